//! `GET /memories` and `DELETE /memories[/{path...}]`: the caller's long-term memory, the files the
//! model sees under `/memories`, listed with each one's size and time of writing, or deleted.

use agent_app::api::ApiError;
use agent_core::turn::TurnService;
use agent_core::{MemoryPath, UserId};
use serde_json::{json, Value};

use crate::files::decode_path;

/// The caller's memory files, sorted by path: `{"memories": [{"path", "size", "last_modified"}]}`.
pub(crate) async fn list(service: &TurnService, user: &UserId) -> Result<Value, ApiError> {
    let files = service.memories(user).await?;
    Ok(json!({ "memories": files }))
}

/// Deletes the memory file (or folder) at `segments` (the raw path after `memories/`, relative to
/// `/memories`), or with `None` every memory of the caller: `{"deleted": [paths]}`. A path that
/// names nothing is a 404; one that is not a memory path, a 400.
pub(crate) async fn delete(service: &TurnService, user: &UserId, segments: Option<&[&str]>) -> Result<Value, ApiError> {
    let path = match segments {
        Some(segments) => {
            let relative = decode_path(segments)?;
            Some(MemoryPath::parse(relative).map_err(|err| ApiError::bad_request(err.to_string()))?)
        }
        None => None,
    };
    let deleted = service.delete_memories(user, path.as_ref()).await?;
    if let (Some(path), true) = (&path, deleted.is_empty()) {
        return Err(ApiError::not_found(format!("no memory `/memories/{path}`")));
    }
    let paths: Vec<&str> = deleted.iter().map(|file| file.path.as_str()).collect();
    Ok(json!({ "deleted": paths }))
}
