//! The writes of what a turn spent: the `ADD`s to the day's totals and to each model's share, in
//! the turn's commit transaction or, for a failed turn, in a transaction of their own.

use agent_ports::store::TurnUsage;
use agent_ports::{StoreError, UserId};
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};

use super::{
    conflict_pause, expires_at, is_transaction_conflict, model_sort_key, usage_day_sort_key, usage_partition_key,
    USAGE_CONFLICT_RETRIES,
};
use crate::codec::{n, s};
use crate::dynamo::DynamoSessionStore;

fn build_error(err: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("building the usage write: {err}"))
}

impl DynamoSessionStore {
    /// The `ADD`s of one turn's usage: the day's totals, and one item per model.
    pub(in crate::dynamo) fn usage_updates(
        &self,
        user: &UserId,
        usage: &TurnUsage,
        now: i64,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let pk = usage_partition_key(user);
        let expires = expires_at(&usage.day, now);
        let totals = usage.totals();
        let mut updates = Vec::with_capacity(1 + usage.models.len());
        // What was spent replaces what was reserved: `claimed` moves by the difference.
        let claimed = i128::from(totals.tokens()) - i128::from(usage.reserved);
        let release = if usage.reserved > 0 { ", reserved :release" } else { "" };
        let mut day = Update::builder()
            .table_name(&self.table)
            .key("pk", s(&pk))
            .key("sk", s(usage_day_sort_key(&usage.day)))
            .update_expression(format!(
                "ADD input_tokens :input, output_tokens :output, tokens :tokens, model_calls :calls, \
                 executions :executions, sandbox_ms :sandbox_ms, turns :turns, failed_turns :failed, \
                 claimed :claimed{release} SET #day = :day, expires_at = :expires",
            ))
            .expression_attribute_values(":claimed", n(claimed))
            .expression_attribute_names("#day", "day")
            .expression_attribute_values(":input", n(totals.input_tokens))
            .expression_attribute_values(":output", n(totals.output_tokens))
            .expression_attribute_values(":tokens", n(totals.tokens()))
            .expression_attribute_values(":calls", n(totals.model_calls))
            .expression_attribute_values(":executions", n(totals.executions))
            .expression_attribute_values(":sandbox_ms", n(totals.sandbox_ms))
            .expression_attribute_values(":turns", n(totals.turns))
            .expression_attribute_values(":failed", n(totals.failed_turns))
            .expression_attribute_values(":day", s(&usage.day))
            .expression_attribute_values(":expires", n(expires));
        if usage.reserved > 0 {
            day = day.expression_attribute_values(":release", n(-i128::from(usage.reserved)));
        }
        let day = day.build().map_err(build_error)?;
        updates.push(TransactWriteItem::builder().update(day).build());
        for (model, spent) in &usage.models {
            let update = Update::builder()
                .table_name(&self.table)
                .key("pk", s(&pk))
                .key("sk", s(model_sort_key(&usage.day, model)))
                .update_expression(
                    "ADD input_tokens :input, output_tokens :output, model_calls :calls \
                     SET #day = :day, #model = :model, expires_at = :expires",
                )
                .expression_attribute_names("#day", "day")
                .expression_attribute_names("#model", "model")
                .expression_attribute_values(":input", n(spent.input_tokens))
                .expression_attribute_values(":output", n(spent.output_tokens))
                .expression_attribute_values(":calls", n(spent.model_calls))
                .expression_attribute_values(":day", s(&usage.day))
                .expression_attribute_values(":model", s(model))
                .expression_attribute_values(":expires", n(expires))
                .build()
                .map_err(build_error)?;
            updates.push(TransactWriteItem::builder().update(update).build());
        }
        Ok(updates)
    }

    /// A failed turn's spend: the same `ADD`s in a transaction of their own, whose client request
    /// token makes an SDK retry of a write that did succeed a no-op.
    pub(in crate::dynamo) async fn record_spend(
        &self,
        user: &UserId,
        usage: &TurnUsage,
        token: &str,
    ) -> Result<(), StoreError> {
        let pk = usage_partition_key(user);
        let items = self.usage_updates(user, usage, crate::dynamo::unix_now())?;
        let mut attempt = 0;
        loop {
            let sent = self
                .client
                .transact_write_items()
                .client_request_token(token)
                .set_transact_items(Some(items.clone()))
                .send()
                .await;
            match sent {
                Ok(_) => return Ok(()),
                Err(err) if attempt < USAGE_CONFLICT_RETRIES && is_transaction_conflict(&err) => {
                    attempt += 1;
                    conflict_pause(attempt).await;
                }
                Err(err) => return Err(self.backend("TransactWriteItems", &pk, err)),
            }
        }
    }
}
