//! A tenant's daily budgets, of tokens and of money: which applies, the refusal before any call of
//! a tenant at or over one, and the reservation each model call makes first.
//!
//! Under a budget every model call first reserves what it may cost (its estimated input and the
//! most it may answer, capped by what is left; in money, at the dearer of the input and cache-write
//! prices and the output price) with an atomic conditional write of the day's usage; the commit (or
//! the failed spend) releases the turn's reservations as it adds what was spent. So parallel turns
//! cannot together pass a budget by more than one call's reservation.

use std::sync::Arc;

use time::OffsetDateTime;

use super::meter::{lock, Meter};
use super::seconds_to_next_utc_day;
use crate::ids::UserId;
use crate::message::ChatRequest;
use crate::model::ModelError;
use crate::store::{BudgetOverride, BudgetUnit, ModelUsage, Reservation, SessionStore, StoreError};
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

impl Meter {
    /// From now on, every model call of this attempt reserves against the gate's budgets first.
    pub(super) fn set_gate(&self, gate: Gate) {
        lock(&self.state).gate = Some(gate);
    }

    /// The error that stopped the attempt at a reservation, if one did.
    pub(in crate::turn) fn stopped(&self) -> Option<TurnError> {
        lock(&self.state).stopped.clone().map(Stop::into_error)
    }

    /// Reserves what `request` may cost before it is sent, in tokens and in money as budgets
    /// apply. Without a budget this does nothing. A model without a price reserves no money (its
    /// tokens still count against a token budget), and a warning says the money budget cannot see it.
    pub(super) async fn reserve(&self, request: &ChatRequest) -> Result<(), ModelError> {
        let (gate, price) = {
            let mut state = lock(&self.state);
            let Some(gate) = state.gate.clone() else { return Ok(()) };
            let model = self.label(request);
            let price = state.prices.price(&model);
            if gate.cost.is_some() && price.is_none() && state.unpriced_warned.insert(model.clone()) {
                tracing::warn!(
                    model = %model,
                    "the model has no price (MODEL_PRICES): the daily money budget cannot see its calls, only a \
                     token budget counts them"
                );
            }
            (gate, price)
        };
        if let Some(limit) = gate.tokens {
            let want = call_reservation(request, gate.output_tokens);
            self.reserve_unit(&gate, BudgetUnit::Tokens, limit, want).await?;
        }
        if let (Some(limit), Some(price)) = (gate.cost, price) {
            let want = price.most_nanos(estimated_input(request), gate.output_tokens);
            if want > 0 {
                self.reserve_unit(&gate, BudgetUnit::Cost, limit, want).await?;
            }
        }
        Ok(())
    }

    /// Reserves `want` in `unit`. What the attempt reserved and has not spent yet covers the call
    /// first; only the rest is asked of the store, capped by what is left. The call is refused when
    /// the store has nothing left and the attempt holds nothing unspent, so a turn's own earlier
    /// reservation never stops its next call.
    async fn reserve_unit(&self, gate: &Gate, unit: BudgetUnit, limit: Limit, want: u64) -> Result<(), ModelError> {
        let unspent = {
            let state = lock(&self.state);
            match unit {
                BudgetUnit::Tokens => {
                    state.reserved.saturating_sub(state.models.values().map(ModelUsage::tokens).sum())
                }
                BudgetUnit::Cost => {
                    state.reserved_cost.saturating_sub(state.models.values().map(|usage| usage.cost_nanos).sum())
                }
            }
        };
        let need = want.saturating_sub(unspent);
        if need == 0 {
            return Ok(());
        }
        let outcome = gate.sessions.reserve(&gate.user, &gate.day, unit, need, limit.budget, limit.seen).await;
        let mut state = lock(&self.state);
        let see = |state: &mut super::meter::Spent, claimed: u64| {
            if let Some(gate) = state.gate.as_mut() {
                let limit = match unit {
                    BudgetUnit::Tokens => gate.tokens.as_mut(),
                    BudgetUnit::Cost => gate.cost.as_mut(),
                };
                if let Some(limit) = limit {
                    limit.seen = claimed;
                }
            }
        };
        match outcome {
            Ok(Reservation::Granted { tokens: granted, claimed }) => {
                match unit {
                    BudgetUnit::Tokens => state.reserved = state.reserved.saturating_add(granted),
                    BudgetUnit::Cost => state.reserved_cost = state.reserved_cost.saturating_add(granted),
                }
                see(&mut state, claimed);
                tracing::debug!(?unit, reserved = granted, asked = need, unspent, claimed, "reserved for a model call");
                Ok(())
            }
            Ok(Reservation::Refused { claimed }) if unspent > 0 => {
                // The budget is held in full; this call goes on what the turn still holds.
                see(&mut state, claimed);
                Ok(())
            }
            Ok(Reservation::Refused { claimed }) => {
                tracing::info!(?unit, claimed, budget = limit.budget, "the tenant's daily budget is spent");
                state.stopped = Some(Stop::Quota { unit, claimed, budget: limit.budget, now: gate.now });
                let message = match unit {
                    BudgetUnit::Tokens => "the daily token budget is spent",
                    BudgetUnit::Cost => "the daily money budget is spent",
                };
                Err(ModelError::Rejected { status: 429, message: message.to_owned() })
            }
            Err(err) => {
                let message = err.to_string();
                state.stopped =
                    Some(Stop::Store { conflict: matches!(err, StoreError::Conflict), message: message.clone() });
                Err(ModelError::Unavailable { attempts: 1, message: format!("reserving a model call: {message}") })
            }
        }
    }
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
