//! A turn over the library, cold and warm: the storage calls it makes (counted from the recording
//! store's log), its wall time, and the handler CPU of a warm turn.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_core::turn::{AgentConfig, TurnReply, TurnService};
use agent_core::{ChatResponse, Message, ModelError, ToolCall, UserId};
use agent_ports::testing::FnModel;
use benches::{cpu_time, request};
use local_store::{MemoryObjectStore, MemorySessionStore};
use serde_json::json;

use crate::{median, BenchResult, COLD_STARTS, MESSAGE, SKILL, SKILL_FILE, WARM_TURNS, WARM_WALL_CAP};

/// The system prompt the model was sent after the last `load_skill` (the loaded SKILL.md is in
/// it), so a benchmark can check which SKILL.md a turn saw.
pub(crate) type Loaded = Arc<Mutex<String>>;

/// A model that answers at once: load [`SKILL`], read [`SKILL_FILE`], then reply (turn-bench's
/// turn). The system prompt after `load_skill` is kept in `loaded`; a failed tool call fails the turn.
pub(crate) fn instant_model(loaded: Loaded) -> FnModel {
    FnModel::new(move |request| {
        let tool_results = request.messages.iter().rev().take_while(|m| !matches!(m, Message::User { .. })).count();
        if let Some(Message::Tool { name, content, .. }) = request.messages.last() {
            if content.starts_with("Error") {
                // The turn fails with this, and so does the run.
                return Err(ModelError::InvalidResponse(format!("the benchmark's {name} call failed: {content}")));
            }
            if name == "load_skill" {
                *loaded.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = request.system.clone();
            }
        }
        let call = |name: &str, arguments| {
            ChatResponse::calling(vec![ToolCall::new(format!("c{tool_results}"), name, arguments)])
        };
        Ok(match tool_results {
            0 => call("load_skill", json!({"skill_path": SKILL})),
            2 => call("read_file", json!({"file_path": SKILL_FILE, "limit": 20})),
            _ => ChatResponse::text("done"),
        })
    })
    .keeping_no_requests()
}

/// A new process's turn service over the stores: every cache empty.
pub(crate) fn service(objects: &Arc<MemoryObjectStore>, sessions: &Arc<MemorySessionStore>) -> (TurnService, Loaded) {
    let loaded = Loaded::default();
    let model = Arc::new(instant_model(loaded.clone()));
    (TurnService::new(sessions.clone(), objects.clone(), model, AgentConfig::default()), loaded)
}

/// The storage calls of one piece of work: object calls by kind, and session loads and commits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Calls {
    pub(crate) by_kind: BTreeMap<&'static str, u64>,
    /// The object calls in order (`get {key}`, ...), keys relative to the tenant.
    pub(crate) log: Vec<String>,
}

impl Calls {
    pub(crate) fn total(&self) -> u64 {
        self.by_kind.values().sum()
    }

    /// `7 (GET 3, LIST 0, PUT 0, session load 1, commit 1)`; a kind with no call is still shown.
    pub(crate) fn text(&self) -> String {
        let kinds = ["GET", "LIST", "PUT", "DELETE", "session load", "commit"];
        let parts: Vec<String> = kinds
            .iter()
            .filter(|kind| !matches!(**kind, "DELETE") || self.by_kind.contains_key(*kind))
            .map(|kind| format!("{kind} {}", self.by_kind.get(kind).copied().unwrap_or(0)))
            .collect();
        format!("{} ({})", self.total(), parts.join(", "))
    }
}

/// What `work` asked of the stores, and its wall time and CPU (the log is read outside them).
pub(crate) struct Counted<T> {
    pub(crate) out: T,
    pub(crate) calls: Calls,
    pub(crate) wall: Duration,
    pub(crate) cpu: Duration,
}

