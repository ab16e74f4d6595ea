//! `SessionStore` on one DynamoDB table: a meta item per session plus one item per turn.
//!
//! Layout (key schema `pk` HASH + `sk` RANGE, both strings):
//! - meta: `pk = "{user_id}#{session_id}"`, `sk = "TURN#META"` ([`META_SORT_KEY`]), which sorts after
//!   every turn item, so one descending Query reads the meta item and then the newest turns; with
//!   `user_id`, `session_id`, `version` (N),
//!   `current_skill` (S or NULL), `loaded_skills` (L of S), `plan` (native M/L/... or NULL),
//!   `workspace` (M: path -> M{`sha256` S, `size` N}), `todos` (L of M), `summary` (M or NULL),
//!   `created_at`, `updated_at`, `expires_at` (N), and `owner` (S, the user id again: the partition
//!   key of the sparse index that lists a user's sessions, see `listing`), and `title` (S, written by
//!   the session's first turn).
//! - turn n: `sk = "TURN#{n:010}"`, with `messages` (S, JSON array of messages) or, above
//!   [`SPILL_THRESHOLD_BYTES`], `messages_ref` (S, object key) and `messages_sha256` (S);
//!   plus `created_at` and `expires_at`.
//!
//! Sessions written before that layout keep their meta item at `sk = "META"`
//! ([`LEGACY_META_SORT_KEY`]): they are read with one more GetItem, and their next commit moves the
//! meta item to the new key in the same transaction (a put of the new item and a delete of the old
//! one, conditional on its version).
//!
//! A tenant's usage and its daily token budget live in a partition of their own,
//! `pk = "{user_id}#@usage"` (see `usage`).
//!
//! `expires_at` (unix seconds) is the table's TTL attribute. DynamoDB deletes expired items
//! only eventually (and moto never does), so expiry is also enforced on read.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use agent_ports::ids::{SessionId, SkillPath, UserId};
use agent_ports::message::Message;
use agent_ports::store::{
    Accepted, BudgetState, Claim, HistoryPage, IdempotencyKey, ObjectStore, Session, SessionCursor, SessionList,
    SessionState, SessionStore, StoreError, TurnCommit, TurnStatus, TurnUsage, UsageDay, WorkspaceFile,
};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use aws_smithy_types::error::display::DisplayErrorContext;
use sha2::{Digest, Sha256};

use crate::codec::{attr_to_json, json_to_attr, n, s, Item, Reader};

mod commit;
mod history;
mod idempotency;
mod listing;
mod usage;
pub use idempotency::{idempotency_sort_key, IDEMPOTENCY_SORT_KEY_PREFIX, IDEMPOTENCY_TTL_SECS};
pub use listing::{OWNER_ATTRIBUTE, SESSIONS_BY_USER_INDEX, TITLE_ATTRIBUTE};
pub use usage::{
    usage_day_sort_key, usage_partition_key, BUDGET_SORT_KEY, USAGE_DAY_PREFIX, USAGE_PARTITION_SUFFIX,
    USAGE_RETENTION_DAYS,
};

/// The sort key of a session's meta item: after every `TURN#{n:010}` (a letter sorts after the
/// digits), so a descending Query of the turns starts at it.
pub const META_SORT_KEY: &str = "TURN#META";
/// Where sessions written before [`META_SORT_KEY`] keep their meta item.
pub const LEGACY_META_SORT_KEY: &str = "META";
/// The sort-key prefix of turn items.
pub const TURN_SORT_KEY_PREFIX: &str = "TURN#";
/// A turn whose JSON is larger than this goes to the object store: DynamoDB items are capped
/// at 400 KB, and the rest of the item plus attribute names need some headroom.
pub const SPILL_THRESHOLD_BYTES: usize = 300_000;

const SECONDS_PER_DAY: i64 = 86_400;

/// The partition key of a session. Ids never contain `#`, so the pair is unambiguous.
pub fn partition_key(user: &UserId, session: &SessionId) -> String {
    format!("{user}#{session}")
}

