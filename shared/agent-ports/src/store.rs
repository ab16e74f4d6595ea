//! The storage ports: an object store (skills, tickets, workspace blobs) and a session store.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sha2::Digest;
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
    /// When the object was last written, in unix seconds; `None` when the store does not say.
    pub last_modified: Option<i64>,
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
}

/// The response headers a presigned download is served with (S3's `response-content-type` and
/// `response-content-disposition`, signed into the link); `None` leaves the stored object's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkHeaders {
    pub content_type: Option<String>,
    pub content_disposition: Option<String>,
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
    /// After a summary attempt failed: no new attempt until the history holds this many messages,
    /// so a model that cannot summarise costs one extra call per few turns, not one per turn.
    #[serde(default)]
    pub summary_retry_at: Option<usize>,
    /// The sandbox's own session for this agent session, when its backend keeps one (an AgentCore
    /// code interpreter session), so the next turn's commands reuse it.
    #[serde(default)]
    pub sandbox_session: Option<String>,
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

/// A summary that stands in for the first `covers` messages of the history when prompts are built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistorySummary {
    pub text: String,
    /// How many messages from the start of the whole history (expired turns included) the summary replaces.
    pub covers: usize,
    /// The turn whose first message is message `covers`: lets a store read back exactly the
    /// turns after the summary in one request. Absent in summaries written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_turn: Option<u64>,
}

/// A session as loaded at the start of a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub user_id: UserId,
    pub session_id: SessionId,
    /// Number of committed turns; 0 for a session that does not exist yet.
    pub version: u64,
    /// The recent part of the history a turn needs: every message the summary does not cover
    /// (within the load bounds). Older messages stay in storage; see [`SessionStore::history_page`].
    pub history: Vec<Message>,
    /// The index, in the whole history, of `history[0]`.
    pub history_offset: usize,
    /// The loaded turns: (turn number, index of its first message in the whole history), oldest first.
    pub turn_starts: Vec<(u64, usize)>,
    pub state: SessionState,
    /// Unix seconds of the last commit, 0 for a new session.
    pub updated_at: i64,
}

impl Session {
    pub fn new(user_id: UserId, session_id: SessionId) -> Self {
        Self {
            user_id,
            session_id,
            version: 0,
            history: Vec::new(),
            history_offset: 0,
            turn_starts: Vec::new(),
            state: SessionState::default(),
            updated_at: 0,
        }
    }

    /// Messages in the whole history, stored turns before `history` included.
    pub fn history_end(&self) -> usize {
        self.history_offset + self.history.len()
    }
}

/// Most turns a session load reads back when the summary does not bound it sooner.
pub const MAX_LOADED_TURNS: usize = 200;
/// Most bytes of stored messages a session load reads back (at least one turn is always read).
pub const MAX_LOADED_HISTORY_BYTES: usize = 4 * 1024 * 1024;

/// One page of a session's stored turns, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage {
    /// (turn number, its messages), newest turn first.
    pub turns: Vec<(u64, Vec<Message>)>,
    /// The turn number to pass as `before` for the next (older) page; `None` on the last page.
    pub next_before: Option<u64>,
}

/// A client's idempotency key for one turn (the SQS message id, or the HTTP `Idempotency-Key`
/// header), with a fingerprint of the request it came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    /// A hash of the client's key: fixed length, so any header value makes a valid sort key.
    pub key_hash: String,
    /// A hash of what the turn was asked (message, ticket): the same key with another request is refused.
    pub request_hash: String,
}

impl IdempotencyKey {
    /// Longest key accepted, in bytes (Stripe's and the IETF draft's keys are far shorter).
    pub const MAX_KEY_BYTES: usize = 255;

    /// Validates a client-supplied key: 1 to 255 visible ASCII characters.
    pub fn new(key: &str, request: &[&str]) -> Result<Self, String> {
        if key.is_empty() || key.len() > Self::MAX_KEY_BYTES {
            return Err(format!("the idempotency key must be 1 to {} characters", Self::MAX_KEY_BYTES));
        }
        if !key.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err("the idempotency key must be visible ASCII characters without spaces".to_owned());
        }
        let mut hasher = sha2::Sha256::new();
        for part in request {
            // Length-prefixed so that ("ab", "c") and ("a", "bc") differ.
            hasher.update((part.len() as u64).to_be_bytes());
            hasher.update(part.as_bytes());
        }
        Ok(Self {
            key_hash: hex::encode(sha2::Sha256::digest(key.as_bytes())),
            request_hash: hex::encode(hasher.finalize()),
        })
    }
}

