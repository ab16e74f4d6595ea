//! Per-tenant usage and the daily token budget, in a partition of the tenant's own.
//!
//! Items (`pk = "{user_id}#@usage"`: a session id cannot hold `@`, so no session's partition has it):
//! - `sk = "DAY#{YYYY-MM-DD}"`: the day's totals over every model: `input_tokens`, `output_tokens`,
//!   `tokens` (their sum, what a budget counts), `model_calls`, `executions`, `sandbox_ms`, `turns`
//!   (committed), `failed_turns` (turns that failed after paid model calls); plus `day` and
//!   `expires_at` ([`USAGE_RETENTION_DAYS`] after the day).
//! - `sk = "DAY#{YYYY-MM-DD}#{model}"`: one model's share of the day: `model`, `input_tokens`,
//!   `output_tokens`, `model_calls`.
//!   Under a budget the day item also holds `reserved` (tokens held by running model calls) and
//!   `claimed` (`tokens` + `reserved`, the one number a conditional write can compare, since
//!   DynamoDB conditions have no arithmetic).
//! - `sk = "TOKEN_BUDGET"`: the tenant's own daily budget, written by an operator: `daily_tokens`
//!   (N, a whole number from 0), or `unlimited` (BOOL; `false` means `daily_tokens` if present, else
//!   the default). Any other shape is reported and the deployment's default applies.
//!
//! A reservation is one `UpdateItem` (`ADD reserved :n, claimed :n` on condition that `claimed`
//! stays within the budget); the commit or a failed turn's spend gives it back (`ADD reserved -r,
//! claimed spent-r`) in the same write that adds what was spent.
//!
//! Every count is an `ADD`, in the turn's commit transaction (so it counts exactly when the turn is
//! stored) or, for a failed turn's spend, in a transaction of its own with a client request token.
//! `TOKEN_BUDGET` sorts after every `DAY#` key, so one Query from today's day item reads the day's
//! tokens and the budget.

use std::collections::BTreeMap;

use agent_ports::store::Reservation;
use agent_ports::store::{BudgetOverride, BudgetState, ModelUsage, TurnUsage, UsageCounts, UsageDay};
use agent_ports::{StoreError, UserId};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, TransactWriteItem, Update};

use super::DynamoSessionStore;
use crate::codec::{n, s, Item, Reader};

/// The suffix of a tenant's usage partition key.
pub const USAGE_PARTITION_SUFFIX: &str = "#@usage";
/// The sort-key prefix of day items.
pub const USAGE_DAY_PREFIX: &str = "DAY#";
/// The sort key of a tenant's own budget.
pub const BUDGET_SORT_KEY: &str = "TOKEN_BUDGET";
/// How long a day's usage is kept after the day.
pub const USAGE_RETENTION_DAYS: i64 = 400;
/// How many times a usage write is tried again after it met a concurrent transaction on the same
/// usage item (another session of the tenant committing at the same moment).
pub(super) const USAGE_CONFLICT_RETRIES: u32 = 5;
/// How many conditional reservation writes one model call tries, each after a fresh read, before
/// its turn is answered as a conflict to retry: each lost try means another turn reserved meanwhile.
const RESERVATION_TRIES: u32 = 8;

/// The partition key of `user`'s usage.
pub fn usage_partition_key(user: &UserId) -> String {
    format!("{user}{USAGE_PARTITION_SUFFIX}")
}

/// The sort key of a day's totals.
pub fn usage_day_sort_key(day: &str) -> String {
    format!("{USAGE_DAY_PREFIX}{day}")
}

fn model_sort_key(day: &str, model: &str) -> String {
    format!("{USAGE_DAY_PREFIX}{day}#{model}")
}

/// Unix seconds at which a day's items may go: the retention after the day's date.
fn expires_at(day: &str, now: i64) -> i64 {
    let parts: Vec<i64> = day.splitn(3, '-').filter_map(|part| part.parse().ok()).collect();
    let start = match parts.as_slice() {
        [year, month, date] => days_from_civil(*year, *month, *date) * 86_400,
        _ => now,
    };
    start.saturating_add(USAGE_RETENTION_DAYS * 86_400)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn build_error(err: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("building the usage write: {err}"))
}

