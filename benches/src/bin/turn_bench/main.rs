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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::turn::{AgentConfig, TurnService};
use agent_core::{ChatResponse, Message, ToolCall, UserId};
use agent_ports::testing::FnModel;
use aws_store::{AwsStores, CallCounter, StoreSettings};
use local_store::{MemoryObjectStore, MemorySessionStore};
use serde_json::{json, Value};
use benches::{cpu_time, request};
use local_stack::lambda::{Function, Invocation};
use local_stack::model_server::Reply;
use local_stack::stack::{status_and_body, system_of, tool_names, tool_results, turn_event, Stack};

mod report;
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

fn skill_md(index: usize) -> String {
    format!(
        "---\nname: skill-{index:04}\ndescription: Synthetic skill number {index} for the benchmark, with a \
         description of ordinary length.\ncategory: cat{}\ntools: [ls, read_file]\n---\n\n# Skill {index}\n\n{}",
        index % 10,
        "Instructions line for the benchmark skill.\n".repeat(60)
    )
}

/// Every object of a tenant with `count` skills, keyed relative to `{user}/`: three files a skill.
fn tenant_skills(count: usize) -> Vec<(String, Vec<u8>)> {
    (0..count)
        .flat_map(|i| {
            let dir = format!("skills/cat{}/skill-{i:04}", i % 10);
            [
                (format!("{dir}/SKILL.md"), skill_md(i).into_bytes()),
                (format!("{dir}/reference.md"), b"Reference material.\n".repeat(20)),
                (
                    format!("{dir}/examples/example.md"),
                    format!("# Example for skill {i}\n\n{}", "An example of the skill at work.\n".repeat(10))
                        .into_bytes(),
                ),
            ]
        })
        .collect()
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

/// `12345` → `12,345`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn total(ops: &Ops) -> u64 {
    ops.values().sum()
}

fn ops_text(ops: &Ops) -> String {
    let parts: Vec<String> = ops.iter().map(|(op, n)| format!("{op} {n}")).collect();
    format!("{} ({})", total(ops), parts.join(", "))
}

// ---------------------------------------------------------------------------------------------
// 1. Handler CPU over the embedded store.

struct CpuFigure {
    per_turn: Duration,
    turns: u32,
    /// Embedded-store calls per warm turn (object lists/gets/puts, session loads/commits).
    calls_per_turn: f64,
    warmup: Duration,
    /// What a cold process does with the index once it has it: decode it, build the catalog's
    /// lookups and render the state-1 listing (median of 5, CPU).
    catalog_load: Duration,
}

/// The CPU a cold process spends turning the stored index into a catalog and its listing, and
/// looking up the skill a turn loads (its part read and decoded), over the embedded store.
async fn catalog_load_cpu(objects: &MemoryObjectStore, user: &UserId) -> Duration {
    use agent_core::skills::SkillLibrary;
    let budget = AgentConfig::default().listing_tokens();
    let skill = agent_core::SkillPath::parse("cat0/skill-0000").unwrap();
    let mut runs = Vec::new();
    for _ in 0..5 {
        let before = cpu_time();
        let catalog = SkillLibrary::new().catalog(objects, user).await.unwrap();
        std::hint::black_box(catalog.listing(objects, budget).await.unwrap());
        std::hint::black_box(catalog.get(objects, &skill).await.unwrap().expect("the loaded skill"));
        runs.push(cpu_time() - before);
    }
    runs.sort();
    runs[runs.len() / 2]
}

