//! `GET /usage?from=YYYY-MM-DD&to=YYYY-MM-DD`: the caller's own usage by UTC day and model.

use agent_core::store::UsageDay;
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

/// The caller's usage: each day with usage, its totals and each model's share, and the range's totals.
pub(super) fn usage_view(range: &UsageDays, days: &[UsageDay]) -> Value {
    let mut totals = agent_core::store::UsageCounts::default();
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
                        "output_tokens": spent.output_tokens,
                        "model_calls": spent.model_calls,
                    })
                })
                .collect();
            let mut body = counts(&day.totals);
            body["date"] = json!(day.day);
            body["models"] = json!(models);
            body
        })
        .collect();
    json!({"from": range.from, "to": range.to, "days": days, "totals": counts(&totals)})
}

fn counts(counts: &agent_core::store::UsageCounts) -> Value {
    json!({
        "input_tokens": counts.input_tokens,
        "output_tokens": counts.output_tokens,
        "tokens": counts.tokens(),
        "model_calls": counts.model_calls,
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
}
