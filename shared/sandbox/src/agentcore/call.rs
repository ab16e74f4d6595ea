//! One call's exchange with the runner (`runner.py`), without I/O: what is written into the
//! interpreter session (the files under a stage folder, `call.json` and the runner itself) and
//! what the runner's report means (the output, how the command ended, what changed under the
//! workspace, which files to read back).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use agent_ports::sandbox::{
    ExecRequest, SandboxError, SandboxFile, WorkspaceChanges, MAX_CALL_FILES, MAX_CALL_FILE_BYTES, MAX_COMMAND_BYTES,
    MAX_RESULT_FILE_BYTES, MAX_TIMEOUT,
};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::handler::output::render_output;
use crate::handler::{human_bytes, Limits};
use crate::wire::{check_relative_path, over_result_bounds, MAX_NOT_KEPT_LINES};

/// The runner, written into the session with every call (it is small, and a session never runs
/// another version of it).
pub(crate) const RUNNER: &str = include_str!("runner.py");
/// The call's tree in the interpreter's working directory; the layout root links to it.
pub(crate) const TREE_NAME: &str = "agent-sandbox";
/// Each call's stage folder is this and a random suffix, next to the tree.
pub(crate) const STAGE_PREFIX: &str = "agent-sandbox-in-";
/// The output's head and tail the runner reports, as the handler keeps them.
pub(crate) const HEAD_BYTES: usize = 32 * 1024;
pub(crate) const TAIL_BYTES: usize = 32 * 1024;
/// The largest report accepted from the runner: a listing of the bounded workspace and the
/// output's head and tail fit many times over.
pub(crate) const MAX_REPORT_BYTES: usize = 16 << 20;

/// One file to write, by path relative to the interpreter's working directory.
#[derive(Debug, Clone)]
pub(crate) enum Upload {
    Text { path: String, text: String },
    Bytes { path: String, bytes: Arc<Vec<u8>> },
}

/// A prepared call: the uploads and what the report is compared with.
#[derive(Debug)]
pub(crate) struct Call {
    /// The stage folder, relative to the interpreter's working directory.
    pub stage: String,
    pub uploads: Vec<Upload>,
    /// Each workspace file sent, by path, with its sha256.
    pub inputs: HashMap<String, [u8; 32]>,
    /// The entries the runner lists at most; past it the listing is incomplete.
    pub max_entries: usize,
    pub limits: Limits,
    pub timeout: Duration,
}

/// `call.json`: what the runner needs besides the files.
#[derive(Debug, Serialize)]
struct CallJson<'a> {
    command: &'a str,
    timeout_ms: u64,
    root: &'a str,
    tree_name: &'a str,
    stage_prefix: &'a str,
    skills: Vec<&'a str>,
    ticket: bool,
    /// Empty files, by path under the tree: the runner makes them (no empty upload is needed).
    empty: Vec<String>,
    limits: LimitsJson,
    max_entries: usize,
    max_bytes: u64,
    max_file_bytes: u64,
    head_bytes: usize,
    tail_bytes: usize,
}

#[derive(Debug, Serialize)]
struct LimitsJson {
    cpu_seconds: u64,
    memory_bytes: u64,
    processes: u64,
    file_bytes: u64,
    open_files: u64,
    output_hard_bytes: u64,
}

fn invalid(detail: String) -> SandboxError {
    SandboxError::Unavailable(format!("invalid request: {detail}"))
}