async fn cpu_per_turn(skills: usize) -> CpuFigure {
    let objects = Arc::new(MemoryObjectStore::new());
    let user = UserId::parse(format!("mem-{skills}")).unwrap();
    for (key, bytes) in tenant_skills(skills) {
        objects.insert(&format!("{user}/{key}"), bytes);
    }
    let sessions = Arc::new(MemorySessionStore::new());
    let service =
        TurnService::new(sessions.clone(), objects.clone(), Arc::new(instant_model()), AgentConfig::default());
    // Warm the process with one turn, as a warm Lambda would be: it builds the tenant's index.
    let started = Instant::now();
    service.run_turn(request(&user, "warmup", MESSAGE)).await.unwrap();
    let warmup = started.elapsed();
    let calls_before = objects.calls.total() + sessions.calls.total();
    let (before, wall) = (cpu_time(), Instant::now());
    let mut turns = 0;
    while turns < WARM_TURNS && wall.elapsed() < CPU_WALL_CAP {
        // A fresh session per turn keeps history length constant across iterations.
        service.run_turn(request(&user, &format!("s{turns}"), MESSAGE)).await.unwrap();
        turns += 1;
    }
    let per_turn = (cpu_time() - before) / turns;
    let calls = objects.calls.total() + sessions.calls.total() - calls_before;
    let catalog_load = catalog_load_cpu(&objects, &user).await;
    CpuFigure { per_turn, turns, calls_per_turn: calls as f64 / f64::from(turns), warmup, catalog_load }
}

// ---------------------------------------------------------------------------------------------
// 2. Storage requests on the real adapters against moto.

struct AwsFigures {
    /// The first turn of a tenant without an index: it builds and stores the index.
    build_ops: Ops,
    build_wall: Duration,
    index_bytes: usize,
    /// The parts the head names, and their bytes together (none for a catalog held in its head).
    parts: (usize, u64),
    /// The skills-index function's rebuild of the same tenant (fresh release process).
    rebuild: Result<(Ops, Duration), String>,
    /// A turn on a new `TurnService` (empty process-wide caches) with the index present.
    cold_ops: Ops,
    cold_wall: Duration,
    /// The next turns of the same session on the same service, each counted on its own.
    warm_ops: Vec<Ops>,
    warm_wall: Duration,
    /// Whether a warm revalidation of the index kept the cached catalog (the GET was answered 304).
    catalog_reused: bool,
}

fn aws_service(config: &aws_config::SdkConfig, settings: &StoreSettings) -> (TurnService, CallCounter) {
    let counter = CallCounter::new();
    let stores = AwsStores::from_sdk_config(config, settings, Some(counter.clone()));
    let service = TurnService::new(stores.sessions, stores.objects, Arc::new(instant_model()), AgentConfig::default());
    (service, counter)
}

/// One turn on `service`: its requests by operation and its wall time.
async fn counted_turn(service: &TurnService, counter: &CallCounter, user: &UserId, session: &str) -> (Ops, Duration) {
    counter.reset();
    let started = Instant::now();
    service.run_turn(request(user, session, MESSAGE)).await.unwrap();
    (counter.operations(), started.elapsed())
}