impl IdempotencyKey {
    /// The key of a queued turn, fingerprinted with everything its record asks (user, session,
    /// message, ticket): the queue worker and the HTTP function that enqueues it compute the same.
    pub fn for_queued_turn(
        key: &str,
        user: &UserId,
        session: &SessionId,
        message: &str,
        ticket: Option<&str>,
    ) -> Result<Self, String> {
        Self::new(key, &[user.as_str(), session.as_str(), message, ticket.unwrap_or("")])
    }
}

/// What a claim on an idempotency key found.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// The key is new (or its previous holder's lease ran out): this turn owns it under `owner`.
    Claimed { owner: String },
    /// A turn with this key was committed: its stored reply.
    Committed { reply: serde_json::Value },
    /// A turn with this key is running now.
    Running,
    /// The key was used with a different request.
    Mismatch,
    /// A background turn with this key failed for good: its error, as stored.
    Failed { error: serde_json::Value },
}

/// Where a turn known by its idempotency key stands (the poll of a background turn).
#[derive(Debug, Clone, PartialEq)]
pub enum TurnStatus {
    /// Accepted for the background and waiting in the queue (also between retries).
    Queued,
    /// A worker is running it now.
    Running,
    /// Committed: the reply a synchronous turn would have answered.
    Committed { reply: serde_json::Value },
    /// Failed for good: the error a synchronous turn would have answered.
    Failed { error: serde_json::Value },
}

/// What recording a background turn found.
#[derive(Debug, Clone, PartialEq)]
pub enum Accepted {
    /// The key is new: the turn is recorded as queued.
    New,
    /// The key was recorded before with the same request (a client's retry): where that turn stands.
    Existing(TurnStatus),
    /// The key was used with a different request.
    Mismatch,
}

/// The idempotency record a commit completes: written in the same transaction as the turn.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitKey {
    pub key: IdempotencyKey,
    /// The owner token of the claim; the commit fails if another turn took the claim over.
    pub owner: String,
    /// The reply to replay when the key comes again.
    pub reply: serde_json::Value,
}

/// What a finished turn writes: the turn's messages and the state after cleanup.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnCommit {
    /// The version read at the start of the turn; the write succeeds only if it is still current.
    pub expected_version: u64,
    pub new_messages: Vec<Message>,
    /// Messages the whole history held before this turn: the index of this turn's first message.
    pub history_len: usize,
    pub state: SessionState,
    /// Unix seconds of this commit.
    pub now: i64,
    /// Unique to this turn's attempt: lets the store recognise its own commit when a retried
    /// request finds it already applied, and serves as DynamoDB's `ClientRequestToken`.
    pub commit_token: String,
    /// The idempotency record to complete, when the turn came with a key.
    pub idempotency: Option<CommitKey>,
    /// What the turn spent, added to the tenant's usage in the same atomic write; `None` counts nothing.
    pub usage: Option<TurnUsage>,
}

/// What one model did in one turn (or one day).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Model calls that came back with an answer (and so were paid for).
    pub model_calls: u64,
}

impl ModelUsage {
    pub fn add(&mut self, other: &ModelUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.model_calls += other.model_calls;
    }

    /// Input and output tokens together: what a daily budget counts.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// What one turn spent, to be added to its tenant's usage for one UTC day.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnUsage {
    /// The UTC day the turn started, `YYYY-MM-DD`.
    pub day: String,
    /// Per model id (the configured model, or a request's own model such as the planner's).
    pub models: BTreeMap<String, ModelUsage>,
    /// Commands run in the sandbox, and the time they ran.
    pub executions: u64,
    pub sandbox_ms: u64,
    /// True for a committed turn; false for the spend of a turn that failed after paid model calls.
    pub committed: bool,
    /// The tokens this turn reserved before its model calls (see [`SessionStore::reserve_tokens`]):
    /// this write releases them as it adds what was spent.
    pub reserved: u64,
}

