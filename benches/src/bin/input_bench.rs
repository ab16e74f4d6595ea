//! The hostile-input benchmark: what a tenant's SKILL.md or a model's tool arguments can cost.
//!
//! 1. Frontmatter shapes (flow nesting, alias expansion, many keys, anchors, tags, long scalars) at
//!    5,000, 20,000 and 80,000 units: CPU time of `parse_skill_md` and its outcome.
//! 2. Tool arguments (450 KB glob and grep patterns, deeply nested patterns and globs, a 64 KiB path)
//!    on the virtual filesystem: CPU time and outcome.
//! 3. Twenty hostile turns in one warm process on the S3/DynamoDB adapters against moto, each of
//!    replies of 40 tool calls (huge patterns, reads, writes): peak RSS after turn 5 and turn 20.
//!
//! Every figure is checked against its bound; the run fails (exit 1) when one is exceeded.
//! Run with `cargo xtask bench`, or alone with `cargo run --release -p benches --bin input-bench`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use agent_core::skills::frontmatter::parse_skill_md;
use agent_core::turn::{AgentConfig, TurnRequest, TurnService, UserProfile};
use agent_core::vfs::Vfs;
use agent_core::{ChatResponse, Message, SessionId, ToolCall, UserId};
use agent_ports::testing::FnModel;
use aws_store::{AwsStores, StoreSettings};
use local_stack::stack::Stack;
use local_store::MemoryObjectStore;
use serde_json::json;

/// A frontmatter parse may take at most this much CPU, whatever its shape and size.
const FRONTMATTER_CPU_BOUND: Duration = Duration::from_millis(20);
/// A file-tool call with hostile arguments may take at most this much CPU.
const TOOL_CPU_BOUND: Duration = Duration::from_millis(20);
/// Peak RSS may grow by at most this much between hostile turn 5 and hostile turn 20.
const RSS_GROWTH_BOUND_KIB: u64 = 8 * 1024;

fn thread_cpu() -> Duration {
    let mut spec = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes into the struct we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut spec) };
    Duration::new(spec.tv_sec as u64, spec.tv_nsec as u32)
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}

