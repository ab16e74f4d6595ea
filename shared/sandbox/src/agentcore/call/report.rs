//! The runner's report: parsed from its last line of stdout, the output rendered as the handler
//! renders it, and how the command ended.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::Deserialize;

use crate::handler::output::render_output;
use crate::handler::{human_bytes, seconds, Limits};

/// The output's head and tail the runner reports, as the handler keeps them.
pub(crate) const HEAD_BYTES: usize = 32 * 1024;
pub(crate) const TAIL_BYTES: usize = 32 * 1024;
/// The largest report accepted from the runner: a listing of the bounded workspace and the
/// output's head and tail fit many times over.
pub(crate) const MAX_REPORT_BYTES: usize = 16 << 20;

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
