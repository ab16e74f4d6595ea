//! What a turn spends and the tenant's daily token budget: a meter per turn attempt counts every
//! answered model call (per model) and every sandbox command; the commit adds the count to the
//! tenant's usage in the same atomic write, and a turn that fails after paid calls records its
//! spend once with a write of its own. A tenant at or over its budget is refused before any call.
//!
//! Under a budget every model call first reserves what it may cost (its estimated input and the
//! most it may answer, capped by what is left) with an atomic conditional write of the day's usage;
//! the commit (or the failed spend) releases the turn's reservations as it adds what was spent. So
//! parallel turns cannot together pass the budget by more than one call's reservation.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sha2::Digest;
use time::OffsetDateTime;

use super::{TurnError, TurnRequest, TurnService};
use crate::ids::UserId;
use crate::message::{ChatRequest, ChatResponse};
use crate::model::{ChatModel, DeltaSink, FileInput, ModelError};
use crate::sandbox::{ExecOutcome, ExecRequest, Sandbox, SandboxError, SandboxLayout};
use crate::store::{BudgetOverride, BudgetUnit, ModelUsage, Reservation, Session, SessionStore, StoreError, TurnUsage};

/// The usage label of the configured model when `LLM_MODEL` names none.
pub const DEFAULT_MODEL_LABEL: &str = "default";
/// Longest model id kept as a usage label (an inference profile ARN is far shorter).
const MAX_MODEL_LABEL: usize = 256;

tokio::task_local! {
    /// The meter of the turn attempt running in this task. Model calls and commands made outside a
    /// turn (none today) are not counted.
    static METER: Arc<Meter>;
}

/// What one turn attempt spent so far.
#[derive(Debug)]
pub(super) struct Meter {
    /// Unique to this attempt: the commit's token, and the seed of the failed spend's token.
    pub(super) token: String,
    model: String,
    state: Mutex<Spent>,
}

#[derive(Debug, Default)]
struct Spent {
    models: BTreeMap<String, ModelUsage>,
    executions: u64,
    sandbox_ms: u64,
    /// The commit failed in storage: whether it was applied is unknown, so the spend is not
    /// recorded a second time on its own.
    commit_unknown: bool,
    /// The tokens this attempt's model calls reserved, released by its commit or failed spend.
    reserved: u64,
    /// The daily budget each model call reserves against; `None` without a budget (or unlimited).
    gate: Option<Gate>,
    /// Why a reservation stopped the attempt, turned into the turn's error.
    stopped: Option<Stop>,
}

/// Where and against what a turn's model calls reserve tokens.
#[derive(Clone)]
struct Gate {
    sessions: Arc<dyn SessionStore>,
    user: UserId,
    day: String,
    budget: u64,
    /// The day's claimed tokens as last seen (a hint for the next reservation).
    seen: u64,
    /// The most tokens one call may answer with (`LLM_MAX_TOKENS`).
    output_tokens: u64,
    now: OffsetDateTime,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate").field("day", &self.day).field("budget", &self.budget).finish_non_exhaustive()
    }
}

/// Why a model call was not made.
#[derive(Debug, Clone)]
enum Stop {
    Quota {
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
    fn into_error(self) -> TurnError {
        match self {
            Stop::Quota { claimed, budget, now } => {
                TurnError::QuotaExceeded { used: claimed, budget, retry_after_secs: seconds_to_next_utc_day(now) }
            }
            Stop::Store { conflict: true, .. } => TurnError::Conflict,
            Stop::Store { message, .. } => TurnError::Store(StoreError::Backend(message)),
        }
    }
}

/// The tokens a call may cost before it is made: the request's pessimistic estimate (see
/// `budget::estimate_text`) and the most the model may answer.
fn call_reservation(request: &ChatRequest, output_tokens: u64) -> u64 {
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
        + request.messages.iter().map(crate::budget::estimate_message).sum::<usize>()
        + tools;
    u64::try_from(input).unwrap_or(u64::MAX).saturating_add(output_tokens).max(1)
}

fn lock(mutex: &Mutex<Spent>) -> std::sync::MutexGuard<'_, Spent> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Meter {
    pub(super) fn new(model: &str) -> Self {
        let model = if model.trim().is_empty() { DEFAULT_MODEL_LABEL } else { model.trim() };
        Self {
            token: hex::encode(rand::random::<[u8; 16]>()),
            model: model.chars().take(MAX_MODEL_LABEL).collect(),
            state: Mutex::new(Spent::default()),
        }
    }