type Shape = (&'static str, fn(usize) -> String);

fn shapes() -> Vec<Shape> {
    vec![
        ("flow nesting `[[[…]]]`", |n| format!("x: {}{}\n", "[".repeat(n), "]".repeat(n))),
        ("map nesting `{a: {a: …}}`", |n| format!("x: {}1{}\n", "{a: ".repeat(n), "}".repeat(n))),
        ("alias expansion (billion laughs)", |n| {
            let per = n / 10;
            format!("a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [{}]\nc: [{}]\n", "*a,".repeat(per), "*b,".repeat(per))
        }),
        ("many keys", |n| (0..n).map(|i| format!("k{i}: v\n")).collect()),
        ("many anchors", |n| format!("l: [{}]\n", (0..n).map(|i| format!("&a{i} x,")).collect::<String>())),
        ("many tags", |n| format!("l: [{}]\n", "!t x,".repeat(n))),
        ("long key", |n| format!("? {}\n: v\n", "k".repeat(n))),
        ("long double-quoted escapes", |n| format!("l: \"{}\"\n", "\\u00e9".repeat(n))),
        ("comment lines", |n| "#\n".repeat(n)),
    ]
}

/// Section 1: returns the table rows and whether every figure kept its bound.
fn frontmatter_section(failures: &mut Vec<String>) {
    println!("\n### Frontmatter shapes (CPU of one parse; outcome)\n");
    println!("| shape | 5,000 units | 20,000 units | 80,000 units |");
    println!("|---|---|---|---|");
    for (name, make) in shapes() {
        let mut cells = Vec::new();
        for units in [5_000, 20_000, 80_000] {
            let text = format!("---\ndescription: d\n{}---\nbody\n", make(units));
            let started = thread_cpu();
            let outcome = parse_skill_md(&text, "x");
            let took = thread_cpu() - started;
            let outcome = match outcome {
                Ok(_) => "parsed".to_owned(),
                Err(reason) => {
                    let reason = reason.to_string();
                    let short: String = reason.trim_start_matches("the frontmatter ").chars().take(32).collect();
                    format!("skipped: {short}…")
                }
            };
            if took > FRONTMATTER_CPU_BOUND {
                failures.push(format!("frontmatter {name} at {units} units took {}", ms(took)));
            }
            cells.push(format!("{} ({outcome})", ms(took)));
        }
        println!("| {name} | {} |", cells.join(" | "));
    }
}

fn tool_section(runtime: &tokio::runtime::Runtime, failures: &mut Vec<String>) {
    let store = MemoryObjectStore::new();
    for i in 0..50 {
        store.insert(&format!("u1/tickets/T1/file-{i}.md"), format!("line {i}\n").repeat(200).into_bytes());
    }
    let vfs = Vfs::new(
        &store,
        UserId::parse("u1").unwrap(),
        SessionId::parse("s1").unwrap(),
        Some(agent_core::TicketId::parse("T1").unwrap()),
        BTreeMap::new(),
    );
    let huge = "a".repeat(450 * 1024);
    let nested_regex = format!("{}a{}", "(".repeat(10_000), ")".repeat(10_000));
    let nested_glob = format!("{}a{}", "{a,".repeat(200), "}".repeat(200));
    let globstars = "**/".repeat(300) + "*";
    let long_path = format!("/ticket/{}", "p".repeat(64 * 1024));
    println!("\n### Tool arguments (CPU of one call; its result)\n");
    println!("| call | CPU | result |");
    println!("|---|---|---|");
    let cases: Vec<(&str, ToolCase<'_>)> = vec![
        ("glob, 450 KB pattern", Box::new(|| text(runtime.block_on(vfs.glob(&huge, None))))),
        ("grep, 450 KB pattern", Box::new(|| text(runtime.block_on(vfs.grep(&huge, None, None))))),
        ("grep, pattern nested 10,000 deep", Box::new(|| text(runtime.block_on(vfs.grep(&nested_regex, None, None))))),
        ("grep, `(a*)*b` × 500", Box::new(|| text(runtime.block_on(vfs.grep(&"(a*)*b".repeat(500), None, None))))),
        ("glob, alternatives nested 200 deep", Box::new(|| text(runtime.block_on(vfs.glob(&nested_glob, None))))),
        ("glob, `**/` × 300", Box::new(|| text(runtime.block_on(vfs.glob(&globstars, None))))),
        ("read_file, 64 KiB path", Box::new(|| text(runtime.block_on(vfs.read_file(&long_path, 0, 10))))),
    ];
    for (name, call) in cases {
        let started = thread_cpu();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&call)).unwrap_or_else(|_| "PANICS".into());
        let took = thread_cpu() - started;
        if took > TOOL_CPU_BOUND || result == "PANICS" {
            failures.push(format!("{name}: {} ({result})", ms(took)));
        }
        let shown: String = result.lines().next().unwrap_or("").chars().take(70).collect();
        println!("| {name} | {} | {shown} |", ms(took));
    }
}

/// One hostile call, run on demand.
type ToolCase<'a> = Box<dyn Fn() -> String + 'a>;

fn text(result: Result<String, agent_core::vfs::VfsError>) -> String {
    result.unwrap_or_else(|error| error.to_string())
}

