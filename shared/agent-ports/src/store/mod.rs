//! The storage ports: an object store (skills, tickets, workspace blobs) and a session store. The
//! plain types they carry are in a file per subject: `objects`, `session`, `idempotency`, `usage`
//! and `listing`.

mod idempotency;
mod listing;
mod objects;
mod session;
mod usage;

use async_trait::async_trait;
use thiserror::Error;

pub use idempotency::{Accepted, Claim, CommitKey, IdempotencyKey, TurnStatus};
pub use listing::{SessionCursor, SessionList, SessionSummary, MAX_SESSIONS_PAGE};
pub use objects::{Fetched, LinkHeaders, Object, ObjectMeta, UploadLink, WriteCondition};
pub use session::{
    HistoryPage, HistorySummary, PausedSubagent, PendingApproval, PendingCall, Session, SessionState, TodoItem,
    TodoStatus, TurnCommit, WorkspaceFile, MAX_LOADED_HISTORY_BYTES, MAX_LOADED_TURNS,
};
pub use usage::{
    nanos_to_usd, parse_usd_nanos, BudgetOverride, BudgetState, BudgetUnit, ModelUsage, Reservation, TurnUsage,
    UsageCounts, UsageDay, NANOS_PER_USD,
};

use crate::ids::{SessionId, UserId};

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
    /// Deletes `key`; deleting a key that does not exist succeeds. A store that cannot delete keeps
    /// the default, which refuses.
    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let _ = key;
        Err(StoreError::Backend("this object store cannot delete".to_owned()))
    }
    /// A link that reads `key` without credentials until it expires (an S3 presigned GET), served
    /// with `headers`, or `None` when the store cannot make one (the caller then hands over the bytes).
    async fn presign_get(
        &self,
        key: &str,
        expires_in: std::time::Duration,
        headers: &LinkHeaders,
    ) -> Result<Option<String>, StoreError> {
        let _ = (key, expires_in, headers);
        Ok(None)
    }

    /// Puts an upload held until a turn attaches it: the store marks it to expire by itself (an
    /// S3 lifecycle rule on its tag), so an upload never attached does not stay. The default is a
    /// plain put.
    async fn put_staged(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        self.put(key, bytes).await
    }

    /// A short-lived link that lets its holder PUT exactly `size` bytes whose SHA-256 is `sha256`
    /// (hex) at `key`, and nothing else: the store refuses another length or other bytes. `None`
    /// when the store makes no links (the in-process one).
    async fn presign_put(
        &self,
        key: &str,
        size: u64,
        sha256: &str,
        expires_in: std::time::Duration,
    ) -> Result<Option<UploadLink>, StoreError> {
        let _ = (key, size, sha256, expires_in);
        Ok(None)
    }
}

/// Sessions keyed by (user, session). Implementations must make `commit` atomic:
/// either the whole turn is stored and the version moves to `expected_version + 1`,
/// or nothing changes.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// The session with the recent part of its history: the turns holding messages at or after
    /// the summary's `covers`, within [`MAX_LOADED_TURNS`] and [`MAX_LOADED_HISTORY_BYTES`].
    async fn load(&self, user: &UserId, session: &SessionId) -> Result<Option<Session>, StoreError>;
    /// The session without its history (`history` empty), and up to `max_turns` stored turns
    /// older than `before` (or the newest), newest first, stopping early once `max_bytes` of
    /// messages were read (never before the first turn); `None` when there is no session.
    async fn history_page(
        &self,
        user: &UserId,
        session: &SessionId,
        before: Option<u64>,
        max_turns: usize,
        max_bytes: usize,
    ) -> Result<Option<(Session, HistoryPage)>, StoreError>;
    async fn commit(&self, user: &UserId, session: &SessionId, commit: &TurnCommit) -> Result<(), StoreError>;
    /// Claims `key` for a turn until `lease_until` (unix seconds), atomically: at most one turn
    /// holds a key at a time, and a committed key answers with its stored reply.
    async fn claim(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        now: i64,
        lease_until: i64,
    ) -> Result<Claim, StoreError>;
    /// Gives up a claim whose turn failed, so a retry can run at once; a no-op when `owner` no
    /// longer holds it. A background turn's record goes back to queued rather than away, so its
    /// poller keeps seeing it pending.
    async fn release(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        owner: &str,
    ) -> Result<(), StoreError>;
    /// Records a background turn under `key` as queued, atomically: a key recorded before with the
    /// same request is left as it is. The record lives until the key's TTL after its last change.
    async fn accept(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        now: i64,
    ) -> Result<Accepted, StoreError>;
    /// Where the turn whose key hashes to `key_hash` stands; `None` when no live record has it.
    async fn turn_status(
        &self,
        user: &UserId,
        session: &SessionId,
        key_hash: &str,
        now: i64,
    ) -> Result<Option<TurnStatus>, StoreError>;
    /// Marks a queued background turn as failed for good with `error`; false (and nothing changes)
    /// unless the key's record is a background turn waiting in the queue.
    async fn fail_queued(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        error: &serde_json::Value,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// Adds what a failed turn spent to the tenant's usage, once per `token`: a retry of this write
    /// with the same token is acknowledged without counting again. Committed turns count through
    /// [`TurnCommit::usage`] instead.
    async fn record_usage(&self, user: &UserId, usage: &TurnUsage, token: &str) -> Result<(), StoreError>;
    /// The tenant's usage from `from` to `to` (`YYYY-MM-DD`, both included), oldest day first; days
    /// without usage are left out.
    async fn usage(&self, user: &UserId, from: &str, to: &str) -> Result<Vec<UsageDay>, StoreError>;
    /// The tokens the tenant used on `day` and its budget override, in one read.
    async fn budget_state(&self, user: &UserId, day: &str) -> Result<BudgetState, StoreError>;
    /// Atomically holds up to `want` of `user`'s `day` for one model call, in the budget's `unit`
    /// (tokens, or money at the price table's prices), so that the day's spent and reserved amount
    /// never passes `budget` by more than the last grant's shortfall: the grant is `want` capped by
    /// what is left; nothing left is a refusal. `seen` is the day's claimed amount as last read (a
    /// hint: a stale one costs a re-read, never a wrong grant). The reservation is released by the
    /// commit or the failed spend that carries it ([`TurnUsage::reserved`],
    /// [`TurnUsage::reserved_cost`]).
    async fn reserve(
        &self,
        user: &UserId,
        day: &str,
        unit: BudgetUnit,
        want: u64,
        budget: u64,
        seen: u64,
    ) -> Result<Reservation, StoreError>;
    /// Up to `limit` (1 to [`MAX_SESSIONS_PAGE`]) of `user`'s live sessions, most recently updated
    /// first (sessions updated in the same second: by session id, descending), starting after
    /// `after`. A store may show a commit in the listing a moment after it was made.
    async fn list_sessions(
        &self,
        user: &UserId,
        after: Option<&SessionCursor>,
        limit: usize,
    ) -> Result<SessionList, StoreError>;
}
