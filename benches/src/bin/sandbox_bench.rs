//! The `execute` benchmark: what one command in the local sandbox costs, what a Lambda invocation
//! of the `sandbox` function would carry for it, and what the runtime adds around it in a turn.
//!
//! 1. warm calls of `true` and `echo hi` straight through `LocalSandbox::execute` (empty workspace,
//!    no skills), and `true` over a workspace of 50 files of 4 KiB;
//! 2. the same with a realistic input: the `tests/skills/pdf-form` skill mounted, a workspace of
//!    three files, and its `fill_form.py` filling the form with pypdf; and `tests/skills/office-docs`
//!    building a sheet with openpyxl and recalculating it with LibreOffice headless (`recalc.py`);
//! 3. the bytes one call moves: the JSON of the `WireRequest` and of the `WireResponse`, and the
//!    time of their round trip through JSON and base64 (part of every local call);
//! 4. a whole turn over the embedded store with a scripted model whose one tool call is
//!    `execute {"command": "true"}`, against the same turn calling `todoread` instead (no sandbox),
//!    with workspaces of 0 and 50 files of 4 KiB and tenants of 10 and 10,000 skills; the sandbox
//!    call inside the turn is timed on its own, and the runtime's overhead is the difference of the
//!    two turns less the direct call of (1) over the same workspace, made beside those turns (same
//!    process, same moment: the call's cost follows the process's size, see 5);
//! 5. the direct call of `true` while this process holds 0, 64 and 256 MiB more memory: the
//!    handler forks the calling process for every command, and the embedded store keeps a large
//!    tenant's library in this process;
//! 6. the compiled `sandbox` function in the image, as Lambda runs it: a fresh environment's start
//!    and first call, and a warm environment's call;
//! 7. a skill's bundle (pinned wheels made here, offline: a few pure-Python packages packed as
//!    `skills sync` packs them, in an in-memory store): a tenant's first call, which fetches the
//!    bundle and installs it with the image's pip into a fresh bundle folder (each run a new
//!    tenant), the same call once it is installed, and a call importing only the standard library.
//!
//! Times are wall times: median, p95 and minimum over `SANDBOX_BENCH_RUNS` runs (default 30) after
//! a few warm-up runs. Progress goes to stderr, the tables to stdout. `SANDBOX_BENCH_SECTIONS`
//! (section numbers separated by commas, `1` and `2` being one; all by default) runs only some.
//! Run with `cargo xtask bench`, or alone with
//! `SANDBOX_ROOT=$(cargo xtask sandbox image) cargo run --release -p benches --bin sandbox-bench`
//! (needs bubblewrap; the commands run in the sandbox image; section 7 needs `python3` on the host
//! to write its wheels).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_core::keys::{skills_prefix, workspace_blob_key};
use agent_core::sandbox::{
    BundleRef, ExecOutcome, ExecRequest, Sandbox, SandboxError, SandboxFile, SandboxLayout, SkillMount,
};
use agent_core::skills::bundle::bundle_file;
use agent_core::store::{SessionState, TurnCommit, WorkspaceFile};
use agent_core::turn::{AgentConfig, TurnRequest, TurnService, UserProfile};
use agent_core::{ChatResponse, Message, SessionId, SessionStore, ToolCall, UserId};
use agent_ports::testing::FnModel;
use async_trait::async_trait;
use local_store::{MemoryObjectStore, MemorySessionStore};
use sandbox::bundles::build::{pack, Wheel};
use sandbox::{handler, BundleSource, Config, LocalSandbox, WireRequest, WireResponse};
use serde_json::json;
use sha2::{Digest, Sha256};
use local_stack::stack::repo_root;

/// Warm-up runs before each measured series.
const WARMUP: usize = 3;
/// Files of the larger workspace, and the size of each.
const WORKSPACE_FILES: usize = 50;
const FILE_BYTES: usize = 4096;
/// The tenants' library sizes, each with the size of another tenant's library held in the same
/// embedded store: the middle one tells a cost of the library from a cost of the process's size.
const CATALOGS: [(usize, usize); 3] = [(10, 0), (10, 10_000), (10_000, 0)];
const FILL_FORM: &str =
    "python /skills/pdf-form/scripts/fill_form.py /skills/pdf-form/assets/form.pdf values.json filled.pdf";
/// A sheet with formulas, then LibreOffice's recalculation of it (a fresh profile each call).
const RECALC: &str = "python /skills/office-docs/scripts/build_sheet.py b.xlsx >/dev/null && \
                      python /skills/office-docs/scripts/recalc.py b.xlsx";
const RUN_TRUE: &str = "Run true.";
const READ_TODOS: &str = "Read the todos.";
/// Not a message: the direct call made beside the turns.
const DIRECT: &str = "";

fn runs() -> usize {
    std::env::var("SANDBOX_BENCH_RUNS").ok().and_then(|n| n.parse().ok()).filter(|&n| n > 0).unwrap_or(30)
}

/// The sections to run: `SANDBOX_BENCH_SECTIONS` (`1,7`: numbers separated by commas), all by default.
fn sections() -> Vec<u32> {
    let all = (1..=7).collect();
    let Some(text) = std::env::var("SANDBOX_BENCH_SECTIONS").ok().filter(|text| !text.trim().is_empty()) else {
        return all;
    };
    let chosen: Vec<u32> = text
        .split(',')
        .map(|part| match part.trim().parse() {
            Ok(n) if (1..=7).contains(&n) => n,
            _ => {
                eprintln!("sandbox-bench: SANDBOX_BENCH_SECTIONS={text}: sections are numbers from 1 to 7");
                std::process::exit(2);
            }
        })
        .collect();
    chosen
}

