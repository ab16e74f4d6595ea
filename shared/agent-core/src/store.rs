//! The storage ports: an object store (skills, tickets, workspace blobs) and a session store.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ids::{SessionId, SkillPath, UserId};
use crate::message::Message;

/// A storage failure. `Conflict` is the only one a caller is expected to act on.
#[derive(Debug, Error)]
pub enum StoreError {
    /// A conditional write lost against a concurrent writer.
    #[error("the stored object was changed by a concurrent writer")]
    Conflict,
    /// The backend failed (network, throttling, permissions).
    #[error("storage backend failed: {0}")]
    Backend(String),
    /// Stored data that does not decode; never silently repaired.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

/// One object's listing entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    pub key: String,
    pub etag: String,
    pub size: u64,
}

/// One object's bytes with the ETag they were read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub bytes: Vec<u8>,
    pub etag: String,
}

/// The answer to a conditional read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The object still has the ETag the caller holds.
    NotModified,
    /// The object changed (or the caller held none): its bytes and new ETag.
    Changed(Object),
    /// There is no object at the key.
    Missing,
}

/// The precondition of a conditional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteCondition {
    /// Only if no object exists at the key (S3 `If-None-Match: *`).
    Absent,
    /// Only if the object still has this ETag (S3 `If-Match`).
    Matches(String),
}

/// A flat key/value blob store such as S3. Keys are always built by this crate from
/// validated ids, so an adapter never has to defend against traversal itself.
#[async_trait]
pub trait ObjectStore: Send + Sync {
    /// Every object under `prefix`, following pagination, in key order.
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError>;
    /// The object at `key`, or `None` when there is none.
    async fn get(&self, key: &str) -> Result<Option<Object>, StoreError>;
    /// Writes (or overwrites) `key`.
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError>;
    /// Reads `key` unless it still has `etag` (S3 `If-None-Match`), so an unchanged object costs
    /// one request and no transfer. The default reads the whole object and compares.
    async fn get_if_changed(&self, key: &str, etag: Option<&str>) -> Result<Fetched, StoreError> {
        Ok(match self.get(key).await? {
            None => Fetched::Missing,
            Some(object) if Some(object.etag.as_str()) == etag => Fetched::NotModified,
            Some(object) => Fetched::Changed(object),
        })
    }
    /// Writes `key` only if `condition` holds, atomically; returns the new ETag. A failed
    /// precondition is [`StoreError::Conflict`]. A store that cannot write atomically keeps the
    /// default, which refuses.
    async fn put_if(&self, key: &str, bytes: Vec<u8>, condition: WriteCondition) -> Result<String, StoreError> {
        let _ = (key, bytes, condition);
        Err(StoreError::Backend("this object store has no conditional writes".to_owned()))
    }
}

/// A file of a session's `/workspace`: its content lives in the object store under its hash,
/// so the manifest can be committed atomically with the rest of the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceFile {
    pub sha256: String,
    pub size: u64,
}

/// The session state that survives between turns, apart from the history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    /// The skill whose SKILL.md drives the prompt; reset to `None` at the end of every turn.
    pub current_skill: Option<SkillPath>,
    /// Skills visible under `/skills`; reset with `current_skill`.
    #[serde(default)]
    pub loaded_skills: Vec<SkillPath>,
    /// The planner's plan, opaque to the skills strategy.
    #[serde(default)]
    pub plan: Option<serde_json::Value>,
    /// `/workspace`: path relative to the root -> file.
    #[serde(default)]
    pub workspace: BTreeMap<String, WorkspaceFile>,
    /// The todo list kept by `todowrite`, carried across turns.
    #[serde(default)]
    pub todos: Vec<TodoItem>,
    /// The model's summary of the oldest part of the history, so it is not recomputed every turn.
    #[serde(default)]
    pub summary: Option<HistorySummary>,
}

/// One entry of the todo list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    pub content: String,
    pub status: TodoStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

/// A summary that stands in for `history[..covers]` when prompts are built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistorySummary {
    pub text: String,
    /// How many messages from the start of the history the summary replaces.
    pub covers: usize,
}

/// A session as loaded at the start of a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub user_id: UserId,
    pub session_id: SessionId,
    /// Number of committed turns; 0 for a session that does not exist yet.
    pub version: u64,
    pub history: Vec<Message>,
    pub state: SessionState,
    /// Unix seconds of the last commit, 0 for a new session.
    pub updated_at: i64,
}

impl Session {
    pub fn new(user_id: UserId, session_id: SessionId) -> Self {
        Self { user_id, session_id, version: 0, history: Vec::new(), state: SessionState::default(), updated_at: 0 }
    }
}

/// What a finished turn writes: the turn's messages and the state after cleanup.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnCommit {
    /// The version read at the start of the turn; the write succeeds only if it is still current.
    pub expected_version: u64,
    pub new_messages: Vec<Message>,
    /// Messages the history held before this turn (lets a store that expires old turns keep
    /// the summary's `covers` pointing at the right message).
    pub history_len: usize,
    pub state: SessionState,
    /// Unix seconds of this commit.
    pub now: i64,
}

/// Sessions keyed by (user, session). Implementations must make `commit` atomic:
/// either the whole turn is stored and the version moves to `expected_version + 1`,
/// or nothing changes.
#[async_trait]
pub trait SessionStore: Send + Sync {
    async fn load(&self, user: &UserId, session: &SessionId) -> Result<Option<Session>, StoreError>;
    async fn commit(&self, user: &UserId, session: &SessionId, commit: &TurnCommit) -> Result<(), StoreError>;
}