/// The sort key of turn `n`; zero-padded so the sort order is the turn order.
pub fn turn_sort_key(turn: u64) -> String {
    format!("{TURN_SORT_KEY_PREFIX}{turn:010}")
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Sessions in a DynamoDB table, with oversized turns spilled to an object store.
#[derive(Clone)]
pub struct DynamoSessionStore {
    client: Client,
    table: String,
    objects: Arc<dyn ObjectStore>,
    ttl_days: u32,
}

impl std::fmt::Debug for DynamoSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamoSessionStore").field("table", &self.table).field("ttl_days", &self.ttl_days).finish()
    }
}

impl DynamoSessionStore {
    pub fn new(client: Client, table: impl Into<String>, objects: Arc<dyn ObjectStore>, ttl_days: u32) -> Self {
        Self { client, table: table.into(), objects, ttl_days }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn ttl_days(&self) -> u32 {
        self.ttl_days
    }

    fn expires_at(&self, now: i64) -> i64 {
        now.saturating_add(i64::from(self.ttl_days) * SECONDS_PER_DAY)
    }

    fn backend<E, R>(&self, operation: &str, pk: &str, err: SdkError<E, R>) -> StoreError
    where
        E: std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        let message = format!("DynamoDB {operation} on table {} (pk {pk}): {}", self.table, DisplayErrorContext(&err));
        tracing::warn!(operation, table = %self.table, pk, error = %message, "DynamoDB request failed");
        StoreError::Backend(message)
    }

    /// The messages of one turn item, following a spill reference when there is one.
    async fn turn_messages(
        &self,
        user: &UserId,
        session: &SessionId,
        turn: u64,
        item: &Item,
    ) -> Result<Vec<Message>, StoreError> {
        let context = format!("session {} turn {turn}", partition_key(user, session));
        let reader = Reader { item, context: &context };
        // Inline messages are decoded where the item holds them, not from a copy.
        let bytes: Cow<'_, [u8]> = match (reader.opt("messages"), reader.opt("messages_ref")) {
            (Some(AttributeValue::S(json)), _) => Cow::Borrowed(json.as_bytes()),
            (_, Some(AttributeValue::S(key))) => {
                // The reference must stay inside this session's own prefix, whatever the item says.
                let session_prefix = format!("{user}/sessions/{session}/");
                if !key.starts_with(&session_prefix) {
                    return Err(StoreError::Corrupt(format!(
                        "{context}: spill reference {key:?} is outside the session"
                    )));
                }
                let object =
                    self.objects.get(key).await?.ok_or_else(|| {
                        StoreError::Corrupt(format!("{context}: spilled messages {key:?} are missing"))
                    })?;
                if let Some(expected) = reader.nullable_string("messages_sha256")? {
                    // A concurrent loser may have overwritten the object before its commit failed.
                    if sha256_hex(&object.bytes) != expected {
                        return Err(StoreError::Corrupt(format!(
                            "{context}: spilled messages {key:?} do not match their checksum"
                        )));
                    }
                }
                Cow::Owned(object.bytes)
            }
            _ => return Err(StoreError::Corrupt(format!("{context}: neither messages nor messages_ref"))),
        };
        serde_json::from_slice(&bytes)
            .map_err(|err| StoreError::Corrupt(format!("{context}: messages do not decode: {err}")))
    }
}

