//! What a turn spends and the tenant's daily budgets: a meter per turn attempt counts every
//! answered model call (per model, with its cost at the price table's prices) and every sandbox
//! command; the commit adds the count to the tenant's usage in the same atomic write, and a turn
//! that fails after paid calls records its spend once with a write of its own. A tenant at or over
//! its budget of tokens (`DAILY_TOKEN_BUDGET`) or of money (`DAILY_BUDGET_USD`) is refused before
//! any call; under a budget each call reserves first (see `budget`).

mod gate;
mod meter;
mod reserve;

use std::sync::Arc;

use time::OffsetDateTime;

use super::{TurnError, TurnRequest, TurnService};
use crate::store::{BudgetState, BudgetUnit, Session};
use gate::{within_budget, Gate, Limit};
pub use meter::DEFAULT_MODEL_LABEL;
pub(in crate::turn) use meter::{Meter, MeteredModel, MeteredSandbox};

/// `YYYY-MM-DD` of `now` in UTC.
pub fn utc_day(now: OffsetDateTime) -> String {
    let date = now.to_offset(time::UtcOffset::UTC).date();
    format!("{:04}-{:02}-{:02}", date.year(), u8::from(date.month()), date.day())
}

/// Whole seconds from `now` to the next UTC midnight (at least 1): when a refused tenant may try again.
pub fn seconds_to_next_utc_day(now: OffsetDateTime) -> u64 {
    let now = now.to_offset(time::UtcOffset::UTC);
    let elapsed = i64::from(now.hour()) * 3600 + i64::from(now.minute()) * 60 + i64::from(now.second());
    u64::try_from(86_400 - elapsed).unwrap_or(1).max(1)
}

/// The budgets that apply to a tenant whose day stands at `state`, or the refusal of the first one
/// it is at or over. An operator's override of a unit applies only where the deployment has a
/// default budget of that unit.
fn budgets(
    tokens: Option<u64>,
    cost: Option<u64>,
    state: &BudgetState,
    now: OffsetDateTime,
) -> Result<(Option<Limit>, Option<Limit>), TurnError> {
    let tokens = match tokens {
        Some(default) => {
            let claimed = state.claimed_tokens.max(state.used_tokens);
            within_budget(BudgetUnit::Tokens, default, state.budget, claimed, now)?
        }
        None => None,
    };
    let cost = match cost {
        Some(default) => {
            let claimed = state.claimed_cost.max(state.used_cost);
            within_budget(BudgetUnit::Cost, default, state.cost_budget, claimed, now)?
        }
        None => None,
    };
    Ok((tokens, cost))
}

impl TurnService {
    /// The session, read together with the tenant's usage of the day when a daily budget applies
    /// (`DAILY_TOKEN_BUDGET`, `DAILY_BUDGET_USD`): a tenant at or over a budget is refused before
    /// any model call. Without a budget this is the session read alone.
    pub(super) async fn load_within_budget(&self, request: &TurnRequest) -> Result<Option<Session>, TurnError> {
        let meter = Meter::current();
        let (token_budget, cost_budget) = (self.config.daily_token_budget, self.config.daily_cost_budget);
        if token_budget.is_none() && cost_budget.is_none() {
            return Ok(self.sessions.load(&request.user, &request.session).await?);
        }
        let day = utc_day(request.now);
        let (session, state) = tokio::join!(
            self.sessions.load(&request.user, &request.session),
            self.sessions.budget_state(&request.user, &day),
        );
        let state = state?;
        self.report_misconfigured(&request.user, &state);
        let (tokens, cost) = budgets(token_budget, cost_budget, &state, request.now)?;
        if let (true, Some(meter)) = (tokens.is_some() || cost.is_some(), meter) {
            meter.set_gate(Gate {
                sessions: Arc::clone(&self.sessions),
                user: request.user.clone(),
                day,
                tokens,
                cost,
                output_tokens: u64::try_from(self.config.output_tokens).unwrap_or(u64::MAX),
                now: request.now,
            });
        }
        Ok(session?)
    }

    /// An unusable budget item is an operator's mistake that must not become the tenant's outage:
    /// the default applies, and the mistake is logged at error level with the item's key and
    /// counted (`BudgetConfigErrors`) for an alarm.
    fn report_misconfigured(&self, user: &crate::ids::UserId, state: &BudgetState) {
        if let Some(problem) = &state.misconfigured {
            tracing::error!(
                config_error = "token_budget",
                item = %format!("pk={user}#@usage, sk=TOKEN_BUDGET"),
                problem = %problem,
                "the tenant's TOKEN_BUDGET item is unusable; the deployment's default budget applies"
            );
            if let Some(alarm) = &self.config_alarm {
                alarm("BudgetConfigErrors");
            }
        }
    }

    /// Refuses the tenant when it is at or over a daily budget (see [`TurnError::QuotaExceeded`]);
    /// nothing is read without a budget. For a caller that must answer before the turn starts (a
    /// streamed response's status); the turn checks again itself.
    pub async fn check_budget(&self, user: &crate::ids::UserId, now: OffsetDateTime) -> Result<(), TurnError> {
        let (tokens, cost) = (self.config.daily_token_budget, self.config.daily_cost_budget);
        if tokens.is_none() && cost.is_none() {
            return Ok(());
        }
        let state = self.sessions.budget_state(user, &utc_day(now)).await?;
        self.report_misconfigured(user, &state);
        budgets(tokens, cost, &state, now).map(|_| ())
    }

    /// The tenant's usage from `from` to `to` (both `YYYY-MM-DD`, included), by day and model.
    pub async fn usage(
        &self,
        user: &crate::ids::UserId,
        from: &str,
        to: &str,
    ) -> Result<Vec<crate::store::UsageDay>, TurnError> {
        Ok(self.sessions.usage(user, from, to).await?)
    }

    /// After a failed attempt: what it spent on answered model calls and commands is real, so it
    /// is recorded once (a retry of the write carries the same token). Nothing is recorded when
    /// nothing was spent, or when the commit itself failed in storage (it may have been applied,
    /// with the spend in it).
    pub(super) async fn record_failed_spend(
        &self,
        request_user: &crate::ids::UserId,
        meter: &Meter,
        now: OffsetDateTime,
    ) {
        if meter::lock(&meter.state).commit_unknown {
            return;
        }
        let usage = meter.usage(now, false);
        // A reservation without a paid call is still given back.
        if usage.is_empty() && usage.reserved == 0 && usage.reserved_cost == 0 {
            return;
        }
        if let Err(err) = self.sessions.record_usage(request_user, &usage, &meter.spend_token()).await {
            tracing::warn!(error = %err, "could not record what the failed turn spent");
        }
    }
}

#[cfg(test)]
mod tests;
