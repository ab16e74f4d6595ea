//! `/memories`: the user's long-term memory, kept across all of the user's sessions as the objects
//! `{user}/memories/{path}`, as LangChain deepagents routes `/memories/` to a persistent store while
//! its other files stay with the conversation. The tools work on it as on `/workspace`.
//!
//! # Decisions
//!
//! - Read lazily: a turn lists `{user}/memories/` once, the first time a tool looks inside
//!   `/memories` (a `glob` or `grep` over `/` included), and fetches a file's bytes only when it
//!   reads them; a turn that never looks makes no request under the prefix. `ls /` names the root
//!   without listing it.
//! - Writes are staged: `write_file`, `edit_file` and `delete` change only the turn's view (later
//!   reads in the turn see them), and the turn service saves them with [`Vfs::save_memories`] once
//!   the loop has run, just before the session commit. A turn that fails before then saves nothing,
//!   and a committed turn has saved every change. The saves are not part of the commit's
//!   transaction (S3 and DynamoDB share none), so a turn that then loses its commit to a concurrent
//!   one may leave its memory changes saved.
//! - The last save of a file wins: two sessions of a user that change one memory at once each save
//!   their own whole file.
//! - A model path becomes a key only as a [`MemoryPath`], after the normalisation every tool path
//!   gets; listed keys that are not memory paths are invisible.
//! - Bounds: [`MAX_MEMORY_FILES`] files, [`MAX_MEMORY_FILE_BYTES`] a file, [`MAX_MEMORY_BYTES`] in
//!   all, paths of [`MAX_MEMORY_PATH_BYTES`]; a write past one is an error naming it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::stream::{self, StreamExt, TryStreamExt};

use super::read::as_text;
use super::resolve::{stat, Stat};
use super::storage::lock;
use super::write::replace_in;
use super::{
    Entry, Source, Vfs, VfsError, LOAD_CONCURRENCY, MAX_MEMORY_BYTES, MAX_MEMORY_FILES, MAX_MEMORY_FILE_BYTES,
    MAX_MEMORY_PATH_BYTES,
};
use crate::ids::MemoryPath;
use crate::keys;
use crate::store::StoreError;

/// The turn's view of `/memories`.
#[derive(Default)]
pub(super) struct Memories {
    /// What the store held when the turn first looked, listed once.
    listing: Mutex<Option<Arc<Vec<Entry>>>>,
    /// The turn's changes by path relative to `/memories`, until [`Vfs::save_memories`].
    staged: BTreeMap<String, Change>,
}

/// A staged change of one memory file: its new bytes, or `None` when it is deleted.
struct Change {
    path: MemoryPath,
    bytes: Option<Arc<Vec<u8>>>,
}

/// What [`Vfs::save_memories`] wrote and deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SavedMemories {
    pub written: usize,
    pub deleted: usize,
}

