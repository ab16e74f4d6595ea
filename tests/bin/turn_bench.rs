//! The per-turn benchmark over tenants of 10, 1,000 and 10,000 skills (each skill a SKILL.md plus
//! `reference.md` and `examples/example.md`), with a zero-latency model that loads one skill,
//! reads one of its files and answers:
//!
//! 1. handler CPU per warm turn over the embedded store;
//! 2. storage requests of a cold turn (new process-wide caches, index present) and of a warm turn,
//!    by operation, on the real S3/DynamoDB adapters against moto; and the one-time index build;
//! 3. cold start of the release `http-turn` binary through the Lambda Runtime API (median of 3);
//! 4. the state-1 system prompt the model is sent, and whether `find_skills` is offered;
//! 5. peak RSS of `http-turn` after 21 turns;
//! 6. storage requests as the compiled function logs them, which must agree with 2.
//!
//! Progress goes to stderr; the table at the end goes to stdout.
//! Run with `cargo xtask bench` (release build; needs moto_server on PATH for items 2 to 6).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::turn::{AgentConfig, TurnRequest, TurnService, UserProfile};
use agent_core::{
    ChatModel, ChatRequest, ChatResponse, Message, ModelError, SessionId, StopReason, ToolCall, Usage, UserId,
};
use async_trait::async_trait;
use aws_store::{AwsStores, CallCounter, StoreSettings};
use local_store::{MemoryObjectStore, MemorySessionStore};
use serde_json::{json, Value};
use tests::lambda::{Function, Invocation};
use tests::model_server::Reply;
use tests::stack::{status_and_body, system_of, tool_names, tool_results, turn_event, Stack};

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
const COLD_STARTS: usize = 3;
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
            0 => call("load_skill", json!({"skill_path": SKILL})),
            2 => call("read_file", json!({"file_path": SKILL_FILE, "limit": 20})),
            _ => ChatResponse {
                content: "done".into(),
                tool_calls: vec![],
                usage: Usage::default(),
                stop_reason: StopReason::EndTurn,
            },
        })
    }
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

fn request(user: &UserId, session: &str) -> TurnRequest {
    TurnRequest {
        user: user.clone(),
        session: SessionId::parse(session).unwrap(),
        message: MESSAGE.into(),
        ticket: None,
        profile: UserProfile::default(),
        deadline: None,
        now: agent_core::turn::OffsetDateTime::now_utc(),
        idempotency: None,
    }
}