    /// Runs `attempt` with this meter counting its model calls and commands.
    pub(super) async fn scope<F: std::future::Future>(self: Arc<Self>, attempt: F) -> F::Output {
        METER.scope(self, attempt).await
    }

    /// The meter of the attempt running in this task, if any.
    pub(super) fn current() -> Option<Arc<Meter>> {
        METER.try_with(Arc::clone).ok()
    }

    fn model_call(&self, request: &ChatRequest, response: &ChatResponse) {
        let model = match request.model.as_deref().map(str::trim).filter(|model| !model.is_empty()) {
            Some(own) => own.chars().take(MAX_MODEL_LABEL).collect(),
            None => self.model.clone(),
        };
        let usage = ModelUsage {
            input_tokens: response.usage.input_tokens,
            output_tokens: response.usage.output_tokens,
            cache_read_tokens: response.usage.cache_read_tokens,
            cache_write_tokens: response.usage.cache_write_tokens,
            model_calls: 1,
            ..ModelUsage::default()
        };
        lock(&self.state).models.entry(model).or_default().add(&usage);
    }

    fn execution(&self, outcome: &ExecOutcome) {
        let mut state = lock(&self.state);
        state.executions += 1;
        state.sandbox_ms += u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX);
    }

    pub(super) fn mark_commit_unknown(&self) {
        lock(&self.state).commit_unknown = true;
    }

    /// From now on, every model call of this attempt reserves against `budget` first.
    fn set_gate(&self, gate: Gate) {
        lock(&self.state).gate = Some(gate);
    }

    /// The error that stopped the attempt at a reservation, if one did.
    pub(super) fn stopped(&self) -> Option<TurnError> {
        lock(&self.state).stopped.clone().map(Stop::into_error)
    }

    /// Reserves what `request` may cost before it is sent. What the attempt reserved and has not
    /// spent yet covers the call first; only the rest is asked of the store, capped by what is left.
    /// The call is refused when the store has nothing left and the attempt holds nothing unspent,
    /// so a turn's own earlier reservation never stops its next call. Without a budget this does
    /// nothing.
    async fn reserve(&self, request: &ChatRequest) -> Result<(), ModelError> {
        let (gate, unspent) = {
            let state = lock(&self.state);
            let Some(gate) = state.gate.clone() else { return Ok(()) };
            let spent: u64 = state.models.values().map(ModelUsage::tokens).sum();
            (gate, state.reserved.saturating_sub(spent))
        };
        let want = call_reservation(request, gate.output_tokens);
        let need = want.saturating_sub(unspent);
        if need == 0 {
            return Ok(());
        }
        let outcome =
            gate.sessions.reserve(&gate.user, &gate.day, BudgetUnit::Tokens, need, gate.budget, gate.seen).await;
        let mut state = lock(&self.state);
        match outcome {
            Ok(Reservation::Granted { tokens, claimed }) => {
                state.reserved = state.reserved.saturating_add(tokens);
                if let Some(gate) = state.gate.as_mut() {
                    gate.seen = claimed;
                }
                tracing::debug!(reserved = tokens, asked = need, unspent, claimed, "reserved tokens for a model call");
                Ok(())
            }
            Ok(Reservation::Refused { claimed }) if unspent > 0 => {
                // The budget is held in full; this call goes on what the turn still holds.
                if let Some(gate) = state.gate.as_mut() {
                    gate.seen = claimed;
                }
                Ok(())
            }
            Ok(Reservation::Refused { claimed }) => {
                tracing::info!(claimed, budget = gate.budget, "the tenant's daily token budget is spent");
                state.stopped = Some(Stop::Quota { claimed, budget: gate.budget, now: gate.now });
                Err(ModelError::Rejected { status: 429, message: "the daily token budget is spent".to_owned() })
            }
            Err(err) => {
                let message = err.to_string();
                state.stopped =
                    Some(Stop::Store { conflict: matches!(err, StoreError::Conflict), message: message.clone() });
                Err(ModelError::Unavailable { attempts: 1, message: format!("reserving tokens: {message}") })
            }
        }
    }

    /// The spend so far, for the UTC day of `now`.
    pub(super) fn usage(&self, now: OffsetDateTime, committed: bool) -> TurnUsage {
        let state = lock(&self.state);
        TurnUsage {
            day: utc_day(now),
            models: state.models.clone(),
            executions: state.executions,
            sandbox_ms: state.sandbox_ms,
            committed,
            reserved: state.reserved,
            reserved_cost: 0,
            grading: false,
        }
    }

    /// The client request token of the failed spend's write: derived from the attempt's, so an SDK
    /// retry of the write is recognised, and distinct from the commit's.
    fn spend_token(&self) -> String {
        hex::encode(&sha2::Sha256::digest(format!("spend:{}", self.token).as_bytes())[..16])
    }
}

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

