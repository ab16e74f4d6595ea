//! The long-session benchmark: one session of 300 tool-heavy turns on the real S3/DynamoDB adapters
//! against moto, with a zero-latency in-process model. For each turn it records the wall time, the
//! process CPU time, the storage requests by operation and the model calls (turn and summary), and
//! reports turn 10 against turn 300 (medians over turns 6-15 and 291-300) with the peak RSS.
//!
//! Run with `cargo xtask bench` (release build; needs moto_server on PATH), or alone with
//! `cargo run --release -p benches --bin session-bench`. `SESSION_BENCH_TURNS` changes the length.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::turn::{AgentConfig, TurnService};
use agent_core::{ChatResponse, Message, ToolCall, UserId};
use agent_ports::testing::FnModel;
use aws_store::{AwsStores, CallCounter, StoreSettings};
use benches::{cpu_time, request};
use local_stack::stack::Stack;
use serde_json::json;

const DEFAULT_TURNS: usize = 300;

/// A model that answers at once with a tool-heavy turn: write a file, read it back, grep the
/// workspace, then answer. Summary requests get a short summary, counted in `summaries`.
fn tool_heavy_model(summaries: Arc<AtomicU64>) -> FnModel {
    let turns_started = AtomicU64::new(0);
    FnModel::new(move |request| {
        if request.system.starts_with("You condense conversations") {
            summaries.fetch_add(1, Ordering::Relaxed);
            return Ok(ChatResponse::text("The user asked for notes; the assistant wrote and searched them."));
        }
        let step = request.messages.iter().rev().take_while(|m| !matches!(m, Message::User { .. })).count();
        if let Some(Message::Tool { name, content, .. }) = request.messages.last() {
            assert!(!content.starts_with("Error"), "the benchmark's {name} call failed: {content}");
        }
        if step == 0 {
            turns_started.fetch_add(1, Ordering::Relaxed);
        }
        let turn = turns_started.load(Ordering::Relaxed);
        let call =
            |name: &str, arguments| ChatResponse::calling(vec![ToolCall::new(format!("c{step}"), name, arguments)]);
        // Eight files, each rewritten in place every eighth turn: the workspace stays the same size.
        let file = format!("/workspace/notes-{}.md", turn % 8);
        let content = format!("Turn marker {turn}\n{}", "A line of notes for the benchmark.\n".repeat(60));
        let edit = json!({"file_path": file, "old_string": format!("Turn marker {}\n", turn.saturating_sub(8)),
            "new_string": format!("Turn marker {turn}\n")});
        Ok(match step {
            0 if turn <= 8 => call("write_file", json!({"file_path": file, "content": content})),
            0 => call("edit_file", edit),
            2 => call("read_file", json!({"file_path": file})),
            4 => call("grep", json!({"pattern": "notes", "path": "/workspace"})),
            _ => ChatResponse::text("Written, read back and searched."),
        })
    })
    .keeping_no_requests()
}

/// One turn's figures.
#[derive(Clone, Copy)]
struct TurnFigures {
    wall: Duration,
    cpu: Duration,
    requests: u64,
}

fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn median<T: Copy + Ord>(values: &mut [T]) -> T {
    values.sort();
    values[values.len() / 2]
}

fn window(figures: &[TurnFigures], around: usize) -> (Duration, Duration, u64) {
    let from = around.saturating_sub(5).max(1);
    let to = (around + 5).min(figures.len());
    let slice = &figures[from - 1..to];
    let mut walls: Vec<Duration> = slice.iter().map(|f| f.wall).collect();
    let mut cpus: Vec<Duration> = slice.iter().map(|f| f.cpu).collect();
    let mut requests: Vec<u64> = slice.iter().map(|f| f.requests).collect();
    (median(&mut walls), median(&mut cpus), median(&mut requests))
}

