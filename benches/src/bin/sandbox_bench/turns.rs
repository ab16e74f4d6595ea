//! Section 4: a whole turn over the embedded store whose one tool call is `execute true`, against
//! the same turn calling `todoread`, beside the direct call over the same workspace.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_core::keys::workspace_blob_key;
use agent_core::sandbox::{ExecOutcome, ExecRequest, Sandbox, SandboxError, SandboxFile, SandboxLayout};
use agent_core::store::{SessionState, TurnCommit, WorkspaceFile};
use agent_core::turn::{TurnRequest, TurnService, UserProfile};
use agent_core::{ChatResponse, Message, SessionId, SessionStore, ToolCall, UserId};
use agent_ports::testing::FnModel;
use async_trait::async_trait;
use local_store::{MemoryObjectStore, MemorySessionStore};
use sandbox::LocalSandbox;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::calls::{exec_request, succeeded};
use crate::figures::thousands;
use crate::{DIRECT, READ_TODOS, RUN_TRUE, WARMUP};

/// The local sandbox, timing each call the turn makes through it.
pub(crate) struct TimedSandbox {
    pub(crate) inner: Arc<LocalSandbox>,
    pub(crate) calls: Mutex<Vec<Duration>>,
}

#[async_trait]
impl Sandbox for TimedSandbox {
    fn layout(&self) -> SandboxLayout {
        self.inner.layout()
    }

    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn execute(&self, request: ExecRequest) -> Result<ExecOutcome, SandboxError> {
        let started = Instant::now();
        let outcome = self.inner.execute(request).await;
        self.calls.lock().unwrap().push(started.elapsed());
        outcome
    }
}

/// A zero-latency model: one tool call (`execute true` or `todoread`, by the user's message), then
/// an answer. A tool call that did not do its work stops the run.
pub(crate) fn zero_latency_model() -> FnModel {
    FnModel::new(|request| {
        let turn: Vec<&Message> =
            request.messages.iter().rev().take_while(|m| !matches!(m, Message::User { .. })).collect();
        let asked = request.messages.iter().rev().find_map(|m| match m {
            Message::User { content, .. } => Some(content.as_str()),
            _ => None,
        });
        if let Some(Message::Tool { name, content, .. }) = turn.first() {
            assert!(!content.starts_with("Error"), "the benchmark's {name} call failed: {content}");
            if name == "execute" {
                assert!(content.contains("[Command succeeded with exit code 0]"), "execute: {content}");
            }
        }
        if !turn.is_empty() {
            return Ok(ChatResponse::text("done"));
        }
        let (name, arguments) = match asked {
            Some(RUN_TRUE) => ("execute", json!({"command": "true"})),
            Some(READ_TODOS) => ("todoread", json!({})),
            other => panic!("unexpected message {other:?}"),
        };
        Ok(ChatResponse::calling(vec![ToolCall::new("c0", name, arguments)]))
    })
    .keeping_no_requests()
}

pub(crate) fn skill_md(index: usize) -> String {
    format!(
        "---\nname: skill-{index:04}\ndescription: Synthetic skill number {index} for the benchmark, with a \
         description of ordinary length.\ncategory: cat{}\ntools: [ls, read_file]\n---\n\n# Skill {index}\n\n{}",
        index % 10,
        "Instructions line for the benchmark skill.\n".repeat(60)
    )
}

/// A tenant of `count` skills (as `turn-bench` makes them: a SKILL.md and two more files each).
pub(crate) fn upload_tenant(objects: &MemoryObjectStore, user: &UserId, count: usize) {
    for i in 0..count {
        let dir = format!("{user}/skills/cat{}/skill-{i:04}", i % 10);
        objects.insert(&format!("{dir}/SKILL.md"), skill_md(i).into_bytes());
        objects.insert(&format!("{dir}/reference.md"), b"Reference material.\n".repeat(20));
        objects.insert(
            &format!("{dir}/examples/example.md"),
            format!("# Example for skill {i}\n\n{}", "An example of the skill at work.\n".repeat(10)).into_bytes(),
        );
    }
}

/// A session whose first turn left `files` in its workspace (blobs in the object store, the
/// manifest in the session), as a user's earlier turn would have.
pub(crate) async fn seed_session(
    sessions: &MemorySessionStore,
    objects: &MemoryObjectStore,
    user: &UserId,
    session: &SessionId,
    files: &[SandboxFile],
) {
    let mut workspace = BTreeMap::new();
    for file in files {
        let sha256 = hex::encode(Sha256::digest(file.bytes.as_slice()));
        objects.insert(&workspace_blob_key(user, session, &sha256), file.bytes.to_vec());
        workspace.insert(file.path.clone(), WorkspaceFile { sha256, size: file.bytes.len() as u64 });
    }
    let commit = TurnCommit {
        expected_version: 0,
        new_messages: vec![Message::user("Here are my notes."), Message::assistant("Noted.")],
        history_len: 0,
        state: SessionState { workspace, ..SessionState::default() },
        now: agent_core::turn::OffsetDateTime::now_utc().unix_timestamp(),
        commit_token: format!("seed-{session}"),
        idempotency: None,
        usage: None,
        skill_versions: Default::default(),
    };
    sessions.commit(user, session, &commit).await.expect("seed the session");
}

