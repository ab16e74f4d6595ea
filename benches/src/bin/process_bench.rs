//! The whole function's CPU: the release `http-turn` process behind the Lambda Runtime API emulator,
//! on moto, with a zero-latency scripted model, at 10, 1,000 and 10,000 skills. The workload is one
//! session of 20 warm turns of 7 model calls each (6 tool calls: `load_skill`, `read_file` of the
//! skill's reference, `ls`, `write_file`, `edit_file` and `read_file` of the written file; then the
//! answer), after the cold turn that started the process.
//!
//! It reports, per library size, the process's CPU (user and system, every thread's on-CPU time
//! from `/proc/{pid}/task/*/schedstat`) up to the cold start's first reply, and per warm turn (with
//! the first and the last warm turn's, since each sends a longer history); with the wall time of each.
//!
//! With `PROCESS_BENCH_MEMORY_MB` (comma-separated, such as `128,256,512,1024`) it also runs the
//! function under Lambda's CPU share for each memory size: a cgroup (v1 `cpu` controller, as root)
//! whose quota is memory ÷ 1,769 MB of one CPU, and reports the wall times there with the price of
//! a million warm turns at Lambda's published Arm price (the template's functions are arm64).
//!
//! Every figure is the median over 3 new processes (`PROCESS_BENCH_PROCESSES`). After the table it
//! says, for the whole machine, whether each figure is within issue 41's goals (2.5 ms of CPU per
//! warm turn, 10 ms per cold start): on a quiet machine, a figure over them is a regression.
//!
//! To compare builds, `PROCESS_BENCH_BINARIES` names them (comma-separated paths, or names in
//! `target/release`): each process slot starts every binary in turn (in reverse order every other
//! slot), so that the machine's drift over a run falls on all of them alike, and the report adds
//! each binary's difference to the first, the median of the slots' differences.
//!
//! Run with `cargo build --release -p http-turn && cargo run --release -p benches --bin
//! process-bench` (moto_server on PATH). `PROCESS_BENCH_SIZES` (comma-separated) picks other sizes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_core::UserId;
use benches::{process_cpu, tenant_skills, thousands};
use local_stack::faults::{FaultProxy, Seen};
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::moto::{create_sessions_table, unique_name};
use local_stack::stack::{status_and_body, tool_results, turn_event, Stack};
use serde_json::json;

/// Warm turns of the measured session, after the cold one.
const WARM_TURNS: usize = 20;
/// Memory at which Lambda gives a function one whole vCPU.
const FULL_CPU_MB: u64 = 1_769;
/// Lambda's published Arm prices (us-east-1, the first tier): per GB-second of duration and per
/// request.
const PRICE_PER_GB_SECOND: f64 = 0.000_013_333_4;
const PRICE_PER_REQUEST: f64 = 0.000_000_2;
/// Issue 41's goals for the function's own CPU, on the whole machine: a figure over them on a quiet
/// run is a regression (docs/performance-process.md names the figures of the last one).
const GOAL_WARM_CPU: Duration = Duration::from_micros(2_500);
const GOAL_COLD_CPU: Duration = Duration::from_millis(10);
/// The skill every turn loads and the file it reads.
const SKILL: &str = "cat2/skill-0002";
const SKILL_FILE: &str = "/skills/skill-0002/reference.md";

fn main() {
    let sizes = list_env("PROCESS_BENCH_SIZES").unwrap_or_else(|| vec![10, 1_000, 10_000]);
    let memories = list_env("PROCESS_BENCH_MEMORY_MB").unwrap_or_default();
    let processes = list_env("PROCESS_BENCH_PROCESSES").and_then(|n| n.first().copied()).unwrap_or(3).max(1) as usize;
    let binaries = binaries_env();
    println!("process-bench: load average before: {}", load_average());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let stack = Stack::new().await;
        let mut rows = Vec::new();
        for size in sizes {
            let user = UserId::parse(format!("proc-{size}")).expect("a user id");
            prepare(&stack, &user, size as usize).await;
            let runs = slots(processes, &binaries, |binary| measure(&stack, &user, None, binary)).await;
            rows.push(Row::new(size, None, &binaries, runs));
            for &memory in &memories {
                let group = CpuShare::create(memory);
                let runs = slots(processes, &binaries, |binary| measure(&stack, &user, Some(&group), binary)).await;
                rows.push(Row::new(size, Some(memory), &binaries, runs));
            }
        }
        report(&rows, &binaries);
    });
    println!("process-bench: load average after: {}", load_average());
}

