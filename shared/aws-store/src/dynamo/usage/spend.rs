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

/// `ADD a :a, b :b, ...` of `adds`' counters.
fn add_clause(adds: &[(&str, i128)]) -> String {
    let terms: Vec<String> = adds.iter().map(|(name, _)| format!("{name} :{name}")).collect();
    format!("ADD {}", terms.join(", "))
}

/// An update of one usage item with the values of `adds` bound.
fn adding(
    table: &str,
    pk: &str,
    sk: String,
    adds: &[(&str, i128)],
) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
    let mut update = Update::builder().table_name(table).key("pk", s(pk)).key("sk", s(sk));
    for (name, value) in adds {
        update = update.expression_attribute_values(format!(":{name}"), n(*value));
    }
    update
}

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
        // What was spent replaces what was reserved: each claimed counter moves by the difference.
        let claimed = i128::from(totals.tokens()) - i128::from(usage.reserved);
        let claimed_cost = i128::from(totals.cost_nanos) - i128::from(usage.reserved_cost);
        let mut adds = vec![
            ("input_tokens", i128::from(totals.input_tokens)),
            ("output_tokens", i128::from(totals.output_tokens)),
            ("cache_read_tokens", i128::from(totals.cache_read_tokens)),
            ("cache_write_tokens", i128::from(totals.cache_write_tokens)),
            ("tokens", i128::from(totals.tokens())),
            ("model_calls", i128::from(totals.model_calls)),
            ("cost_nanos", i128::from(totals.cost_nanos)),
            ("unpriced_calls", i128::from(totals.unpriced_calls)),
            ("executions", i128::from(totals.executions)),
            ("sandbox_ms", i128::from(totals.sandbox_ms)),
            ("turns", i128::from(totals.turns)),
            ("failed_turns", i128::from(totals.failed_turns)),
            ("claimed", claimed),
        ];
        // The money counters are only written once a price or a money budget has moved them, so a
        // deployment without prices keeps the items it had.
        if totals.cost_nanos > 0 || usage.reserved_cost > 0 {
            adds.push(("claimed_cost", claimed_cost));
        }
        if usage.reserved > 0 {
            adds.push(("reserved", -i128::from(usage.reserved)));
        }
        if usage.reserved_cost > 0 {
            adds.push(("reserved_cost", -i128::from(usage.reserved_cost)));
        }
        let day = adding(&self.table, &pk, usage_day_sort_key(&usage.day), &adds)
            .update_expression(format!("{} SET #day = :day, expires_at = :expires", add_clause(&adds)))
            .expression_attribute_names("#day", "day")
            .expression_attribute_values(":day", s(&usage.day))
            .expression_attribute_values(":expires", n(expires))
            .build()
            .map_err(build_error)?;
        updates.push(TransactWriteItem::builder().update(day).build());
        for (model, spent) in &usage.models {
            let adds = [
                ("input_tokens", i128::from(spent.input_tokens)),
                ("output_tokens", i128::from(spent.output_tokens)),
                ("cache_read_tokens", i128::from(spent.cache_read_tokens)),
                ("cache_write_tokens", i128::from(spent.cache_write_tokens)),
                ("model_calls", i128::from(spent.model_calls)),
                ("cost_nanos", i128::from(spent.cost_nanos)),
                ("unpriced_calls", i128::from(spent.unpriced_calls)),
            ];
            let update = adding(&self.table, &pk, model_sort_key(&usage.day, model), &adds)
                .update_expression(format!(
                    "{} SET #day = :day, #model = :model, expires_at = :expires",
                    add_clause(&adds)
                ))
                .expression_attribute_names("#day", "day")
                .expression_attribute_names("#model", "model")
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
