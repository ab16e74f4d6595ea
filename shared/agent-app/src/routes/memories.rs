//! `GET /memories` and `DELETE /memories[/{path...}]`: the caller's long-term memory, the files the
//! model sees under `/memories`, listed with each one's size and time of writing, or deleted.

use agent_core::turn::MemoryFile;
use agent_core::MemoryPath;
use serde_json::{json, Value};

use super::files::decode_path;
use crate::api::ApiError;

/// The memory file (or folder) at `segments` (the raw path after `memories/`, relative to
/// `/memories`), or `None` for every memory of the caller; one that is not a memory path is a 400.
pub(super) fn memory_path(segments: Option<&[&str]>) -> Result<Option<MemoryPath>, ApiError> {
    let Some(segments) = segments else { return Ok(None) };
    let relative = decode_path(segments)?;
    MemoryPath::parse(relative).map(Some).map_err(|err| ApiError::bad_request(err.to_string()))
}

/// The caller's memory files, sorted by path: `{"memories": [{"path", "size", "last_modified"}]}`.
pub(super) fn memories_view(files: &[MemoryFile]) -> Value {
    json!({ "memories": files })
}

/// What was deleted: `{"deleted": [paths]}`; a path that named nothing is a 404.
pub(super) fn deleted_view(path: Option<&MemoryPath>, deleted: &[MemoryFile]) -> Result<Value, ApiError> {
    if let (Some(path), true) = (path, deleted.is_empty()) {
        return Err(ApiError::not_found(format!("no memory `/memories/{path}`")));
    }
    let paths: Vec<&str> = deleted.iter().map(|file| file.path.as_str()).collect();
    Ok(json!({ "deleted": paths }))
}
