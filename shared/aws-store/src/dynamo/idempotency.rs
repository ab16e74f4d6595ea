//! Idempotency records in the session's partition: claimed with a conditional put when a turn
//! starts, completed inside the turn's commit transaction, released when the turn fails. A
//! background turn's record is written first as queued (`accept`), claimed from the queue, put back
//! to queued when an attempt fails, and marked failed when it fails for good.
//!
//! Item: `pk = "{user_id}#{session_id}"`, `sk = "IDEM#{sha256(key)}"`, with `request_hash` (S),
//! `owner` (S, while running), `status` (S: `queued` | `running` | `committed` | `failed`),
//! `lease_until` (N), `reply` (M, once committed), `error` (M, once failed), `background` (BOOL,
//! background turns only), `created_at` and `expires_at` (N, the table's TTL attribute).

use std::collections::HashMap;

use agent_ports::store::{Accepted, Claim, CommitKey, IdempotencyKey, TurnStatus};
use agent_ports::{SessionId, StoreError, UserId};
use aws_sdk_dynamodb::types::Update;

use super::{partition_key, DynamoSessionStore};
use crate::codec::{attr_to_json, json_to_attr, n, s, Item, Reader};

/// The sort-key prefix of idempotency records.
pub const IDEMPOTENCY_SORT_KEY_PREFIX: &str = "IDEM#";
/// How long a committed key is remembered: a client or queue retrying later than this runs anew.
pub const IDEMPOTENCY_TTL_SECS: i64 = 24 * 60 * 60;

const QUEUED: &str = "queued";
const RUNNING: &str = "running";
const COMMITTED: &str = "committed";
const FAILED: &str = "failed";

/// The sort key of the record for `key`.
pub fn idempotency_sort_key(key: &IdempotencyKey) -> String {
    format!("{IDEMPOTENCY_SORT_KEY_PREFIX}{}", key.key_hash)
}

fn is_condition_failure<E: aws_sdk_dynamodb::error::ProvideErrorMetadata>(err: &E) -> bool {
    err.code() == Some("ConditionalCheckFailedException")
}

impl DynamoSessionStore {
    pub(super) async fn claim_key(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        now: i64,
        lease_until: i64,
    ) -> Result<Claim, StoreError> {
        let pk = partition_key(user, session);
        let sk = idempotency_sort_key(key);
        // A record can vanish between the failed put and the read (its turn was released): try again.
        for _ in 0..3 {
            let owner = hex::encode(rand::random::<[u8; 16]>());
            let item: Item = HashMap::from([
                ("pk".to_string(), s(&pk)),
                ("sk".to_string(), s(&sk)),
                ("request_hash".to_string(), s(&key.request_hash)),
                ("owner".to_string(), s(&owner)),
                ("status".to_string(), s(RUNNING)),
                ("lease_until".to_string(), n(lease_until)),
                ("created_at".to_string(), n(now)),
                ("expires_at".to_string(), n(lease_until.saturating_add(IDEMPOTENCY_TTL_SECS))),
            ]);
            // Free to take: no record, one past its TTL, or a running one whose holder's lease ran
            // out (a killed invocation) for the same request.
            let put = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression(
                    "attribute_not_exists(#pk) OR #expires_at < :now \
                     OR (#status = :running AND #lease_until < :now AND #request_hash = :request_hash \
                         AND attribute_not_exists(#background))",
                )
                .expression_attribute_names("#pk", "pk")
                .expression_attribute_names("#background", "background")
                .expression_attribute_names("#expires_at", "expires_at")
                .expression_attribute_names("#status", "status")
                .expression_attribute_names("#lease_until", "lease_until")
                .expression_attribute_names("#request_hash", "request_hash")
                .expression_attribute_values(":now", n(now))
                .expression_attribute_values(":running", s(RUNNING))
                .expression_attribute_values(":request_hash", s(&key.request_hash))
                .send()
                .await;
            match put {
                Ok(_) => return Ok(Claim::Claimed { owner }),
                Err(err) if err.as_service_error().is_some_and(is_condition_failure) => {}
                Err(err) => return Err(self.backend("PutItem", &pk, err)),
            }
            let found = self
                .client
                .get_item()
                .table_name(&self.table)
                .key("pk", s(&pk))
                .key("sk", s(&sk))
                .consistent_read(true)
                .send()
                .await
                .map_err(|err| self.backend("GetItem", &pk, err))?;
            let Some(item) = found.item else { continue };
            let context = format!("session {pk} {sk}");
            let reader = Reader { item: &item, context: &context };
            if reader.string("request_hash")? != key.request_hash {
                return Ok(Claim::Mismatch);
            }
            // An SDK retry of our own put that had been applied: the claim is ours.
            let held_by = reader.opt("owner").and_then(|held| held.as_s().ok());
            if held_by == Some(&owner) && reader.string("status")? == RUNNING {
                return Ok(Claim::Claimed { owner });
            }
            let status = reader.string("status")?;
            let lapsed = status == RUNNING && reader.int::<i64>("lease_until")? < now;
            match status {
                COMMITTED => return Ok(Claim::Committed { reply: attr_to_json(reader.get("reply")?)? }),
                FAILED => return Ok(Claim::Failed { error: attr_to_json(reader.get("error")?)? }),
                RUNNING if !lapsed => return Ok(Claim::Running),
                // A background turn waiting in the queue, or one whose worker was killed: take it
                // over in place, so the record stays a background turn for its poller.
                QUEUED | RUNNING => {
                    let previous = if lapsed { Some(reader.string("owner")?) } else { None };
                    if self.take_over(&pk, &sk, previous, &owner, now, lease_until).await? {
                        return Ok(Claim::Claimed { owner });
                    }
                }
                other => return Err(StoreError::Corrupt(format!("{context}: unknown status {other:?}"))),
            }
        }
        Err(StoreError::Conflict)
    }

