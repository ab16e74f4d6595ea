//! The per-turn benchmark: handler CPU time, storage round trips per warm turn, cold start and
//! peak RSS, with a zero-latency scripted model and tenants of 10 and 200 skills.
//!
//! Run with `cargo xtask bench` (release build; needs moto_server on PATH for the AWS figures).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::turn::{AgentConfig, TurnRequest, TurnService, UserProfile};
use agent_core::{
    ChatModel, ChatRequest, ChatResponse, Message, ModelError, SessionId, StopReason, ToolCall, Usage, UserId,
};
use async_trait::async_trait;
use aws_store::{AwsStores, CallCounter, StoreSettings};
use local_store::{MemoryObjectStore, MemorySessionStore};
use serde_json::json;
use tests::model_server::Reply;
use tests::stack::{turn_event, Stack};

const WARM_TURNS: u32 = 200;

/// A model that answers instantly: load a skill (`skill-0002` lives in `cat2`, as 2 % 10 = 2, and exists in both tenants),
/// read one of its files, then reply.
struct InstantModel;

#[async_trait]
impl ChatModel for InstantModel {
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let tool_results = request.messages.iter().rev().take_while(|m| !matches!(m, Message::User { .. })).count();
        // A figure is only worth quoting if the turn did the work: a failed tool call stops the run.
        if let Some(Message::Tool { name, content, .. }) = request.messages.last() {
            assert!(!content.starts_with("Error"), "the benchmark's {name} call failed: {content}");
        }
        let call = |name: &str, arguments| ChatResponse {
            content: String::new(),
            tool_calls: vec![ToolCall { id: format!("c{tool_results}"), name: name.into(), arguments }],
            usage: Usage::default(),
            stop_reason: StopReason::ToolUse,
        };
        Ok(match tool_results {
            0 => call("load_skill", json!({"skill_path": "cat2/skill-0002"})),
            2 => call("read_file", json!({"file_path": "/skills/skill-0002/reference.md", "limit": 20})),
            _ => ChatResponse {
                content: "done".into(),
                tool_calls: vec![],
                usage: Usage::default(),
                stop_reason: StopReason::EndTurn,
            },
        })
    }
}

fn skill_md(index: usize) -> String {
    format!(
        "---\nname: skill-{index:04}\ndescription: Synthetic skill number {index} for the benchmark, with a \
         description of ordinary length.\ncategory: cat{}\ntools: [ls, read_file]\n---\n\n# Skill {index}\n\n{}",
        index % 10,
        "Instructions line for the benchmark skill.\n".repeat(60)
    )
}

fn tenant_skills(count: usize) -> Vec<(String, Vec<u8>)> {
    (0..count)
        .flat_map(|i| {
            let dir = format!("skills/cat{}/skill-{i:04}", i % 10);
            [
                (format!("{dir}/SKILL.md"), skill_md(i).into_bytes()),
                (format!("{dir}/reference.md"), b"Reference material.\n".repeat(20)),
            ]
        })
        .collect()
}

fn request(user: &UserId, session: &str) -> TurnRequest {
    TurnRequest {
        user: user.clone(),
        session: SessionId::parse(session).unwrap(),
        message: "Please use the skill.".into(),
        ticket: None,
        profile: UserProfile::default(),
        deadline: None,
        now: time_now(),
    }
}

fn time_now() -> agent_core::turn::OffsetDateTime {
    agent_core::turn::OffsetDateTime::now_utc()
}