/// A model whose every reply asks for 40 hostile tool calls, then answers.
fn hostile_model() -> FnModel {
    let replies = AtomicU32::new(0);
    FnModel::new(move |request| {
        let round = replies.fetch_add(1, Ordering::Relaxed);
        if request.system.starts_with("You condense conversations") {
            return Ok(ChatResponse::text("Hostile turns so far."));
        }
        let steps = request.messages.iter().rev().take_while(|m| !matches!(m, Message::User { .. })).count();
        if steps >= 8 {
            return Ok(ChatResponse::text("done"));
        }
        let big = "a".repeat(200 * 1024);
        let calls = (0..40)
            .map(|i| {
                let (name, arguments) = match i % 4 {
                    0 => ("glob", json!({"pattern": big})),
                    1 => ("grep", json!({"pattern": format!("{}x{}", "(".repeat(300), ")".repeat(300))})),
                    2 => ("read_file", json!({"file_path": "/workspace/big.txt"})),
                    _ => (
                        "write_file",
                        json!({"file_path": format!("/workspace/r{round}-{i}.txt"), "content": "z".repeat(60_000)}),
                    ),
                };
                ToolCall::new(format!("c{round}-{i}"), name, arguments)
            })
            .collect();
        Ok(ChatResponse::calling(calls))
    })
    .keeping_no_requests()
}

/// On the real adapters against moto, so the stored data lives in moto's process and the RSS
/// measured is the runtime's own.
fn memory_section(runtime: &tokio::runtime::Runtime, failures: &mut Vec<String>) {
    let stack = runtime.block_on(Stack::new());
    let config = runtime.block_on(local_stack::moto::sdk_config(&stack.endpoint));
    let settings = StoreSettings::from_lookup(|name| match name {
        "SESSIONS_TABLE" => Some(stack.table.clone()),
        "SKILLS_BUCKET" => Some(stack.bucket.clone()),
        "S3_FORCE_PATH_STYLE" => Some("true".into()),
        _ => None,
    })
    .unwrap();
    let stores = AwsStores::from_sdk_config(&config, &settings, None);
    let service = TurnService::new(stores.sessions, stores.objects, Arc::new(hostile_model()), AgentConfig::default());
    let user = UserId::parse("u1").unwrap();
    let mut rss = BTreeMap::new();
    for turn in 1..=20 {
        let request = TurnRequest {
            user: user.clone(),
            // Half the turns continue one session, half start new ones: both kinds of growth show.
            session: SessionId::parse(if turn % 2 == 0 { "hostile".to_owned() } else { format!("h{turn}") }).unwrap(),
            message: "Do everything at once.".into(),
            ticket: None,
            profile: UserProfile::default(),
            deadline: None,
            now: agent_core::turn::OffsetDateTime::now_utc(),
            idempotency: None,
            decisions: None,
            attachments: Vec::new(),
            pins: Default::default(),
        };
        runtime.block_on(service.run_turn(request)).expect("a hostile turn still commits");
        if turn == 5 || turn == 20 {
            rss.insert(turn, peak_rss_kib());
        }
    }
    let growth = rss[&20].saturating_sub(rss[&5]);
    println!("\n### Twenty hostile turns in one warm process (40 tool calls a reply, 8 replies a turn)\n");
    println!("| peak RSS after turn 5 | after turn 20 | growth |");
    println!("|---|---|---|");
    println!("| {} MiB | {} MiB | {} KiB |", rss[&5] / 1024, rss[&20] / 1024, growth);
    if growth > RSS_GROWTH_BOUND_KIB {
        failures.push(format!("peak RSS grew by {growth} KiB from turn 5 to turn 20"));
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut failures = Vec::new();
    println!("## Hostile input: bounds held");
    frontmatter_section(&mut failures);
    tool_section(&runtime, &mut failures);
    memory_section(&runtime, &mut failures);
    if failures.is_empty() {
        println!(
            "\nEvery figure is within its bound (frontmatter {}, tool call {}, RSS growth {} MiB).",
            ms(FRONTMATTER_CPU_BOUND),
            ms(TOOL_CPU_BOUND),
            RSS_GROWTH_BOUND_KIB / 1024
        );
    } else {
        eprintln!("FAILED: {}", failures.join("; "));
        std::process::exit(1);
    }
}
