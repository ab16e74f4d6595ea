//! `SessionStore` on one DynamoDB table: a meta item per session plus one item per turn.
//!
//! Layout (key schema `pk` HASH + `sk` RANGE, both strings):
//! - meta: `pk = "{user_id}#{session_id}"`, `sk = "META"`, with `user_id`, `session_id`, `version` (N),
//!   `current_skill` (S or NULL), `loaded_skills` (L of S), `plan` (native M/L/... or NULL),
//!   `workspace` (M: path -> M{`sha256` S, `size` N}), `todos` (L of M), `summary` (M or NULL),
//!   `created_at`, `updated_at`, `expires_at` (N).
//! - turn n: `sk = "TURN#{n:010}"`, with `messages` (S, JSON array of messages) or, above
//!   [`SPILL_THRESHOLD_BYTES`], `messages_ref` (S, object key) and `messages_sha256` (S);
//!   plus `created_at` and `expires_at`.
//!
//! `expires_at` (unix seconds) is the table's TTL attribute. DynamoDB deletes expired items
//! only eventually (and moto never does), so expiry is also enforced on read.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use agent_core::ids::{SessionId, SkillPath, UserId};
use agent_core::keys;
use agent_core::message::Message;
use agent_core::store::{
    Accepted, Claim, HistoryPage, IdempotencyKey, ObjectStore, Session, SessionState, SessionStore, StoreError,
    TurnCommit, TurnStatus, WorkspaceFile,
};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use aws_smithy_types::error::display::DisplayErrorContext;
use sha2::{Digest, Sha256};

use crate::codec::{attr_to_json, json_to_attr, n, s, Item, Reader};

mod history;
mod idempotency;
pub use idempotency::{idempotency_sort_key, IDEMPOTENCY_SORT_KEY_PREFIX, IDEMPOTENCY_TTL_SECS};

/// The sort key of a session's meta item.
pub const META_SORT_KEY: &str = "META";
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
        let bytes = match (reader.opt("messages"), reader.opt("messages_ref")) {
            (Some(AttributeValue::S(json)), _) => json.clone().into_bytes(),
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
                object.bytes
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
    Ok(SessionState {
        current_skill,
        loaded_skills,
        plan,
        workspace,
        todos,
        summary,
        summary_retry_at,
        sandbox_session,
    })
}

impl DynamoSessionStore {
    /// Whether the session's last commit is the one with `token`: tells our own commit, applied by
    /// an attempt whose answer was lost, from a concurrent turn's.
    async fn committed_by(&self, pk: &str, token: &str) -> Result<bool, StoreError> {
        let meta = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(META_SORT_KEY))
            .projection_expression("commit_token")
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| self.backend("GetItem", pk, err))?;
        Ok(meta.item.and_then(|item| item.get("commit_token").cloned()).is_some_and(|stored| stored == s(token)))
    }
}