fn cpu_time() -> Duration {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we pass.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// Handler CPU per turn over the embedded store (no network at all), 200 skills.
async fn cpu_per_turn(skills: usize) -> (Duration, u64) {
    let objects = Arc::new(MemoryObjectStore::new());
    let user = UserId::parse("bench-user").unwrap();
    for (key, bytes) in tenant_skills(skills) {
        objects.insert(&format!("{user}/{key}"), bytes);
    }
    let sessions = Arc::new(MemorySessionStore::new());
    let service = TurnService::new(sessions.clone(), objects.clone(), Arc::new(InstantModel), AgentConfig::default());
    // Warm the caches with one turn, as a warm Lambda would have them.
    service.run_turn(request(&user, "warmup")).await.unwrap();
    let before = cpu_time();
    for turn in 0..WARM_TURNS {
        // A fresh session per turn keeps history length constant across iterations.
        service.run_turn(request(&user, &format!("s{turn}"))).await.unwrap();
    }
    let per_turn = (cpu_time() - before) / WARM_TURNS;
    let calls = objects.calls.total() + sessions.calls.total();
    (per_turn, calls)
}

/// Storage round trips of the real S3/DynamoDB adapters against moto, cold and warm.
async fn aws_round_trips(stack: &Stack, skills: usize) -> (u64, u64, String) {
    let user = UserId::parse(format!("tenant-{skills}")).unwrap();
    for (key, bytes) in tenant_skills(skills) {
        stack.put(&format!("{user}/{key}"), bytes).await;
    }
    let config = tests::moto::sdk_config(&stack.endpoint).await;
    let settings = StoreSettings::from_lookup(|name| match name {
        "SESSIONS_TABLE" => Some(stack.table.clone()),
        "SKILLS_BUCKET" => Some(stack.bucket.clone()),
        "S3_FORCE_PATH_STYLE" => Some("true".into()),
        _ => None,
    })
    .unwrap();
    let counter = CallCounter::new();
    let stores = AwsStores::from_sdk_config(&config, &settings, Some(counter.clone()));
    let service = TurnService::new(stores.sessions, stores.objects, Arc::new(InstantModel), AgentConfig::default());
    service.run_turn(request(&user, "cold")).await.unwrap();
    let cold = counter.total();
    counter.reset();
    service.run_turn(request(&user, "cold")).await.unwrap();
    let warm = counter.total();
    let detail = format!("{:?}", counter.operations());
    (cold, warm, detail)
}

fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        println!("# turn-bench ({} warm turns per figure)\n", WARM_TURNS);
        for skills in [10, 200] {
            let (cpu, _) = cpu_per_turn(skills).await;
            println!(
                "handler CPU per turn, embedded store, {skills:>3} skills, 3 model calls: {:>8.1} µs",
                cpu.as_secs_f64() * 1e6
            );
        }

        if std::process::Command::new("moto_server").arg("--help").output().is_err() {
            println!("\nmoto_server not found: skipping the S3/DynamoDB, cold-start and RSS figures");
            return;
        }
        let stack = Stack::new().await;
        println!();
        for skills in [10, 200] {
            let (cold, warm, detail) = aws_round_trips(&stack, skills).await;
            println!(
                "S3+DynamoDB requests per turn, {skills:>3} skills: cold cache {cold:>3}, warm {warm:>2}  {detail}"
            );
        }

        // Cold start and peak RSS of the release binary, through the Lambda Runtime API.
        stack.upload_example_skills("bench-user").await;
        for (key, bytes) in tenant_skills(200) {
            stack.put(&format!("bench-user/{key}"), bytes).await;
        }
        stack.model.push((0..25).map(|_| Reply::text("ok")));
        let started = Instant::now();
        let http = stack.http(&[]).await;
        http.call(turn_event(Some("bench-user"), "cold", json!({"message": "hola"}))).await;
        let cold_start = started.elapsed();
        for turn in 0..20 {
            http.call(turn_event(Some("bench-user"), &format!("rss{turn}"), json!({"message": "hola"}))).await;
        }
        println!(
            "\ncold start (process spawn → first turn answered, 200 skills, moto on loopback): {:.0} ms",
            cold_start.as_secs_f64() * 1e3
        );
        match http.pid().and_then(peak_rss_kib) {
            Some(kib) => {
                println!("peak RSS of http-turn after 21 turns with 200 skills: {:.1} MiB", kib as f64 / 1024.0)
            }
            None => println!("peak RSS: /proc not readable"),
        }
    });
}
