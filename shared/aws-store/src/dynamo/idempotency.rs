//! Idempotency records in the session's partition: claimed with a conditional put when a turn
//! starts, completed inside the turn's commit transaction, released when the turn fails.
//!
//! Item: `pk = "{user_id}#{session_id}"`, `sk = "IDEM#{sha256(key)}"`, with `request_hash` (S),
//! `owner` (S), `status` (S: `running` | `committed`), `lease_until` (N), `reply` (M, once
//! committed), `created_at` and `expires_at` (N, the table's TTL attribute).

use std::collections::HashMap;

use agent_core::store::{Claim, CommitKey, IdempotencyKey};
use agent_core::{SessionId, StoreError, UserId};
use aws_sdk_dynamodb::types::Update;

use super::{partition_key, DynamoSessionStore};
use crate::codec::{attr_to_json, json_to_attr, n, s, Item, Reader};

/// The sort-key prefix of idempotency records.
pub const IDEMPOTENCY_SORT_KEY_PREFIX: &str = "IDEM#";
/// How long a committed key is remembered: a client or queue retrying later than this runs anew.
pub const IDEMPOTENCY_TTL_SECS: i64 = 24 * 60 * 60;

const RUNNING: &str = "running";
const COMMITTED: &str = "committed";

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
                     OR (#status = :running AND #lease_until < :now AND #request_hash = :request_hash)",
                )
                .expression_attribute_names("#pk", "pk")
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
            if reader.string("owner")? == owner && reader.string("status")? == RUNNING {
                return Ok(Claim::Claimed { owner });
            }
            return match reader.string("status")? {
                COMMITTED => Ok(Claim::Committed { reply: attr_to_json(reader.get("reply")?)? }),
                RUNNING => Ok(Claim::Running),
                other => Err(StoreError::Corrupt(format!("{context}: unknown status {other:?}"))),
            };
        }
        Err(StoreError::Conflict)
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
            .condition_expression("#owner = :owner AND #status = :running")
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":owner", s(owner))
            .expression_attribute_values(":running", s(RUNNING))
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(()),
            // Someone else holds it now, or the turn was committed after all: nothing to give back.
            Err(err) if err.as_service_error().is_some_and(is_condition_failure) => Ok(()),
            Err(err) => Err(self.backend("DeleteItem", &pk, err)),
        }
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
