//! `GET /usage?from=YYYY-MM-DD&to=YYYY-MM-DD`: the caller's own usage by UTC day and model.

use agent_core::pricing::PriceTable;
use agent_core::store::{nanos_to_usd, UsageCounts, UsageDay};
use agent_core::turn::utc_day;
use serde_json::{json, Value};
use time::{Date, Duration, Month, OffsetDateTime};

use super::message::Query;
use crate::api::ApiError;

/// The longest range one request may ask for, in days (both ends included).
pub const MAX_USAGE_DAYS: i64 = 366;
/// The range when `from` is not given: this many days up to `to`.
const DEFAULT_USAGE_DAYS: i64 = 30;

/// A `YYYY-MM-DD` date, strictly: four-digit year, two-digit month and day, a real calendar day.
pub fn parse_day(name: &str, value: &str) -> Result<Date, ApiError> {
    let bad = || ApiError::bad_request(format!("`{name}` must be a date as YYYY-MM-DD, not `{value}`"));
    let bytes = value.as_bytes();
    let shaped = bytes.len() == 10
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes.iter().enumerate().all(|(at, byte)| at == 4 || at == 7 || byte.is_ascii_digit());
    if !shaped {
        return Err(bad());
    }
    let year: i32 = value[..4].parse().map_err(|_| bad())?;
    let month: u8 = value[5..7].parse().map_err(|_| bad())?;
    let day: u8 = value[8..].parse().map_err(|_| bad())?;
    let month = Month::try_from(month).map_err(|_| bad())?;
    Date::from_calendar_date(year, month, day).map_err(|_| bad())
}

fn format_day(date: Date) -> String {
    utc_day(date.midnight().assume_utc())
}

/// The range asked for: `to` defaults to today (UTC), `from` to the 30 days that end at `to`.
pub fn usage_range(from: Option<&str>, to: Option<&str>, today: OffsetDateTime) -> Result<(Date, Date), ApiError> {
    let to = match to {
        Some(to) => parse_day("to", to)?,
        None => today.to_offset(time::UtcOffset::UTC).date(),
    };
    let from = match from {
        Some(from) => parse_day("from", from)?,
        None => to.checked_sub(Duration::days(DEFAULT_USAGE_DAYS - 1)).unwrap_or(to),
    };
    if from > to {
        return Err(ApiError::bad_request("`from` must not be after `to`"));
    }
    if (to - from).whole_days() >= MAX_USAGE_DAYS {
        return Err(ApiError::bad_request(format!("ask for at most {MAX_USAGE_DAYS} days at a time")));
    }
    Ok((from, to))
}

/// The days asked for, as the store names them (`YYYY-MM-DD`, UTC).
pub(super) struct UsageDays {
    pub(super) from: String,
    pub(super) to: String,
}

impl UsageDays {
    pub(super) fn from_query(query: &Query) -> Result<Self, ApiError> {
        let (from, to) = usage_range(query.first("from"), query.first("to"), OffsetDateTime::now_utc())?;
        Ok(Self { from: format_day(from), to: format_day(to) })
    }
}

/// The caller's usage: each day with usage, its totals and each model's share, and the range's
/// totals, with the cost at `prices` and where those come from.
pub(super) fn usage_view(range: &UsageDays, days: &[UsageDay], prices: &PriceTable) -> Value {
    let mut totals = UsageCounts::default();
    let days: Vec<Value> = days
        .iter()
        .map(|day| {
            totals.add(&day.totals);
            let models: Vec<Value> = day
                .models
                .iter()
                .map(|(model, spent)| {
                    json!({
                        "model": model,
                        "input_tokens": spent.input_tokens,
                        "uncached_input_tokens": spent.uncached_input_tokens(),
                        "cache_read_tokens": spent.cache_read_tokens,
                        "cache_write_tokens": spent.cache_write_tokens,
                        "output_tokens": spent.output_tokens,
                        "model_calls": spent.model_calls,
                        "cost_usd": cost_usd(spent.cost_nanos, spent.model_calls, spent.unpriced_calls),
                        "unpriced_calls": spent.unpriced_calls,
                    })
                })
                .collect();
            let mut body = counts(&day.totals);
            body["date"] = json!(day.day);
            body["models"] = json!(models);
            body
        })
        .collect();
    json!({
        "from": range.from,
        "to": range.to,
        "days": days,
        "totals": counts(&totals),
        "prices": {"date": prices.date(), "currency": prices.currency(), "source": prices.source()},
    })
}