/// Counts what `work` asks of the stores, and times it.
pub(crate) async fn counted<T>(
    objects: &MemoryObjectStore,
    sessions: &MemorySessionStore,
    user: &UserId,
    work: impl std::future::Future<Output = T>,
) -> Counted<T> {
    let logged = objects.recorded().len();
    let (loads, commits) = session_calls(sessions);
    let (before, started) = (cpu_time(), Instant::now());
    let out = work.await;
    let (wall, cpu) = (started.elapsed(), cpu_time() - before);
    let mut calls = Calls::default();
    let tenant = format!("{user}/");
    for call in &objects.recorded()[logged..] {
        let kind = match call.split_once(' ').map(|(kind, _)| kind) {
            Some("get") => "GET",
            Some("list") => "LIST",
            Some("put") => "PUT",
            Some("delete") => "DELETE",
            _ => "other",
        };
        *calls.by_kind.entry(kind).or_default() += 1;
        calls.log.push(call.replacen(&tenant, "", 1));
    }
    let (loads_after, commits_after) = session_calls(sessions);
    calls.by_kind.insert("session load", loads_after - loads);
    calls.by_kind.insert("commit", commits_after - commits);
    Counted { out, calls, wall, cpu }
}

fn session_calls(sessions: &MemorySessionStore) -> (u64, u64) {
    use std::sync::atomic::Ordering::Relaxed;
    (sessions.calls.session_loads.load(Relaxed), sessions.calls.session_commits.load(Relaxed))
}

/// What a turn over one library costs.
pub(crate) struct TurnFigures {
    /// A new process's first turn (index present, a new session): its calls, and its wall time
    /// and CPU, medians of [`COLD_STARTS`] new services.
    pub(crate) cold: Calls,
    pub(crate) cold_wall: Vec<Duration>,
    pub(crate) cold_cpu: Duration,
    /// The same session's next turn in the same process.
    pub(crate) warm: Calls,
    /// Handler CPU per warm turn (a new session each), and the turns it is over.
    pub(crate) warm_cpu: Duration,
    pub(crate) warm_turns: u32,
    /// The system prompt with the SKILL.md the turns loaded (checked by the caller), and the
    /// version the last cold turn recorded.
    pub(crate) loaded: String,
    pub(crate) versions: BTreeMap<String, u32>,
}

/// Runs one turn and checks it answered.
pub(crate) async fn turn(service: &TurnService, user: &UserId, session: &str) -> BenchResult<TurnReply> {
    let reply = service.run_turn(request(user, session, MESSAGE)).await?;
    if reply.reply != "done" {
        return Err(format!("the turn answered {:?}", reply.reply).into());
    }
    Ok(reply)
}

pub(crate) async fn turn_figures(
    objects: &Arc<MemoryObjectStore>,
    sessions: &Arc<MemorySessionStore>,
    user: &UserId,
    label: &str,
) -> BenchResult<TurnFigures> {
    let (mut cold_wall, mut cold_cpu, mut cold_calls) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    for start in 0..COLD_STARTS {
        let (service, loaded) = service(objects, sessions);
        let session = format!("{label}-cold-{start}");
        let cold = counted(objects, sessions, user, turn(&service, user, &session)).await;
        let reply = cold.out?;
        cold_wall.push(cold.wall);
        cold_cpu.push(cold.cpu);
        cold_calls.push(cold.calls);
        last = Some((service, loaded, session, reply));
    }
    if cold_calls.windows(2).any(|pair| pair[0].by_kind != pair[1].by_kind) {
        return Err(format!("{label}: cold turns made different calls: {cold_calls:?}").into());
    }
    let (service, loaded, session, reply) = last.ok_or("no cold start was run")?;
    let warm = counted(objects, sessions, user, turn(&service, user, &session)).await;
    warm.out?;

    let (before, wall) = (cpu_time(), Instant::now());
    let mut warm_turns = 0;
    while warm_turns < WARM_TURNS && wall.elapsed() < WARM_WALL_CAP {
        turn(&service, user, &format!("{label}-warm-{warm_turns}")).await?;
        warm_turns += 1;
    }
    let warm_cpu = (cpu_time() - before) / warm_turns.max(1);
    let text = loaded.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
    Ok(TurnFigures {
        cold: cold_calls.swap_remove(0),
        cold_cpu: median(&cold_cpu),
        cold_wall,
        warm: warm.calls,
        warm_cpu,
        warm_turns,
        loaded: text,
        versions: reply.skill_versions,
    })
}
