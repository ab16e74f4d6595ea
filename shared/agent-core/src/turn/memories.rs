//! The user's long-term memory for its owner (`GET /memories`, `DELETE /memories[/{path}]`): the
//! objects under `{user}/memories/` that `/memories` shows the model, and nothing else.

use futures::stream::{self, StreamExt, TryStreamExt};
use serde::Serialize;

use super::{TurnError, TurnService};
use crate::ids::{MemoryPath, UserId};
use crate::keys;
use crate::vfs::LOAD_CONCURRENCY;

/// A memory file as its owner sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryFile {
    /// Its path as the model sees it: `/memories/{path}`.
    pub path: String,
    pub size: u64,
    /// When it was last written, in unix seconds; `null` when the store does not say.
    pub last_modified: Option<i64>,
}

/// A listed memory file: its path relative to `/memories` (only keys that are memory paths, as in
/// the file tools) and what the listing says of it.
struct Listed {
    path: MemoryPath,
    file: MemoryFile,
}

impl TurnService {
    /// The caller's memory files, sorted by path.
    pub async fn memories(&self, user: &UserId) -> Result<Vec<MemoryFile>, TurnError> {
        Ok(self.list_memories(user).await?.into_iter().map(|listed| listed.file).collect())
    }

    /// Deletes the caller's memory file at `path`, or every file under it when it is a folder, or,
    /// with no path, all of the caller's memories; answers the files deleted (none when `path`
    /// names nothing).
    pub async fn delete_memories(
        &self,
        user: &UserId,
        path: Option<&MemoryPath>,
    ) -> Result<Vec<MemoryFile>, TurnError> {
        let under = path.map(|path| format!("{path}/"));
        let doomed: Vec<Listed> = self
            .list_memories(user)
            .await?
            .into_iter()
            .filter(|listed| match (path, &under) {
                (Some(path), Some(under)) => listed.path == *path || listed.path.as_str().starts_with(under.as_str()),
                _ => true,
            })
            .collect();
        stream::iter(doomed.iter().map(|listed| keys::memory_key(user, &listed.path)))
            .map(|key| async move { self.objects.delete(&key).await })
            .buffer_unordered(LOAD_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;
        if !doomed.is_empty() {
            tracing::info!(deleted = doomed.len(), "memories deleted");
        }
        Ok(doomed.into_iter().map(|listed| listed.file).collect())
    }

    async fn list_memories(&self, user: &UserId) -> Result<Vec<Listed>, TurnError> {
        let prefix = keys::memories_prefix(user);
        let listed = self.objects.list(&prefix).await?;
        Ok(listed
            .into_iter()
            .filter_map(|meta| {
                let path = MemoryPath::parse(meta.key.strip_prefix(&prefix)?).ok()?;
                let file = MemoryFile {
                    path: format!("/memories/{path}"),
                    size: meta.size,
                    last_modified: meta.last_modified,
                };
                Some(Listed { path, file })
            })
            .collect())
    }
}