/// The binaries to measure: `PROCESS_BENCH_BINARIES`, or the release `http-turn`.
fn binaries_env() -> Vec<String> {
    let named = std::env::var("PROCESS_BENCH_BINARIES").unwrap_or_default();
    let binaries: Vec<String> =
        named.split(',').map(str::trim).filter(|name| !name.is_empty()).map(str::to_owned).collect();
    if binaries.is_empty() {
        vec!["http-turn".to_owned()]
    } else {
        binaries
    }
}

/// One size's (and CPU share's) figures: each binary's median, and each binary's median difference
/// to the first over the slots.
struct Row {
    size: u64,
    memory: Option<u64>,
    figures: Vec<Figures>,
    differences: Vec<(Duration, Duration, bool, bool)>,
}

impl Row {
    fn new(size: u64, memory: Option<u64>, binaries: &[String], runs: Vec<Vec<Figures>>) -> Row {
        let differences = (1..binaries.len()).map(|b| median_difference(&runs, b)).collect();
        let figures: Vec<Figures> = runs.into_iter().map(median_of).collect();
        for (binary, figures) in binaries.iter().zip(&figures) {
            let at = memory.map(|memory| format!(" at {memory} MB")).unwrap_or_default();
            eprintln!("  {size} skills{at}, {binary}: {}", figures.line());
        }
        Row { size, memory, figures, differences }
    }
}

/// Uploads the tenant's skills and lets a throwaway process build its catalog index, so that the
/// measured cold start is a new process's, not the tenant's first turn ever.
async fn prepare(stack: &Stack, user: &UserId, size: usize) {
    let objects: Vec<(String, Vec<u8>)> =
        tenant_skills(size).into_iter().map(|(key, bytes)| (format!("{user}/{key}"), bytes)).collect();
    // Seeded straight into moto's S3 (the benchmark measures turns, not uploads).
    for batch in objects.chunks(2_000) {
        stack.seed_objects(batch.to_vec()).await;
    }
    let builder = stack.http(&[]).await;
    turn(stack, &builder, user, "index-build", true).await;
}

/// What one process did: its cold start and its warm turns.
struct Figures {
    cold_cpu: Duration,
    cold_wall: Duration,
    warm_cpu: Duration,
    warm_wall: Duration,
    /// The CPU of the first and of the last warm turn: each turn sends and reads a longer history.
    first_warm_cpu: Duration,
    last_warm_cpu: Duration,
    /// A warm turn's storage requests, by operation.
    storage: String,
    /// The cold turn's storage requests, by operation.
    cold_storage: String,
}

impl Figures {
    fn line(&self) -> String {
        format!(
            "cold start {} CPU ({} wall; {} storage requests), warm turn {} CPU ({} wall; the first {}, the last {}), {} storage requests",
            ms(self.cold_cpu),
            ms(self.cold_wall),
            self.cold_storage,
            ms(self.warm_cpu),
            ms(self.warm_wall),
            ms(self.first_warm_cpu),
            ms(self.last_warm_cpu),
            self.storage
        )
    }
}

/// Runs `measure` for every binary in each of `processes` slots, every other slot in reverse order;
/// the runs of each binary, in slot order.
async fn slots<F, Fut>(processes: usize, binaries: &[String], mut measure: F) -> Vec<Vec<Figures>>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Figures>,
{
    let mut runs: Vec<Vec<Figures>> = binaries.iter().map(|_| Vec::with_capacity(processes)).collect();
    for slot in 0..processes {
        let mut order: Vec<usize> = (0..binaries.len()).collect();
        if slot % 2 == 1 {
            order.reverse();
        }
        for b in order {
            let figures = measure(binaries[b].clone()).await;
            runs[b].push(figures);
        }
    }
    runs
}

/// The median of each figure over a binary's new processes: a single cold start varies by a few
/// milliseconds with what the machine is doing.
fn median_of(mut runs: Vec<Figures>) -> Figures {
    let median = |figure: fn(&Figures) -> Duration| {
        let mut values: Vec<Duration> = runs.iter().map(figure).collect();
        values.sort();
        values[values.len() / 2]
    };
    Figures {
        cold_cpu: median(|f| f.cold_cpu),
        cold_wall: median(|f| f.cold_wall),
        warm_cpu: median(|f| f.warm_cpu),
        warm_wall: median(|f| f.warm_wall),
        first_warm_cpu: median(|f| f.first_warm_cpu),
        last_warm_cpu: median(|f| f.last_warm_cpu),
        cold_storage: runs.last().map(|f| f.cold_storage.clone()).unwrap_or_default(),
        storage: runs.pop().map(|f| f.storage).unwrap_or_default(),
    }
}

