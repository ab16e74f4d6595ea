//! UTC days, which budget applies, and what a call reserves.

use time::OffsetDateTime;

use super::gate::{call_reservation, within_budget, Limit};
use super::*;
use crate::message::ChatRequest;
use crate::store::{BudgetOverride, BudgetState, BudgetUnit};

#[test]
fn days_and_the_wait_until_the_next_one_are_utc() {
    let at = OffsetDateTime::from_unix_timestamp(1_764_115_200 - 90).unwrap(); // 2025-11-25 23:58:30 UTC
    assert_eq!(utc_day(at), "2025-11-25");
    assert_eq!(seconds_to_next_utc_day(at), 90);
    let later = at.to_offset(time::UtcOffset::from_hms(5, 0, 0).unwrap());
    assert_eq!(utc_day(later), "2025-11-25", "an offset does not move the day");
    let midnight = OffsetDateTime::from_unix_timestamp(1_764_115_200).unwrap();
    assert_eq!((utc_day(midnight).as_str(), seconds_to_next_utc_day(midnight)), ("2025-11-26", 86_400));
}

#[test]
fn the_override_replaces_the_default_and_unlimited_lifts_it() {
    let now = OffsetDateTime::from_unix_timestamp(1_764_115_200).unwrap();
    let tokens = BudgetUnit::Tokens;
    assert_eq!(within_budget(tokens, 100, None, 99, now).unwrap(), Some(Limit { budget: 100, seen: 99 }));
    let refused = within_budget(tokens, 100, None, 100, now).unwrap_err();
    assert!(matches!(
        refused,
        TurnError::QuotaExceeded { unit: BudgetUnit::Tokens, used: 100, budget: 100, retry_after_secs: 86_400 }
    ));
    assert!(within_budget(tokens, 100, Some(BudgetOverride::Limit(1_000)), 500, now).is_ok());
    assert!(within_budget(tokens, 100, Some(BudgetOverride::Limit(0)), 5, now).is_err());
    assert!(matches!(within_budget(tokens, 0, Some(BudgetOverride::Unlimited), u64::MAX, now), Ok(None)));
    // Reservations count against the budget: the claimed amount is what is compared.
    let state = BudgetState { used_tokens: 40, claimed_tokens: 100, ..BudgetState::default() };
    assert!(budgets(Some(100), None, &state, now).is_err());
    // Money has its own override and its own refusal, in billionths of a dollar.
    let state = BudgetState {
        used_cost: 2_000_000_000,
        claimed_cost: 2_500_000_000,
        cost_budget: Some(BudgetOverride::Limit(2_500_000_000)),
        ..BudgetState::default()
    };
    let refused = budgets(Some(1_000), Some(10_000_000_000), &state, now).unwrap_err();
    assert!(matches!(refused, TurnError::QuotaExceeded { unit: BudgetUnit::Cost, used: 2_500_000_000, .. }));
    assert!(refused.to_string().contains("$2.50 of $2.50"), "{refused}");
    assert_eq!(budgets(Some(1_000), None, &state, now).unwrap(), (Some(Limit { budget: 1_000, seen: 0 }), None));
    assert_eq!(budgets(None, None, &state, now).unwrap(), (None, None), "an override needs a default of its unit");
}

#[test]
fn a_call_reserves_its_estimated_input_and_its_most_output() {
    let request = ChatRequest {
        system: "x".repeat(300),
        messages: vec![crate::message::Message::User { content: "y".repeat(30), files: Vec::new() }],
        ..ChatRequest::default()
    };
    assert_eq!(call_reservation(&request, 4096), 100 + (4 + 10) + 4096);
    assert_eq!(call_reservation(&request, 0), 114);
}
