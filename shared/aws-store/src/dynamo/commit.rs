//! Committing a turn: one transaction puts the turn item, moves the meta item's version on
//! (conditional on the version the turn read) and completes the idempotency record. A session still
//! in the older layout (meta item at `sk = META`) has its meta item moved to [`META_SORT_KEY`] by the
//! same transaction: a put of the new item and a delete of the old one, conditional on its version.
//! The turn's usage rides in the same transaction (`ADD`s on the tenant's usage items, see `usage`),
//! so it counts exactly when the turn is stored.

use std::collections::HashMap;

use agent_ports::ids::{SessionId, UserId};
use agent_ports::keys;
use agent_ports::message::session_title;
use agent_ports::store::{StoreError, TurnCommit};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};
use sha2::{Digest, Sha256};

use super::usage::{conflict_pause, USAGE_CONFLICT_RETRIES};
use super::{
    idempotency, partition_key, sha256_hex, state_attributes, turn_sort_key, DynamoSessionStore, LEGACY_META_SORT_KEY,
    META_SORT_KEY, OWNER_ATTRIBUTE, SPILL_THRESHOLD_BYTES, TITLE_ATTRIBUTE,
};
use crate::codec::{n, s, Item, Reader};

/// What a transaction came to.
enum Outcome {
    Applied,
    /// A condition failed: another turn moved the session on, or the meta item is not where this
    /// write expected it.
    Lost,
}

/// The client request token of the transaction that moves an older session's meta item: another
/// token than the first attempt's, whose request carried other items.
fn migration_token(token: &str) -> String {
    hex::encode(&Sha256::digest(format!("move-meta:{token}").as_bytes())[..16])
}

