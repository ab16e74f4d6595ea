//! The per-turn benchmark over tenants of 10, 1,000 and 10,000 skills (each skill a SKILL.md plus
//! `reference.md` and `examples/example.md`), with a zero-latency model that loads one skill,
//! reads one of its files and answers:
//!
//! 1. handler CPU per warm turn over the embedded store;
//! 2. storage requests of a cold turn (new process-wide caches, index present, a new session) and
//!    of a warm turn (the same session's next turn), by operation, on the real S3/DynamoDB adapters
//!    against moto; and the one-time index build;
//! 3. cold start of the release `http-turn` binary through the Lambda Runtime API (median of 5), and
//!    the same less the turn's waits on storage as its summary line reports them: moto's latency
//!    grows with the bucket's object count, which S3's does not;
//! 4. the state-1 system prompt the model is sent, and whether `find_skills` is offered;
//! 5. peak RSS of `http-turn` after 21 turns (its cold turn and 20 more of that session);
//! 6. storage requests as the compiled function logs them, which must agree with 2.
//!
//! Progress goes to stderr; the table at the end goes to stdout.
//! Run with `cargo xtask bench` (release build; needs moto_server on PATH for items 2 to 6).

mod aws;
mod cpu;
mod function;
mod report;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use benches::{tenant_skills, thousands};

use agent_core::turn::AgentConfig;
use agent_core::{ChatResponse, Message, ToolCall, UserId};
use agent_ports::testing::FnModel;
use local_stack::model_server::Reply;
use local_stack::stack::Stack;
use serde_json::json;

use crate::aws::aws_figures;
use crate::cpu::cpu_per_turn;
use crate::function::{function_figures, upload};
use report::*;

/// Storage requests per operation (`S3.GetObject`, `DynamoDB.Query`, ...).
type Ops = BTreeMap<String, u64>;

/// The library sizes measured, unless `TURN_BENCH_SIZES` (comma-separated) names others.
const SIZES: [usize; 3] = [10, 1_000, 10_000];
/// Warm turns per CPU figure.
const WARM_TURNS: u32 = 200;
/// A CPU figure stops early (and says so) when its warm turns take longer than this in all.
const CPU_WALL_CAP: Duration = Duration::from_secs(30);
/// Warm turns on the real adapters after the cold one, each counted on its own.
const AWS_WARM_TURNS: usize = 5;
/// Fresh `http-turn` processes per size for the cold-start median.
pub(crate) const COLD_STARTS: usize = 5;
/// The pause before each of those cold starts.
const COLD_START_PAUSE: Duration = Duration::from_secs(1);
/// Turns the last of those processes answers before its peak RSS is read.
const RSS_TURNS: usize = 21;
/// Objects per upload batch (each batch is put 32 at a time), for progress reports.
const UPLOAD_BATCH: usize = 2_000;
/// The skill every turn loads (`cat2`, as 2 % 10 = 2; it exists at every size) and the file it reads.
const SKILL: &str = "cat2/skill-0002";
const SKILL_FILE: &str = "/skills/skill-0002/reference.md";
const MESSAGE: &str = "Please use the skill.";