async fn aws_figures(stack: &Stack, user: &UserId) -> AwsFigures {
    let config = local_stack::moto::sdk_config(&stack.endpoint).await;
    let settings = StoreSettings::from_lookup(|name| match name {
        "SESSIONS_TABLE" => Some(stack.table.clone()),
        "SKILLS_BUCKET" => Some(stack.bucket.clone()),
        "S3_FORCE_PATH_STYLE" => Some("true".into()),
        _ => None,
    })
    .unwrap();
    let index_key = agent_core::keys::catalog_index_key(user);
    assert!(stack.get(&index_key).await.is_none(), "{user} must start without an index");

    // The one-time build, by a throwaway service's first turn.
    let (throwaway, counter) = aws_service(&config, &settings);
    let (build_ops, build_wall) = counted_turn(&throwaway, &counter, user, "build").await;
    drop(throwaway);
    let head_bytes = stack.get(&index_key).await.unwrap_or_default();
    let index_bytes = head_bytes.len();
    let parts = match agent_core::skills::index::decode_index(&head_bytes) {
        Ok(agent_core::skills::index::IndexRead::Usable(head)) => {
            (head.parts.len(), head.parts.iter().map(|part| part.bytes).sum())
        }
        _ => (0, 0),
    };
    eprintln!("  index build (first turn): {} in {:.0} ms", ops_text(&build_ops), ms(build_wall));

    // The same build by the skills-index function, for comparison.
    let indexer = stack.skills_index(&[]).await;
    let mark = indexer.log_mark();
    let started = Instant::now();
    let event = json!({"rebuild": {"user_id": user.to_string()}});
    let rebuild = match indexer.invoke_with_budget(event, Duration::from_secs(600)).await {
        Invocation::Response(_) => {
            let wall = started.elapsed();
            Ok((indexer.storage_requests_since(mark).await, wall))
        }
        Invocation::Error(error) => Err(format!("the rebuild failed: {error}")),
        Invocation::Stream(_) => Err("the rebuild streamed its answer".to_owned()),
    };
    drop(indexer);
    match &rebuild {
        Ok((ops, wall)) => eprintln!("  skills-index rebuild: {} in {:.0} ms", ops_text(ops), ms(*wall)),
        Err(error) => eprintln!("  skills-index rebuild: {error}"),
    }

    // A cold turn (new caches, index present), then warm turns on the same service.
    let (service, counter) = aws_service(&config, &settings);
    let (cold_ops, cold_wall) = counted_turn(&service, &counter, user, "cold").await;
    let mut warm_ops = Vec::new();
    let mut warm_wall = Duration::ZERO;
    for _ in 0..AWS_WARM_TURNS {
        let (ops, wall) = counted_turn(&service, &counter, user, "cold").await;
        warm_ops.push(ops);
        warm_wall += wall;
    }
    // An unchanged index is answered 304 and the cached catalog is used again, not parsed anew.
    let again = service.skill_catalog(user).await.unwrap();
    let catalog_reused = Arc::ptr_eq(&again, &service.skill_catalog(user).await.unwrap());
    eprintln!("  cold turn: {} in {:.0} ms", ops_text(&cold_ops), ms(cold_wall));
    eprintln!("  warm turn: {}", ops_text(&warm_ops[0]));
    AwsFigures {
        catalog_reused,
        build_ops,
        build_wall,
        index_bytes,
        parts,
        rebuild,
        cold_ops,
        cold_wall,
        warm_ops,
        warm_wall: warm_wall / AWS_WARM_TURNS as u32,
    }
}

// ---------------------------------------------------------------------------------------------
// 3 to 6. The release http-turn binary through the Lambda Runtime API.

struct FunctionFigures {
    /// Process spawn → first reply, one per fresh process.
    cold_starts: Vec<Duration>,
    /// Each cold start less its turn's waits on storage ([`storage_waits`]).
    cold_starts_less_storage: Vec<Duration>,
    /// The first model request of the first cold turn.
    system_prompt: String,
    tools: Vec<String>,
    /// Storage requests the function logged for each process's cold turn.
    log_cold: Vec<Ops>,
    /// ... and for each warm turn of the last process.
    log_warm: Vec<Ops>,
    rss_kib: Option<u64>,
}

/// Queues the scripted turn's model replies; returns the position its first model request will
/// have among the requests the model server records. Done before a timed turn starts: reading the
/// recorded requests copies them all.
fn script_turn(stack: &Stack) -> usize {
    let first = stack.model.requests().len();
    stack.model.push(scripted_turn());
    first
}