impl Call {
    /// Checks `request` (the bounds of one call, paths) and lays its files out under a stage
    /// folder named with `nonce`: `tree/workspace/...`, `tree/skills/<name>/...`,
    /// `tree/ticket/...`, with `call.json` and `run.py` beside `tree`.
    pub(crate) fn prepare(
        request: &ExecRequest,
        root: &str,
        limits: &Limits,
        nonce: &str,
    ) -> Result<Call, SandboxError> {
        if request.command.len() > MAX_COMMAND_BYTES || request.command.contains('\0') {
            return Err(invalid(format!("the command is over {MAX_COMMAND_BYTES} bytes or holds a NUL")));
        }
        if request.timeout.is_zero() || request.timeout > MAX_TIMEOUT {
            return Err(invalid(format!("the timeout {:?} is out of range", request.timeout)));
        }
        let ticket = request.ticket.as_deref().unwrap_or_default();
        let all = request.workspace.iter().chain(request.skills.iter().flat_map(|skill| &skill.files)).chain(ticket);
        let (bytes, files) =
            all.fold((0u64, 0usize), |(bytes, files), file| (bytes + file.bytes.len() as u64, files + 1));
        if bytes > MAX_CALL_FILE_BYTES || files > MAX_CALL_FILES {
            return Err(SandboxError::TooLarge {
                bytes,
                files,
                max_bytes: MAX_CALL_FILE_BYTES,
                max_files: MAX_CALL_FILES,
            });
        }
        let stage = format!("{STAGE_PREFIX}{nonce}");
        let mut uploads = Vec::with_capacity(files + 2);
        let mut empty = Vec::new();
        let mut place = |root: String, files: &[SandboxFile]| -> Result<(), SandboxError> {
            for file in files {
                check_relative_path(&file.path).map_err(|err| invalid(format!("{:?}: {err}", file.path)))?;
                let under_tree = format!("{root}/{}", file.path);
                if file.bytes.is_empty() {
                    empty.push(under_tree);
                } else {
                    uploads
                        .push(Upload::Bytes { path: format!("{stage}/tree/{under_tree}"), bytes: file.bytes.clone() });
                }
            }
            Ok(())
        };
        place("workspace".to_owned(), &request.workspace)?;
        for skill in &request.skills {
            if check_relative_path(&skill.name).is_err() || skill.name.contains('/') {
                return Err(invalid(format!("the skill name {:?} is not one path segment", skill.name)));
            }
            place(format!("skills/{}", skill.name), &skill.files)?;
        }
        place("ticket".to_owned(), ticket)?;

        let inputs: HashMap<String, [u8; 32]> =
            request.workspace.iter().map(|file| (file.path.clone(), Sha256::digest(&*file.bytes).into())).collect();
        let folders: HashSet<&str> = request
            .workspace
            .iter()
            .flat_map(|file| file.path.match_indices('/').map(|(at, _)| &file.path[..at]))
            .collect();
        let baseline_bytes: u64 = request.workspace.iter().map(|file| file.bytes.len() as u64).sum();
        let max_entries = (request.workspace.len() + folders.len()).saturating_add(limits.files);
        let timeout_ms = u64::try_from(request.timeout.as_millis()).unwrap_or(u64::MAX);
        let json = CallJson {
            command: &request.command,
            timeout_ms,
            root,
            tree_name: TREE_NAME,
            stage_prefix: STAGE_PREFIX,
            skills: request.skills.iter().map(|skill| skill.name.as_str()).collect(),
            ticket: request.ticket.is_some(),
            empty,
            limits: LimitsJson {
                cpu_seconds: limits.cpu_seconds,
                memory_bytes: limits.memory_bytes,
                processes: limits.processes,
                file_bytes: limits.file_bytes,
                open_files: limits.open_files,
                output_hard_bytes: limits.output_hard_bytes,
            },
            max_entries,
            max_bytes: baseline_bytes.saturating_add(limits.disk_bytes),
            max_file_bytes: MAX_RESULT_FILE_BYTES,
            head_bytes: HEAD_BYTES,
            tail_bytes: TAIL_BYTES,
        };
        let json = serde_json::to_string(&json).map_err(|err| invalid(format!("call.json: {err}")))?;
        uploads.push(Upload::Text { path: format!("{stage}/call.json"), text: json });
        uploads.push(Upload::Text { path: format!("{stage}/run.py"), text: RUNNER.to_owned() });
        Ok(Call { stage, uploads, inputs, max_entries, limits: *limits, timeout: request.timeout })
    }

    /// The `executeCommand` that runs the runner, with `timeout` left for the command.
    pub(crate) fn command_line(&self, timeout: Duration) -> String {
        let millis = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX).max(1);
        format!("python3 {}/run.py {millis}", self.stage)
    }
}