impl DynamoSessionStore {
    /// The `ADD`s of one turn's usage: the day's totals, and one item per model.
    pub(super) fn usage_updates(
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
    pub(super) async fn record_spend(&self, user: &UserId, usage: &TurnUsage, token: &str) -> Result<(), StoreError> {
        let pk = usage_partition_key(user);
        let items = self.usage_updates(user, usage, super::unix_now())?;
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

    /// The tenant's usage by day and model, from `from` to `to` (both included): one Query (more
    /// pages only past 1 MB, which a year of days does not reach).
    pub(super) async fn usage_days(&self, user: &UserId, from: &str, to: &str) -> Result<Vec<UsageDay>, StoreError> {
        let pk = usage_partition_key(user);
        let mut days: BTreeMap<String, UsageDay> = BTreeMap::new();
        let mut start: Option<Item> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND sk BETWEEN :from AND :to")
                .expression_attribute_values(":pk", s(&pk))
                .expression_attribute_values(":from", s(usage_day_sort_key(from)))
                // `~` sorts after `#`: the last day's model items are included.
                .expression_attribute_values(":to", s(format!("{}~", usage_day_sort_key(to))))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|err| self.backend("Query", &pk, err))?;
            for item in page.items() {
                let sk = Reader { item, context: &pk }.string("sk")?.to_owned();
                let context = format!("usage {pk} {sk}");
                let reader = Reader { item, context: &context };
                let day = reader.string("day")?.to_owned();
                let entry = days.entry(day.clone()).or_insert_with(|| UsageDay { day, ..UsageDay::default() });
                match reader.opt("model") {
                    Some(AttributeValue::S(model)) => {
                        entry.models.entry(model.clone()).or_default().add(&model_usage(&reader)?);
                    }
                    _ => entry.totals.add(&counts(&reader)?),
                }
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        Ok(days.into_values().collect())
    }

    /// The tokens of `day` and the tenant's own budget: one Query from the day's item to the budget
    /// item (the day's model items come along; a later day's, only around midnight).
    pub(super) async fn day_budget(&self, user: &UserId, day: &str) -> Result<BudgetState, StoreError> {
        let pk = usage_partition_key(user);
        let day_key = usage_day_sort_key(day);
        let found = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk BETWEEN :day AND :budget")
            .expression_attribute_values(":pk", s(&pk))
            .expression_attribute_values(":day", s(&day_key))
            .expression_attribute_values(":budget", s(BUDGET_SORT_KEY))
            .projection_expression("sk, tokens, claimed, daily_tokens, unlimited")
            .send()
            .await
            .map_err(|err| self.backend("Query", &pk, err))?;
        let mut state = BudgetState::default();
        for item in found.items() {
            let context = format!("usage {pk}");
            let reader = Reader { item, context: &context };
            let sk = reader.string("sk")?;
            if sk == day_key {
                state.used_tokens = optional_count(&reader, "tokens")?;
                state.claimed_tokens = claimed_of(&reader)?.unwrap_or(state.used_tokens);
            } else if sk == BUDGET_SORT_KEY {
                match budget_override(item) {
                    Ok(budget) => state.budget = budget,
                    Err(problem) => state.misconfigured = Some(problem),
                }
            }
        }
        Ok(state)
    }

    /// The day's `claimed` tokens, read consistently (`None` without a day item or its `claimed`)
    /// and the day's `tokens`.
    async fn day_claimed(&self, pk: &str, day_key: &str) -> Result<(Option<u64>, u64), StoreError> {
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(day_key))
            .consistent_read(true)
            .projection_expression("tokens, claimed")
            .send()
            .await
            .map_err(|err| self.backend("GetItem", pk, err))?;
        let Some(item) = found.item else { return Ok((None, 0)) };
        let context = format!("usage {pk} {day_key}");
        let reader = Reader { item: &item, context: &context };
        Ok((claimed_of(&reader)?, optional_count(&reader, "tokens")?))
    }

    /// See [`agent_ports::store::SessionStore::reserve_tokens`]: an `ADD` of `reserved` and `claimed`
    /// on condition that `claimed` stays within `budget`, its size capped by what the last read
    /// left; a lost condition re-reads and tries again.
    pub(super) async fn reserve(
        &self,
        user: &UserId,
        day: &str,
        want: u64,
        budget: u64,
        seen: u64,
    ) -> Result<Reservation, StoreError> {
        let pk = usage_partition_key(user);
        let day_key = usage_day_sort_key(day);
        let expires = expires_at(day, super::unix_now());
        let mut claimed = seen;
        // `seen` may be stale: before a refusal, and after a lost condition, read again.
        let mut fresh = false;
        for _ in 0..RESERVATION_TRIES {
            let left = budget.saturating_sub(claimed);
            if left == 0 {
                if fresh {
                    return Ok(Reservation::Refused { claimed });
                }
                claimed = self.fresh_claimed(&pk, &day_key).await?;
                fresh = true;
                continue;
            }
            let tokens = want.min(left).max(1);
            let sent = self
                .client
                .update_item()
                .table_name(&self.table)
                .key("pk", s(&pk))
                .key("sk", s(&day_key))
                .update_expression("ADD reserved :n, claimed :n SET #day = :day, expires_at = :expires")
                // Also true of a new day item, and of one written before reservations existed
                // (whose turns started counting `claimed` from this write on).
                .condition_expression("attribute_not_exists(claimed) OR claimed <= :max")
                .expression_attribute_names("#day", "day")
                .expression_attribute_values(":n", n(tokens))
                .expression_attribute_values(":max", n(budget - tokens))
                .expression_attribute_values(":day", s(day))
                .expression_attribute_values(":expires", n(expires))
                .return_values(ReturnValue::UpdatedNew)
                .send()
                .await;
            match sent {
                Ok(output) => {
                    let after = output
                        .attributes
                        .as_ref()
                        .and_then(|item| item.get("claimed"))
                        .and_then(|value| value.as_n().ok())
                        .and_then(|value| value.parse::<i64>().ok())
                        .map_or(claimed.saturating_add(tokens), |value| u64::try_from(value).unwrap_or(0));
                    if after <= budget {
                        return Ok(Reservation::Granted { tokens, claimed: after });
                    }
                    // DynamoDB's condition makes this impossible; a store that checks the condition
                    // and applies the update apart (moto under concurrent requests) can get here.
                    // The grant is given back rather than trusted.
                    self.release(&pk, &day_key, tokens).await?;
                    claimed = after.saturating_sub(tokens);
                    fresh = true;
                }
                Err(err)
                    if matches!(err.as_service_error(), Some(UpdateItemError::ConditionalCheckFailedException(_))) =>
                {
                    claimed = self.fresh_claimed(&pk, &day_key).await?;
                    fresh = true;
                }
                Err(err) => return Err(self.backend("UpdateItem", &pk, err)),
            }
        }
        tracing::warn!(pk, "gave up reserving tokens after losing every try to concurrent turns");
        Err(StoreError::Conflict)
    }

    /// Gives back a reservation of `tokens` that the store granted past the budget.
    async fn release(&self, pk: &str, day_key: &str, tokens: u64) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(day_key))
            .update_expression("ADD reserved :n, claimed :n")
            .expression_attribute_values(":n", n(-i128::from(tokens)))
            .send()
            .await
            .map_err(|err| self.backend("UpdateItem", pk, err))?;
        Ok(())
    }

    async fn fresh_claimed(&self, pk: &str, day_key: &str) -> Result<u64, StoreError> {
        let (claimed, tokens) = self.day_claimed(pk, day_key).await?;
        Ok(claimed.unwrap_or(tokens))
    }
}

