//! The sandbox port: where `execute` runs a command over a copy of the session's files. The core
//! knows only this trait and the file exchange; the backends (local processes, a Lambda function,
//! AgentCore) live in the `sandbox` crate.
//!
//! A call carries everything the command may see (the workspace, the mounted skills' folders and
//! the ticket) and answers the command's output, its exit status and what it changed under the
//! workspace. Nothing is kept between calls by contract: a backend that keeps state (an AgentCore
//! interpreter session) keeps it for one (tenant, session) only.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use thiserror::Error;

pub use crate::bundle::BundleRef;
use crate::ids::{SessionId, UserId};

/// The default timeout of one command (deepagents' and peers' minute).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest timeout a command may ask for; the turn's deadline may allow less.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// The most characters of combined output the model is given; longer output is cut in the middle.
pub const MAX_OUTPUT_CHARS: usize = 30_000;
/// The largest file a command may leave in the workspace and have kept.
pub const MAX_RESULT_FILE_BYTES: u64 = 4 << 20;
/// The most bytes of files sent into one call (the workspace, skills and ticket together): a Lambda
/// request is at most 6 MB, and base64 makes 4.5 MB of files 6 MB.
pub const MAX_CALL_FILE_BYTES: u64 = 4_400_000;
/// The most files sent into one call.
pub const MAX_CALL_FILES: usize = 2_000;
/// The longest command accepted, in bytes.
pub const MAX_COMMAND_BYTES: usize = 16 * 1024;

/// One file sent to or returned by the sandbox: its path relative to its root, and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxFile {
    pub path: String,
    pub bytes: Arc<Vec<u8>>,
}

/// A skill folder mounted read-only at `{layout.skills}/{name}`.
#[derive(Debug, Clone)]
pub struct SkillMount {
    /// The short name the skill is visible under (as in the virtual filesystem's `/skills`).
    pub name: String,
    pub files: Vec<SandboxFile>,
    /// The wheels its scripts need that the image lacks, installed by the backend before the
    /// command runs (the bytes are fetched by the backend only when it has not installed them).
    pub bundle: Option<BundleRef>,
}

/// One command to run.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// The tenant: a backend never lets two tenants share an execution environment.
    pub tenant: UserId,
    pub session: SessionId,
    /// Run by `bash -c` with the workspace as the working directory.
    pub command: String,
    pub timeout: Duration,
    /// The workspace as the command finds it (read-write).
    pub workspace: Vec<SandboxFile>,
    /// Skills whose folders the command may read.
    pub skills: Vec<SkillMount>,
    /// The ticket's files (read-only), when the turn has a ticket.
    pub ticket: Option<Vec<SandboxFile>>,
    /// The backend's own session from an earlier call of this agent session, for a backend that
    /// keeps one (AgentCore); others ignore it.
    pub resume: Option<String>,
}

/// What a command changed under the workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceChanges {
    /// Files created or changed, with their new bytes.
    pub written: Vec<SandboxFile>,
    /// Paths of files that were removed (or replaced by something that is not a file).
    pub deleted: Vec<String>,
    /// What the sandbox did not bring back, one line each (a file over the size bound, a symlink,
    /// a special file), to be told to the model.
    pub not_kept: Vec<String>,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutcome {
    /// stdout and stderr interleaved as written, cut in the middle to `MAX_OUTPUT_CHARS`.
    pub output: String,
    /// Bytes of output left out by the cut.
    pub omitted_bytes: u64,
    /// The exit code, or `None` when the command was killed (timeout, a bound, a signal).
    pub exit_code: Option<i32>,
    /// Why the sandbox stopped the command, when it did ("timed out after 60 s", "printed more than
    /// 64 MiB").
    pub stopped: Option<String>,
    pub timed_out: bool,
    pub changes: WorkspaceChanges,
    /// Time the command ran, as the sandbox measured it.
    pub duration: Duration,
    /// The backend's session to resume next time (kept with the agent session), if it keeps one.
    pub session: Option<String>,
}

/// Where a backend mounts things, as the command sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxLayout {
    pub workspace: String,
    pub skills: String,
    pub ticket: String,
}

impl Default for SandboxLayout {
    /// The same paths as the virtual filesystem's.
    fn default() -> Self {
        Self { workspace: "/workspace".to_owned(), skills: "/skills".to_owned(), ticket: "/ticket".to_owned() }
    }
}

