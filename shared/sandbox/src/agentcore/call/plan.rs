//! What the runner's listing says changed under the workspace, compared with the files sent as the
//! handler's `collect` compares: the files to read back (in batches, matched by sha256), the
//! deletions, and what is not kept.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use agent_ports::sandbox::{SandboxFile, WorkspaceChanges, MAX_RESULT_FILE_BYTES};
use sha2::{Digest, Sha256};

use super::prepare::Call;
use super::report::{Entry, Report};
use crate::handler::human_bytes;
use crate::wire::{check_relative_path, over_result_bounds, MAX_NOT_KEPT_LINES};

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