/// The runner's report (unknown fields are ignored, so that an older backend reads a newer
/// runner's report).
#[derive(Debug, Deserialize)]
pub(crate) struct Report {
    pub v: u32,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub stop: Option<String>,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub signal: Option<i32>,
    #[serde(default)]
    pub duration_ms: u64,
    #[serde(default)]
    pub output: Option<ReportOutput>,
    #[serde(default)]
    pub entries: Vec<Entry>,
    #[serde(default)]
    pub complete: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ReportOutput {
    pub total: u64,
    pub head: String,
    pub tail: String,
}

/// One listed entry under the workspace (folders are walked, not listed).
#[derive(Debug, Deserialize)]
#[serde(tag = "k")]
pub(crate) enum Entry {
    /// A regular file, its size and sha256 (none past the size bound).
    #[serde(rename = "f")]
    File { p: String, s: u64, h: Option<String> },
    #[serde(rename = "l")]
    Link { p: String },
    #[serde(rename = "o")]
    Other { p: String },
    /// A folder that could not be read; "" is the workspace itself.
    #[serde(rename = "u")]
    Unreadable { p: String },
    /// A name that is not UTF-8 (shown lossily).
    #[serde(rename = "n")]
    BadName { p: String },
    /// A file that could not be read.
    #[serde(rename = "e")]
    Failed { p: String, m: String },
}

impl Report {
    /// The report in the runner's stdout: its last line (the runner prints one line of JSON;
    /// whatever the session printed before it is skipped).
    pub(crate) fn parse(stdout: &str) -> Result<Report, String> {
        if stdout.len() > MAX_REPORT_BYTES {
            return Err(format!("the runner's report is over {MAX_REPORT_BYTES} bytes"));
        }
        let line = stdout.trim_end().rsplit('\n').next().unwrap_or_default();
        if !line.starts_with('{') {
            return Err("the runner printed no report".to_owned());
        }
        let report: Report = serde_json::from_str(line).map_err(|err| format!("the runner's report: {err}"))?;
        if report.v != 1 {
            return Err(format!("the runner's report has version {}", report.v));
        }
        Ok(report)
    }

    /// The output as the model gets it and the bytes left out (as the handler renders it).
    pub(crate) fn output(&self) -> (String, u64) {
        let Some(output) = &self.output else { return (String::new(), 0) };
        // The runner keeps at most these; more is cut rather than trusted.
        let mut head = STANDARD.decode(&output.head).unwrap_or_default();
        head.truncate(HEAD_BYTES);
        let mut tail = STANDARD.decode(&output.tail).unwrap_or_default();
        if tail.len() > TAIL_BYTES {
            tail.drain(..tail.len() - TAIL_BYTES);
        }
        render_output(&head, &tail, output.total)
    }

    /// How the command ended: its exit code, why it was stopped, whether it timed out.
    pub(crate) fn ending(&self, timeout: Duration, limits: &Limits) -> (Option<i32>, Option<String>, bool) {
        let stopped = match self.stop.as_deref() {
            None => return (self.exit_code.filter(|_| self.signal.is_none()), None, false),
            Some("timeout") => return (None, Some(format!("timed out after {}", seconds(timeout))), true),
            Some("output") => format!("printed more than {} of output", human_bytes(limits.output_hard_bytes)),
            Some("files") => format!("created more than {} files in the workspace", limits.files),
            Some("disk") => format!("wrote more than {} to the workspace", human_bytes(limits.disk_bytes)),
            Some(other) => format!("stopped by the sandbox ({})", other.chars().take(60).collect::<String>()),
        };
        (None, Some(stopped), false)
    }
}

/// "2 s" or "1.5 s".
fn seconds(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

/// A new or changed file to read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wanted {
    pub path: String,
    pub sha256: [u8; 32],
    pub size: u64,
}

/// What the listing says changed, before the new files are read back.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub wanted: Vec<Wanted>,
    pub deleted: Vec<String>,
    not_kept: Vec<String>,
    not_kept_lines: usize,
}

