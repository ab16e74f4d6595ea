//! Per-tenant usage and the daily budgets (of tokens and of money), in a partition of the tenant's own.
//!
//! Items (`pk = "{user_id}#@usage"`: a session id cannot hold `@`, so no session's partition has it):
//! - `sk = "DAY#{YYYY-MM-DD}"`: the day's totals over every model: `input_tokens` (every input
//!   token, cached or not), `cache_read_tokens`, `cache_write_tokens`, `output_tokens`, `tokens`
//!   (input and output, what a token budget counts), `model_calls`, `cost_nanos` (billionths of a
//!   dollar at the price table's prices), `unpriced_calls` (calls of models without a price),
//!   `executions`, `sandbox_ms`, `turns` (committed), `failed_turns` (turns that failed after paid
//!   model calls); plus `day` and `expires_at` ([`USAGE_RETENTION_DAYS`] after the day).
//! - `sk = "DAY#{YYYY-MM-DD}#{model}"`: one model's share of the day: `model`, `input_tokens`,
//!   `cache_read_tokens`, `cache_write_tokens`, `output_tokens`, `model_calls`, `cost_nanos`,
//!   `unpriced_calls`.
//!   Under a token budget the day item also holds `reserved` (tokens held by running model calls)
//!   and `claimed` (`tokens` + `reserved`, the one number a conditional write can compare, since
//!   DynamoDB conditions have no arithmetic); under a money budget, `reserved_cost` and
//!   `claimed_cost` the same way (`claimed_cost` is written once money has moved).
//! - `sk = "TOKEN_BUDGET"`: the tenant's own daily budgets, written by an operator: `daily_tokens`
//!   (N, a whole number from 0), `daily_usd` (N, dollars from 0 with at most 9 decimals), or
//!   `unlimited` (BOOL, lifts both; `false` means the numbers present, else the defaults). Any
//!   other shape is reported and the deployment's defaults apply.
//!
//! A reservation is one `UpdateItem` (`ADD reserved :n, claimed :n` on condition that `claimed`
//! stays within the budget); the commit or a failed turn's spend gives it back (`ADD reserved -r,
//! claimed spent-r`) in the same write that adds what was spent.
//!
//! Every count is an `ADD`, in the turn's commit transaction (so it counts exactly when the turn is
//! stored) or, for a failed turn's spend, in a transaction of its own with a client request token.
//! `TOKEN_BUDGET` sorts after every `DAY#` key, so one Query from today's day item reads the day's
//! tokens and the budget.
//!
//! A file per part: `spend` (the writes of what a turn spent), `days` (the usage read back by day
//! and model), `budget` (the day's tokens and money against the budgets, and model calls' reservations); this
//! file holds the keys and what they share.

mod budget;
mod days;
mod spend;

use agent_ports::{StoreError, UserId};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;

use crate::codec::Reader;

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
/// The partition key of `user`'s usage.
pub fn usage_partition_key(user: &UserId) -> String {
    format!("{user}{USAGE_PARTITION_SUFFIX}")
}

/// The sort key of a day's totals.
pub fn usage_day_sort_key(day: &str) -> String {
    format!("{USAGE_DAY_PREFIX}{day}")
}

pub(super) fn model_sort_key(day: &str, model: &str) -> String {
    format!("{USAGE_DAY_PREFIX}{day}#{model}")
}

/// Unix seconds at which a day's items may go: the retention after the day's date.
pub(super) fn expires_at(day: &str, now: i64) -> i64 {
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

/// A counter that an item may not have yet (an `ADD` creates it).
pub(super) fn optional_count(reader: &Reader<'_>, name: &str) -> Result<u64, StoreError> {
    match reader.opt(name) {
        None => Ok(0),
        Some(_) => reader.int(name),
    }
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
}
