//! Sections 1, 2, 3 and 5: the inputs of a direct call, direct calls of `LocalSandbox::execute`,
//! the bytes a Lambda invocation would carry for one, and the same call beside more memory.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::sandbox::{ExecOutcome, ExecRequest, Sandbox, SandboxFile, SkillMount};
use agent_core::{SessionId, UserId};
use sandbox::{handler, LocalSandbox, WireRequest, WireResponse};

use crate::figures::stats;
use crate::{FILE_BYTES, WARMUP};

pub(crate) fn file(path: &str, bytes: Vec<u8>) -> SandboxFile {
    SandboxFile { path: path.to_owned(), bytes: Arc::new(bytes) }
}

/// `count` text files of exactly [`FILE_BYTES`] each, all different.
pub(crate) fn workspace_files(count: usize) -> Vec<SandboxFile> {
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
pub(crate) fn pdf_workspace() -> Vec<SandboxFile> {
    vec![
        file("values.json", r#"{"buyer_name": "Ana García", "price": "250000"}"#.as_bytes().to_vec()),
        file("notes.md", "# Purchase\n\nBuyer: Ana García\nPrice: 250000\n".repeat(20).into_bytes()),
        file("data.csv", "field,value\nbuyer_name,Ana García\nprice,250000\n".repeat(40).into_bytes()),
    ]
}

/// A skill's folder as a mount: every file under `dir`, by path relative to it.
pub(crate) fn skill_mount(name: &str, dir: &Path) -> SkillMount {
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

pub(crate) fn exec_request(command: &str, workspace: Vec<SandboxFile>, skills: Vec<SkillMount>) -> ExecRequest {
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
pub(crate) struct DirectCase {
    pub(crate) label: String,
    pub(crate) request: ExecRequest,
    pub(crate) check: fn(&ExecOutcome),
}

pub(crate) fn succeeded(outcome: &ExecOutcome) {
    assert_eq!(outcome.exit_code, Some(0), "the command failed: {}", outcome.output);
}

pub(crate) fn printed_hi(outcome: &ExecOutcome) {
    succeeded(outcome);
    assert_eq!(outcome.output, "hi\n");
}

pub(crate) fn filled_the_form(outcome: &ExecOutcome) {
    succeeded(outcome);
    let pdf = outcome.changes.written.iter().find(|f| f.path == "filled.pdf").expect("filled.pdf comes back");
    assert!(pdf.bytes.starts_with(b"%PDF"), "filled.pdf is a PDF");
}

pub(crate) fn recalculated(outcome: &ExecOutcome) {
    succeeded(outcome);
    assert!(outcome.output.contains(r#""status": "success", "total_formulas": 2"#), "{}", outcome.output);
    let sheet = outcome.changes.written.iter().find(|f| f.path == "b.xlsx").expect("b.xlsx comes back");
    assert!(sheet.bytes.starts_with(b"PK"), "b.xlsx is a zip");
}

// ---------------------------------------------------------------------------------------------
// 1 and 2. Direct calls.

pub(crate) async fn time_direct(sandbox: &LocalSandbox, case: &DirectCase, runs: usize) -> Vec<Duration> {
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

pub(crate) struct WireSizes {
    pub(crate) request_json: usize,
    pub(crate) response_json: usize,
    pub(crate) files_in: u64,
    pub(crate) files_out: usize,
    /// Encoding, serialising and parsing back both messages, and decoding their files (what
    /// `LocalSandbox::execute` and the handler do with them), median of the runs.
    pub(crate) round_trip: Duration,
}

/// The event a Lambda invocation would carry for `request`, and the response the handler answers.
pub(crate) async fn wire_sizes(sandbox: &LocalSandbox, request: &ExecRequest, runs: usize) -> WireSizes {
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

/// Extra resident memory the direct call of `true` is measured beside.
pub(crate) const BALLAST_MIB: [usize; 3] = [0, 64, 256];

/// The direct call of `true` (empty workspace) while this process holds `BALLAST_MIB` more of
/// touched memory, the sizes rotating run by run: the handler starts each command with a fork
/// (its `pre_exec` rules out `posix_spawn`), which copies the caller's page tables.
pub(crate) async fn time_with_ballast(local: &LocalSandbox, runs: usize) -> Vec<Vec<Duration>> {
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