/// A model that answers instantly: load a skill, read one of its files, then reply.
fn instant_model() -> FnModel {
    FnModel::new(|request| {
        let tool_results = request.messages.iter().rev().take_while(|m| !matches!(m, Message::User { .. })).count();
        // A figure is only worth quoting if the turn did the work: a failed tool call stops the run.
        if let Some(Message::Tool { name, content, .. }) = request.messages.last() {
            assert!(!content.starts_with("Error"), "the benchmark's {name} call failed: {content}");
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

/// The same turn scripted for the compiled function and the scripted model server.
fn scripted_turn() -> [Reply; 3] {
    [
        Reply::tool("load_skill", json!({"skill_path": SKILL})),
        Reply::tool("read_file", json!({"file_path": SKILL_FILE, "limit": 20})),
        Reply::text("done"),
    ]
}

fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn total(ops: &Ops) -> u64 {
    ops.values().sum()
}

fn ops_text(ops: &Ops) -> String {
    let parts: Vec<String> = ops.iter().map(|(op, n)| format!("{op} {n}")).collect();
    format!("{} ({})", total(ops), parts.join(", "))
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let run_started = Instant::now();
        let listing_budget = AgentConfig {
            context_tokens: agent_core::budget::default_context_tokens("scripted-model"),
            ..AgentConfig::default()
        }
        .listing_tokens();

        // 1. CPU first, while this process runs nothing else.
        let mut reports = Vec::new();
        for skills in sizes() {
            eprintln!("[{:>5.0} s] CPU per warm turn, {skills} skills", run_started.elapsed().as_secs_f64());
            let cpu = cpu_per_turn(skills).await;
            eprintln!(
                "  {:.0} µs over {} turns; cold catalog load {:.1} ms",
                cpu.per_turn.as_secs_f64() * 1e6,
                cpu.turns,
                ms(cpu.catalog_load)
            );
            reports.push(SizeReport { skills, cpu, aws: None, function: None });
        }

        let load_before = load_average();
        let moto = std::process::Command::new("moto_server").arg("--help").output().is_ok();
        let mut moto_context = String::new();
        if moto {
            let stack = Stack::new().await;
            let user = |skills: usize| UserId::parse(format!("bench-{skills}")).unwrap();
            // Every tenant goes in before anything is measured, so every size meets the same bucket.
            eprintln!("[{:>5.0} s] uploading the tenants to moto", run_started.elapsed().as_secs_f64());
            let mut uploaded = 0;
            for skills in reports.iter().map(|r| r.skills) {
                uploaded += upload(&stack, &user(skills), skills).await;
            }
            moto_context = moto_latencies(&stack, &user(reports[0].skills), uploaded).await;
            for report in &mut reports {
                let skills = report.skills;
                eprintln!("[{:>5.0} s] storage requests, {skills} skills", run_started.elapsed().as_secs_f64());
                report.aws = Some(aws_figures(&stack, &user(skills)).await);
                eprintln!("[{:>5.0} s] http-turn, {skills} skills", run_started.elapsed().as_secs_f64());
                report.function = Some(function_figures(&stack, &user(skills)).await);
            }
        }

        println!(
            "# turn-bench: {} skills (each SKILL.md + reference.md + examples/example.md)\n",
            size_list(&reports, ", ")
        );
        println!(
            "Each turn: load_skill(\"{SKILL}\"), read_file(\"{SKILL_FILE}\"), answer; zero-latency model. \
             Storage figures count HTTP attempts of the real S3/DynamoDB adapters against moto_server on \
             loopback; the index is present for cold and warm turns.\n"
        );
        if moto {
            println!("{moto_context}\n");
        } else {
            println!("moto_server not found: only the CPU figures were measured; the rest are n/a.\n");
        }
        print_report(&reports, listing_budget);
        print_targets(&reports, listing_budget);
        println!(
            "\n(run took {:.0} s on {} cores; load average before {load_before}, after {})",
            run_started.elapsed().as_secs_f64(),
            cores(),
            load_average()
        );
    });
}

/// The 1-minute load average, to judge how quiet the machine was.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// What one request costs moto with every tenant uploaded: the floor under every wall time here.
async fn moto_latencies(stack: &Stack, user: &UserId, objects: usize) -> String {
    let prefix = format!("{user}/skills/{SKILL}/");
    let key = format!("{prefix}SKILL.md");
    let (mut lists, mut gets) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let started = Instant::now();
        assert_eq!(stack.object_keys(&prefix).await.len(), 3, "the skill has three files");
        lists.push(started.elapsed());
        let started = Instant::now();
        assert!(stack.get(&key).await.is_some());
        gets.push(started.elapsed());
    }
    format!(
        "moto_server with {} objects in the bucket answers a GetObject of a SKILL.md in {:.1} ms and a \
         ListObjectsV2 of one skill's prefix (3 keys) in {:.1} ms (medians of 5); moto scans the whole bucket to \
         list a prefix, S3 does not, so every ListObjectsV2 below carries that cost at every size.",
        thousands(objects as u64),
        ms(median(&gets).unwrap_or_default()),
        ms(median(&lists).unwrap_or_default())
    )
}

/// `TURN_BENCH_SIZES`, or [`SIZES`].
fn sizes() -> Vec<usize> {
    match std::env::var("TURN_BENCH_SIZES") {
        Ok(list) => list
            .split(',')
            .map(|size| size.trim().replace('_', "").parse().expect("TURN_BENCH_SIZES: comma-separated numbers"))
            .collect(),
        Err(_) => SIZES.to_vec(),
    }
}

/// `10 / 1,000 / 10,000`.
fn size_list(reports: &[SizeReport], separator: &str) -> String {
    reports.iter().map(|r| thousands(r.skills as u64)).collect::<Vec<_>>().join(separator)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}