impl TurnUsage {
    /// The day's totals this turn adds.
    pub fn totals(&self) -> UsageCounts {
        let mut model = ModelUsage::default();
        for usage in self.models.values() {
            model.add(usage);
        }
        UsageCounts {
            input_tokens: model.input_tokens,
            output_tokens: model.output_tokens,
            model_calls: model.model_calls,
            executions: self.executions,
            sandbox_ms: self.sandbox_ms,
            turns: u64::from(self.committed),
            // A write that only releases a reservation (the turn failed before any paid call) is
            // no failed turn of the tenant's.
            failed_turns: u64::from(!self.committed && !self.is_empty()),
        }
    }

    /// Whether anything was spent at all.
    pub fn is_empty(&self) -> bool {
        self.models.values().all(|usage| usage.model_calls == 0 && usage.tokens() == 0) && self.executions == 0
    }

    /// Tokens spent, input and output, over every model.
    pub fn tokens(&self) -> u64 {
        self.models.values().map(ModelUsage::tokens).sum()
    }
}

/// A tenant's usage over one UTC day, all models together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageCounts {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub model_calls: u64,
    pub executions: u64,
    pub sandbox_ms: u64,
    /// Committed turns.
    pub turns: u64,
    /// Turns that failed after paid model calls (their spend is counted above).
    pub failed_turns: u64,
}

impl UsageCounts {
    pub fn add(&mut self, other: &UsageCounts) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.model_calls += other.model_calls;
        self.executions += other.executions;
        self.sandbox_ms += other.sandbox_ms;
        self.turns += other.turns;
        self.failed_turns += other.failed_turns;
    }

    /// Input and output tokens together: what a daily budget counts.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// One UTC day of a tenant's usage: the totals and each model's share.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageDay {
    /// `YYYY-MM-DD`.
    pub day: String,
    pub totals: UsageCounts,
    pub models: BTreeMap<String, ModelUsage>,
}

/// A tenant's own daily token budget, set by an operator in the store; it replaces the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetOverride {
    /// No budget for this tenant.
    Unlimited,
    /// At most this many tokens (input and output) a UTC day.
    Tokens(u64),
}

/// What a turn needs to know before it may spend: the tokens the tenant used on the day, and its
/// override, if an operator set one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BudgetState {
    pub used_tokens: u64,
    /// The day's tokens spent and still reserved by running turns, together.
    pub claimed_tokens: u64,
    pub budget: Option<BudgetOverride>,
    /// The operator's budget item exists but is unusable: what is wrong with it. The tenant then
    /// gets the deployment's default budget (never an outage), and the turn reports it.
    pub misconfigured: Option<String>,
}

/// What [`SessionStore::reserve_tokens`] came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// `tokens` (at least 1, at most what was asked) are held for the call; `claimed` is the day's
    /// spent and reserved tokens after this reservation.
    Granted { tokens: u64, claimed: u64 },
    /// Nothing is left of the budget: the day's spent and reserved tokens are `claimed`.
    Refused { claimed: u64 },
}

/// Sessions a listing answers at most in one page.
pub const MAX_SESSIONS_PAGE: usize = 100;

/// Where a listing of a user's sessions goes on: the sort values of the last session it showed.
/// It names no user: the store always lists the caller's own sessions after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCursor {
    pub updated_at: i64,
    pub session_id: SessionId,
}

/// One session as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub session_id: SessionId,
    /// Unix seconds of the first commit and of the last.
    pub created_at: i64,
    pub updated_at: i64,
    /// Number of committed turns.
    pub version: u64,
    /// The first message, as [`crate::message::session_title`] shortens it; `None` for a session
    /// begun before titles were kept.
    pub title: Option<String>,
}

/// One page of a user's sessions, most recently updated first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionList {
    pub sessions: Vec<SessionSummary>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<SessionCursor>,
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
    /// Atomically holds up to `want` tokens of `user`'s `day` for one model call, so that the day's
    /// spent and reserved tokens never pass `budget` by more than the last grant's shortfall: the
    /// grant is `want` capped by what is left; nothing left is a refusal. `seen` is the day's
    /// claimed tokens as last read (a hint: a stale one costs a re-read, never a wrong grant).
    /// The reservation is released by the commit or the failed spend that carries it
    /// ([`TurnUsage::reserved`]).
    async fn reserve_tokens(
        &self,
        user: &UserId,
        day: &str,
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