/// Dollars, or null when none of the calls had a price.
fn cost_usd(nanos: u64, calls: u64, unpriced: u64) -> Value {
    if calls > unpriced || nanos > 0 {
        json!(nanos_to_usd(nanos))
    } else {
        Value::Null
    }
}

fn counts(counts: &UsageCounts) -> Value {
    json!({
        "input_tokens": counts.input_tokens,
        "uncached_input_tokens": counts.input_tokens.saturating_sub(counts.cache_read_tokens).saturating_sub(counts.cache_write_tokens),
        "cache_read_tokens": counts.cache_read_tokens,
        "cache_write_tokens": counts.cache_write_tokens,
        "output_tokens": counts.output_tokens,
        "tokens": counts.tokens(),
        "model_calls": counts.model_calls,
        "cost_usd": cost_usd(counts.cost_nanos, counts.model_calls, counts.unpriced_calls),
        "unpriced_calls": counts.unpriced_calls,
        "executions": counts.executions,
        "sandbox_seconds": counts.sandbox_ms as f64 / 1000.0,
        "turns": counts.turns,
        "failed_turns": counts.failed_turns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_strict_and_ranges_bounded() {
        let today = OffsetDateTime::from_unix_timestamp(1_795_564_800).unwrap(); // 2026-11-25
        let (from, to) = usage_range(None, None, today).unwrap();
        assert_eq!((format_day(from).as_str(), format_day(to).as_str()), ("2026-10-27", "2026-11-25"));
        let (from, to) = usage_range(Some("2024-02-29"), Some("2024-03-01"), today).unwrap();
        assert_eq!((from.day(), to.day()), (29, 1));
        for bad in ["2026-2-01", "2026-02-30", "2026/02/01", "20260201", "2026-13-01", "+026-01-01", "2026-01-01 "] {
            assert_eq!(usage_range(Some(bad), None, today).unwrap_err().status, 400, "{bad}");
        }
        assert_eq!(usage_range(Some("2026-11-02"), Some("2026-11-01"), today).unwrap_err().status, 400);
        assert!(usage_range(Some("2025-01-01"), Some("2025-12-31"), today).is_ok(), "365 days");
        assert!(usage_range(Some("2024-01-01"), Some("2024-12-31"), today).is_ok(), "366 days");
        assert_eq!(usage_range(Some("2024-01-01"), Some("2025-01-01"), today).unwrap_err().status, 400);
    }

    #[test]
    fn the_view_splits_input_prices_the_days_and_says_where_prices_come_from() {
        use agent_core::store::ModelUsage;
        let priced = ModelUsage {
            input_tokens: 1_000,
            output_tokens: 10,
            cache_read_tokens: 600,
            cache_write_tokens: 300,
            model_calls: 2,
            cost_nanos: 1_500_000,
            unpriced_calls: 0,
        };
        let unpriced = ModelUsage {
            input_tokens: 50,
            output_tokens: 5,
            model_calls: 1,
            unpriced_calls: 1,
            ..ModelUsage::default()
        };
        let mut totals = UsageCounts::default();
        for usage in [priced, unpriced] {
            totals.add(&UsageCounts {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                cache_read_tokens: usage.cache_read_tokens,
                cache_write_tokens: usage.cache_write_tokens,
                model_calls: usage.model_calls,
                cost_nanos: usage.cost_nanos,
                unpriced_calls: usage.unpriced_calls,
                ..UsageCounts::default()
            });
        }
        let day = UsageDay {
            day: "2026-11-29".into(),
            totals,
            models: [("gpt-4o".to_owned(), priced), ("mine".to_owned(), unpriced)].into(),
        };
        let range = UsageDays { from: "2026-11-29".into(), to: "2026-11-29".into() };
        let view = usage_view(&range, &[day], &PriceTable::shipped());
        let models = &view["days"][0]["models"];
        assert_eq!(models[0]["uncached_input_tokens"], 100);
        assert_eq!(models[0]["cost_usd"], 0.0015);
        assert_eq!((models[1]["cost_usd"].is_null(), models[1]["unpriced_calls"].as_u64()), (true, Some(1)));
        assert_eq!(view["totals"]["uncached_input_tokens"], 150);
        assert_eq!(
            (view["totals"]["cost_usd"].as_f64(), view["totals"]["unpriced_calls"].as_u64()),
            (Some(0.0015), Some(1))
        );
        assert_eq!(view["prices"]["date"], "2026-11-29");
        assert!(view["prices"]["source"].as_array().is_some_and(|sources| sources.len() >= 3));
    }
}