fn main() {
    let turns: usize = std::env::var("SESSION_BENCH_TURNS").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_TURNS);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let stack = Stack::new().await;
        let config = local_stack::moto::sdk_config(&stack.endpoint).await;
        let settings = StoreSettings::from_lookup(|name| match name {
            "SESSIONS_TABLE" => Some(stack.table.clone()),
            "SKILLS_BUCKET" => Some(stack.bucket.clone()),
            "S3_FORCE_PATH_STYLE" => Some("true".into()),
            _ => None,
        })
        .unwrap();
        let counter = CallCounter::new();
        let stores = AwsStores::from_sdk_config(&config, &settings, Some(counter.clone()));
        let summary_calls = Arc::new(AtomicU64::new(0));
        let model = Arc::new(tool_heavy_model(summary_calls.clone()));
        let service = TurnService::new(stores.sessions, stores.objects, model.clone(), AgentConfig::default());
        let user = UserId::parse("bench-user").unwrap();
        let mut figures = Vec::with_capacity(turns);
        let mut ops_at: BTreeMap<usize, BTreeMap<String, u64>> = BTreeMap::new();
        let mut rss_at_10 = 0;
        for turn in 1..=turns {
            let turn_request = request(&user, "long", format!("Turn {turn}: please update the notes and search them."));
            counter.reset();
            let (cpu_before, started) = (cpu_time(), Instant::now());
            service.run_turn(turn_request).await.expect("the turn commits");
            let (wall, cpu) = (started.elapsed(), cpu_time() - cpu_before);
            let operations = counter.operations();
            figures.push(TurnFigures { wall, cpu, requests: operations.values().sum() });
            if turn == 10 || turn == turns {
                ops_at.insert(turn, operations);
            }
            if turn == 10 {
                rss_at_10 = rss_kib("VmHWM:");
            }
            if turn % 50 == 0 {
                eprintln!("  turn {turn}: {:.1} ms, {} requests", wall.as_secs_f64() * 1000.0, figures[turn - 1].requests);
            }
        }
        let (wall_10, cpu_10, requests_10) = window(&figures, 10);
        let (wall_n, cpu_n, requests_n) = window(&figures, turns);
        let summaries = summary_calls.load(Ordering::Relaxed);
        println!("\n## Long session: {turns} tool-heavy turns (write_file, read_file, grep, answer) on S3/DynamoDB (moto)\n");
        println!("| | turn 10 | turn {turns} |");
        println!("|---|---|---|");
        println!("| wall time per turn (median of 10) | {:.1} ms | {:.1} ms |", wall_10.as_secs_f64() * 1e3, wall_n.as_secs_f64() * 1e3);
        println!("| CPU per turn (median of 10) | {:.2} ms | {:.2} ms |", cpu_10.as_secs_f64() * 1e3, cpu_n.as_secs_f64() * 1e3);
        println!("| storage requests per turn (median of 10) | {requests_10} | {requests_n} |");
        let ops = |turn: usize| {
            ops_at.get(&turn).map_or(String::new(), |ops| {
                ops.iter().map(|(op, n)| format!("{op} {n}")).collect::<Vec<_>>().join(", ")
            })
        };
        println!("| requests of that turn, by operation | {} | {} |", ops(10), ops(turns));
        println!("| peak RSS of the process | {} MiB (after turn 10) | {} MiB |", rss_at_10 / 1024, rss_kib("VmHWM:") / 1024);
        println!(
            "\nModel calls: {} for the turns, {summaries} summaries ({:.1} turns per summary).",
            model.calls() as u64 - summaries,
            turns as f64 / summaries.max(1) as f64
        );
        let flat = requests_n <= requests_10 + 1 && cpu_n.as_secs_f64() <= cpu_10.as_secs_f64() * 3.0 + 0.002;
        if !flat {
            eprintln!("FAILED: the cost of a turn grows with the session ({requests_10} -> {requests_n} requests, {cpu_10:?} -> {cpu_n:?} CPU)");
            std::process::exit(1);
        }
    });
}