    /// Moves a background record from queued (or from the lapsed claim of `previous`) to running
    /// under `owner`; false when it changed meanwhile.
    async fn take_over(
        &self,
        pk: &str,
        sk: &str,
        previous: Option<&str>,
        owner: &str,
        now: i64,
        lease_until: i64,
    ) -> Result<bool, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .update_expression(
                "SET #status = :running, #owner = :owner, #lease_until = :lease_until, #expires_at = :expires_at",
            )
            .expression_attribute_names("#status", "status")
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_names("#lease_until", "lease_until")
            .expression_attribute_names("#expires_at", "expires_at")
            .expression_attribute_values(":running", s(RUNNING))
            .expression_attribute_values(":owner", s(owner))
            .expression_attribute_values(":lease_until", n(lease_until))
            .expression_attribute_values(":expires_at", n(lease_until.saturating_add(IDEMPOTENCY_TTL_SECS)));
        let update = match previous {
            None => update.condition_expression("#status = :queued").expression_attribute_values(":queued", s(QUEUED)),
            Some(previous) => update
                .condition_expression("#status = :running AND #owner = :previous AND #lease_until < :now")
                .expression_attribute_values(":previous", s(previous))
                .expression_attribute_values(":now", n(now)),
        };
        match update.send().await {
            Ok(_) => Ok(true),
            Err(err) if err.as_service_error().is_some_and(is_condition_failure) => Ok(false),
            Err(err) => Err(self.backend("UpdateItem", pk, err)),
        }
    }

    pub(super) async fn accept_key(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        now: i64,
    ) -> Result<Accepted, StoreError> {
        let pk = partition_key(user, session);
        let sk = idempotency_sort_key(key);
        let item: Item = HashMap::from([
            ("pk".to_string(), s(&pk)),
            ("sk".to_string(), s(&sk)),
            ("request_hash".to_string(), s(&key.request_hash)),
            ("status".to_string(), s(QUEUED)),
            ("background".to_string(), aws_sdk_dynamodb::types::AttributeValue::Bool(true)),
            ("created_at".to_string(), n(now)),
            ("expires_at".to_string(), n(now.saturating_add(IDEMPOTENCY_TTL_SECS))),
        ]);
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#pk) OR #expires_at < :now")
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_names("#expires_at", "expires_at")
            .expression_attribute_values(":now", n(now))
            .send()
            .await;
        match put {
            Ok(_) => return Ok(Accepted::New),
            Err(err) if err.as_service_error().is_some_and(is_condition_failure) => {}
            Err(err) => return Err(self.backend("PutItem", &pk, err)),
        }
        let Some(item) = self.read_key(&pk, &sk).await? else {
            // Released between the put and the read: the client's retry will record it.
            return Ok(Accepted::Existing(TurnStatus::Queued));
        };
        let context = format!("session {pk} {sk}");
        let reader = Reader { item: &item, context: &context };
        if reader.string("request_hash")? != key.request_hash {
            return Ok(Accepted::Mismatch);
        }
        Ok(Accepted::Existing(status_of(&reader)?))
    }

    pub(super) async fn key_status(
        &self,
        user: &UserId,
        session: &SessionId,
        key_hash: &str,
        now: i64,
    ) -> Result<Option<TurnStatus>, StoreError> {
        let pk = partition_key(user, session);
        let sk = format!("{IDEMPOTENCY_SORT_KEY_PREFIX}{key_hash}");
        let Some(item) = self.read_key(&pk, &sk).await? else { return Ok(None) };
        let context = format!("session {pk} {sk}");
        let reader = Reader { item: &item, context: &context };
        // DynamoDB deletes expired items lazily: an expired one is gone already.
        if reader.int::<i64>("expires_at")? < now {
            return Ok(None);
        }
        status_of(&reader).map(Some)
    }

    pub(super) async fn fail_queued_key(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        error: &serde_json::Value,
        now: i64,
    ) -> Result<bool, StoreError> {
        let pk = partition_key(user, session);
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(&pk))
            .key("sk", s(idempotency_sort_key(key)))
            .update_expression("SET #status = :failed, #error = :error, #expires_at = :expires_at")
            .condition_expression("#status = :queued AND #background = :true")
            .expression_attribute_names("#status", "status")
            .expression_attribute_names("#error", "error")
            .expression_attribute_names("#expires_at", "expires_at")
            .expression_attribute_names("#background", "background")
            .expression_attribute_values(":failed", s(FAILED))
            .expression_attribute_values(":queued", s(QUEUED))
            .expression_attribute_values(":true", aws_sdk_dynamodb::types::AttributeValue::Bool(true))
            .expression_attribute_values(":error", json_to_attr(error))
            .expression_attribute_values(":expires_at", n(now.saturating_add(IDEMPOTENCY_TTL_SECS)))
            .send()
            .await;
        match update {
            Ok(_) => Ok(true),
            Err(err) if err.as_service_error().is_some_and(is_condition_failure) => Ok(false),
            Err(err) => Err(self.backend("UpdateItem", &pk, err)),
        }
    }

    async fn read_key(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| self.backend("GetItem", pk, err))?;
        Ok(found.item)
    }

    pub(super) async fn release_key(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        owner: &str,
    ) -> Result<(), StoreError> {
        let pk = partition_key(user, session);
        let deleted = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(&pk))
            .key("sk", s(idempotency_sort_key(key)))
            .condition_expression("#owner = :owner AND #status = :running AND attribute_not_exists(#background)")
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_names("#status", "status")
            .expression_attribute_names("#background", "background")
            .expression_attribute_values(":owner", s(owner))
            .expression_attribute_values(":running", s(RUNNING))
            .send()
            .await;
        match deleted {
            Ok(_) => return Ok(()),
            Err(err) if err.as_service_error().is_some_and(is_condition_failure) => {}
            Err(err) => return Err(self.backend("DeleteItem", &pk, err)),
        }
        // A background turn goes back to queued for the queue's next attempt; otherwise someone
        // else holds the key now, or the turn was committed after all: nothing to give back.
        let requeued = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(&pk))
            .key("sk", s(idempotency_sort_key(key)))
            .update_expression("SET #status = :queued REMOVE #owner, #lease_until")
            .condition_expression("#owner = :owner AND #status = :running AND attribute_exists(#background)")
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_names("#status", "status")
            .expression_attribute_names("#background", "background")
            .expression_attribute_names("#lease_until", "lease_until")
            .expression_attribute_values(":owner", s(owner))
            .expression_attribute_values(":running", s(RUNNING))
            .expression_attribute_values(":queued", s(QUEUED))
            .send()
            .await;
        match requeued {
            Ok(_) => Ok(()),
            Err(err) if err.as_service_error().is_some_and(is_condition_failure) => Ok(()),
            Err(err) => Err(self.backend("UpdateItem", &pk, err)),
        }
    }
}