fn decode_state(reader: &Reader<'_>) -> Result<SessionState, StoreError> {
    let context = reader.context;
    let current_skill = reader
        .nullable_string("current_skill")?
        .map(SkillPath::parse)
        .transpose()
        .map_err(|err| StoreError::Corrupt(format!("{context}: current_skill: {err}")))?;
    let loaded_skills = reader
        .list("loaded_skills")?
        .iter()
        .map(|value| {
            let text = value
                .as_s()
                .map_err(|_| StoreError::Corrupt(format!("{context}: loaded_skills holds a non-string")))?;
            SkillPath::parse(text).map_err(|err| StoreError::Corrupt(format!("{context}: loaded_skills: {err}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let plan = match reader.opt("plan") {
        None | Some(AttributeValue::Null(_)) => None,
        Some(value) => Some(attr_to_json(value)?),
    };
    let mut workspace = BTreeMap::new();
    for (path, value) in reader.map("workspace")? {
        let file_context = format!("{context}: workspace file {path:?}");
        let file = value.as_m().map_err(|_| StoreError::Corrupt(format!("{file_context} is not a map")))?;
        let file_reader = Reader { item: file, context: &file_context };
        workspace.insert(
            path.clone(),
            WorkspaceFile { sha256: file_reader.string("sha256")?.to_string(), size: file_reader.int("size")? },
        );
    }
    // Older items have neither attribute; both default to empty.
    let todos = match reader.opt("todos") {
        None | Some(AttributeValue::Null(_)) => Vec::new(),
        Some(value) => serde_json::from_value(attr_to_json(value)?)
            .map_err(|err| StoreError::Corrupt(format!("{context}: todos: {err}")))?,
    };
    let summary = match reader.opt("summary") {
        None | Some(AttributeValue::Null(_)) => None,
        Some(value) => Some(
            serde_json::from_value(attr_to_json(value)?)
                .map_err(|err| StoreError::Corrupt(format!("{context}: summary: {err}")))?,
        ),
    };
    let summary_retry_at = match reader.opt("summary_retry_at") {
        None | Some(AttributeValue::Null(_)) => None,
        Some(_) => Some(reader.int::<usize>("summary_retry_at")?),
    };
    let sandbox_session = match reader.opt("sandbox_session") {
        None | Some(AttributeValue::Null(_)) => None,
        Some(_) => Some(reader.string("sandbox_session")?.to_owned()),
    };
    let pending_approval = match reader.opt("pending_approval") {
        None | Some(AttributeValue::Null(_)) => None,
        Some(value) => Some(
            serde_json::from_value(attr_to_json(value)?)
                .map_err(|err| StoreError::Corrupt(format!("{context}: pending_approval: {err}")))?,
        ),
    };
    Ok(SessionState {
        current_skill,
        loaded_skills,
        plan,
        workspace,
        todos,
        summary,
        summary_retry_at,
        sandbox_session,
        pending_approval,
    })
}

/// The meta attributes that carry the state, as DynamoDB values.
fn state_attributes(state: &SessionState) -> [(&'static str, AttributeValue); 9] {
    let current_skill = match &state.current_skill {
        Some(skill) => s(skill.to_string()),
        None => AttributeValue::Null(true),
    };
    let loaded_skills = AttributeValue::L(state.loaded_skills.iter().map(|skill| s(skill.to_string())).collect());
    let plan = state.plan.as_ref().map(json_to_attr).unwrap_or(AttributeValue::Null(true));
    let workspace = AttributeValue::M(
        state
            .workspace
            .iter()
            .map(|(path, file)| {
                let entry =
                    HashMap::from([("sha256".to_string(), s(&file.sha256)), ("size".to_string(), n(file.size))]);
                (path.clone(), AttributeValue::M(entry))
            })
            .collect(),
    );
    let todos = json_to_attr(&serde_json::to_value(&state.todos).expect("todos serialise"));
    let summary = match &state.summary {
        Some(summary) => json_to_attr(&serde_json::to_value(summary).expect("summary serialises")),
        None => AttributeValue::Null(true),
    };
    let pending_approval = match &state.pending_approval {
        Some(pending) => json_to_attr(&serde_json::to_value(pending).expect("a pending approval serialises")),
        None => AttributeValue::Null(true),
    };
    [
        ("current_skill", current_skill),
        ("loaded_skills", loaded_skills),
        ("plan", plan),
        ("workspace", workspace),
        ("todos", todos),
        ("summary", summary),
        ("summary_retry_at", state.summary_retry_at.map_or(AttributeValue::Null(true), n)),
        ("sandbox_session", state.sandbox_session.as_deref().map_or(AttributeValue::Null(true), s)),
        ("pending_approval", pending_approval),
    ]
}

#[async_trait]
impl SessionStore for DynamoSessionStore {
    async fn load(&self, user: &UserId, session: &SessionId) -> Result<Option<Session>, StoreError> {
        self.load_recent(user, session).await
    }

    async fn history_page(
        &self,
        user: &UserId,
        session: &SessionId,
        before: Option<u64>,
        max_turns: usize,
        max_bytes: usize,
    ) -> Result<Option<(Session, HistoryPage)>, StoreError> {
        self.page(user, session, before, max_turns, max_bytes).await
    }

    async fn claim(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        now: i64,
        lease_until: i64,
    ) -> Result<Claim, StoreError> {
        self.claim_key(user, session, key, now, lease_until).await
    }

    async fn release(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        owner: &str,
    ) -> Result<(), StoreError> {
        self.release_key(user, session, key, owner).await
    }

    async fn accept(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        now: i64,
    ) -> Result<Accepted, StoreError> {
        self.accept_key(user, session, key, now).await
    }

    async fn turn_status(
        &self,
        user: &UserId,
        session: &SessionId,
        key_hash: &str,
        now: i64,
    ) -> Result<Option<TurnStatus>, StoreError> {
        self.key_status(user, session, key_hash, now).await
    }

    async fn fail_queued(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        error: &serde_json::Value,
        now: i64,
    ) -> Result<bool, StoreError> {
        self.fail_queued_key(user, session, key, error, now).await
    }

    async fn commit(&self, user: &UserId, session: &SessionId, commit: &TurnCommit) -> Result<(), StoreError> {
        self.commit_turn(user, session, commit).await
    }

    async fn record_usage(&self, user: &UserId, usage: &TurnUsage, token: &str) -> Result<(), StoreError> {
        self.record_spend(user, usage, token).await
    }

    async fn usage(&self, user: &UserId, from: &str, to: &str) -> Result<Vec<UsageDay>, StoreError> {
        self.usage_days(user, from, to).await
    }

    async fn budget_state(&self, user: &UserId, day: &str) -> Result<BudgetState, StoreError> {
        self.day_budget(user, day).await
    }

    async fn reserve(
        &self,
        user: &UserId,
        day: &str,
        unit: agent_ports::store::BudgetUnit,
        want: u64,
        budget: u64,
        seen: u64,
    ) -> Result<agent_ports::store::Reservation, StoreError> {
        self.reserve_of(user, day, unit, want, budget, seen).await
    }

    /// Sessions whose meta item was last written before [`OWNER_ATTRIBUTE`] existed are not
    /// listed until their next turn writes it.
    async fn list_sessions(
        &self,
        user: &UserId,
        after: Option<&SessionCursor>,
        limit: usize,
    ) -> Result<SessionList, StoreError> {
        self.sessions_of(user, after, limit).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_documented_layout() {
        let user = UserId::parse("auth0|42").unwrap();
        let session = SessionId::parse("s-1").unwrap();
        assert_eq!(partition_key(&user, &session), "auth0|42#s-1");
        assert_eq!(turn_sort_key(7), "TURN#0000000007");
        assert!(turn_sort_key(9) < turn_sort_key(10));
        assert!(turn_sort_key(9_999_999_999).as_str() < META_SORT_KEY, "the meta item sorts after every turn");
        assert!(META_SORT_KEY.starts_with(TURN_SORT_KEY_PREFIX));
    }

    #[test]
    fn state_is_stored_as_native_attributes() {
        let mut state = SessionState { plan: Some(serde_json::json!({"steps": [1, 2]})), ..Default::default() };
        state.workspace.insert("a.txt".into(), WorkspaceFile { sha256: "ab".into(), size: 3 });
        let item: Item = state_attributes(&state).into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        assert_eq!(item["current_skill"], AttributeValue::Null(true));
        assert!(matches!(&item["plan"], AttributeValue::M(_)));
        let decoded = decode_state(&Reader { item: &item, context: "test" }).unwrap();
        assert_eq!(decoded, state);
    }
}
