//! The reservation each model call makes first, under a budget: what the attempt holds unspent
//! covers the call first; only the rest is asked of the store, in tokens and in money.

use super::gate::{call_reservation, estimated_input, Gate, Limit, Stop};
use super::meter::{lock, Meter};
use crate::message::ChatRequest;
use crate::model::ModelError;
use crate::store::{BudgetUnit, ModelUsage, Reservation, StoreError};
use crate::turn::TurnError;

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