/// Binary `b`'s warm and cold CPU against the first binary's, slot by slot: the medians of the
/// differences (their magnitudes, and whether each is a saving).
fn median_difference(runs: &[Vec<Figures>], b: usize) -> (Duration, Duration, bool, bool) {
    let median = |figure: fn(&Figures) -> Duration| {
        let mut differences: Vec<f64> = runs[0]
            .iter()
            .zip(&runs[b])
            .map(|(first, other)| figure(other).as_secs_f64() - figure(first).as_secs_f64())
            .collect();
        differences.sort_by(f64::total_cmp);
        differences[differences.len() / 2]
    };
    let (warm, cold) = (median(|f| f.warm_cpu), median(|f| f.cold_cpu));
    (Duration::from_secs_f64(warm.abs()), Duration::from_secs_f64(cold.abs()), warm < 0.0, cold < 0.0)
}

/// A new process (in `share`'s cgroup when given): its first turn, then [`WARM_TURNS`] more of the
/// same session.
async fn measure(stack: &Stack, user: &UserId, share: Option<&CpuShare>, binary: String) -> Figures {
    // A cold start is a new process on a quiet machine: let the previous phase's work settle.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let session = format!("s{}", rand_suffix());
    // AWS keeps a client's connections open between requests and moto's server closes each one, so
    // the function reaches moto through a proxy that keeps them open (and counts the requests).
    let proxy = FaultProxy::start(&stack.endpoint).await;
    // A table of its own: moto's queries slow down as a table fills, which would make the later
    // rows' wall times longer than the earlier ones' for moto's sake alone.
    let table = unique_name("process-bench");
    create_sessions_table(&stack.dynamodb, &table).await;
    let env = stack.env(&[("AWS_ENDPOINT_URL", proxy.endpoint.as_str()), ("SESSIONS_TABLE", table.as_str())]);
    let started = Instant::now();
    let function = match share {
        Some(share) => Function::start_in_cgroup(&binary, &env, &share.path).await,
        None => Function::start(&binary, &env).await,
    };
    let pid = function.pid().expect("the function's pid");
    turn(stack, &function, user, &session, false).await;
    let (cold_cpu, cold_wall) = (process_cpu(pid), started.elapsed());
    let cold_requests = proxy.log().len();
    let (before, started) = (process_cpu(pid), Instant::now());
    let mut each = Vec::with_capacity(WARM_TURNS);
    for n in 0..WARM_TURNS {
        let at = process_cpu(pid);
        turn(stack, &function, user, &session, n + 1 == WARM_TURNS).await;
        each.push(process_cpu(pid) - at);
    }
    let turns = WARM_TURNS as u32;
    let (warm_cpu, warm_wall) = ((process_cpu(pid) - before) / turns, started.elapsed() / turns);
    let log = proxy.log();
    let (cold_storage, storage) =
        (storage_requests(&log[..cold_requests], 1), storage_requests(&log[cold_requests..], WARM_TURNS));
    let (first_warm_cpu, last_warm_cpu) = (each[0], each[WARM_TURNS - 1]);
    Figures { cold_cpu, cold_wall, warm_cpu, warm_wall, first_warm_cpu, last_warm_cpu, storage, cold_storage }
}

/// A turn's storage requests, by operation, from what the proxy saw over `turns` turns.
fn storage_requests(seen: &[Seen], turns: usize) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for request in seen {
        *counts.entry(format!("{:?} {}", request.service, request.operation)).or_default() += 1;
    }
    let per_turn = |n: usize| format!("{:.1}", n as f64 / turns as f64).replace(".0", "");
    let parts: Vec<String> = counts.iter().map(|(operation, n)| format!("{} {operation}", per_turn(*n))).collect();
    format!("{} ({})", per_turn(seen.len()), parts.join(", "))
}

/// One turn of the workload; it must answer 200 having taken the 7 replies. With `check`, its
/// requests are read back too (7 calls, no failed tool call): reading them copies every request the
/// model server ever recorded, so only the first and last turn of a process do.
async fn turn(stack: &Stack, function: &Function, user: &UserId, session: &str, check: bool) {
    let first = if check { stack.model.requests().len() } else { 0 };
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": SKILL})),
        Reply::tool("read_file", json!({"file_path": SKILL_FILE, "limit": 20})),
        Reply::tool("ls", json!({"path": "/workspace"})),
        Reply::tool("write_file", json!({"file_path": "/workspace/notes.md", "content": "Notes of the turn.\n"})),
        Reply::tool(
            "edit_file",
            json!({"file_path": "/workspace/notes.md", "old_string": "Notes", "new_string": "The notes"}),
        ),
        Reply::tool("read_file", json!({"file_path": "/workspace/notes.md"})),
        Reply::text("done"),
    ]);
    let response = function.call(turn_event(Some(user.as_str()), session, json!({"message": "Use the skill."}))).await;
    let (status, body) = status_and_body(&response);
    assert_eq!(status, 200, "the benchmark turn failed: {body}");
    assert_eq!(stack.model.remaining(), 0, "the turn should take its 7 replies: {body}");
    if !check {
        return;
    }
    let requests = stack.model.requests();
    assert_eq!(requests.len() - first, 7, "the turn should call the model 7 times: {body}");
    for result in tool_results(requests.last().expect("a request")) {
        assert!(!result.starts_with("Error"), "a tool call of the benchmark failed: {result}");
    }
}