impl Plan {
    /// Compares the listing with the files sent, as the handler's `collect` does: new and
    /// changed regular files are wanted (all of them, or none past the count or the bytes one
    /// result may bring back), files sent that are no longer regular files are deleted, the rest is told in
    /// `not_kept`. An incomplete listing infers no deletion.
    pub(crate) fn new(report: &Report, call: &Call, result_bytes: u64) -> Plan {
        let mut plan = Plan::default();
        let mut seen = HashSet::new();
        let mut unreadable: Vec<String> = Vec::new();
        let (mut changed, mut changed_bytes) = (0usize, 0u64);
        for entry in report.entries.iter().take(call.max_entries.saturating_add(1)) {
            let path = match entry {
                Entry::File { p, .. } | Entry::Link { p } | Entry::Other { p } | Entry::Failed { p, .. } => p,
                Entry::Unreadable { p } => {
                    let name = if p.is_empty() { "the workspace" } else { p.as_str() };
                    plan.not_kept(format!("{}: a folder that could not be read", bounded(name)));
                    unreadable.push(if p.is_empty() { String::new() } else { format!("{p}/") });
                    continue;
                }
                Entry::BadName { p } => {
                    plan.not_kept(format!("{:?}: a name that is not UTF-8", bounded(p)));
                    continue;
                }
            };
            if let Err(err) = check_relative_path(path) {
                plan.not_kept(format!("{:?}: {err}", bounded(path)));
                continue;
            }
            match entry {
                Entry::Link { .. } => plan.not_kept(format!("{path}: a symbolic link")),
                Entry::Other { .. } => plan.not_kept(format!("{path}: not a regular file")),
                Entry::Failed { m, .. } => plan.not_kept(format!("{path}: could not be read ({})", bounded(m))),
                Entry::File { s, h, .. } => {
                    seen.insert(path.clone());
                    let sha256 = h.as_deref().and_then(parse_sha256);
                    match sha256 {
                        Some(sha256) if *s <= MAX_RESULT_FILE_BYTES => {
                            if call.inputs.get(path) == Some(&sha256) {
                                continue;
                            }
                            changed += 1;
                            changed_bytes = changed_bytes.saturating_add(*s);
                            plan.wanted.push(Wanted { path: path.clone(), sha256, size: *s });
                        }
                        _ => {
                            // Too large a file is still a change the all-or-nothing bound counts.
                            changed += 1;
                            changed_bytes = changed_bytes.saturating_add(*s);
                            plan.not_kept(format!(
                                "{path}: {s} bytes, larger than the {} a file may have to be kept",
                                human_bytes(MAX_RESULT_FILE_BYTES)
                            ))
                        }
                    }
                }
                Entry::Unreadable { .. } | Entry::BadName { .. } => {}
            }
        }
        if report.complete && report.entries.len() <= call.max_entries {
            let mut deleted: Vec<String> = call
                .inputs
                .keys()
                .filter(|path| !seen.contains(*path))
                .filter(|path| !unreadable.iter().any(|folder| path.starts_with(folder.as_str())))
                .cloned()
                .collect();
            deleted.sort();
            plan.deleted = deleted;
        } else {
            plan.not_kept(format!(
                "the workspace holds more than {} files and folders; the rest were not looked at",
                call.max_entries
            ));
        }
        if let Some(line) = over_result_bounds(changed, changed_bytes, result_bytes) {
            plan.wanted = Vec::new();
            plan.deleted = Vec::new();
            plan.not_kept.insert(0, line);
        }
        plan
    }

    pub(crate) fn not_kept(&mut self, line: String) {
        self.not_kept_lines += 1;
        if self.not_kept_lines <= MAX_NOT_KEPT_LINES {
            self.not_kept.push(line);
        }
    }

    /// The changes, with the files read back by sha256; a wanted file that did not come back
    /// (or came back other than listed) is not kept.
    pub(crate) fn finish(mut self, read: &HashMap<[u8; 32], Arc<Vec<u8>>>) -> WorkspaceChanges {
        let mut written = Vec::with_capacity(self.wanted.len());
        for wanted in std::mem::take(&mut self.wanted) {
            match read.get(&wanted.sha256) {
                Some(bytes) => written.push(SandboxFile { path: wanted.path, bytes: bytes.clone() }),
                None => self.not_kept(format!("{}: could not be read back from the sandbox", wanted.path)),
            }
        }
        written.sort_by(|a, b| a.path.cmp(&b.path));
        if self.not_kept_lines > MAX_NOT_KEPT_LINES {
            self.not_kept.push(format!("and {} more", self.not_kept_lines - MAX_NOT_KEPT_LINES));
        }
        WorkspaceChanges { written, deleted: self.deleted, not_kept: self.not_kept }
    }
}

/// Splits `wanted` into batches of at most `max_bytes` (a larger file alone) and `max_files`.
pub(crate) fn batches(wanted: &[Wanted], max_bytes: u64, max_files: usize) -> Vec<&[Wanted]> {
    let mut batches = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (at, file) in wanted.iter().enumerate() {
        if at > start && (bytes + file.size > max_bytes || at - start >= max_files) {
            batches.push(&wanted[start..at]);
            (start, bytes) = (at, 0);
        }
        bytes += file.size;
    }
    if start < wanted.len() {
        batches.push(&wanted[start..]);
    }
    batches
}

