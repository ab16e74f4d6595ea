//! What the command left in the workspace: measured while it runs (to stop it past the disk and
//! file bounds) and collected after every process of it is gone (written, deleted, not kept).
//! Walks never follow symbolic links and stop at the entry bound.

use std::collections::{HashMap, HashSet};
use std::fs::{DirEntry, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use agent_ports::sandbox::MAX_RESULT_FILE_BYTES;
use sha2::{Digest, Sha256};

use super::human_bytes;
use crate::wire::{check_relative_path, over_result_bounds, WireFile, MAX_NOT_KEPT_LINES};

/// The most the workspace may hold while the command runs: the inputs plus the limits.
pub(crate) struct Bounds {
    pub entries: usize,
    pub bytes: u64,
}

pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The reason to stop the command when the workspace is over its bounds. Sizes are the files'
/// lengths, so a sparse file counts as large as it claims to be.
pub(crate) fn over_bounds(workspace: &Path, bounds: &Bounds, limits: &super::Limits) -> Option<String> {
    let mut entries = 0usize;
    let mut bytes = 0u64;
    let mut folders = vec![workspace.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(listing) = std::fs::read_dir(&folder) else { continue };
        for entry in listing.flatten() {
            entries += 1;
            if entries > bounds.entries {
                return Some(format!("created more than {} files in the workspace", limits.files));
            }
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                folders.push(entry.path());
            } else if meta.is_file() {
                bytes = bytes.saturating_add(meta.len());
                if bytes > bounds.bytes {
                    return Some(format!("wrote more than {} to the workspace", human_bytes(limits.disk_bytes)));
                }
            }
        }
    }
    None
}

/// What changed under the workspace.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    pub written: Vec<WireFile>,
    pub deleted: Vec<String>,
    pub not_kept: Vec<String>,
}

/// Compares the workspace with its inputs (by sha256): new and changed regular files are written,
/// input paths that are no longer regular files are deleted, and everything else is told in
/// `not_kept`. `result_bytes` and [`crate::wire::MAX_RESPONSE_FILES`] bound the written files together: past
/// either, none of the changes are kept and one line says which bound and the totals. A walk cut
/// short at the entry bound infers no deletion (the files it did not reach may well be there).
pub(crate) fn collect(
    workspace: &Path,
    inputs: &HashMap<String, [u8; 32]>,
    bounds: &Bounds,
    result_bytes: u64,
) -> Changes {
    let mut walk =
        Walk { changes: Changes::default(), not_kept_lines: 0, changed: 0, changed_bytes: 0, result_bytes, inputs };
    let mut seen = HashSet::new();
    let mut unreadable: Vec<String> = Vec::new();
    let mut entries = 0usize;
    let mut complete = true;
    let mut folders = vec![(workspace.to_path_buf(), String::new())];
    'walk: while let Some((folder, prefix)) = folders.pop() {
        let listing = match std::fs::read_dir(&folder) {
            Ok(listing) => listing,
            Err(_) => {
                let name = if prefix.is_empty() { "the workspace" } else { prefix.trim_end_matches('/') };
                walk.not_kept(format!("{name}: a folder that could not be read"));
                unreadable.push(prefix);
                continue;
            }
        };
        let mut children: Vec<DirEntry> = Vec::new();
        for entry in listing.flatten() {
            entries += 1;
            if entries > bounds.entries {
                complete = false;
                walk.not_kept(format!(
                    "the workspace holds more than {} files and folders; the rest were not looked at",
                    bounds.entries
                ));
                break 'walk;
            }
            children.push(entry);
        }
        // Sorted, so that which files make the bounds does not depend on the directory order.
        children.sort_by_key(DirEntry::file_name);
        for entry in children {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                walk.not_kept(format!("{:?}: a name that is not UTF-8", format!("{prefix}{}", name.to_string_lossy())));
                continue;
            };
            let path = format!("{prefix}{name}");
            let Ok(kind) = entry.file_type() else { continue };
            if let Err(err) = check_relative_path(&path) {
                walk.not_kept(format!("{path:?}: {err}"));
            } else if kind.is_dir() {
                folders.push((entry.path(), format!("{path}/")));
            } else if kind.is_symlink() {
                walk.not_kept(format!("{path}: a symbolic link"));
            } else if !kind.is_file() {
                walk.not_kept(format!("{path}: not a regular file"));
            } else {
                seen.insert(path.clone());
                walk.file(entry.path(), path);
            }
        }
    }
    if complete {
        let mut deleted: Vec<String> = inputs
            .keys()
            .filter(|path| !seen.contains(*path))
            .filter(|path| !unreadable.iter().any(|folder| path.starts_with(folder.as_str())))
            .cloned()
            .collect();
        deleted.sort();
        walk.changes.deleted = deleted;
    }
    walk.changes.written.sort_by(|a, b| a.path.cmp(&b.path));
    if let Some(line) = over_result_bounds(walk.changed, walk.changed_bytes, result_bytes) {
        walk.changes.written = Vec::new();
        walk.changes.deleted = Vec::new();
        walk.changes.not_kept.insert(0, line);
    }
    if walk.not_kept_lines > MAX_NOT_KEPT_LINES {
        walk.changes.not_kept.push(format!("and {} more", walk.not_kept_lines - MAX_NOT_KEPT_LINES));
    }
    walk.changes
}

struct Walk<'a> {
    changes: Changes,
    not_kept_lines: usize,
    /// New or changed files, kept or not, and their bytes: what the all-or-nothing bound counts.
    changed: usize,
    changed_bytes: u64,
    result_bytes: u64,
    inputs: &'a HashMap<String, [u8; 32]>,
}

impl Walk<'_> {
    fn not_kept(&mut self, line: String) {
        self.not_kept_lines += 1;
        if self.not_kept_lines <= MAX_NOT_KEPT_LINES {
            self.changes.not_kept.push(line);
        }
    }

    /// A regular file: kept when new or changed; once the changed files are over a bound, none is
    /// held any more (they are all dropped), only counted.
    fn file(&mut self, on_disk: PathBuf, path: String) {
        let bytes = match read_bounded(&on_disk, MAX_RESULT_FILE_BYTES) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                let size = std::fs::symlink_metadata(&on_disk).map(|meta| meta.len()).unwrap_or(0);
                self.changed += 1;
                self.changed_bytes = self.changed_bytes.saturating_add(size);
                return self.not_kept(format!(
                    "{path}: {size} bytes, larger than the {} a file may have to be kept",
                    human_bytes(MAX_RESULT_FILE_BYTES)
                ));
            }
            Err(err) => return self.not_kept(format!("{path}: could not be read ({err})")),
        };
        if self.inputs.get(&path) == Some(&sha256(&bytes)) {
            return;
        }
        self.changed += 1;
        self.changed_bytes = self.changed_bytes.saturating_add(bytes.len() as u64);
        if over_result_bounds(self.changed, self.changed_bytes, self.result_bytes).is_some() {
            self.changes.written = Vec::new();
            return;
        }
        self.changes.written.push(WireFile::encode(path, &bytes));
    }
}

/// A regular file's bytes, or `None` when it is larger than `max` (never reading more than that).
fn read_bounded(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    // No following a link and no blocking on a fifo swapped in for the file.
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > max {
        return Ok(None);
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}