/// A cgroup (v1 `cpu`) whose CPU quota is Lambda's share at `memory` MB.
struct CpuShare {
    path: PathBuf,
}

impl CpuShare {
    fn create(memory: u64) -> CpuShare {
        let path = Path::new("/sys/fs/cgroup/cpu").join(format!("process-bench-{memory}"));
        std::fs::create_dir_all(&path).expect("a cpu cgroup (run as root, with cgroup v1's cpu controller)");
        let period: u64 = 100_000;
        let quota = (period * memory / FULL_CPU_MB).max(1_000);
        std::fs::write(path.join("cpu.cfs_period_us"), period.to_string()).expect("the cgroup's period");
        std::fs::write(path.join("cpu.cfs_quota_us"), quota.to_string()).expect("the cgroup's quota");
        CpuShare { path }
    }
}

fn report(rows: &[Row], binaries: &[String]) {
    println!("\nthe release http-turn, one session: a cold start, then {WARM_TURNS} warm turns of 7 model calls");
    let several = binaries.len() > 1;
    println!(
        "{:>8} {:>12} {:>14} {:>14} {:>14} {:>22} {:>14} {:>16}{}",
        "skills",
        "CPU share",
        "cold CPU",
        "cold wall",
        "warm CPU",
        "first / last warm",
        "warm wall",
        "$ per 1M warm",
        if several { "  binary" } else { "" }
    );
    for row in rows {
        for (binary, figures) in binaries.iter().zip(&row.figures) {
            let (share, price) = match row.memory {
                None => ("whole".to_owned(), String::new()),
                Some(memory) => {
                    let seconds = figures.warm_wall.as_secs_f64();
                    let gb = memory as f64 / 1024.0;
                    let price = 1e6 * (seconds * gb * PRICE_PER_GB_SECOND + PRICE_PER_REQUEST);
                    (format!("{memory} MB"), format!("${price:.2}"))
                }
            };
            println!(
                "{:>8} {:>12} {:>14} {:>14} {:>14} {:>22} {:>14} {:>16}{}",
                thousands(row.size),
                share,
                ms(figures.cold_cpu),
                ms(figures.cold_wall),
                ms(figures.warm_cpu),
                format!("{} / {}", ms(figures.first_warm_cpu), ms(figures.last_warm_cpu)),
                ms(figures.warm_wall),
                price,
                if several { format!("  {binary}") } else { String::new() }
            );
        }
    }
    let signed = |magnitude: Duration, saving: bool| format!("{}{}", if saving { "-" } else { "+" }, ms(magnitude));
    for row in rows {
        for (binary, (warm, cold, warm_saves, cold_saves)) in binaries.iter().skip(1).zip(&row.differences) {
            let at = row.memory.map(|memory| format!(" at {memory} MB")).unwrap_or_default();
            println!(
                "compare: {binary} against {} at {} skills{at}: warm turn {}, cold start {} (medians of the slots' differences)",
                binaries[0],
                thousands(row.size),
                signed(*warm, *warm_saves),
                signed(*cold, *cold_saves)
            );
        }
    }
    for row in rows.iter().filter(|row| row.memory.is_none()) {
        let Some(figures) = row.figures.first() else { continue };
        for (what, figure, goal) in
            [("warm turn", figures.warm_cpu, GOAL_WARM_CPU), ("cold start", figures.cold_cpu, GOAL_COLD_CPU)]
        {
            let verdict = if figure <= goal { "within" } else { "OVER" };
            println!(
                "goal: {what} at {} skills: {} of CPU, {verdict} the goal of {} (on a quiet machine, over is a regression)",
                thousands(row.size),
                ms(figure),
                ms(goal)
            );
        }
    }
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}

fn list_env(name: &str) -> Option<Vec<u64>> {
    let value = std::env::var(name).ok()?;
    Some(value.split(',').filter_map(|part| part.trim().parse().ok()).collect())
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|line| line.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