/// The sha256 of `bytes`.
pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (at, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * at..2 * at + 2], 16).ok()?;
    }
    Some(out)
}

/// A service-given text, cut to a line's length.
fn bounded(text: &str) -> String {
    text.chars().take(crate::wire::MAX_PATH_BYTES + 100).collect()
}

#[cfg(test)]
mod tests {
    use agent_ports::sandbox::SkillMount;
    use agent_ports::{SessionId, UserId};

    use super::*;

    fn file(path: &str, bytes: &[u8]) -> SandboxFile {
        SandboxFile { path: path.into(), bytes: Arc::new(bytes.to_vec()) }
    }

    fn request(workspace: Vec<SandboxFile>) -> ExecRequest {
        ExecRequest {
            tenant: UserId::parse("u1").expect("valid"),
            session: SessionId::parse("s1").expect("valid"),
            command: "ls".into(),
            timeout: Duration::from_secs(5),
            workspace,
            skills: vec![SkillMount {
                name: "pdf".into(),
                files: vec![file("scripts/a.py", b"print(1)")],
                bundle: None,
            }],
            ticket: Some(vec![file("t.txt", b"")]),
            resume: None,
        }
    }

    fn hex(bytes: &[u8]) -> String {
        sha256(bytes).iter().map(|byte| format!("{byte:02x}")).collect()
    }

    #[test]
    fn a_call_lays_its_files_out_under_the_stage_with_empty_files_made_by_the_runner() {
        let call = Call::prepare(
            &request(vec![file("a/b.bin", &[0, 255]), file("e.txt", b"")]),
            "/tmp/agent",
            &Limits::default(),
            "n1",
        )
        .expect("valid");
        let paths: Vec<&str> = call
            .uploads
            .iter()
            .map(|upload| match upload {
                Upload::Text { path, .. } | Upload::Bytes { path, .. } => path.as_str(),
            })
            .collect();
        assert_eq!(
            paths,
            [
                "agent-sandbox-in-n1/tree/workspace/a/b.bin",
                "agent-sandbox-in-n1/tree/skills/pdf/scripts/a.py",
                "agent-sandbox-in-n1/call.json",
                "agent-sandbox-in-n1/run.py"
            ]
        );
        let Upload::Text { text, .. } = &call.uploads[2] else { panic!("call.json is text") };
        let json: serde_json::Value = serde_json::from_str(text).expect("JSON");
        assert_eq!(json["empty"], serde_json::json!(["workspace/e.txt", "ticket/t.txt"]));
        assert_eq!(json["ticket"], true);
        assert_eq!(json["timeout_ms"], 5000);
        assert_eq!(call.max_entries, 3 + 1000, "two files and a folder, then the limit");
        assert_eq!(call.command_line(Duration::from_millis(4200)), "python3 agent-sandbox-in-n1/run.py 4200");
    }

    #[test]
    fn calls_over_the_bounds_or_with_bad_paths_are_refused() {
        let big = vec![file("big", &vec![1u8; MAX_CALL_FILE_BYTES as usize + 1])];
        assert!(matches!(
            Call::prepare(&request(big), "/tmp/agent", &Limits::default(), "n"),
            Err(SandboxError::TooLarge { .. })
        ));
        let bad = vec![file("../x", b"x")];
        assert!(matches!(
            Call::prepare(&request(bad), "/tmp/agent", &Limits::default(), "n"),
            Err(SandboxError::Unavailable(_))
        ));
    }

    fn report(entries: serde_json::Value, complete: bool) -> Report {
        let json = serde_json::json!({"v": 1, "exit_code": 0, "duration_ms": 5, "entries": entries,
                                      "complete": complete, "extra": "ignored"});
        Report::parse(&format!("noise\n{json}\n")).expect("parses")
    }