/// The model every turn calls through: counts each answered call on the attempt's meter.
pub(super) struct MeteredModel {
    pub(super) inner: Arc<dyn ChatModel>,
}

#[async_trait]
impl ChatModel for MeteredModel {
    fn file_input(&self) -> FileInput {
        self.inner.file_input()
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        if let Some(meter) = Meter::current() {
            meter.reserve(request).await?;
        }
        let response = self.inner.complete(request).await?;
        if let Some(meter) = Meter::current() {
            meter.model_call(request, &response);
        }
        Ok(response)
    }

    async fn complete_streaming(
        &self,
        request: &ChatRequest,
        sink: &dyn DeltaSink,
    ) -> Result<ChatResponse, ModelError> {
        if let Some(meter) = Meter::current() {
            meter.reserve(request).await?;
        }
        let response = self.inner.complete_streaming(request, sink).await?;
        if let Some(meter) = Meter::current() {
            meter.model_call(request, &response);
        }
        Ok(response)
    }
}

/// The sandbox every turn runs commands in: counts each finished command and its time.
pub(super) struct MeteredSandbox {
    pub(super) inner: Arc<dyn Sandbox>,
}

#[async_trait]
impl Sandbox for MeteredSandbox {
    fn layout(&self) -> SandboxLayout {
        self.inner.layout()
    }

    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn execute(&self, request: ExecRequest) -> Result<ExecOutcome, SandboxError> {
        let outcome = self.inner.execute(request).await?;
        if let Some(meter) = Meter::current() {
            meter.execution(&outcome);
        }
        Ok(outcome)
    }
}

impl TurnService {
    /// The session, read together with the tenant's usage of the day when a daily budget applies
    /// (`DAILY_TOKEN_BUDGET`): a tenant at or over its budget is refused before any model call.
    /// Without a budget this is the session read alone.
    pub(super) async fn load_within_budget(&self, request: &TurnRequest) -> Result<Option<Session>, TurnError> {
        let Some(default) = self.config.daily_token_budget else {
            return Ok(self.sessions.load(&request.user, &request.session).await?);
        };
        let day = utc_day(request.now);
        let (session, budget) = tokio::join!(
            self.sessions.load(&request.user, &request.session),
            self.sessions.budget_state(&request.user, &day),
        );
        let budget = budget?;
        self.report_misconfigured(&request.user, &budget);
        let seen = budget.claimed_tokens.max(budget.used_tokens);
        if let (Some(budget), Some(meter)) = (within_budget(default, budget, request.now)?, Meter::current()) {
            meter.set_gate(Gate {
                sessions: Arc::clone(&self.sessions),
                user: request.user.clone(),
                day,
                budget,
                seen,
                output_tokens: u64::try_from(self.config.output_tokens).unwrap_or(u64::MAX),
                now: request.now,
            });
        }
        Ok(session?)
    }

