//! A call prepared for the interpreter session: the request checked against one call's bounds and
//! its files laid out under a stage folder, with `call.json` (what the runner needs besides the
//! files) and the runner itself.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use agent_ports::sandbox::{
    ExecRequest, SandboxError, SandboxFile, MAX_CALL_FILES, MAX_CALL_FILE_BYTES, MAX_COMMAND_BYTES,
    MAX_RESULT_FILE_BYTES, MAX_TIMEOUT,
};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::report::{HEAD_BYTES, TAIL_BYTES};
use crate::handler::Limits;
use crate::wire::check_relative_path;

/// The runner, written into the session with every call (it is small, and a session never runs
/// another version of it).
pub(crate) const RUNNER: &str = include_str!("../runner.py");
/// The call's tree in the interpreter's working directory; the layout root links to it.
pub(crate) const TREE_NAME: &str = "agent-sandbox";
/// Each call's stage folder is this and a random suffix, next to the tree.
pub(crate) const STAGE_PREFIX: &str = "agent-sandbox-in-";

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