    #[test]
    fn the_listing_gives_new_and_changed_files_deletions_and_what_is_not_kept() {
        let call = Call::prepare(
            &request(vec![file("same.txt", b"same"), file("changed.txt", b"old"), file("gone.txt", b"x")]),
            "/tmp/agent",
            &Limits::default(),
            "n",
        )
        .expect("valid");
        let entries = serde_json::json!([
            {"k": "f", "p": "same.txt", "s": 4, "h": hex(b"same")},
            {"k": "f", "p": "changed.txt", "s": 3, "h": hex(b"new")},
            {"k": "f", "p": "out/new.bin", "s": 2, "h": hex(&[0, 1])},
            {"k": "f", "p": "huge.bin", "s": MAX_RESULT_FILE_BYTES + 1, "h": null},
            {"k": "l", "p": "link"},
            {"k": "n", "p": "bad\u{FFFD}"},
            {"k": "f", "p": " lead", "s": 1, "h": hex(b"l")},
        ]);
        let plan = Plan::new(&report(entries.clone(), true), &call, 8 << 20);
        let wanted: Vec<&str> = plan.wanted.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(wanted, ["changed.txt", "out/new.bin"]);
        assert_eq!(plan.deleted, ["gone.txt"]);
        let mut read = HashMap::new();
        read.insert(sha256(b"new"), Arc::new(b"new".to_vec()));
        let changes = plan.finish(&read);
        assert_eq!(changes.written, [file("changed.txt", b"new")]);
        let not_kept = changes.not_kept.join("\n");
        for part in [
            "huge.bin: 4194305 bytes",
            "link: a symbolic link",
            "not UTF-8",
            "whitespace",
            "out/new.bin: could not be read back",
        ] {
            assert!(not_kept.contains(part), "{part}: {not_kept}");
        }
        // Over the bytes one result brings back (the huge file counts): nothing is kept, and
        // one line says which bound and the totals.
        let plan = Plan::new(&report(entries.clone(), true), &call, 1 << 20);
        assert!(plan.wanted.is_empty() && plan.deleted.is_empty(), "{plan:?}");
        let changes = plan.finish(&HashMap::new());
        assert!(changes.not_kept[0].contains("none of the command's changes were brought back"), "{changes:?}");
        assert!(changes.not_kept[0].contains("3 files of 4194310 bytes"), "{changes:?}");
        assert!(changes.not_kept[0].contains("past the 1048576 bytes"), "{changes:?}");
        let plan = Plan::new(&report(entries, false), &call, 8 << 20);
        assert!(plan.deleted.is_empty(), "an incomplete listing infers no deletion");
        let plan = Plan::new(&report(serde_json::json!([{"k": "u", "p": ""}]), true), &call, 1 << 20);
        assert!(plan.deleted.is_empty(), "nothing under an unreadable folder is deleted");
    }

    #[test]
    fn output_is_rendered_as_the_handler_renders_it() {
        assert_eq!(render_output(b"hello ", b"world", 11), ("hello world".to_owned(), 0));
        let head = "é".repeat(HEAD_BYTES / 2);
        let (text, omitted) = render_output(&head.as_bytes()[..HEAD_BYTES - 1], b"\xa9end", 1_000_000);
        assert!(!text.contains('\u{FFFD}') && text.ends_with("end"), "{}", &text[text.len() - 10..]);
        assert!(omitted > 1_000_000 - (HEAD_BYTES as u64 + 4) && text.contains("bytes of output omitted"));
    }

    #[test]
    fn endings_name_the_bound_that_stopped_the_command() {
        let mut report = report(serde_json::json!([]), true);
        let limits = Limits::default();
        assert_eq!(report.ending(Duration::from_secs(2), &limits), (Some(0), None, false));
        report.stop = Some("timeout".into());
        assert_eq!(report.ending(Duration::from_secs(2), &limits), (None, Some("timed out after 2 s".into()), true));
        report.stop = Some("output".into());
        assert_eq!(
            report.ending(Duration::from_secs(2), &limits).1.as_deref(),
            Some("printed more than 64 MiB of output")
        );
        report.stop = None;
        report.signal = Some(9);
        assert_eq!(report.ending(Duration::from_secs(2), &limits), (None, None, false));
    }

    #[test]
    fn read_batches_hold_their_bounds() {
        let wanted = |size| Wanted { path: "p".into(), sha256: [0; 32], size };
        let files = vec![wanted(5), wanted(5), wanted(20), wanted(1), wanted(1), wanted(1)];
        let sizes: Vec<usize> = batches(&files, 10, 2).iter().map(|batch| batch.len()).collect();
        assert_eq!(sizes, [2, 1, 2, 1]);
        assert!(batches(&[], 10, 2).is_empty());
    }

    #[test]
    fn reports_that_are_not_the_runners_are_errors() {
        assert!(Report::parse("python3: can't open file").is_err());
        assert!(Report::parse("{\"v\":2}").is_err());
        assert!(Report::parse("{\"v\":1,\"entries\":[{\"k\":\"zzz\"}]}").is_err());
    }
}