/// Why a command could not be run; `Display` is what the model is told (never a backend's message).
#[derive(Debug, Error)]
pub enum SandboxError {
    /// The files of the call are over what one call may carry.
    #[error(
        "Error: the files to send to the sandbox are too large ({bytes} bytes in {files} files; one command may \
         take at most {max_bytes} bytes in {max_files} files). Delete files you no longer need from /workspace."
    )]
    TooLarge { bytes: u64, files: usize, max_bytes: u64, max_files: usize },
    /// The backend refused or failed; the detail is logged, not shown.
    #[error("Error: the sandbox is unavailable right now; try again later")]
    Unavailable(String),
    /// A skill's bundle (the packages its scripts need) could not be installed; the command did
    /// not run. The reason is about the tenant's own bundle, so it is shown.
    #[error("Error: the skill's packages could not be installed in the sandbox, so the command did not run: {0}")]
    Bundle(String),
    /// The backend is busy (throttled); the command did not run.
    #[error("Error: the sandbox is busy; the command did not run. Try again in a moment.")]
    Busy(String),
}

/// Runs commands in isolation. Implementations must give a command no credentials, no network and
/// bounded time, memory, processes, output and files, and nothing of another tenant or session.
#[async_trait]
pub trait Sandbox: Send + Sync {
    /// Where the command finds its files.
    fn layout(&self) -> SandboxLayout {
        SandboxLayout::default()
    }

    /// A short name for logs and the docs ("local", "lambda", "agentcore").
    fn name(&self) -> &'static str;

    async fn execute(&self, request: ExecRequest) -> Result<ExecOutcome, SandboxError>;
}

/// Cuts `output` to `max_chars` characters, keeping its head and tail around a note that says how
/// much was left out; returns the text and the bytes omitted (added to `already_omitted`).
pub fn cut_middle(output: &str, max_chars: usize, already_omitted: u64) -> (String, u64) {
    let chars = output.chars().count();
    if chars <= max_chars {
        return (output.to_owned(), already_omitted);
    }
    let keep_head = max_chars / 2;
    let keep_tail = max_chars - keep_head;
    let head_end = output.char_indices().nth(keep_head).map_or(output.len(), |(at, _)| at);
    let tail_start = output.char_indices().nth(chars - keep_tail).map_or(output.len(), |(at, _)| at);
    let omitted = already_omitted + (tail_start - head_end) as u64;
    (
        format!("{}\n\n... [{omitted} bytes of output omitted] ...\n\n{}", &output[..head_end], &output[tail_start..]),
        omitted,
    )
}

/// What the model is told of a finished command: the output, then its exit status, as deepagents'
/// `execute` answers, with what the sandbox did not keep.
pub fn render_outcome(outcome: &ExecOutcome) -> String {
    let mut text = outcome.output.clone();
    if outcome.omitted_bytes > 0 && !text.contains("bytes of output omitted") {
        text.push_str(&format!("\n\n[{} bytes of output omitted]", outcome.omitted_bytes));
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    match (&outcome.stopped, outcome.exit_code) {
        (Some(reason), _) => text.push_str(&format!("\n[Command stopped: {reason}]")),
        (None, Some(0)) => text.push_str("\n[Command succeeded with exit code 0]"),
        (None, Some(code)) => text.push_str(&format!("\n[Command failed with exit code {code}]")),
        (None, None) => text.push_str("\n[Command was killed by a signal]"),
    }
    for line in &outcome.changes.not_kept {
        text.push_str(&format!("\n[Not kept: {line}]"));
    }
    text.trim_start_matches('\n').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_bound_is_cut_in_the_middle_with_a_note() {
        let output = format!("{}{}", "a".repeat(40_000), "b".repeat(40_000));
        let (cut, omitted) = cut_middle(&output, MAX_OUTPUT_CHARS, 0);
        assert_eq!(omitted, 50_000);
        assert!(cut.starts_with(&"a".repeat(15_000)));
        assert!(cut.ends_with(&"b".repeat(15_000)));
        assert!(cut.contains("[50000 bytes of output omitted]"));
        let (same, none) = cut_middle("short", MAX_OUTPUT_CHARS, 0);
        assert_eq!((same.as_str(), none), ("short", 0));
    }

    #[test]
    fn the_result_says_how_the_command_ended() {
        let mut outcome = ExecOutcome {
            output: "hello".into(),
            omitted_bytes: 0,
            exit_code: Some(3),
            stopped: None,
            timed_out: false,
            changes: WorkspaceChanges::default(),
            duration: Duration::ZERO,
            session: None,
        };
        assert_eq!(render_outcome(&outcome), "hello\n\n[Command failed with exit code 3]");
        outcome.exit_code = None;
        outcome.stopped = Some("timed out after 2 s".into());
        assert!(render_outcome(&outcome).ends_with("[Command stopped: timed out after 2 s]"));
    }
}
