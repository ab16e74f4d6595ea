//! The function's printed lines, kept in a bounded buffer, and the storage requests its
//! `storage requests` lines count.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// How many of the function's most recent log lines are kept.
const LOG_LINES_KEPT: usize = 20_000;

/// The function's stdout and stderr lines, in the order they were read. Line numbers (marks)
/// count every line ever read, including the oldest ones dropped to stay within the bound.
#[derive(Default)]
pub(super) struct LogBuffer {
    lines: VecDeque<String>,
    dropped: usize,
}

impl LogBuffer {
    pub(super) fn push(&mut self, line: String) {
        if self.lines.len() == LOG_LINES_KEPT {
            self.lines.pop_front();
            self.dropped += 1;
        }
        self.lines.push_back(line);
    }

    pub(super) fn mark(&self) -> usize {
        self.dropped + self.lines.len()
    }

    pub(super) fn since(&self, mark: usize) -> Vec<String> {
        self.lines.iter().skip(mark.saturating_sub(self.dropped)).cloned().collect()
    }
}

pub(super) type Logs = Arc<Mutex<LogBuffer>>;

/// Reads `stream` line by line into `logs` until the function closes it, echoing each line to
/// the real stderr when `echo` is set (written directly, so the test harness does not capture it).
pub(super) async fn capture(stream: impl AsyncRead + Unpin, logs: Logs, echo: bool) {
    let mut reader = BufReader::new(stream);
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        match reader.read_until(b'\n', &mut bytes).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(&bytes).trim_end_matches(['\n', '\r']).to_owned();
        if echo {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
        logs.lock().unwrap().push(line);
    }
}

/// The per-operation counts of a `storage requests` log line (JSON, as `agent_app::with_request_log`
/// writes it: `fields.storage_operations` holds a JSON object as a string), or `None` for any other line.
pub(super) fn storage_requests(line: &str) -> Option<BTreeMap<String, u64>> {
    let value: Value = serde_json::from_str(line).ok()?;
    let fields = value.get("fields")?;
    if fields.get("message")?.as_str()? != "storage requests" {
        return None;
    }
    match fields.get("storage_operations")? {
        Value::String(text) => serde_json::from_str(text).ok(),
        object => serde_json::from_value(object.clone()).ok(),
    }
}