/// The status a record shows its poller.
fn status_of(reader: &Reader<'_>) -> Result<TurnStatus, StoreError> {
    match reader.string("status")? {
        QUEUED => Ok(TurnStatus::Queued),
        RUNNING => Ok(TurnStatus::Running),
        COMMITTED => Ok(TurnStatus::Committed { reply: attr_to_json(reader.get("reply")?)? }),
        FAILED => Ok(TurnStatus::Failed { error: attr_to_json(reader.get("error")?)? }),
        other => Err(StoreError::Corrupt(format!("{}: unknown status {other:?}", reader.context))),
    }
}

/// The write that completes the claim inside the commit transaction: it fails (and with it the
/// whole commit) unless this turn still holds the claim.
pub(super) fn complete_claim(table: &str, pk: &str, key: &CommitKey, now: i64) -> Result<Update, StoreError> {
    Update::builder()
        .table_name(table)
        .key("pk", s(pk))
        .key("sk", s(idempotency_sort_key(&key.key)))
        .update_expression("SET #status = :committed, #reply = :reply, #expires_at = :expires_at, #updated_at = :now")
        .condition_expression("#owner = :owner AND #status = :running")
        .expression_attribute_names("#status", "status")
        .expression_attribute_names("#reply", "reply")
        .expression_attribute_names("#expires_at", "expires_at")
        .expression_attribute_names("#updated_at", "updated_at")
        .expression_attribute_names("#owner", "owner")
        .expression_attribute_values(":committed", s(COMMITTED))
        .expression_attribute_values(":running", s(RUNNING))
        // A native map: no JSON escaping, so a bounded reply stays inside the 400 KB item limit.
        .expression_attribute_values(":reply", json_to_attr(&key.reply))
        .expression_attribute_values(":expires_at", n(now.saturating_add(IDEMPOTENCY_TTL_SECS)))
        .expression_attribute_values(":now", n(now))
        .expression_attribute_values(":owner", s(&key.owner))
        .build()
        .map_err(|err| StoreError::Backend(format!("building the idempotency write: {err}")))
}
