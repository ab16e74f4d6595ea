//! The day's tokens and money against the tenant's budgets: the budget item an operator wrote, read
//! with the day's counts in one Query, and each model call's reservation, a conditional `ADD` re-read
//! and tried again when another turn reserved meanwhile.

use agent_ports::store::{BudgetOverride, BudgetState, BudgetUnit, Reservation};
use agent_ports::{StoreError, UserId};
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};

use super::{expires_at, optional_count, usage_day_sort_key, usage_partition_key, BUDGET_SORT_KEY};
use crate::codec::{n, s, Item, Reader};
use crate::dynamo::DynamoSessionStore;

/// How many conditional reservation writes one model call tries, each after a fresh read, before
/// its turn is answered as a conflict to retry: each lost try means another turn reserved meanwhile.
const RESERVATION_TRIES: u32 = 8;

/// The day item's attributes a budget unit counts in: what was spent, what running calls hold, and
/// their sum (the one number a condition can compare).
struct Counters {
    spent: &'static str,
    reserved: &'static str,
    claimed: &'static str,
}

fn counters(unit: BudgetUnit) -> Counters {
    match unit {
        BudgetUnit::Tokens => Counters { spent: "tokens", reserved: "reserved", claimed: "claimed" },
        BudgetUnit::Cost => Counters { spent: "cost_nanos", reserved: "reserved_cost", claimed: "claimed_cost" },
    }
}

impl DynamoSessionStore {
    /// The tokens of `day` and the tenant's own budget: one Query from the day's item to the budget
    /// item (the day's model items come along; a later day's, only around midnight).
    pub(in crate::dynamo) async fn day_budget(&self, user: &UserId, day: &str) -> Result<BudgetState, StoreError> {
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
            .projection_expression("sk, tokens, claimed, cost_nanos, claimed_cost, daily_tokens, daily_usd, unlimited")
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
                state.claimed_tokens = claimed_of(&reader, "claimed")?.unwrap_or(state.used_tokens);
                state.used_cost = optional_count(&reader, "cost_nanos")?;
                state.claimed_cost = claimed_of(&reader, "claimed_cost")?.unwrap_or(state.used_cost);
            } else if sk == BUDGET_SORT_KEY {
                match budget_override(item) {
                    Ok(budget) => state.budget = budget,
                    Err(problem) => state.misconfigured = Some(problem),
                }
                match cost_override(item) {
                    Ok(budget) => state.cost_budget = budget,
                    Err(problem) => state.misconfigured = Some(problem),
                }
            }
        }
        Ok(state)
    }

    /// The day's claimed amount in `unit`, read consistently (`None` without a day item or its
    /// claimed counter) and the day's spent amount.
    async fn day_claimed(&self, pk: &str, day_key: &str, unit: BudgetUnit) -> Result<(Option<u64>, u64), StoreError> {
        let names = counters(unit);
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(day_key))
            .consistent_read(true)
            .projection_expression(format!("{}, {}", names.spent, names.claimed))
            .send()
            .await
            .map_err(|err| self.backend("GetItem", pk, err))?;
        let Some(item) = found.item else { return Ok((None, 0)) };
        let context = format!("usage {pk} {day_key}");
        let reader = Reader { item: &item, context: &context };
        Ok((claimed_of(&reader, names.claimed)?, optional_count(&reader, names.spent)?))
    }

    /// See [`agent_ports::store::SessionStore::reserve`]: an `ADD` of the unit's reserved and
    /// claimed counters on condition that the claimed one stays within `budget`, its size capped by
    /// what the last read left; a lost condition re-reads and tries again.
    pub(in crate::dynamo) async fn reserve_of(
        &self,
        user: &UserId,
        day: &str,
        unit: BudgetUnit,
        want: u64,
        budget: u64,
        seen: u64,
    ) -> Result<Reservation, StoreError> {
        let names = counters(unit);
        let pk = usage_partition_key(user);
        let day_key = usage_day_sort_key(day);
        let expires = expires_at(day, crate::dynamo::unix_now());
        let mut claimed = seen;
        // `seen` may be stale: before a refusal, and after a lost condition, read again.
        let mut fresh = false;
        for _ in 0..RESERVATION_TRIES {
            let left = budget.saturating_sub(claimed);
            if left == 0 {
                if fresh {
                    return Ok(Reservation::Refused { claimed });
                }
                claimed = self.fresh_claimed(&pk, &day_key, unit).await?;
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
                .update_expression("ADD #reserved :n, #claimed :n SET #day = :day, expires_at = :expires")
                // Also true of a new day item, and of one written before reservations existed
                // (whose turns started counting `claimed` from this write on).
                .condition_expression("attribute_not_exists(#claimed) OR #claimed <= :max")
                .expression_attribute_names("#reserved", names.reserved)
                .expression_attribute_names("#claimed", names.claimed)
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
                        .and_then(|item| item.get(names.claimed))
                        .and_then(|value| value.as_n().ok())
                        .and_then(|value| value.parse::<i64>().ok())
                        .map_or(claimed.saturating_add(tokens), |value| u64::try_from(value).unwrap_or(0));
                    if after <= budget {
                        return Ok(Reservation::Granted { tokens, claimed: after });
                    }
                    // DynamoDB's condition makes this impossible; a store that checks the condition
                    // and applies the update apart (moto under concurrent requests) can get here.
                    // The grant is given back rather than trusted.
                    self.release(&pk, &day_key, unit, tokens).await?;
                    claimed = after.saturating_sub(tokens);
                    fresh = true;
                }
                Err(err)
                    if matches!(err.as_service_error(), Some(UpdateItemError::ConditionalCheckFailedException(_))) =>
                {
                    claimed = self.fresh_claimed(&pk, &day_key, unit).await?;
                    fresh = true;
                }
                Err(err) => return Err(self.backend("UpdateItem", &pk, err)),
            }
        }
        tracing::warn!(pk, ?unit, "gave up reserving after losing every try to concurrent turns");
        Err(StoreError::Conflict)
    }

    /// Gives back a reservation of `tokens` (in `unit`) that the store granted past the budget.
    async fn release(&self, pk: &str, day_key: &str, unit: BudgetUnit, tokens: u64) -> Result<(), StoreError> {
        let names = counters(unit);
        self.client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(day_key))
            .update_expression("ADD #reserved :n, #claimed :n")
            .expression_attribute_names("#reserved", names.reserved)
            .expression_attribute_names("#claimed", names.claimed)
            .expression_attribute_values(":n", n(-i128::from(tokens)))
            .send()
            .await
            .map_err(|err| self.backend("UpdateItem", pk, err))?;
        Ok(())
    }

    async fn fresh_claimed(&self, pk: &str, day_key: &str, unit: BudgetUnit) -> Result<u64, StoreError> {
        let (claimed, spent) = self.day_claimed(pk, day_key, unit).await?;
        Ok(claimed.unwrap_or(spent))
    }
}