impl Vfs<'_> {
    /// The files of `/memories` as the turn sees them: the listing with the turn's changes.
    pub(super) async fn memory_entries(&self) -> Result<Arc<Vec<Entry>>, VfsError> {
        let listed = self.memory_listing().await?;
        if self.memories.staged.is_empty() {
            return Ok(listed);
        }
        let mut files: BTreeMap<String, Entry> =
            listed.iter().map(|entry| (entry.rel.clone(), entry.clone())).collect();
        for (rel, change) in &self.memories.staged {
            match &change.bytes {
                Some(bytes) => {
                    let entry =
                        Entry { rel: rel.clone(), size: bytes.len() as u64, source: Source::Staged(bytes.clone()) };
                    files.insert(rel.clone(), entry);
                }
                None => {
                    files.remove(rel);
                }
            }
        }
        Ok(Arc::new(files.into_values().collect()))
    }

    /// The stored memory files, listed on first use.
    async fn memory_listing(&self) -> Result<Arc<Vec<Entry>>, VfsError> {
        let cached = lock(&self.memories.listing).clone();
        if let Some(listing) = cached {
            return Ok(listing);
        }
        let listed = self.list_objects(&keys::memories_prefix(&self.user)).await?;
        let listing: Arc<Vec<Entry>> =
            Arc::new(listed.iter().filter(|entry| MemoryPath::parse(entry.rel.as_str()).is_ok()).cloned().collect());
        *lock(&self.memories.listing) = Some(listing.clone());
        Ok(listing)
    }

    /// `write_file` under `/memories`: the whole file, staged, within the memory's bounds.
    pub(super) async fn write_memory(&mut self, rel: String, shown: String, content: &str) -> Result<String, VfsError> {
        let entries = self.memory_entries().await?;
        let path = check_memory_write(&entries, &rel, &shown, None, content.len())?;
        self.stage(rel, path, Some(content.as_bytes().to_vec()));
        Ok(format!("Updated file {shown}"))
    }

    /// `edit_file` under `/memories`, with the same rules and messages as in `/workspace`.
    pub(super) async fn edit_memory(
        &mut self,
        rel: String,
        shown: String,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<String, VfsError> {
        let entries = self.memory_entries().await?;
        let entry = match stat(&entries, &rel) {
            Stat::File(entry) => entry,
            Stat::Dir => return Err(VfsError::IsDirectory(shown)),
            Stat::Missing => return Err(VfsError::NotFound(shown)),
        };
        if old.is_empty() {
            return Err(VfsError::EmptyOldString);
        }
        let bytes = self.load(&shown, &entry).await?;
        let text = as_text(&bytes).ok_or(VfsError::Binary { path: shown.clone(), size: bytes.len() as u64 })?;
        let (updated, count) = replace_in(text, old, new, replace_all)?;
        let path = check_memory_write(&entries, &rel, &shown, Some(entry.size), updated.len())?;
        self.stage(rel, path, Some(updated.into_bytes()));
        Ok(format!("Successfully replaced {count} instance(s) of the string in '{shown}'"))
    }

    /// `delete` under `/memories`: a file, or a directory with everything in it.
    pub(super) async fn delete_memory(&mut self, rel: String, shown: String) -> Result<String, VfsError> {
        let entries = self.memory_entries().await?;
        let prefix = format!("{rel}/");
        let doomed: Vec<&Entry> =
            entries.iter().filter(|entry| entry.rel == rel || entry.rel.starts_with(&prefix)).collect();
        if doomed.is_empty() {
            return Err(VfsError::NotFound(shown));
        }
        let listed = self.memory_listing().await?;
        for entry in doomed {
            // Every entry's path is a memory path: listed ones are filtered, staged ones were checked.
            let Ok(path) = MemoryPath::parse(entry.rel.as_str()) else { continue };
            if listed.iter().any(|stored| stored.rel == entry.rel) {
                self.stage(entry.rel.clone(), path, None);
            } else {
                // Written during this turn only: nothing to delete in the store.
                self.memories.staged.remove(&entry.rel);
            }
        }
        Ok(format!("Deleted {shown}"))
    }

    fn stage(&mut self, rel: String, path: MemoryPath, bytes: Option<Vec<u8>>) {
        self.memories.staged.insert(rel, Change { path, bytes: bytes.map(Arc::new) });
    }

    /// Saves the turn's `/memories` changes to the store: each written file whole, each deleted one
    /// removed. The turn service calls it once the loop has run, just before the session commit.
    pub async fn save_memories(&self) -> Result<SavedMemories, StoreError> {
        // Owned items: a closure over borrowed ones trips rustc's higher-ranked `Send` check when
        // the caller's future must be `Send`.
        let changes: Vec<(String, Option<Arc<Vec<u8>>>)> = self
            .memories
            .staged
            .values()
            .map(|change| (keys::memory_key(&self.user, &change.path), change.bytes.clone()))
            .collect();
        let saved: Vec<bool> = stream::iter(changes)
            .map(|(key, bytes)| async move {
                match bytes {
                    Some(bytes) => self.objects.put(&key, bytes.to_vec()).await.map(|()| true),
                    None => self.objects.delete(&key).await.map(|()| false),
                }
            })
            .buffer_unordered(LOAD_CONCURRENCY)
            .try_collect()
            .await?;
        let written = saved.iter().filter(|written| **written).count();
        Ok(SavedMemories { written, deleted: saved.len() - written })
    }
}

/// Whether a write of `size` bytes to `rel` (replacing a file of `replaced` bytes, if any) keeps
/// `/memories` within its bounds; the file's path as a key when it does. The checks and their order
/// are those of a `/workspace` write.
fn check_memory_write(
    entries: &[Entry],
    rel: &str,
    shown: &str,
    replaced: Option<u64>,
    size: usize,
) -> Result<MemoryPath, VfsError> {
    if size > MAX_MEMORY_FILE_BYTES {
        return Err(VfsError::MemoryTooLarge { size });
    }
    let prefix = format!("{rel}/");
    if entries.iter().any(|entry| entry.rel.starts_with(&prefix)) {
        return Err(VfsError::IsDirectory(shown.to_owned()));
    }
    let segments: Vec<&str> = rel.split('/').collect();
    for depth in 1..segments.len() {
        let ancestor = segments[..depth].join("/");
        if entries.iter().any(|entry| entry.rel == ancestor) {
            return Err(VfsError::NotADirectory(format!("/memories/{ancestor}")));
        }
    }
    if rel.len() > MAX_MEMORY_PATH_BYTES {
        return Err(VfsError::InvalidPath(format!(
            "{shown} (a /memories path is at most {MAX_MEMORY_PATH_BYTES} bytes after /memories/)"
        )));
    }
    let path = MemoryPath::parse(rel).map_err(|error| VfsError::InvalidPath(format!("{shown} ({error})")))?;
    let replaced = replaced.or_else(|| entries.iter().find(|entry| entry.rel == rel).map(|entry| entry.size));
    if replaced.is_none() && entries.len() >= MAX_MEMORY_FILES {
        return Err(VfsError::Quota(format!(
            "/memories already holds {MAX_MEMORY_FILES} files, its limit; delete memories you no longer need with \
             delete, or write over an existing one"
        )));
    }
    let total: u64 = entries.iter().map(|entry| entry.size).sum();
    let after = total.saturating_sub(replaced.unwrap_or(0)).saturating_add(size as u64);
    if after > MAX_MEMORY_BYTES {
        return Err(VfsError::Quota(format!(
            "/memories would hold {after} bytes, over its limit of {} MiB; delete memories you no longer need with \
             delete, or keep them shorter",
            MAX_MEMORY_BYTES / (1024 * 1024)
        )));
    }
    Ok(path)
}