pub(crate) fn turn_request(user: &UserId, session: &SessionId, message: &str) -> TurnRequest {
    TurnRequest {
        user: user.clone(),
        session: session.clone(),
        message: message.into(),
        ticket: None,
        profile: UserProfile::default(),
        deadline: None,
        now: agent_core::turn::OffsetDateTime::now_utc(),
        idempotency: None,
        decisions: None,
        attachments: Vec::new(),
        pins: Default::default(),
    }
}

pub(crate) struct TurnFigures {
    pub(crate) files: usize,
    pub(crate) skills: usize,
    /// Skills of another tenant in the same store.
    pub(crate) neighbours: usize,
    /// The direct call of `true` over the same workspace, made beside each pair of turns.
    pub(crate) direct: Vec<Duration>,
    pub(crate) with_execute: Vec<Duration>,
    pub(crate) without: Vec<Duration>,
    /// The sandbox call inside each turn with execute.
    pub(crate) sandbox_in_turn: Vec<Duration>,
    /// Each turn with execute less its own sandbox call.
    pub(crate) rest_of_turn: Vec<Duration>,
    /// This process's resident memory after the series.
    pub(crate) rss_kib: Option<u64>,
}

/// A tenant's turns: each run is a turn of each variant (a fresh session seeded with `files`) and
/// the direct call of `true` over the same files, in an order that rotates, so that the three are
/// measured at the same moment, in the same process, and drift in the machine's load falls on all.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn time_turns(
    service: &TurnService,
    timed: &TimedSandbox,
    local: &LocalSandbox,
    sessions: &MemorySessionStore,
    objects: &MemoryObjectStore,
    user: &UserId,
    files: &[SandboxFile],
    (skills, neighbours): (usize, usize),
    runs: usize,
) -> TurnFigures {
    let mut figures = TurnFigures {
        files: files.len(),
        skills,
        neighbours,
        direct: Vec::new(),
        with_execute: Vec::new(),
        without: Vec::new(),
        sandbox_in_turn: Vec::new(),
        rest_of_turn: Vec::new(),
        rss_kib: None,
    };
    let direct = exec_request("true", files.to_vec(), vec![]);
    for run in 0..WARMUP + runs {
        let mut order = [DIRECT, RUN_TRUE, READ_TODOS];
        order.rotate_left(run % 3);
        for message in order {
            if message == DIRECT {
                let started = Instant::now();
                let outcome = local.execute(direct.clone()).await.expect("the direct call");
                let elapsed = started.elapsed();
                succeeded(&outcome);
                if run >= WARMUP {
                    figures.direct.push(elapsed);
                }
                continue;
            }
            let tag = if message == RUN_TRUE { "x" } else { "t" };
            let session = SessionId::parse(format!("w{}-{tag}-{run}", files.len())).unwrap();
            seed_session(sessions, objects, user, &session, files).await;
            timed.calls.lock().unwrap().clear();
            let started = Instant::now();
            let reply = service.run_turn(turn_request(user, &session, message)).await.expect("the turn commits");
            let elapsed = started.elapsed();
            let executions = if message == RUN_TRUE { 1 } else { 0 };
            assert_eq!(reply.executions, executions, "{message}");
            assert_eq!(reply.steps, 2, "{message}");
            let calls = timed.calls.lock().unwrap().clone();
            assert_eq!(calls.len(), executions as usize);
            // The session's blobs go, so the process does not grow with the runs.
            for file in files {
                let sha256 = hex::encode(Sha256::digest(file.bytes.as_slice()));
                objects.remove(&workspace_blob_key(user, &session, &sha256));
            }
            if run < WARMUP {
                continue;
            }
            if message == RUN_TRUE {
                figures.with_execute.push(elapsed);
                figures.sandbox_in_turn.push(calls[0]);
                figures.rest_of_turn.push(elapsed.saturating_sub(calls[0]));
            } else {
                figures.without.push(elapsed);
            }
        }
    }
    figures.rss_kib = rss_kib();
    figures
}

/// A tenant's library as the tables name it.
pub(crate) fn tenant_name(skills: usize, neighbours: usize) -> String {
    match neighbours {
        0 => format!("{} skills", thousands(skills as u64)),
        _ => format!("{} skills beside another tenant's {}", thousands(skills as u64), thousands(neighbours as u64)),
    }
}

/// This process's resident memory (VmRSS).
pub(crate) fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