/// What an operator wrote: `unlimited: true`, or `daily_tokens` (a whole number from 0), or
/// `unlimited: false` alone (the default applies: `None`). Anything else is the problem, in words.
fn budget_override(item: &Item) -> Result<Option<BudgetOverride>, String> {
    const SHAPE: &str = "needs `daily_tokens` (N, a whole number from 0), `daily_usd` (N) or `unlimited` (BOOL)";
    match item.get("unlimited") {
        Some(AttributeValue::Bool(true)) => return Ok(Some(BudgetOverride::Unlimited)),
        None | Some(AttributeValue::Bool(false)) => {}
        Some(other) => return Err(format!("`unlimited` is {}, not a BOOL; {SHAPE}", kind(other))),
    }
    match item.get("daily_tokens") {
        Some(AttributeValue::N(number)) => match number.trim().parse::<u64>() {
            Ok(tokens) => Ok(Some(BudgetOverride::Limit(tokens))),
            Err(_) => Err(format!("`daily_tokens` is {number}, not a whole number from 0")),
        },
        Some(other) => Err(format!("`daily_tokens` is {}, not a number; {SHAPE}", kind(other))),
        None if matches!(item.get("unlimited"), Some(AttributeValue::Bool(false)))
            || item.contains_key("daily_usd") =>
        {
            Ok(None)
        }
        None => Err(format!("the item has neither; it {SHAPE}")),
    }
}

/// The money budget an operator wrote: `unlimited: true` lifts it too; `daily_usd` (N, dollars
/// from 0, e.g. `2.50`) sets it; without `daily_usd` the default applies (`None`).
fn cost_override(item: &Item) -> Result<Option<BudgetOverride>, String> {
    if matches!(item.get("unlimited"), Some(AttributeValue::Bool(true))) {
        return Ok(Some(BudgetOverride::Unlimited));
    }
    match item.get("daily_usd") {
        None => Ok(None),
        Some(AttributeValue::N(number)) => match agent_ports::store::parse_usd_nanos(number) {
            Some(nanos) => Ok(Some(BudgetOverride::Limit(nanos))),
            None => Err(format!("`daily_usd` is {number}, not an amount of dollars from 0 (at most 9 decimals)")),
        },
        Some(other) => Err(format!("`daily_usd` is {}, not a number (N) of dollars", kind(other))),
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

/// The day's claimed counter `name`: `None` on an item written before reservations existed.
fn claimed_of(reader: &Reader<'_>, name: &str) -> Result<Option<u64>, StoreError> {
    match reader.opt(name) {
        None => Ok(None),
        // Negative only on an item whose first claimed count came from a commit's release.
        Some(_) => Ok(Some(u64::try_from(reader.int::<i64>(name)?).unwrap_or(0))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_item_is_read_as_written_or_reported() {
        let item = |attrs: &[(&str, AttributeValue)]| -> Item {
            attrs.iter().map(|(name, value)| ((*name).to_owned(), value.clone())).collect()
        };
        let number = |text: &str| AttributeValue::N(text.to_owned());
        assert_eq!(budget_override(&item(&[("daily_tokens", number("500"))])), Ok(Some(BudgetOverride::Limit(500))));
        assert_eq!(
            budget_override(&item(&[("unlimited", AttributeValue::Bool(true))])),
            Ok(Some(BudgetOverride::Unlimited))
        );
        assert_eq!(budget_override(&item(&[("unlimited", AttributeValue::Bool(false))])), Ok(None));
        assert_eq!(
            budget_override(&item(&[("unlimited", AttributeValue::Bool(false)), ("daily_tokens", number("7"))])),
            Ok(Some(BudgetOverride::Limit(7)))
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