/// One scripted turn of `function` (queued by [`script_turn`], which returned `first`), checked like
/// the in-process one: it must answer 200, call the model three times and see no failed tool call.
/// Returns the wall time from `started` to the answer, the first model request of the turn, the
/// storage requests the function logged, and its waits on storage ([`storage_waits`]).
async fn function_turn(
    stack: &Stack,
    function: &Function,
    user: &UserId,
    session: &str,
    (first, started): (usize, Instant),
) -> (Duration, Value, Ops, Duration) {
    let mark = function.log_mark();
    let response = function.call(turn_event(Some(user.as_str()), session, json!({"message": MESSAGE}))).await;
    let wall = started.elapsed();
    let (status, body) = status_and_body(&response);
    assert_eq!(status, 200, "the benchmark turn failed: {body}");
    let requests = stack.model.requests();
    assert_eq!(requests.len() - first, 3, "the turn should call the model three times; {body}");
    assert_eq!(stack.model.remaining(), 0);
    for result in tool_results(requests.last().unwrap()) {
        assert!(!result.starts_with("Error"), "a tool call of the benchmark failed: {result}");
    }
    let ops = function.storage_requests_since(mark).await;
    let waits = storage_waits(&function.logs_since(mark));
    (wall, requests[first].clone(), ops, waits)
}

/// The turn's waits on storage as its summary line reports them: the session and catalog loads
/// (made at once, so the longer of the two) and the commit. Zero when the line is missing.
fn storage_waits(lines: &[String]) -> Duration {
    let summary = lines
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["fields"]["message"] == "turn summary");
    let Some(summary) = summary else { return Duration::ZERO };
    let step = |name: &str| summary["fields"][name].as_f64().unwrap_or(0.0);
    let ms = step("session_load_ms").max(step("catalog_ms")) + step("commit_ms");
    Duration::from_secs_f64(ms / 1000.0)
}

async fn function_figures(stack: &Stack, user: &UserId) -> FunctionFigures {
    let mut figures = FunctionFigures {
        cold_starts: Vec::new(),
        cold_starts_less_storage: Vec::new(),
        system_prompt: String::new(),
        tools: Vec::new(),
        log_cold: Vec::new(),
        log_warm: Vec::new(),
        rss_kib: None,
    };
    for run in 0..COLD_STARTS {
        // A cold start is a new process on a quiet machine: let the previous phase's work settle.
        tokio::time::sleep(COLD_START_PAUSE).await;
        let first = script_turn(stack);
        let started = Instant::now();
        let http = stack.http(&[]).await;
        let session = format!("coldstart{run}");
        let (wall, first_request, ops, waits) = function_turn(stack, &http, user, &session, (first, started)).await;
        eprintln!(
            "  http-turn cold start {}: {:.0} ms ({:.0} ms of it on storage), logged {}",
            run + 1,
            ms(wall),
            ms(waits),
            ops_text(&ops)
        );
        figures.cold_starts.push(wall);
        figures.cold_starts_less_storage.push(wall.saturating_sub(waits));
        figures.log_cold.push(ops);
        if run == 0 {
            figures.system_prompt = system_of(&first_request);
            figures.tools = tool_names(&first_request);
        }
        if run + 1 == COLD_STARTS {
            // The same session goes on, as a user's conversation does.
            for _ in 1..RSS_TURNS {
                let first = script_turn(stack);
                let (_, _, ops, _) = function_turn(stack, &http, user, &session, (first, Instant::now())).await;
                figures.log_warm.push(ops);
            }
            figures.rss_kib = http.pid().and_then(peak_rss_kib);
        }
    }
    figures
}
/// Uploads a tenant's objects, `UPLOAD_BATCH` at a time (each batch 32 requests at a time);
/// returns how many.
async fn upload(stack: &Stack, user: &UserId, skills: usize) -> usize {
    let objects: Vec<(String, Vec<u8>)> =
        tenant_skills(skills).into_iter().map(|(key, bytes)| (format!("{user}/{key}"), bytes)).collect();
    let count = objects.len();
    let started = Instant::now();
    let mut objects = objects.into_iter();
    let mut done = 0;
    loop {
        let batch: Vec<(String, Vec<u8>)> = objects.by_ref().take(UPLOAD_BATCH).collect();
        if batch.is_empty() {
            break;
        }
        done += batch.len();
        stack.put_many(batch).await;
        let elapsed = started.elapsed().as_secs_f64();
        eprintln!("  {user}: {done}/{count} objects in {elapsed:.1} s ({:.0}/s)", done as f64 / elapsed);
    }
    count
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