    /// An unusable budget item is an operator's mistake that must not become the tenant's outage:
    /// the default applies, and the mistake is logged at error level with the item's key and
    /// counted (`BudgetConfigErrors`) for an alarm.
    fn report_misconfigured(&self, user: &UserId, state: &crate::store::BudgetState) {
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

    /// Refuses the tenant when it is at or over its daily budget (see [`TurnError::QuotaExceeded`]);
    /// nothing is read without a budget. For a caller that must answer before the turn starts (a
    /// streamed response's status); the turn checks again itself.
    pub async fn check_budget(&self, user: &crate::ids::UserId, now: OffsetDateTime) -> Result<(), TurnError> {
        let Some(default) = self.config.daily_token_budget else { return Ok(()) };
        let state = self.sessions.budget_state(user, &utc_day(now)).await?;
        self.report_misconfigured(user, &state);
        within_budget(default, state, now).map(|_| ())
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
        if lock(&meter.state).commit_unknown {
            return;
        }
        let usage = meter.usage(now, false);
        // A reservation without a paid call is still given back.
        if usage.is_empty() && usage.reserved == 0 {
            return;
        }
        if let Err(err) = self.sessions.record_usage(request_user, &usage, &meter.spend_token()).await {
            tracing::warn!(error = %err, "could not record what the failed turn spent");
        }
    }
}

/// The budget that applies (the tenant's override, else `default`; `None` when unlimited), and the
/// refusal when the day's spent and reserved tokens have reached it.
fn within_budget(
    default: u64,
    state: crate::store::BudgetState,
    now: OffsetDateTime,
) -> Result<Option<u64>, TurnError> {
    let budget = match state.budget {
        Some(BudgetOverride::Unlimited) => return Ok(None),
        Some(BudgetOverride::Limit(tokens)) => tokens,
        None => default,
    };
    let claimed = state.claimed_tokens.max(state.used_tokens);
    if claimed < budget {
        return Ok(Some(budget));
    }
    tracing::info!(used_tokens = state.used_tokens, claimed, budget, "the tenant's daily token budget is spent");
    Err(TurnError::QuotaExceeded { used: claimed, budget, retry_after_secs: seconds_to_next_utc_day(now) })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let state = |used, budget| crate::store::BudgetState {
            used_tokens: used,
            claimed_tokens: used,
            budget,
            ..crate::store::BudgetState::default()
        };
        assert!(within_budget(100, state(99, None), now).is_ok());
        let refused = within_budget(100, state(100, None), now).unwrap_err();
        assert!(matches!(refused, TurnError::QuotaExceeded { used: 100, budget: 100, retry_after_secs: 86_400 }));
        assert!(within_budget(100, state(500, Some(BudgetOverride::Limit(1_000))), now).is_ok());
        assert!(within_budget(100, state(5, Some(BudgetOverride::Limit(0))), now).is_err());
        assert!(matches!(within_budget(0, state(u64::MAX, Some(BudgetOverride::Unlimited)), now), Ok(None)));
        let reserved = crate::store::BudgetState { claimed_tokens: 100, ..state(40, None) };
        assert!(within_budget(100, reserved, now).is_err(), "reservations count against the budget");
    }

    #[test]
    fn a_call_reserves_its_estimated_input_and_its_most_output() {
        let request = ChatRequest {
            system: "x".repeat(300),
            system_tail: String::new(),
            cache_key: None,
            messages: vec![crate::message::Message::User { content: "y".repeat(30), files: Vec::new() }],
            tools: Arc::default(),
            model: None,
            response_format: None,
            files: Default::default(),
        };
        assert_eq!(call_reservation(&request, 4096), 100 + (4 + 10) + 4096);
        assert_eq!(call_reservation(&request, 0), 114);
    }
}