fn cpu_time() -> Duration {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we pass.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
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

/// The CPU a cold process spends turning the stored index into a catalog and its listing.
async fn catalog_load_cpu(objects: &MemoryObjectStore, user: &UserId) -> Duration {
    use agent_core::skills::index::{decode_index, IndexRead};
    use agent_core::skills::Catalog;
    use agent_core::ObjectStore;
    let stored = objects.get(&agent_core::keys::catalog_index_key(user)).await.unwrap().expect("the index was built");
    let budget = AgentConfig::default().listing_tokens();
    let mut runs: Vec<Duration> = (0..5)
        .map(|_| {
            let before = cpu_time();
            let IndexRead::Usable(index) = decode_index(&stored.bytes).unwrap() else { panic!("unusable index") };
            let catalog = Catalog::new(index, stored.etag.clone());
            std::hint::black_box(catalog.listing(budget));
            cpu_time() - before
        })
        .collect();
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
    let service = TurnService::new(sessions.clone(), objects.clone(), Arc::new(InstantModel), AgentConfig::default());
    // Warm the process with one turn, as a warm Lambda would be: it builds the tenant's index.
    let started = Instant::now();
    service.run_turn(request(&user, "warmup")).await.unwrap();
    let warmup = started.elapsed();
    let calls_before = objects.calls.total() + sessions.calls.total();
    let (before, wall) = (cpu_time(), Instant::now());
    let mut turns = 0;
    while turns < WARM_TURNS && wall.elapsed() < CPU_WALL_CAP {
        // A fresh session per turn keeps history length constant across iterations.
        service.run_turn(request(&user, &format!("s{turns}"))).await.unwrap();
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
    /// The skills-index function's rebuild of the same tenant (fresh release process).
    rebuild: Result<(Ops, Duration), String>,
    /// A turn on a new `TurnService` (empty process-wide caches) with the index present.
    cold_ops: Ops,
    cold_wall: Duration,
    /// The turns after it on the same service, each counted on its own.
    warm_ops: Vec<Ops>,
    warm_wall: Duration,
    /// Whether a warm revalidation of the index kept the cached catalog (the GET was answered 304).
    catalog_reused: bool,
}

fn aws_service(config: &aws_config::SdkConfig, settings: &StoreSettings) -> (TurnService, CallCounter) {
    let counter = CallCounter::new();
    let stores = AwsStores::from_sdk_config(config, settings, Some(counter.clone()));
    let service = TurnService::new(stores.sessions, stores.objects, Arc::new(InstantModel), AgentConfig::default());
    (service, counter)
}

/// One turn on `service`: its requests by operation and its wall time.
async fn counted_turn(service: &TurnService, counter: &CallCounter, user: &UserId, session: &str) -> (Ops, Duration) {
    counter.reset();
    let started = Instant::now();
    service.run_turn(request(user, session)).await.unwrap();
    (counter.operations(), started.elapsed())
}

async fn aws_figures(stack: &Stack, user: &UserId) -> AwsFigures {
    let config = tests::moto::sdk_config(&stack.endpoint).await;
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
    let index_bytes = stack.get(&index_key).await.map_or(0, |bytes| bytes.len());
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
    for turn in 0..AWS_WARM_TURNS {
        let (ops, wall) = counted_turn(&service, &counter, user, &format!("warm{turn}")).await;
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
/// Returns the wall time from `started` to the answer, the first model request of the turn, and the
/// storage requests the function logged.
async fn function_turn(
    stack: &Stack,
    function: &Function,
    user: &UserId,
    session: &str,
    (first, started): (usize, Instant),
) -> (Duration, Value, Ops) {
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
    (wall, requests[first].clone(), ops)
}

async fn function_figures(stack: &Stack, user: &UserId) -> FunctionFigures {
    let mut figures = FunctionFigures {
        cold_starts: Vec::new(),
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
        let (wall, first_request, ops) = function_turn(stack, &http, user, &session, (first, started)).await;
        eprintln!("  http-turn cold start {}: {:.0} ms, logged {}", run + 1, ms(wall), ops_text(&ops));
        figures.cold_starts.push(wall);
        figures.log_cold.push(ops);
        if run == 0 {
            figures.system_prompt = system_of(&first_request);
            figures.tools = tool_names(&first_request);
        }
        if run + 1 == COLD_STARTS {
            for turn in 1..RSS_TURNS {
                let first = script_turn(stack);
                let (_, _, ops) =
                    function_turn(stack, &http, user, &format!("rss{turn}"), (first, Instant::now())).await;
                figures.log_warm.push(ops);
            }
            figures.rss_kib = http.pid().and_then(peak_rss_kib);
        }
    }
    figures
}

// ---------------------------------------------------------------------------------------------
// The report.

struct SizeReport {
    skills: usize,
    cpu: CpuFigure,
    aws: Option<AwsFigures>,
    function: Option<FunctionFigures>,
}

fn median(values: &[Duration]) -> Option<Duration> {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted.get(sorted.len() / 2).copied()
}

/// The state-1 skill listing inside a system prompt: from its header to the end.
fn listing_of(system: &str) -> &str {
    system.find("This account has").map_or("", |at| system[at..].trim_end())
}

/// Which tier of `agent_core::skills::listing` a rendered listing is, from its wording.
fn listing_tier(listing: &str) -> &'static str {
    if listing.is_empty() {
        "none"
    } else if listing.contains("all shown below with their full description") {
        "full descriptions"
    } else if listing.contains("Skills by category, each written as its load_skill argument") {
        "names by category"
    } else if listing.contains("Skills by category (") {
        "categories with counts"
    } else if listing.contains("none is listed here") {
        "one-line summary"
    } else {
        "shortened descriptions"
    }
}

fn tokens(bytes: usize) -> usize {
    bytes.div_ceil(3)
}

/// All the same, or `None` when there is nothing to compare.
fn all_equal(values: &[Ops]) -> Option<bool> {
    let first = values.first()?;
    Some(values.iter().all(|ops| ops == first))
}

struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(reports: &[SizeReport]) -> Self {
        let mut header = vec!["figure".to_owned()];
        header.extend(reports.iter().map(|r| format!("{} skills", thousands(r.skills as u64))));
        Table { header, rows: Vec::new() }
    }

    fn row(&mut self, label: impl Into<String>, cells: Vec<String>) {
        let mut row = vec![label.into()];
        row.extend(cells);
        self.rows.push(row);
    }

    /// A total row, then one row per operation seen at any size.
    fn ops_rows(&mut self, label: &str, ops: &[Option<Ops>]) {
        let cell = |ops: &Option<Ops>, f: &dyn Fn(&Ops) -> String| ops.as_ref().map_or("n/a".to_owned(), f);
        self.row(
            format!("**{label}**"),
            ops.iter().map(|o| cell(o, &|ops| format!("**{}**", thousands(total(ops))))).collect(),
        );
        let names: BTreeSet<&String> = ops.iter().flatten().flat_map(|ops| ops.keys()).collect();
        for name in names {
            self.row(
                format!("  · {name}"),
                ops.iter().map(|o| cell(o, &|ops| thousands(ops.get(name).copied().unwrap_or(0)))).collect(),
            );
        }
    }

    fn print(&self) {
        let line = |cells: &[String]| println!("| {} |", cells.join(" | "));
        line(&self.header);
        let rule: Vec<String> =
            self.header.iter().enumerate().map(|(i, _)| if i == 0 { "---" } else { "---:" }.to_owned()).collect();
        line(&rule);
        for row in &self.rows {
            line(row);
        }
    }
}

fn print_report(reports: &[SizeReport], listing_budget: usize) {
    let mut table = Table::new(reports);
    let each = |f: &dyn Fn(&SizeReport) -> Option<String>| -> Vec<String> {
        reports.iter().map(|r| f(r).unwrap_or_else(|| "n/a".to_owned())).collect()
    };

    table.row(
        "handler CPU per warm turn (embedded store)",
        each(&|r| Some(format!("{:.0} µs", r.cpu.per_turn.as_secs_f64() * 1e6))),
    );
    table.row("  warm turns measured", each(&|r| Some(r.cpu.turns.to_string())));
    table.row("  embedded-store calls per warm turn", each(&|r| Some(format!("{:.1}", r.cpu.calls_per_turn))));
    table.row(
        "cold catalog load CPU (decode index, build lookups, render listing)",
        each(&|r| Some(format!("{:.1} ms", ms(r.cpu.catalog_load)))),
    );
    table.row("  warm-up turn (builds the index in memory)", each(&|r| Some(format!("{:.0} ms", ms(r.cpu.warmup)))));

    let aws = |f: &dyn Fn(&AwsFigures) -> Ops| -> Vec<Option<Ops>> {
        reports.iter().map(|r| r.aws.as_ref().map(f)).collect()
    };
    table.ops_rows("storage requests, cold turn (CallCounter, moto)", &aws(&|a| a.cold_ops.clone()));
    table.row(
        "  cold turn wall time (moto on loopback)",
        each(&|r| r.aws.as_ref().map(|a| format!("{:.0} ms", ms(a.cold_wall)))),
    );
    table.ops_rows("storage requests per warm turn (CallCounter, moto)", &aws(&|a| a.warm_ops[0].clone()));
    table.row(
        format!("  the {AWS_WARM_TURNS} warm turns counted alike"),
        each(&|r| {
            r.aws.as_ref().and_then(|a| all_equal(&a.warm_ops)).map(|same| if same { "yes" } else { "NO" }.into())
        }),
    );
    table.row(
        "  warm turn wall time (moto on loopback)",
        each(&|r| r.aws.as_ref().map(|a| format!("{:.0} ms", ms(a.warm_wall)))),
    );
    table.row(
        "  index revalidation kept the cached catalog (304)",
        each(&|r| r.aws.as_ref().map(|a| if a.catalog_reused { "yes" } else { "NO" }.into())),
    );

    let log = |f: &dyn Fn(&FunctionFigures) -> Option<Ops>| -> Vec<Option<Ops>> {
        reports.iter().map(|r| r.function.as_ref().and_then(f)).collect()
    };
    table.ops_rows("storage requests, cold turn (http-turn's own log)", &log(&|f| f.log_cold.first().cloned()));
    table.ops_rows("storage requests per warm turn (http-turn's own log)", &log(&|f| f.log_warm.first().cloned()));
    table.row(
        "  log agrees with CallCounter (cold ×3, warm ×20)",
        each(&|r| {
            let (aws, function) = (r.aws.as_ref()?, r.function.as_ref()?);
            let cold = function.log_cold.iter().all(|ops| *ops == aws.cold_ops);
            let warm = function.log_warm.iter().all(|ops| *ops == aws.warm_ops[0]);
            Some(if cold && warm { "yes".into() } else { format!("NO (cold {cold}, warm {warm})") })
        }),
    );

    table.ops_rows("index build: first turn of a tenant with no index", &aws(&|a| a.build_ops.clone()));
    table.row("  index build turn wall time", each(&|r| r.aws.as_ref().map(|a| format!("{:.0} ms", ms(a.build_wall)))));
    table.row(
        "  skills-index rebuild (fresh release process): requests, wall time",
        each(&|r| {
            r.aws.as_ref().map(|a| match &a.rebuild {
                Ok((ops, wall)) => format!("{} in {:.0} ms", thousands(total(ops)), ms(*wall)),
                Err(error) => error.clone(),
            })
        }),
    );
    table
        .row("  index object size", each(&|r| r.aws.as_ref().map(|a| format!("{:.1} KB", a.index_bytes as f64 / 1e3))));

    table.row(
        "cold start → first reply, http-turn (median of 3)",
        each(&|r| {
            let f = r.function.as_ref()?;
            let runs: Vec<String> = f.cold_starts.iter().map(|d| format!("{:.0}", ms(*d))).collect();
            Some(format!("**{:.0} ms** ({})", ms(median(&f.cold_starts)?), runs.join(", ")))
        }),
    );
    table.row(
        "state-1 system prompt (first model call)",
        each(&|r| {
            let bytes = r.function.as_ref()?.system_prompt.len();
            Some(format!("{} B ≈ {} tokens", thousands(bytes as u64), thousands(tokens(bytes) as u64)))
        }),
    );
    table.row(
        format!("  skill listing in it (budget {} tokens)", thousands(listing_budget as u64)),
        each(&|r| {
            let bytes = listing_of(&r.function.as_ref()?.system_prompt).len();
            Some(format!("{} B ≈ {} tokens", thousands(bytes as u64), thousands(tokens(bytes) as u64)))
        }),
    );
    table.row(
        "  find_skills offered",
        each(&|r| {
            Some(if r.function.as_ref()?.tools.iter().any(|t| t == "find_skills") { "yes" } else { "no" }.into())
        }),
    );
    table.row(
        "  listing tier shown",
        each(&|r| Some(listing_tier(listing_of(&r.function.as_ref()?.system_prompt)).into())),
    );
    table.row(
        format!("peak RSS of http-turn after {RSS_TURNS} turns (VmHWM)"),
        each(&|r| r.function.as_ref()?.rss_kib.map(|kib| format!("{:.1} MiB", kib as f64 / 1024.0))),
    );
    table.print();
}

/// The targets, each judged from the figures; a miss is printed as it is.
fn print_targets(reports: &[SizeReport], listing_budget: usize) {
    println!("\n## Targets\n");
    let verdict = |met: bool| if met { "met" } else { "**MISSED**" };
    let aws: Vec<&AwsFigures> = reports.iter().filter_map(|r| r.aws.as_ref()).collect();
    let functions: Vec<&FunctionFigures> = reports.iter().filter_map(|r| r.function.as_ref()).collect();
    if aws.len() == reports.len() {
        let cold: Vec<Ops> = aws.iter().map(|a| a.cold_ops.clone()).collect();
        let warm: Vec<Ops> = aws.iter().map(|a| a.warm_ops[0].clone()).collect();
        let totals = |all: &[Ops]| all.iter().map(|ops| total(ops).to_string()).collect::<Vec<_>>().join(" / ");
        println!(
            "- storage requests of a cold turn do not grow with the library: {} requests at {} skills — {}",
            totals(&cold),
            size_list(reports, " / "),
            verdict(all_equal(&cold) == Some(true))
        );
        println!(
            "- storage requests of a warm turn do not grow with the library: {} requests at {} skills — {}",
            totals(&warm),
            size_list(reports, " / "),
            verdict(all_equal(&warm) == Some(true) && aws.iter().all(|a| all_equal(&a.warm_ops) == Some(true)))
        );
        println!("  - a warm turn is: {}", ops_text(&warm[0]));
    } else {
        println!("- storage request targets: not measured (no moto_server)");
    }
    if functions.len() == reports.len() {
        let first = median(&functions[0].cold_starts).unwrap_or_default();
        let last = median(&functions[functions.len() - 1].cold_starts).unwrap_or_default();
        println!(
            "- cold start at {} skills within 2× of cold start at {}: {:.0} ms vs {:.0} ms = {:.2}× — {}",
            thousands(reports[reports.len() - 1].skills as u64),
            thousands(reports[0].skills as u64),
            ms(last),
            ms(first),
            last.as_secs_f64() / first.as_secs_f64(),
            verdict(last <= first * 2)
        );
        let system = &functions[functions.len() - 1].system_prompt;
        let (listing, whole) = (tokens(listing_of(system).len()), tokens(system.len()));
        println!(
            "- system prompt at {} skills within the listing budget of {} tokens: listing ≈ {} tokens, whole \
             system prompt ≈ {} tokens — {}",
            thousands(reports[reports.len() - 1].skills as u64),
            thousands(listing_budget as u64),
            thousands(listing as u64),
            thousands(whole as u64),
            verdict(listing <= listing_budget && whole <= listing_budget)
        );
        if aws.len() == reports.len() {
            let agree = reports.iter().all(|r| match (&r.aws, &r.function) {
                (Some(a), Some(f)) => {
                    f.log_cold.iter().all(|ops| *ops == a.cold_ops)
                        && f.log_warm.iter().all(|ops| *ops == a.warm_ops[0])
                }
                _ => false,
            });
            println!("- the compiled function's own log agrees with the CallCounter figures — {}", verdict(agree));
        }
    } else {
        println!("- cold start and system prompt targets: not measured (no moto_server)");
    }
    let (first, last) = (&reports[0].cpu, &reports[reports.len() - 1].cpu);
    println!(
        "- (no target) warm-turn CPU at {} vs {} skills: {:.2}×",
        thousands(reports[reports.len() - 1].skills as u64),
        thousands(reports[0].skills as u64),
        last.per_turn.as_secs_f64() / first.per_turn.as_secs_f64()
    );
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