/// What an operator wrote: `unlimited: true`, or `daily_tokens` (a whole number from 0), or
/// `unlimited: false` alone (the default applies: `None`). Anything else is the problem, in words.
fn budget_override(item: &Item) -> Result<Option<BudgetOverride>, String> {
    const SHAPE: &str = "needs `daily_tokens` (N, a whole number from 0) or `unlimited` (BOOL)";
    match item.get("unlimited") {
        Some(AttributeValue::Bool(true)) => return Ok(Some(BudgetOverride::Unlimited)),
        None | Some(AttributeValue::Bool(false)) => {}
        Some(other) => return Err(format!("`unlimited` is {}, not a BOOL; {SHAPE}", kind(other))),
    }
    match item.get("daily_tokens") {
        Some(AttributeValue::N(number)) => match number.trim().parse::<u64>() {
            Ok(tokens) => Ok(Some(BudgetOverride::Tokens(tokens))),
            Err(_) => Err(format!("`daily_tokens` is {number}, not a whole number from 0")),
        },
        Some(other) => Err(format!("`daily_tokens` is {}, not a number; {SHAPE}", kind(other))),
        None if matches!(item.get("unlimited"), Some(AttributeValue::Bool(false))) => Ok(None),
        None => Err(format!("the item has neither; it {SHAPE}")),
    }
}

/// An attribute's DynamoDB type, for a message.
fn kind(value: &AttributeValue) -> &'static str {
    match value {
        AttributeValue::S(_) => "a string (S)",
        AttributeValue::N(_) => "a number (N)",
        AttributeValue::Bool(_) => "a BOOL",
        AttributeValue::Null(_) => "NULL",
        AttributeValue::M(_) => "a map (M)",
        AttributeValue::L(_) => "a list (L)",
        _ => "a set or binary",
    }
}