/// The meta attributes that carry the state, as DynamoDB values.
fn state_attributes(state: &SessionState) -> [(&'static str, AttributeValue); 8] {
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
    [
        ("current_skill", current_skill),
        ("loaded_skills", loaded_skills),
        ("plan", plan),
        ("workspace", workspace),
        ("todos", todos),
        ("summary", summary),
        ("summary_retry_at", state.summary_retry_at.map_or(AttributeValue::Null(true), n)),
        ("sandbox_session", state.sandbox_session.as_deref().map_or(AttributeValue::Null(true), s)),
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
        let pk = partition_key(user, session);
        let version = commit
            .expected_version
            .checked_add(1)
            .ok_or_else(|| StoreError::Backend(format!("session {pk}: version overflow")))?;
        let now = commit.now;
        let expires_at = self.expires_at(now);

        let json = serde_json::to_string(&commit.new_messages)
            .map_err(|err| StoreError::Backend(format!("session {pk}: encoding turn {version}: {err}")))?;
        let mut turn_item: Item = HashMap::from([
            ("pk".to_string(), s(&pk)),
            ("sk".to_string(), s(turn_sort_key(version))),
            ("created_at".to_string(), n(now)),
            ("expires_at".to_string(), n(expires_at)),
            ("message_offset".to_string(), n(commit.history_len)),
        ]);
        if json.len() > SPILL_THRESHOLD_BYTES {
            // Written before the transaction: if the commit then fails, an unreferenced object
            // is left behind, never a turn item pointing at nothing.
            let checksum = sha256_hex(json.as_bytes());
            let key = keys::turn_spill_key(user, session, version, &checksum);
            self.objects.put(&key, json.into_bytes()).await?;
            turn_item.insert("messages_ref".to_string(), s(key));
            turn_item.insert("messages_sha256".to_string(), s(checksum));
        } else {
            turn_item.insert("messages".to_string(), s(json));
        }
        let turn_put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(turn_item))
            .build()
            .map_err(|err| StoreError::Backend(format!("building the turn write: {err}")))?;

        let meta_write = if commit.expected_version == 0 {
            // A new session, or one whose TTL passed but that DynamoDB has not deleted yet.
            let mut meta: Item = HashMap::from([
                ("pk".to_string(), s(&pk)),
                ("sk".to_string(), s(META_SORT_KEY)),
                ("user_id".to_string(), s(user.as_str())),
                ("session_id".to_string(), s(session.as_str())),
                ("version".to_string(), n(version)),
                ("created_at".to_string(), n(now)),
                ("updated_at".to_string(), n(now)),
                ("expires_at".to_string(), n(expires_at)),
                ("commit_token".to_string(), s(&commit.commit_token)),
            ]);
            meta.extend(state_attributes(&commit.state).map(|(name, value)| (name.to_string(), value)));
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(meta))
                .condition_expression("attribute_not_exists(#pk) OR #expires_at < :now")
                .expression_attribute_names("#pk", "pk")
                .expression_attribute_names("#expires_at", "expires_at")
                .expression_attribute_values(":now", n(now))
                .build()
                .map_err(|err| StoreError::Backend(format!("building the meta write: {err}")))?;
            TransactWriteItem::builder().put(put).build()
        } else {
            // An update rather than a put, only so that `created_at` survives: every other
            // attribute is rewritten, so the item ends up exactly as a full put would leave it.
            let mut names = HashMap::new();
            let mut values = HashMap::new();
            let mut sets = Vec::new();
            let attributes = [
                ("user_id", s(user.as_str())),
                ("session_id", s(session.as_str())),
                ("version", n(version)),
                ("updated_at", n(now)),
                ("expires_at", n(expires_at)),
                ("commit_token", s(&commit.commit_token)),
            ]
            .into_iter()
            .chain(state_attributes(&commit.state));
            for (name, value) in attributes {
                names.insert(format!("#{name}"), name.to_string());
                values.insert(format!(":{name}"), value);
                sets.push(format!("#{name} = :{name}"));
            }
            names.insert("#created_at".to_string(), "created_at".to_string());
            sets.push("#created_at = if_not_exists(#created_at, :updated_at)".to_string());
            values.insert(":expected".to_string(), n(commit.expected_version));
            let update = Update::builder()
                .table_name(&self.table)
                .key("pk", s(&pk))
                .key("sk", s(META_SORT_KEY))
                .update_expression(format!("SET {}", sets.join(", ")))
                .condition_expression("#version = :expected")
                .set_expression_attribute_names(Some(names))
                .set_expression_attribute_values(Some(values))
                .build()
                .map_err(|err| StoreError::Backend(format!("building the meta write: {err}")))?;
            TransactWriteItem::builder().update(update).build()
        };

        // The client request token makes an SDK retry of a transaction that did succeed an
        // acknowledged no-op (for ten minutes) instead of a failed condition.
        let mut transaction = self
            .client
            .transact_write_items()
            .client_request_token(&commit.commit_token)
            .transact_items(TransactWriteItem::builder().put(turn_put).build())
            .transact_items(meta_write);
        if let Some(key) = &commit.idempotency {
            let update = idempotency::complete_claim(&self.table, &pk, key, now)?;
            transaction = transaction.transact_items(TransactWriteItem::builder().update(update).build());
        }
        let result = transaction.send().await;
        match result {
            Ok(_) => Ok(()),
            Err(err) => {
                if let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) = err.as_service_error() {
                    let codes: Vec<&str> =
                        cancelled.cancellation_reasons().iter().map(|reason| reason.code().unwrap_or("None")).collect();
                    // `TransactionConflict` means another transaction on this session was in
                    // flight: a concurrent turn, which is what `Conflict` tells the caller.
                    let lost = codes
                        .iter()
                        .any(|code| matches!(*code, "ConditionalCheckFailed" | "TransactionConflict"))
                        || (codes.is_empty()
                            && cancelled.message().is_some_and(|message| message.contains("ConditionalCheckFailed")));
                    if lost && self.committed_by(&pk, &commit.commit_token).await? {
                        // A retry of our own transaction that had already been applied.
                        tracing::info!(pk, "the commit was applied by an earlier attempt of this request");
                        return Ok(());
                    }
                    if lost {
                        tracing::info!(
                            pk,
                            expected_version = commit.expected_version,
                            "commit lost to a concurrent turn"
                        );
                        return Err(StoreError::Conflict);
                    }
                }
                Err(self.backend("TransactWriteItems", &pk, err))
            }
        }
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
        assert!(META_SORT_KEY < TURN_SORT_KEY_PREFIX);
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
