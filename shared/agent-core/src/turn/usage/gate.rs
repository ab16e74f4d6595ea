//! A tenant's daily budgets, of tokens and of money: which applies, the refusal before any call of
//! a tenant at or over one, and what a model call reserves (`reserve` makes the reservation).
//!
//! Under a budget every model call first reserves what it may cost (its estimated input and the
//! most it may answer, capped by what is left; in money, at the dearer of the input and cache-write
//! prices and the output price) with an atomic conditional write of the day's usage; the commit (or
//! the failed spend) releases the turn's reservations as it adds what was spent. So parallel turns
//! cannot together pass a budget by more than one call's reservation.

use std::sync::Arc;

use time::OffsetDateTime;

use super::seconds_to_next_utc_day;
use crate::ids::UserId;
use crate::message::ChatRequest;
use crate::store::{BudgetOverride, BudgetUnit, SessionStore, StoreError};
use crate::turn::TurnError;

/// Where and against what a turn's model calls reserve.
#[derive(Clone)]
pub(super) struct Gate {
    pub(super) sessions: Arc<dyn SessionStore>,
    pub(super) user: UserId,
    pub(super) day: String,
    /// The token budget, if one applies.
    pub(super) tokens: Option<Limit>,
    /// The money budget (billionths of a dollar), if one applies.
    pub(super) cost: Option<Limit>,
    /// The most tokens one call may answer with (`LLM_MAX_TOKENS`).
    pub(super) output_tokens: u64,
    pub(super) now: OffsetDateTime,
}

/// One budget and the day's claimed amount as last seen (a hint for the next reservation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Limit {
    pub(super) budget: u64,
    pub(super) seen: u64,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("day", &self.day)
            .field("tokens", &self.tokens)
            .field("cost", &self.cost)
            .finish_non_exhaustive()
    }
}

/// Why a model call was not made.
#[derive(Debug, Clone)]
pub(super) enum Stop {
    Quota {
        unit: BudgetUnit,
        claimed: u64,
        budget: u64,
        now: OffsetDateTime,
    },
    /// The reservation's write failed; a lost race is a conflict to retry.
    Store {
        conflict: bool,
        message: String,
    },
}

impl Stop {
    pub(super) fn into_error(self) -> TurnError {
        match self {
            Stop::Quota { unit, claimed, budget, now } => {
                TurnError::QuotaExceeded { unit, used: claimed, budget, retry_after_secs: seconds_to_next_utc_day(now) }
            }
            Stop::Store { conflict: true, .. } => TurnError::Conflict,
            Stop::Store { message, .. } => TurnError::Store(StoreError::Backend(message)),
        }
    }
}

/// The request's pessimistic input estimate in tokens (see `budget::estimate_text`).
pub(super) fn estimated_input(request: &ChatRequest) -> u64 {
    let tools: usize = request
        .tools
        .iter()
        .map(|tool| {
            8 + crate::budget::estimate_text(&tool.name)
                + crate::budget::estimate_text(&tool.description)
                + crate::budget::estimate_text(&tool.parameters.to_string())
        })
        .sum();
    let input = crate::budget::estimate_text(&request.system)
        + crate::budget::estimate_text(&request.system_tail)
        + request.messages.iter().map(crate::budget::estimate_message).sum::<usize>()
        + tools;
    u64::try_from(input).unwrap_or(u64::MAX)
}

/// The tokens a call may cost before it is made: its estimated input and the most the model may
/// answer.
pub(super) fn call_reservation(request: &ChatRequest, output_tokens: u64) -> u64 {
    estimated_input(request).saturating_add(output_tokens).max(1)
}

/// The budget of `unit` that applies (the tenant's `own` override, else `default`; `None` when
/// unlimited), and the refusal when the day's spent and reserved amount, `claimed`, has reached it.
pub(super) fn within_budget(
    unit: BudgetUnit,
    default: u64,
    own: Option<BudgetOverride>,
    claimed: u64,
    now: OffsetDateTime,
) -> Result<Option<Limit>, TurnError> {
    let budget = match own {
        Some(BudgetOverride::Unlimited) => return Ok(None),
        Some(BudgetOverride::Limit(limit)) => limit,
        None => default,
    };
    if claimed < budget {
        return Ok(Some(Limit { budget, seen: claimed }));
    }
    tracing::info!(?unit, claimed, budget, "the tenant's daily budget is spent");
    Err(TurnError::QuotaExceeded { unit, used: claimed, budget, retry_after_secs: seconds_to_next_utc_day(now) })
}