/// The day's `claimed` tokens: `None` on an item written before reservations existed.
fn claimed_of(reader: &Reader<'_>) -> Result<Option<u64>, StoreError> {
    match reader.opt("claimed") {
        None => Ok(None),
        // Negative only on an item whose first `claimed` came from a commit's release.
        Some(_) => Ok(Some(u64::try_from(reader.int::<i64>("claimed")?).unwrap_or(0))),
    }
}

/// A counter that an item may not have yet (an `ADD` creates it).
fn optional_count(reader: &Reader<'_>, name: &str) -> Result<u64, StoreError> {
    match reader.opt(name) {
        None => Ok(0),
        Some(_) => reader.int(name),
    }
}

fn counts(reader: &Reader<'_>) -> Result<UsageCounts, StoreError> {
    Ok(UsageCounts {
        input_tokens: optional_count(reader, "input_tokens")?,
        output_tokens: optional_count(reader, "output_tokens")?,
        model_calls: optional_count(reader, "model_calls")?,
        executions: optional_count(reader, "executions")?,
        sandbox_ms: optional_count(reader, "sandbox_ms")?,
        turns: optional_count(reader, "turns")?,
        failed_turns: optional_count(reader, "failed_turns")?,
    })
}

fn model_usage(reader: &Reader<'_>) -> Result<ModelUsage, StoreError> {
    Ok(ModelUsage {
        input_tokens: optional_count(reader, "input_tokens")?,
        output_tokens: optional_count(reader, "output_tokens")?,
        model_calls: optional_count(reader, "model_calls")?,
    })
}

/// Whether a transaction was cancelled only because another transaction held one of its items.
pub(super) fn is_transaction_conflict<R>(err: &aws_sdk_dynamodb::error::SdkError<TransactWriteItemsError, R>) -> bool {
    match err.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
            let codes: Vec<&str> =
                cancelled.cancellation_reasons().iter().map(|reason| reason.code().unwrap_or("None")).collect();
            codes.contains(&"TransactionConflict")
                && codes.iter().all(|code| matches!(*code, "None" | "TransactionConflict"))
        }
        _ => false,
    }
}

/// A short, growing, jittered wait before a usage write is tried again.
pub(super) async fn conflict_pause(attempt: u32) {
    let base = 10u64 << attempt.min(5);
    let jitter = rand::random::<u64>() % base;
    tokio::time::sleep(std::time::Duration::from_millis(base + jitter)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_keys_sort_as_the_reads_need() {
        let user = UserId::parse("auth0|42").unwrap();
        assert_eq!(usage_partition_key(&user), "auth0|42#@usage");
        assert!(agent_ports::SessionId::parse("@usage").is_err(), "no session shares the partition");
        let today = usage_day_sort_key("2026-11-25");
        let model = model_sort_key("2026-11-25", "anthropic.claude-3:0");
        assert!(today < model && model.as_str() < "DAY#2026-11-25~" && "DAY#2026-11-25~" < "DAY#2026-11-26");
        assert!(usage_day_sort_key("9999-12-31~").as_str() < BUDGET_SORT_KEY, "the budget sorts after every day");
        assert_eq!(expires_at("2026-11-25", 0), 1_795_564_800 + USAGE_RETENTION_DAYS * 86_400);
    }

    #[test]
    fn a_budget_item_is_read_as_written_or_reported() {
        let item = |attrs: &[(&str, AttributeValue)]| -> Item {
            attrs.iter().map(|(name, value)| ((*name).to_owned(), value.clone())).collect()
        };
        let number = |text: &str| AttributeValue::N(text.to_owned());
        assert_eq!(budget_override(&item(&[("daily_tokens", number("500"))])), Ok(Some(BudgetOverride::Tokens(500))));
        assert_eq!(
            budget_override(&item(&[("unlimited", AttributeValue::Bool(true))])),
            Ok(Some(BudgetOverride::Unlimited))
        );
        assert_eq!(budget_override(&item(&[("unlimited", AttributeValue::Bool(false))])), Ok(None));
        assert_eq!(
            budget_override(&item(&[("unlimited", AttributeValue::Bool(false)), ("daily_tokens", number("7"))])),
            Ok(Some(BudgetOverride::Tokens(7)))
        );
        for bad in [
            item(&[("daily_tokens", number("-5"))]),
            item(&[("daily_tokens", number("2.5"))]),
            item(&[("daily_tokens", AttributeValue::S("1000".to_owned()))]),
            item(&[("unlimited", AttributeValue::S("yes".to_owned()))]),
            item(&[]),
        ] {
            assert!(budget_override(&bad).is_err(), "{bad:?}");
        }
    }
}
