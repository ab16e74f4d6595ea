//! The writing tools: `write_file`, `edit_file` and `delete`, inside `/workspace` within its
//! quotas, or handed to `memories` for a path inside `/memories`.

use std::collections::HashSet;
use std::sync::Arc;

use futures::{stream, StreamExt, TryStreamExt};

use super::read::as_text;
use super::resolve::Writable;
use super::storage::sha256_hex;
use super::{
    Entry, Source, Vfs, VfsError, LOAD_CONCURRENCY, MAX_FILE_BYTES, MAX_WORKSPACE_BYTES, MAX_WORKSPACE_FILES,
    MAX_WORKSPACE_PATH_BYTES, SNIPPET_CHARS,
};
use crate::keys;
use crate::store::{StoreError, WorkspaceFile};

/// Bytes of held blobs past which those no file names are dropped: twice the workspace's bound.
const MAX_UNSAVED_BYTES: u64 = 2 * MAX_WORKSPACE_BYTES;

impl Vfs<'_> {
    /// Writes a whole file under `/workspace` or `/memories` (parents are implied), creating it or
    /// replacing it.
    pub async fn write_file(&mut self, path: &str, content: &str) -> Result<String, VfsError> {
        let (rel, shown) = match self.writable(path)? {
            (Writable::Workspace(rel), shown) => (rel, shown),
            (Writable::Memories(rel), shown) => return self.write_memory(rel, shown, content).await,
        };
        if content.len() > MAX_FILE_BYTES {
            return Err(VfsError::ContentTooLarge { size: content.len() });
        }
        let prefix = format!("{rel}/");
        if self.workspace.keys().any(|p| p.starts_with(&prefix)) {
            return Err(VfsError::IsDirectory(shown));
        }
        let segments: Vec<&str> = rel.split('/').collect();
        for depth in 1..segments.len() {
            let ancestor = segments[..depth].join("/");
            if self.workspace.contains_key(&ancestor) {
                return Err(VfsError::NotADirectory(format!("/workspace/{ancestor}")));
            }
        }
        let replaced = self.workspace.get(&rel).map(|file| file.size);
        if replaced.is_none() {
            if rel.len() > MAX_WORKSPACE_PATH_BYTES {
                return Err(VfsError::InvalidPath(format!(
                    "{shown} (a /workspace path is at most {MAX_WORKSPACE_PATH_BYTES} bytes after /workspace/)"
                )));
            }
            if self.workspace.len() >= MAX_WORKSPACE_FILES {
                return Err(VfsError::Quota(format!(
                    "/workspace already holds {MAX_WORKSPACE_FILES} files, its limit; delete files you no longer \
                     need with delete, or write over an existing one"
                )));
            }
        }
        self.check_bytes_quota(replaced.unwrap_or(0), content.len())?;
        let file = self.store_blob(content.as_bytes());
        self.note_written(&rel, file.size);
        self.workspace.insert(rel, file);
        self.trim_unsaved();
        Ok(format!("Updated file {shown}"))
    }

    /// Replaces `old` with `new` in a `/workspace` or `/memories` file: exactly one occurrence, or
    /// all of them with `replace_all`; the errors are deepagents' (with `old` cut to [`SNIPPET_CHARS`]).
    pub async fn edit_file(&mut self, path: &str, old: &str, new: &str, replace_all: bool) -> Result<String, VfsError> {
        let (rel, shown) = match self.writable(path)? {
            (Writable::Workspace(rel), shown) => (rel, shown),
            (Writable::Memories(rel), shown) => return self.edit_memory(rel, shown, old, new, replace_all).await,
        };
        let Some(file) = self.workspace.get(&rel).cloned() else {
            let prefix = format!("{rel}/");
            return Err(if self.workspace.keys().any(|p| p.starts_with(&prefix)) {
                VfsError::IsDirectory(shown)
            } else {
                VfsError::NotFound(shown)
            });
        };
        if old.is_empty() {
            return Err(VfsError::EmptyOldString);
        }
        let entry = Entry { rel: rel.clone(), size: file.size, source: Source::Blob(file.sha256) };
        let bytes = self.load(&shown, &entry).await?;
        let text = as_text(&bytes).ok_or(VfsError::Binary { path: shown.clone(), size: bytes.len() as u64 })?;
        let (updated, count) = replace_in(text, old, new, replace_all)?;
        if updated.len() > MAX_FILE_BYTES {
            return Err(VfsError::ContentTooLarge { size: updated.len() });
        }
        self.check_bytes_quota(file.size, updated.len())?;
        let file = self.store_blob(updated.as_bytes());
        self.note_written(&rel, file.size);
        self.workspace.insert(rel, file);
        self.trim_unsaved();
        Ok(format!("Successfully replaced {count} instance(s) of the string in '{shown}'"))
    }

    /// Removes a `/workspace` file, or a directory with everything under it, from the manifest, as
    /// deepagents' `delete` does (the content-addressed blobs stay, unreferenced), or the same under
    /// `/memories`. The roots themselves cannot be deleted.
    pub async fn delete(&mut self, path: &str) -> Result<String, VfsError> {
        let (rel, shown) = match self.writable(path)? {
            (Writable::Workspace(rel), shown) => (rel, shown),
            (Writable::Memories(rel), shown) => return self.delete_memory(rel, shown).await,
        };
        let prefix = format!("{rel}/");
        let before = self.workspace.len();
        self.workspace.retain(|file, _| *file != rel && !file.starts_with(&prefix));
        if self.workspace.len() == before {
            return Err(VfsError::NotFound(shown));
        }
        Ok(format!("Deleted {shown}"))
    }

    /// Whether replacing `old` bytes by `new` keeps the workspace within [`MAX_WORKSPACE_BYTES`].
    fn check_bytes_quota(&self, old: u64, new: usize) -> Result<(), VfsError> {
        let total: u64 = self.workspace.values().map(|file| file.size).sum();
        let after = total.saturating_sub(old).saturating_add(new as u64);
        if after > MAX_WORKSPACE_BYTES {
            return Err(VfsError::Quota(format!(
                "/workspace would hold {after} bytes, over its limit of {} MiB; delete files you no longer need \
                 with delete",
                MAX_WORKSPACE_BYTES / (1024 * 1024)
            )));
        }
        Ok(())
    }

    /// Holds a workspace blob for [`Vfs::save_workspace`] unless the manifest or this turn already
    /// has its hash. The caller names it in the manifest, then calls [`Vfs::trim_unsaved`].
    pub(super) fn store_blob(&mut self, bytes: &[u8]) -> WorkspaceFile {
        let sha = sha256_hex(bytes);
        let known = self.unsaved.contains_key(&sha) || self.workspace.values().any(|f| f.sha256 == sha);
        if !known {
            // Reads of it this turn find it here ([`Vfs::load`]), not in the turn's read cache.
            self.unsaved_bytes += bytes.len() as u64;
            self.unsaved.insert(sha.clone(), Arc::new(bytes.to_vec()));
        }
        WorkspaceFile { sha256: sha, size: bytes.len() as u64 }
    }

    /// Once the held blobs pass [`MAX_UNSAVED_BYTES`], forgets those no file of the manifest names
    /// any more, so a turn that rewrites a file many times holds little more than the workspace's
    /// bound. Called once a write has named its blobs in the manifest, never between the two.
    pub(super) fn trim_unsaved(&mut self) {
        if self.unsaved_bytes <= MAX_UNSAVED_BYTES {
            return;
        }
        let named: HashSet<&str> = self.workspace.values().map(|file| file.sha256.as_str()).collect();
        self.unsaved.retain(|sha, _| named.contains(sha.as_str()));
        self.unsaved_bytes = self.unsaved.values().map(|bytes| bytes.len() as u64).sum();
    }

    /// Puts the blobs this turn wrote that the manifest names, a few at a time; the caller commits
    /// the manifest only after this succeeds. Returns how many were put.
    pub async fn save_workspace(&self) -> Result<usize, StoreError> {
        let named: HashSet<&str> = self.workspace.values().map(|file| file.sha256.as_str()).collect();
        let objects = self.objects;
        let blobs: Vec<(String, Arc<Vec<u8>>)> = self
            .unsaved
            .iter()
            .filter(|(sha, _)| named.contains(sha.as_str()))
            .map(|(sha, bytes)| (keys::workspace_blob_key(&self.user, &self.session, sha), bytes.clone()))
            .collect();
        let saved: Vec<(String, Arc<Vec<u8>>)> = stream::iter(blobs)
            .map(|(key, bytes)| async move { objects.put(&key, bytes.to_vec()).await.map(|()| (key, bytes)) })
            .buffer_unordered(LOAD_CONCURRENCY)
            .try_collect()
            .await?;
        if let Some(cache) = self.shared_files {
            for (key, bytes) in &saved {
                cache.insert(key.clone(), bytes.clone());
            }
        }
        Ok(saved.len())
    }
}

/// `text` with `old` replaced by `new` (every occurrence, which must be one unless `replace_all`),
/// and how many there were; the errors are deepagents'.
pub(super) fn replace_in(text: &str, old: &str, new: &str, replace_all: bool) -> Result<(String, usize), VfsError> {
    let count = text.matches(old).count();
    if count == 0 {
        // A model often adds a final newline the file does not have; say so precisely.
        if let Some(stripped) = old.strip_suffix('\n').filter(|s| !s.is_empty() && text.ends_with(*s)) {
            return Err(match text.matches(stripped).count() {
                1 => VfsError::TrailingNewline,
                n => VfsError::TrailingNewlineAmbiguous(n),
            });
        }
        return Err(VfsError::StringNotFound(truncate_chars(old, SNIPPET_CHARS, "...")));
    }
    if count > 1 && !replace_all {
        return Err(VfsError::AmbiguousEdit { snippet: truncate_chars(old, SNIPPET_CHARS, "..."), count });
    }
    Ok((text.replace(old, new), count))
}

fn truncate_chars(line: &str, max: usize, marker: &str) -> String {
    match line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}{marker}", &line[..cut]),
        None => line.to_owned(),
    }
}