// ---------------------------------------------------------------------------------------------
// Figures.

#[derive(Clone, Copy)]
struct Stats {
    median: Duration,
    p95: Duration,
    min: Duration,
}

fn stats(values: &[Duration]) -> Stats {
    let mut sorted = values.to_vec();
    sorted.sort();
    let at = |fraction: f64| sorted[((sorted.len() - 1) as f64 * fraction).round() as usize];
    Stats { median: at(0.5), p95: at(0.95), min: sorted[0] }
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}

/// A signed difference of two durations, in milliseconds.
fn ms_diff(a: Duration, b: Duration) -> String {
    format!("{:.2} ms", (a.as_secs_f64() - b.as_secs_f64()) * 1e3)
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

fn row(cells: &[String]) {
    println!("| {} |", cells.join(" | "));
}

fn header(cells: &[&str]) {
    row(&cells.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>());
    row(&cells.iter().enumerate().map(|(i, _)| if i == 0 { "---" } else { "---:" }.to_owned()).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------------------------
// Inputs.

fn file(path: &str, bytes: Vec<u8>) -> SandboxFile {
    SandboxFile { path: path.to_owned(), bytes: Arc::new(bytes) }
}

/// `count` text files of exactly [`FILE_BYTES`] each, all different.
fn workspace_files(count: usize) -> Vec<SandboxFile> {
    (0..count)
        .map(|i| {
            let mut text = String::new();
            let mut line = 0;
            while text.len() < FILE_BYTES {
                text.push_str(&format!("file {i:02}, line {line:03}: some notes kept in the workspace.\n"));
                line += 1;
            }
            text.truncate(FILE_BYTES);
            file(&format!("notes/file-{i:02}.txt"), text.into_bytes())
        })
        .collect()
}

/// The pdf-form call's workspace: the values to fill and two files a user would have beside them.
fn pdf_workspace() -> Vec<SandboxFile> {
    vec![
        file("values.json", r#"{"buyer_name": "Ana García", "price": "250000"}"#.as_bytes().to_vec()),
        file("notes.md", "# Purchase\n\nBuyer: Ana García\nPrice: 250000\n".repeat(20).into_bytes()),
        file("data.csv", "field,value\nbuyer_name,Ana García\nprice,250000\n".repeat(40).into_bytes()),
    ]
}

/// A skill's folder as a mount: every file under `dir`, by path relative to it.
fn skill_mount(name: &str, dir: &Path) -> SkillMount {
    fn walk(root: &Path, dir: &Path, files: &mut Vec<SandboxFile>) {
        for entry in std::fs::read_dir(dir).expect("read the skill's folder") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                walk(root, &path, files);
            } else {
                let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                files.push(file(&rel, std::fs::read(&path).expect("read a skill file")));
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    files.sort_by(|a, b| a.path.cmp(&b.path));
    SkillMount { name: name.to_owned(), files, bundle: None }
}

fn exec_request(command: &str, workspace: Vec<SandboxFile>, skills: Vec<SkillMount>) -> ExecRequest {
    ExecRequest {
        tenant: UserId::parse("bench-user").unwrap(),
        session: SessionId::parse("bench-session").unwrap(),
        command: command.to_owned(),
        timeout: Duration::from_secs(60),
        workspace,
        skills,
        ticket: None,
        resume: None,
    }
}

/// One call to measure directly, and what its outcome must be for the figure to count.
struct DirectCase {
    label: String,
    request: ExecRequest,
    check: fn(&ExecOutcome),
}

fn succeeded(outcome: &ExecOutcome) {
    assert_eq!(outcome.exit_code, Some(0), "the command failed: {}", outcome.output);
}

fn printed_hi(outcome: &ExecOutcome) {
    succeeded(outcome);
    assert_eq!(outcome.output, "hi\n");
}

fn filled_the_form(outcome: &ExecOutcome) {
    succeeded(outcome);
    let pdf = outcome.changes.written.iter().find(|f| f.path == "filled.pdf").expect("filled.pdf comes back");
    assert!(pdf.bytes.starts_with(b"%PDF"), "filled.pdf is a PDF");
}

fn recalculated(outcome: &ExecOutcome) {
    succeeded(outcome);
    assert!(outcome.output.contains(r#""status": "success", "total_formulas": 2"#), "{}", outcome.output);
    let sheet = outcome.changes.written.iter().find(|f| f.path == "b.xlsx").expect("b.xlsx comes back");
    assert!(sheet.bytes.starts_with(b"PK"), "b.xlsx is a zip");
}

// ---------------------------------------------------------------------------------------------
// 1 and 2. Direct calls.

async fn time_direct(sandbox: &LocalSandbox, case: &DirectCase, runs: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(runs);
    for run in 0..WARMUP + runs {
        let request = case.request.clone();
        let started = Instant::now();
        let outcome = sandbox.execute(request).await.unwrap_or_else(|err| panic!("{}: {err:?}", case.label));
        let elapsed = started.elapsed();
        (case.check)(&outcome);
        if run >= WARMUP {
            times.push(elapsed);
        }
    }
    times
}

// ---------------------------------------------------------------------------------------------
// 3. Bytes on the wire.

struct WireSizes {
    request_json: usize,
    response_json: usize,
    files_in: u64,
    files_out: usize,
    /// Encoding, serialising and parsing back both messages, and decoding their files (what
    /// `LocalSandbox::execute` and the handler do with them), median of the runs.
    round_trip: Duration,
}

/// The event a Lambda invocation would carry for `request`, and the response the handler answers.
async fn wire_sizes(sandbox: &LocalSandbox, request: &ExecRequest, runs: usize) -> WireSizes {
    let wire = WireRequest::from_exec(request);
    let request_json = serde_json::to_vec(&wire).unwrap().len();
    let files_in = wire.file_totals().0;
    let response = handler::run(sandbox.config(), wire).await.expect("the handler runs the call");
    let response_json = serde_json::to_vec(&response).unwrap().len();
    let files_out = response.written.iter().map(|f| f.decoded_len() as usize).sum();
    let mut times = Vec::with_capacity(runs);
    for _ in 0..WARMUP + runs {
        let started = Instant::now();
        let json = serde_json::to_vec(&WireRequest::from_exec(request)).unwrap();
        let event: WireRequest = serde_json::from_slice(&json).unwrap();
        let skills = event.skills.iter().flat_map(|skill| skill.files.iter());
        for file in event.workspace.iter().chain(skills) {
            std::hint::black_box(file.decode(u64::MAX).unwrap());
        }
        let json = serde_json::to_vec(&response).unwrap();
        let answer: WireResponse = serde_json::from_slice(&json).unwrap();
        std::hint::black_box(answer.into_outcome().unwrap());
        times.push(started.elapsed());
    }
    let round_trip = stats(&times[WARMUP..]).median;
    WireSizes { request_json, response_json, files_in, files_out, round_trip }
}

// ---------------------------------------------------------------------------------------------
// 4. Turns.

/// The local sandbox, timing each call the turn makes through it.
struct TimedSandbox {
    inner: Arc<LocalSandbox>,
    calls: Mutex<Vec<Duration>>,
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
fn zero_latency_model() -> FnModel {
    FnModel::new(|request| {
        let turn: Vec<&Message> =
            request.messages.iter().rev().take_while(|m| !matches!(m, Message::User { .. })).collect();
        let asked = request.messages.iter().rev().find_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
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

fn skill_md(index: usize) -> String {
    format!(
        "---\nname: skill-{index:04}\ndescription: Synthetic skill number {index} for the benchmark, with a \
         description of ordinary length.\ncategory: cat{}\ntools: [ls, read_file]\n---\n\n# Skill {index}\n\n{}",
        index % 10,
        "Instructions line for the benchmark skill.\n".repeat(60)
    )
}

/// A tenant of `count` skills (as `turn-bench` makes them: a SKILL.md and two more files each).
fn upload_tenant(objects: &MemoryObjectStore, user: &UserId, count: usize) {
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
async fn seed_session(
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
    };
    sessions.commit(user, session, &commit).await.expect("seed the session");
}

fn turn_request(user: &UserId, session: &SessionId, message: &str) -> TurnRequest {
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
    }
}

struct TurnFigures {
    files: usize,
    skills: usize,
    /// Skills of another tenant in the same store.
    neighbours: usize,
    /// The direct call of `true` over the same workspace, made beside each pair of turns.
    direct: Vec<Duration>,
    with_execute: Vec<Duration>,
    without: Vec<Duration>,
    /// The sandbox call inside each turn with execute.
    sandbox_in_turn: Vec<Duration>,
    /// Each turn with execute less its own sandbox call.
    rest_of_turn: Vec<Duration>,
    /// This process's resident memory after the series.
    rss_kib: Option<u64>,
}

/// A tenant's turns: each run is a turn of each variant (a fresh session seeded with `files`) and
/// the direct call of `true` over the same files, in an order that rotates, so that the three are
/// measured at the same moment, in the same process, and drift in the machine's load falls on all.
#[allow(clippy::too_many_arguments)]
async fn time_turns(
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
fn tenant_name(skills: usize, neighbours: usize) -> String {
    match neighbours {
        0 => format!("{} skills", thousands(skills as u64)),
        _ => format!("{} skills beside another tenant's {}", thousands(skills as u64), thousands(neighbours as u64)),
    }
}

/// This process's resident memory (VmRSS).
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

// ---------------------------------------------------------------------------------------------
// 5. The calling process's size.

/// Extra resident memory the direct call of `true` is measured beside.
const BALLAST_MIB: [usize; 3] = [0, 64, 256];

/// The direct call of `true` (empty workspace) while this process holds `BALLAST_MIB` more of
/// touched memory, the sizes rotating run by run: the handler starts each command with a fork
/// (its `pre_exec` rules out `posix_spawn`), which copies the caller's page tables.
async fn time_with_ballast(local: &LocalSandbox, runs: usize) -> Vec<Vec<Duration>> {
    let request = exec_request("true", vec![], vec![]);
    let mut times = vec![Vec::new(); BALLAST_MIB.len()];
    for run in 0..WARMUP + runs {
        for step in 0..BALLAST_MIB.len() {
            let which = (run + step) % BALLAST_MIB.len();
            let ballast = vec![1u8; BALLAST_MIB[which] << 20];
            std::hint::black_box(&ballast);
            let started = Instant::now();
            let outcome = local.execute(request.clone()).await.expect("the direct call");
            let elapsed = started.elapsed();
            succeeded(&outcome);
            drop(ballast);
            if run >= WARMUP {
                times[which].push(elapsed);
            }
        }
    }
    times
}

// ---------------------------------------------------------------------------------------------
// 7. A skill's bundle.

/// The bundle's wheels: distribution, version, modules. The first imports the other two, as a
/// package imports its dependencies.
const BUNDLE_WHEELS: [(&str, &str, usize); 3] =
    [("notary_dates", "1.4.2", 12), ("notary_text", "0.9.0", 6), ("notary_tables", "2.1.0", 8)];
/// The skill the bundle belongs to.
const BUNDLE_SKILL: &str = "notary";
/// Tenants whose first call is measured, each installing the bundle anew.
const BUNDLE_TENANTS: usize = 5;
const IMPORT_BUNDLE: &str = "python -c 'import notary_dates; print(notary_dates.__version__)'";
const IMPORT_JSON: &str = "python -c 'import json; print(json.__name__)'";

/// Writes pure-Python wheels to `argv[1]` by the spec in `argv[2]`: each module a table, a dozen
/// functions and a class (about 4 KB of source), the package's `__init__` importing its modules
/// and those of the packages it depends on; fixed dates and modes, so the same spec always makes
/// the same bytes.
const WRITE_WHEELS: &str = r#"
import base64, hashlib, json, sys, zipfile
out, spec = sys.argv[1], json.loads(sys.argv[2])
def module(name, m):
    table = ", ".join(f"{k}: {k * k + m}" for k in range(40))
    lines = [f'"""{name}.m{m:02d}: made for the sandbox benchmark."""', "", "import math", "", f"TABLE = {{{table}}}", ""]
    for f in range(12):
        lines += [
            f"def f{f:02d}(x, y=1):",
            f"    '''Function {f} of module {m}: a sum over range(x), scaled.'''",
            "    total = 0",
            "    for i in range(x):",
            f"        total += (i * {f + 1} + y) % {m + 7}",
            "    return math.sqrt(total) + TABLE.get(x % 40, 0)",
            "",
        ]
    lines += [
        f"class Record{m:02d}:",
        "    def __init__(self, value):",
        "        self.value = value",
        "",
        "    def scaled(self, k):",
        "        return [f00(self.value + i) * k for i in range(3)]",
        "",
        "    def __repr__(self):",
        f"        return f'Record{m:02d}({{self.value!r}})'",
        "",
    ]
    return "\n".join(lines)
for wheel in spec:
    name, version, modules, deps = wheel["name"], wheel["version"], wheel["modules"], wheel["deps"]
    info = f"{name}-{version}.dist-info"
    files = {}
    for m in range(modules):
        files[f"{name}/m{m:02d}.py"] = module(name, m)
    imports = "".join(f"import {dep}\n" for dep in deps)
    imports += "".join(f"from . import m{m:02d}\n" for m in range(modules))
    files[f"{name}/__init__.py"] = f'"""{name}: made for the sandbox benchmark."""\n{imports}__version__ = "{version}"\n'
    requires = "".join(f"Requires-Dist: {dep}\n" for dep in deps)
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requires}"
    files[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: sandbox-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    def add(archive, path, data):
        entry = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
        entry.compress_type = zipfile.ZIP_DEFLATED
        entry.external_attr = 0o644 << 16
        archive.writestr(entry, data)
    with zipfile.ZipFile(f"{out}/{name}-{version}-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
            add(archive, path, data)
        record.append(f"{info}/RECORD,,")
        add(archive, f"{info}/RECORD", "\n".join(record) + "\n")
"#;

/// The bundle's wheels, written by the host's `python3` into `dir`, by file name.
fn write_wheels(dir: &Path) -> Vec<Wheel> {
    let spec: Vec<serde_json::Value> = BUNDLE_WHEELS
        .iter()
        .enumerate()
        .map(|(i, (name, version, modules))| {
            let deps: Vec<&str> = if i == 0 { BUNDLE_WHEELS[1..].iter().map(|w| w.0).collect() } else { vec![] };
            json!({"name": name, "version": version, "modules": modules, "deps": deps})
        })
        .collect();
    let made = std::process::Command::new("python3")
        .args(["-c", WRITE_WHEELS])
        .arg(dir)
        .arg(serde_json::to_string(&spec).unwrap())
        .output()
        .expect("section 7 writes its wheels with python3 on the host");
    assert!(made.status.success(), "writing the wheels: {}", String::from_utf8_lossy(&made.stderr));
    let mut wheels: Vec<Wheel> = BUNDLE_WHEELS
        .iter()
        .map(|(name, version, _)| {
            let file = format!("{name}-{version}-py3-none-any.whl");
            let bytes = std::fs::read(dir.join(&file)).expect("read a wheel");
            Wheel { file, distribution: (*name).to_owned(), version: (*version).to_owned(), bytes }
        })
        .collect();
    wheels.sort_by(|a, b| a.file.cmp(&b.file));
    wheels
}

/// The bundle's tar as `cargo xtask skills sync` packs it.
fn pack_bundle(wheels: &[Wheel]) -> Vec<u8> {
    let needs = [BUNDLE_WHEELS[0].0.to_owned()];
    pack(wheels, &needs, "sandbox-bench", "3").expect("pack the bundle")
}

/// The files under `dir` inside an installed `site` folder, and their bytes.
fn installed_size(dir: &Path) -> (u64, u64) {
    fn walk(dir: &Path, in_site: bool, totals: &mut (u64, u64)) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let (path, kind) = (entry.path(), entry.file_type().expect("a file type"));
            if kind.is_dir() {
                walk(&path, in_site || entry.file_name() == "site", totals);
            } else if in_site && kind.is_file() {
                totals.0 += 1;
                totals.1 += entry.metadata().map_or(0, |meta| meta.len());
            }
        }
    }
    let mut totals = (0, 0);
    walk(dir, false, &mut totals);
    totals
}

/// What section 7 measured.
struct BundleFigures {
    tar_bytes: usize,
    /// The tar's SHA-256 (the same every run: the wheels and the tar are made deterministically).
    sha256: String,
    wheel_bytes: usize,
    modules: usize,
    /// Files and bytes one install leaves.
    installed: (u64, u64),
    /// The process's first install (it warms the page cache for pip; not among `first`).
    process_first: Duration,
    first: Vec<Duration>,
    cached: Vec<Duration>,
    plain: Vec<Duration>,
}

/// The bundle's calls through a `LocalSandbox` like `base` whose bundles go to a fresh folder and
/// come from an in-memory store: a warm-up tenant's first call, [`BUNDLE_TENANTS`] more tenants'
/// first calls, then the last tenant's same call and a call without the bundle, alternating.
async fn time_bundle(base: &LocalSandbox, runs: usize) -> BundleFigures {
    let dir = std::env::temp_dir().join(format!("sandbox-bench-bundle-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (wheels_dir, bundle_dir) = (dir.join("wheels"), dir.join("installed"));
    for folder in [&wheels_dir, &bundle_dir] {
        std::fs::create_dir_all(folder).expect("make the bundle benchmark's folders");
    }
    let wheels = write_wheels(&wheels_dir);
    let tar = pack_bundle(&wheels);
    let sha256 = hex::encode(Sha256::digest(&tar));
    let objects = Arc::new(MemoryObjectStore::new());
    let config = Config { bundle_dir: bundle_dir.clone(), ..base.config().clone() };
    let key = local_stack::stack::test_bundle_key();
    let local = LocalSandbox::new(config).with_bundles(BundleSource::new(objects.clone(), Some(key.clone())));
    let skill_md = format!(
        "---\nname: {BUNDLE_SKILL}\ndescription: Deadlines and tables for notarial deeds.\n---\n\n# Notary\n\n\
         Run `python -c 'import notary_dates'`.\n"
    );
    // The tenant's copy of the skill and its bundle in the store, and the call naming it.
    let request_for = |tenant: &UserId, command: &str| {
        // Signed for the tenant as skills sync signs it: the sandbox installs no other.
        let mac = key.mac(tenant, &sha256);
        let stored = format!("{}{BUNDLE_SKILL}/{}", skills_prefix(tenant), bundle_file(&sha256, &mac));
        objects.insert(&stored, tar.clone());
        let bundle = BundleRef { key: stored, sha256: sha256.clone(), mac: Some(mac), size: tar.len() as u64 };
        let skill = SkillMount {
            name: BUNDLE_SKILL.to_owned(),
            files: vec![file("SKILL.md", skill_md.clone().into_bytes())],
            bundle: Some(bundle),
        };
        ExecRequest { tenant: tenant.clone(), ..exec_request(command, vec![], vec![skill]) }
    };
    let imported = |outcome: &ExecOutcome| {
        succeeded(outcome);
        assert_eq!(outcome.output, format!("{}\n", BUNDLE_WHEELS[0].1), "the bundle's package imports");
    };
    let call = |request: ExecRequest| {
        let local = &local;
        async move {
            let started = Instant::now();
            let outcome = local.execute(request).await.unwrap_or_else(|err| panic!("the bundle's call: {err:?}"));
            (started.elapsed(), outcome)
        }
    };

    let (process_first, outcome) = call(request_for(&UserId::parse("bench-bundle-warm").unwrap(), IMPORT_BUNDLE)).await;
    imported(&outcome);
    let installed = installed_size(&bundle_dir);
    assert!(installed.0 > 0, "the bundle was installed under {}", bundle_dir.display());
    let mut first = Vec::new();
    let mut last = None;
    for i in 0..BUNDLE_TENANTS {
        let tenant = UserId::parse(format!("bench-bundle-{i}")).unwrap();
        let (elapsed, outcome) = call(request_for(&tenant, IMPORT_BUNDLE)).await;
        imported(&outcome);
        first.push(elapsed);
        last = Some(tenant);
    }
    let tenant = last.expect("a tenant");
    let (installed_all, _) = installed_size(&bundle_dir);
    assert_eq!(installed_all, installed.0 * (BUNDLE_TENANTS as u64 + 1), "every tenant installed its own copy");
    let cached_request = request_for(&tenant, IMPORT_BUNDLE);
    let plain_request = ExecRequest { tenant: tenant.clone(), ..exec_request(IMPORT_JSON, vec![], vec![]) };
    let (mut cached, mut plain) = (Vec::new(), Vec::new());
    for run in 0..WARMUP + runs {
        for step in 0..2 {
            let with_bundle = (run + step) % 2 == 0;
            if with_bundle {
                let (elapsed, outcome) = call(cached_request.clone()).await;
                imported(&outcome);
                if run >= WARMUP {
                    cached.push(elapsed);
                }
            } else {
                let (elapsed, outcome) = call(plain_request.clone()).await;
                succeeded(&outcome);
                assert_eq!(outcome.output, "json\n");
                if run >= WARMUP {
                    plain.push(elapsed);
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    BundleFigures {
        tar_bytes: tar.len(),
        sha256,
        wheel_bytes: wheels.iter().map(|wheel| wheel.bytes.len()).sum(),
        modules: BUNDLE_WHEELS.iter().map(|wheel| wheel.2).sum(),
        installed,
        process_first,
        first,
        cached,
        plain,
    }
}

// ---------------------------------------------------------------------------------------------

/// The first line a program prints for `--version`, or why not.
fn version_of(program: &str, arg: &str) -> String {
    std::process::Command::new(program).arg(arg).output().ok().map_or_else(
        || "not found".to_owned(),
        |out| {
            let text = if out.stdout.is_empty() { out.stderr } else { out.stdout };
            String::from_utf8_lossy(&text).lines().next().unwrap_or("").trim().to_owned()
        },
    )
}

/// What section 6 measured.
struct ImageFigures {
    size: String,
    fresh: Vec<Duration>,
    warm: Vec<Duration>,
}

/// Starts the compiled `sandbox` function in the image (as the tests' Lambda stand-in does) a few
/// times for the fresh figure, and calls one environment `runs` times for the warm one.
async fn image_environment(runs: usize) -> ImageFigures {
    let root = local_stack::image::root();
    let request = serde_json::json!({
        "tenant": "bench", "session": "s1", "command": "true", "timeout_ms": 10_000, "workspace": [], "skills": []
    });
    let mut fresh = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let function = local_stack::lambda::Function::start_in_image("sandbox", &root, &[]).await;
        let answer = function.call(request.clone()).await;
        fresh.push(started.elapsed());
        assert_eq!(answer["exit_code"], 0, "{answer}");
    }
    let function = local_stack::lambda::Function::start_in_image("sandbox", &root, &[]).await;
    function.call(request.clone()).await;
    let mut warm = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let answer = function.call(request.clone()).await;
        warm.push(started.elapsed());
        assert_eq!(answer["exit_code"], 0, "{answer}");
    }
    let size = std::fs::read_to_string(root.parent().expect("the image's folder").join("ready"))
        .ok()
        .and_then(|ready| ready.lines().nth(1).and_then(|bytes| bytes.parse::<u64>().ok()))
        .map_or_else(|| "unknown".to_owned(), |bytes| format!("{} MB in files", bytes / 1_000_000));
    ImageFigures { size, fresh, warm }
}

/// The image's Python, as the commands see it.
fn image_python() -> String {
    let dir = std::env::temp_dir();
    let output = local_stack::image::run_in_image(&dir, "python3", &["--version"]);
    format!("the sandbox image's {}", String::from_utf8_lossy(&output.stdout).trim())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

fn main() {
    let runs = runs();
    let sections = sections();
    let wanted = |section: u32| sections.contains(&section);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let started = Instant::now();
        let load_before = load_average();
        let local = match LocalSandbox::from_env() {
            Ok(local) => Arc::new(local),
            Err(err) => {
                eprintln!("sandbox-bench: the local sandbox is not available: {err}");
                std::process::exit(1);
            }
        };
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;

        println!("# sandbox-bench: `execute` in the local sandbox, and what the runtime adds\n");
        println!(
            "Machine: {cores} cores (nproc), Linux {}, {}, {}{}; {runs} runs per figure after {WARMUP} warm-up \
             runs; wall times.\n",
            kernel.trim(),
            version_of("bwrap", "--version"),
            image_python(),
            if root { ", run as root (a fresh unprivileged uid per call)" } else { "" }
        );

        // 1 and 2. Direct calls.
        let pdf_form = skill_mount("pdf-form", &repo_root().join("tests/skills/pdf-form"));
        let mut cases = vec![
            DirectCase {
                label: "`true`, empty workspace, no skills".into(),
                request: exec_request("true", vec![], vec![]),
                check: succeeded,
            },
            DirectCase {
                label: "`echo hi`, empty workspace, no skills".into(),
                request: exec_request("echo hi", vec![], vec![]),
                check: printed_hi,
            },
            DirectCase {
                label: format!("`true`, workspace of {WORKSPACE_FILES} files of 4 KiB"),
                request: exec_request("true", workspace_files(WORKSPACE_FILES), vec![]),
                check: succeeded,
            },
        ];
        cases.push(DirectCase {
            label: format!(
                "pdf-form `fill_form.py` (skill of {} files mounted, workspace of 3 files)",
                pdf_form.files.len()
            ),
            request: exec_request(FILL_FORM, pdf_workspace(), vec![pdf_form.clone()]),
            check: filled_the_form,
        });
        let office = skill_mount("office-docs", &repo_root().join("tests/skills/office-docs"));
        cases.push(DirectCase {
            label: "office-docs: a sheet built with openpyxl, recalculated by LibreOffice headless (`recalc.py`)"
                .into(),
            request: exec_request(RECALC, vec![], vec![office]),
            check: recalculated,
        });
        if wanted(1) || wanted(2) {
            let mut direct = Vec::new();
            for case in &cases {
                eprintln!("direct: {}", case.label);
                direct.push(stats(&time_direct(&local, case, runs).await));
            }
            println!(
                "## 1–2. One warm call through `LocalSandbox::execute` (this process: {} RSS)\n",
                rss_kib().map_or("?".into(), |kib| format!("{:.0} MiB", kib as f64 / 1024.0))
            );
            header(&["call", "median", "p95", "min"]);
            for (case, figure) in cases.iter().zip(&direct) {
                row(&[case.label.clone(), ms(figure.median), ms(figure.p95), ms(figure.min)]);
            }
        }

        // 3. Bytes per call.
        if wanted(3) {
            println!("\n## 3. Bytes one call moves (the JSON a Lambda invocation of `sandbox` would carry)\n");
            header(&[
                "call",
                "request JSON",
                "files in (decoded)",
                "response JSON",
                "files out (decoded)",
                "JSON round trip (median)",
            ]);
            for case in &cases {
                let sizes = wire_sizes(&local, &case.request, runs).await;
                row(&[
                    case.label.clone(),
                    format!("{} B", thousands(sizes.request_json as u64)),
                    format!("{} B", thousands(sizes.files_in)),
                    format!("{} B", thousands(sizes.response_json as u64)),
                    format!("{} B", thousands(sizes.files_out as u64)),
                    format!("{:.3} ms", sizes.round_trip.as_secs_f64() * 1e3),
                ]);
            }
        }

        // 7 and 5, measured while the process is still small; printed last.
        let bundle = if wanted(7) {
            eprintln!("bundle: first installs, then the installed bundle's calls");
            let rss = rss_kib();
            Some((time_bundle(&local, runs).await, rss))
        } else {
            None
        };
        let base = rss_kib().unwrap_or(0) as f64 / 1024.0;
        let ballast = if wanted(5) {
            eprintln!("direct: `true` beside ballast");
            time_with_ballast(&local, runs).await
        } else {
            Vec::new()
        };

        // 4. Turns.
        let timed = Arc::new(TimedSandbox { inner: local.clone(), calls: Mutex::new(Vec::new()) });
        let workspaces = [Vec::new(), workspace_files(WORKSPACE_FILES)];
        let mut turns = Vec::new();
        for (skills, neighbours) in CATALOGS.into_iter().filter(|_| wanted(4)) {
            let objects = Arc::new(MemoryObjectStore::new());
            let sessions = Arc::new(MemorySessionStore::new());
            let user = UserId::parse(format!("tenant-{skills}")).unwrap();
            upload_tenant(&objects, &user, skills);
            upload_tenant(&objects, &UserId::parse("neighbour").unwrap(), neighbours);
            let service =
                TurnService::new(sessions.clone(), objects.clone(), Arc::new(zero_latency_model()), AgentConfig::default())
                    .with_sandbox(timed.clone());
            // A warm process: the first turn builds the tenant's index.
            let warm = SessionId::parse("warm-up").unwrap();
            service.run_turn(turn_request(&user, &warm, READ_TODOS)).await.expect("the warm-up turn");
            for files in &workspaces {
                eprintln!("turns: {}, workspace of {} files", tenant_name(skills, neighbours), files.len());
                let catalog = (skills, neighbours);
                turns.push(time_turns(&service, &timed, &local, &sessions, &objects, &user, files, catalog, runs).await);
            }
        }
        if wanted(4) {
            println!("\n## 4. A whole turn (embedded store, scripted model: one tool call, then an answer)\n");
            header(&["tenant, workspace", "series", "median", "p95", "min"]);
            for t in &turns {
                let name = format!("{}, {} files", tenant_name(t.skills, t.neighbours), t.files);
                for (series, values) in [
                    ("direct call of `true` over the same workspace", &t.direct),
                    ("turn with `execute true`", &t.with_execute),
                    ("turn with `todoread`", &t.without),
                    ("the sandbox call inside the turn", &t.sandbox_in_turn),
                    ("turn with `execute` less its sandbox call", &t.rest_of_turn),
                ] {
                    let s = stats(values);
                    row(&[name.clone(), series.into(), ms(s.median), ms(s.p95), ms(s.min)]);
                }
            }
            println!(
                "\nMedians. overhead = (turn with execute − turn without) − the direct call of `true` over the same \
                 workspace, made beside these turns; the next column instead takes each turn less its own sandbox \
                 call, less the turn without (no sandbox noise in it).\n"
            );
            header(&[
                "tenant, workspace",
                "with execute",
                "without",
                "difference",
                "sandbox call in the turn",
                "direct call",
                "overhead",
                "overhead (turn less its own call)",
                "process RSS",
            ]);
            for t in &turns {
                let (with, without) = (stats(&t.with_execute).median, stats(&t.without).median);
                let difference = with.as_secs_f64() - without.as_secs_f64();
                let direct = stats(&t.direct).median;
                row(&[
                    format!("{}, {} files", tenant_name(t.skills, t.neighbours), t.files),
                    ms(with),
                    ms(without),
                    format!("{:.2} ms", difference * 1e3),
                    ms(stats(&t.sandbox_in_turn).median),
                    ms(direct),
                    format!("{:.2} ms", (difference - direct.as_secs_f64()) * 1e3),
                    ms_diff(stats(&t.rest_of_turn).median, without),
                    t.rss_kib.map_or("?".into(), |kib| format!("{:.0} MiB", kib as f64 / 1024.0)),
                ]);
            }
            // The library's size: the figures that must not grow with it.
            let find = |(skills, neighbours): (usize, usize), files: usize| {
                turns.iter().find(|t| t.skills == skills && t.neighbours == neighbours && t.files == files)
            };
            println!();
            for files in [0, WORKSPACE_FILES] {
                let [small, beside, large] = CATALOGS.map(|catalog| find(catalog, files));
                let (Some(small), Some(beside), Some(large)) = (small, beside, large) else { continue };
                let overhead = |t: &TurnFigures| {
                    Duration::from_secs_f64(
                        (stats(&t.rest_of_turn).median.as_secs_f64() - stats(&t.without).median.as_secs_f64()).max(0.0),
                    )
                };
                let without = |t: &TurnFigures| stats(&t.without).median;
                for (figure, small, beside, large) in [
                    ("turn without execute", without(small), without(beside), without(large)),
                    ("overhead (turn less its own call)", overhead(small), overhead(beside), overhead(large)),
                ] {
                    println!(
                        "- {figure}, {files} files: {} at {}, {} at {}, {} at {}",
                        ms(small),
                        tenant_name(CATALOGS[0].0, CATALOGS[0].1),
                        ms(beside),
                        tenant_name(CATALOGS[1].0, CATALOGS[1].1),
                        ms(large),
                        tenant_name(CATALOGS[2].0, CATALOGS[2].1),
                    );
                }
            }
        }
        if wanted(5) {
            println!("\n## 5. The direct call of `true` against the size of the calling process\n");
            header(&["process RSS", "median", "p95", "min"]);
            for (mib, values) in BALLAST_MIB.iter().zip(ballast) {
                let s = stats(&values);
                row(&[format!("{:.0} MiB ({mib} MiB added)", base + *mib as f64), ms(s.median), ms(s.p95), ms(s.min)]);
            }
        }
        // 6. The sandbox function in the image, as Lambda runs it.
        if wanted(6) {
            eprintln!("image: the sandbox function in a fresh environment, then warm");
            let image = image_environment(runs).await;
            println!(
                "\n## 6. The `sandbox` function in the image, as Lambda runs it (root read-only, uid 993, `true`)\n"
            );
            println!("The image's root filesystem: {}.\n", image.size);
            header(&["call", "median", "p95", "min"]);
            let fresh = stats(&image.fresh);
            row(&[
                "a fresh environment: the function starts, then its first call".into(),
                ms(fresh.median),
                ms(fresh.p95),
                ms(fresh.min),
            ]);
            let warm = stats(&image.warm);
            row(&["a warm environment's call".into(), ms(warm.median), ms(warm.p95), ms(warm.min)]);
        }
        // 7. A skill's bundle.
        if let Some((bundle, rss)) = &bundle {
            println!(
                "\n## 7. A skill's bundle through `LocalSandbox::execute` (in-memory store, a fresh bundle folder; \
                 this process: {} RSS)\n",
                rss.map_or("?".into(), |kib| format!("{:.0} MiB", kib as f64 / 1024.0))
            );
            println!(
                "The bundle: {} pure-Python wheels ({} modules of about 4 KB of source), a tar of {} B ({} B of \
                 wheels; SHA-256 {}…, the same every run); one install leaves {} files, {} B. The bundled command is `{IMPORT_BUNDLE}` (its package \
                 imports the other two); the first calls are {BUNDLE_TENANTS} new tenants' (each installs its own \
                 copy), the installed calls the last tenant's, alternating with the call without a bundle.\n",
                BUNDLE_WHEELS.len(),
                bundle.modules,
                thousands(bundle.tar_bytes as u64),
                thousands(bundle.wheel_bytes as u64),
                &bundle.sha256[..12],
                thousands(bundle.installed.0),
                thousands(bundle.installed.1),
            );
            header(&["call", "runs", "median", "p95", "min"]);
            for (label, values) in [
                (
                    "a tenant's first call: the bundle read from the store, installed by the image's pip, then the \
                     command",
                    &bundle.first,
                ),
                ("the same call, the bundle installed (`PYTHONPATH`, read-only)", &bundle.cached),
                ("`python -c 'import json'`, no bundle", &bundle.plain),
            ] {
                let s = stats(values);
                row(&[label.into(), values.len().to_string(), ms(s.median), ms(s.p95), ms(s.min)]);
            }
            let median = |values: &[Duration]| stats(values).median;
            println!(
                "\n- the install's share of a first call (medians, first − installed): {}",
                ms_diff(median(&bundle.first), median(&bundle.cached))
            );
            println!(
                "- the installed bundle's call against the call without one (medians): {}",
                ms_diff(median(&bundle.cached), median(&bundle.plain))
            );
            println!(
                "- the process's first install (a warm-up tenant, not in the figures above): {}",
                ms(bundle.process_first)
            );
        }

        println!(
            "\n(run took {:.0} s on {cores} cores; load average before {load_before}, after {})",
            started.elapsed().as_secs_f64(),
            load_average()
        );
    });
}