impl DynamoSessionStore {
    pub(super) async fn commit_turn(
        &self,
        user: &UserId,
        session: &SessionId,
        commit: &TurnCommit,
    ) -> Result<(), StoreError> {
        let pk = partition_key(user, session);
        let version = commit
            .expected_version
            .checked_add(1)
            .ok_or_else(|| StoreError::Backend(format!("session {pk}: version overflow")))?;
        let turn = self.turn_put(user, session, &pk, version, commit).await?;
        let meta = if commit.expected_version == 0 {
            // A new session, or one whose TTL passed but that DynamoDB has not deleted yet.
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(self.meta_item(user, session, &pk, version, commit, commit.now)))
                .condition_expression("attribute_not_exists(#pk) OR #expires_at < :now")
                .expression_attribute_names("#pk", "pk")
                .expression_attribute_names("#expires_at", "expires_at")
                .expression_attribute_values(":now", n(commit.now))
                .build()
                .map_err(|err| StoreError::Backend(format!("building the meta write: {err}")))?;
            TransactWriteItem::builder().put(put).build()
        } else {
            TransactWriteItem::builder().update(self.meta_update(user, session, &pk, version, commit)?).build()
        };
        if let Outcome::Applied =
            self.transact(user, &pk, commit, vec![turn.clone(), meta], &commit.commit_token).await?
        {
            return Ok(());
        }
        match self.meta_token(&pk).await? {
            Some(token) => self.ours_or_conflict(&pk, commit, &token),
            // No meta item at the new key although the turn read a version: a session still in
            // the older layout, whose meta item this commit moves.
            None if commit.expected_version > 0 => {
                self.commit_moving_meta(user, session, &pk, version, commit, turn).await
            }
            None => Err(StoreError::Conflict),
        }
    }

    /// After a lost transaction, the meta item's commit token says whether our own commit was
    /// applied by an earlier attempt whose answer was lost, or a concurrent turn's.
    fn ours_or_conflict(&self, pk: &str, commit: &TurnCommit, stored: &str) -> Result<(), StoreError> {
        if stored == commit.commit_token {
            tracing::info!(pk, "the commit was applied by an earlier attempt of this request");
            return Ok(());
        }
        tracing::info!(pk, expected_version = commit.expected_version, "commit lost to a concurrent turn");
        Err(StoreError::Conflict)
    }

    /// The commit of a session whose meta item is still at [`LEGACY_META_SORT_KEY`].
    async fn commit_moving_meta(
        &self,
        user: &UserId,
        session: &SessionId,
        pk: &str,
        version: u64,
        commit: &TurnCommit,
        turn: TransactWriteItem,
    ) -> Result<(), StoreError> {
        let Some(legacy) = self.legacy_meta(pk).await? else { return Err(StoreError::Conflict) };
        let context = format!("session {pk} {LEGACY_META_SORT_KEY}");
        let reader = Reader { item: &legacy, context: &context };
        if reader.int::<u64>("version")? != commit.expected_version || reader.int::<i64>("expires_at")? < commit.now {
            tracing::info!(pk, expected_version = commit.expected_version, "commit lost to a concurrent turn");
            return Err(StoreError::Conflict);
        }
        let created_at = reader.int::<i64>("created_at").unwrap_or(commit.now);
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(self.meta_item(user, session, pk, version, commit, created_at)))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", "pk")
            .build()
            .map_err(|err| StoreError::Backend(format!("building the meta write: {err}")))?;
        let delete = Delete::builder()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(LEGACY_META_SORT_KEY))
            .condition_expression("#version = :expected")
            .expression_attribute_names("#version", "version")
            .expression_attribute_values(":expected", n(commit.expected_version))
            .build()
            .map_err(|err| StoreError::Backend(format!("building the old meta item's delete: {err}")))?;
        let items = vec![
            turn,
            TransactWriteItem::builder().put(put).build(),
            TransactWriteItem::builder().delete(delete).build(),
        ];
        match self.transact(user, pk, commit, items, &migration_token(&commit.commit_token)).await? {
            Outcome::Applied => {
                tracing::info!(pk, version, "moved the session's meta item to the current layout");
                Ok(())
            }
            Outcome::Lost => match self.meta_token(pk).await? {
                Some(token) => self.ours_or_conflict(pk, commit, &token),
                None => Err(StoreError::Conflict),
            },
        }
    }

    /// The turn item, with its messages inline or, over [`SPILL_THRESHOLD_BYTES`], in the object store.
    async fn turn_put(
        &self,
        user: &UserId,
        session: &SessionId,
        pk: &str,
        version: u64,
        commit: &TurnCommit,
    ) -> Result<TransactWriteItem, StoreError> {
        let json = serde_json::to_string(&commit.new_messages)
            .map_err(|err| StoreError::Backend(format!("session {pk}: encoding turn {version}: {err}")))?;
        let mut item: Item = HashMap::from([
            ("pk".to_string(), s(pk)),
            ("sk".to_string(), s(turn_sort_key(version))),
            ("created_at".to_string(), n(commit.now)),
            ("expires_at".to_string(), n(self.expires_at(commit.now))),
            ("message_offset".to_string(), n(commit.history_len)),
        ]);
        if !commit.skill_versions.is_empty() {
            let versions = serde_json::to_string(&commit.skill_versions)
                .map_err(|err| StoreError::Backend(format!("session {pk}: encoding turn {version}'s skills: {err}")))?;
            item.insert("skill_versions".to_string(), s(versions));
        }
        if json.len() > SPILL_THRESHOLD_BYTES {
            // Written before the transaction: if the commit then fails, an unreferenced object
            // is left behind, never a turn item pointing at nothing.
            let checksum = sha256_hex(json.as_bytes());
            let key = keys::turn_spill_key(user, session, version, &checksum);
            self.objects.put(&key, json.into_bytes()).await?;
            item.insert("messages_ref".to_string(), s(key));
            item.insert("messages_sha256".to_string(), s(checksum));
        } else {
            item.insert("messages".to_string(), s(json));
        }
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .build()
            .map_err(|err| StoreError::Backend(format!("building the turn write: {err}")))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// The whole meta item at [`META_SORT_KEY`] after this commit.
    fn meta_item(
        &self,
        user: &UserId,
        session: &SessionId,
        pk: &str,
        version: u64,
        commit: &TurnCommit,
        created_at: i64,
    ) -> Item {
        let mut meta: Item = HashMap::from([
            ("pk".to_string(), s(pk)),
            ("sk".to_string(), s(META_SORT_KEY)),
            ("user_id".to_string(), s(user.as_str())),
            // Only meta items carry it: the sparse index of a user's sessions.
            (OWNER_ATTRIBUTE.to_string(), s(user.as_str())),
            ("session_id".to_string(), s(session.as_str())),
            ("version".to_string(), n(version)),
            ("created_at".to_string(), n(created_at)),
            ("updated_at".to_string(), n(commit.now)),
            ("expires_at".to_string(), n(self.expires_at(commit.now))),
            ("commit_token".to_string(), s(&commit.commit_token)),
        ]);
        meta.extend(state_attributes(&commit.state).map(|(name, value)| (name.to_string(), value)));
        // Only a session's first turn names it; a moved older session keeps none.
        if let Some(title) = session_title(&commit.new_messages).filter(|_| commit.expected_version == 0) {
            meta.insert(TITLE_ATTRIBUTE.to_string(), s(title));
        }
        meta
    }

    /// The meta item's update from the version the turn read. An update rather than a put, only so
    /// that `created_at` and the title survive: every other attribute is rewritten, so the item ends
    /// up exactly as a full put would leave it.
    fn meta_update(
        &self,
        user: &UserId,
        session: &SessionId,
        pk: &str,
        version: u64,
        commit: &TurnCommit,
    ) -> Result<Update, StoreError> {
        let mut names = HashMap::new();
        let mut values = HashMap::new();
        let mut sets = Vec::new();
        let attributes = [
            ("user_id", s(user.as_str())),
            // Also on sessions written before the index existed: they are listed from this turn on.
            (OWNER_ATTRIBUTE, s(user.as_str())),
            ("session_id", s(session.as_str())),
            ("version", n(version)),
            ("updated_at", n(commit.now)),
            ("expires_at", n(self.expires_at(commit.now))),
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
        Update::builder()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(META_SORT_KEY))
            .update_expression(format!("SET {}", sets.join(", ")))
            .condition_expression("#version = :expected")
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .build()
            .map_err(|err| StoreError::Backend(format!("building the meta write: {err}")))
    }

    /// One TransactWriteItems of `items` plus the idempotency record's completion and the turn's
    /// usage. The client request token makes an SDK retry of a transaction that did succeed an
    /// acknowledged no-op (for ten minutes) instead of a failed condition.
    async fn transact(
        &self,
        user: &UserId,
        pk: &str,
        commit: &TurnCommit,
        mut items: Vec<TransactWriteItem>,
        token: &str,
    ) -> Result<Outcome, StoreError> {
        if let Some(key) = &commit.idempotency {
            let update = idempotency::complete_claim(&self.table, pk, key, commit.now)?;
            items.push(TransactWriteItem::builder().update(update).build());
        }
        // The session's own items come first: a cancellation reason at or after this index is about
        // the tenant's usage.
        let session_items = items.len();
        if let Some(usage) = &commit.usage {
            items.extend(self.usage_updates(user, usage, commit.now)?);
        }
        let mut attempt = 0;
        loop {
            let sent =
                self.client.transact_write_items().client_request_token(token).set_transact_items(Some(items.clone()));
            let err = match sent.send().await {
                Ok(_) => return Ok(Outcome::Applied),
                Err(err) => err,
            };
            if let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) = err.as_service_error() {
                let codes: Vec<&str> =
                    cancelled.cancellation_reasons().iter().map(|reason| reason.code().unwrap_or("None")).collect();
                // `TransactionConflict` on a session item means another transaction on this session
                // was in flight: a concurrent turn, which is what `Conflict` tells the caller.
                let lost = codes
                    .iter()
                    .take(session_items)
                    .any(|code| matches!(*code, "ConditionalCheckFailed" | "TransactionConflict"))
                    || (codes.is_empty()
                        && cancelled.message().is_some_and(|message| message.contains("ConditionalCheckFailed")));
                if lost {
                    return Ok(Outcome::Lost);
                }
                // Only a usage item was held, by a turn of another of the tenant's sessions: nothing
                // was applied, so the same transaction is sent again.
                let usage_busy = codes.iter().skip(session_items).any(|code| *code == "TransactionConflict");
                if usage_busy && attempt < USAGE_CONFLICT_RETRIES {
                    attempt += 1;
                    tracing::info!(pk, attempt, "the tenant's usage item was busy; sending the commit again");
                    conflict_pause(attempt).await;
                    continue;
                }
            }
            return Err(self.backend("TransactWriteItems", pk, err));
        }
    }

    /// The commit token of the meta item at [`META_SORT_KEY`] (empty when it has none), or `None`
    /// when there is no such item.
    async fn meta_token(&self, pk: &str) -> Result<Option<String>, StoreError> {
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
        Ok(meta.item.map(|item| match item.get("commit_token") {
            Some(AttributeValue::S(token)) => token.clone(),
            _ => String::new(),
        }))
    }

    /// The meta item at [`LEGACY_META_SORT_KEY`], if the session still has one.
    pub(super) async fn legacy_meta(&self, pk: &str) -> Result<Option<Item>, StoreError> {
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(LEGACY_META_SORT_KEY))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| self.backend("GetItem", pk, err))?;
        Ok(found.item)
    }
}
