//! The meter of one turn attempt: every answered model call (per model, its tokens as the provider
//! split them and their cost at the price table's prices) and every sandbox command, and the model
//! and sandbox wrappers that count them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sha2::Digest;
use time::OffsetDateTime;

use super::gate::{Gate, Stop};
use super::utc_day;
use crate::message::{ChatRequest, ChatResponse};
use crate::model::{ChatModel, DeltaSink, FileInput, ModelError};
use crate::pricing::PriceTable;
use crate::sandbox::{ExecOutcome, ExecRequest, Sandbox, SandboxError, SandboxLayout};
use crate::store::{ModelUsage, TurnUsage};
use crate::turn::TurnCost;

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
pub(in crate::turn) struct Meter {
    /// Unique to this attempt: the commit's token, and the seed of the failed spend's token.
    pub(in crate::turn) token: String,
    model: String,
    pub(super) state: Mutex<Spent>,
}

#[derive(Debug)]
pub(super) struct Spent {
    pub(super) models: BTreeMap<String, ModelUsage>,
    executions: u64,
    sandbox_ms: u64,
    /// The commit failed in storage: whether it was applied is unknown, so the spend is not
    /// recorded a second time on its own.
    pub(super) commit_unknown: bool,
    /// The tokens this attempt's model calls reserved, released by its commit or failed spend.
    pub(super) reserved: u64,
    /// The money (billionths of a dollar) they reserved, released the same way.
    pub(super) reserved_cost: u64,
    /// The daily budgets each model call reserves against; `None` without one.
    pub(super) gate: Option<Gate>,
    /// Why a reservation stopped the attempt, turned into the turn's error.
    pub(super) stopped: Option<Stop>,
    /// What the calls are priced at.
    pub(super) prices: Arc<PriceTable>,
    /// Models without a price already reported as invisible to the money budget.
    pub(super) unpriced_warned: BTreeSet<String>,
}

pub(super) fn lock(mutex: &Mutex<Spent>) -> std::sync::MutexGuard<'_, Spent> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Meter {
    /// A meter of `model`'s calls, priced at `prices` (the deployment's table).
    pub(in crate::turn) fn priced(model: &str, prices: Arc<PriceTable>) -> Self {
        let model = if model.trim().is_empty() { DEFAULT_MODEL_LABEL } else { model.trim() };
        Self {
            token: hex::encode(rand::random::<[u8; 16]>()),
            model: model.chars().take(MAX_MODEL_LABEL).collect(),
            state: Mutex::new(Spent {
                models: BTreeMap::new(),
                executions: 0,
                sandbox_ms: 0,
                commit_unknown: false,
                reserved: 0,
                reserved_cost: 0,
                gate: None,
                stopped: None,
                prices,
                unpriced_warned: BTreeSet::new(),
            }),
        }
    }

    /// Runs `attempt` with this meter counting its model calls and commands.
    pub(in crate::turn) async fn scope<F: std::future::Future>(self: Arc<Self>, attempt: F) -> F::Output {
        METER.scope(self, attempt).await
    }

    /// The meter of the attempt running in this task, if any.
    pub(in crate::turn) fn current() -> Option<Arc<Meter>> {
        METER.try_with(Arc::clone).ok()
    }

    /// The usage label of a call: its request's own model, else the configured one.
    pub(super) fn label(&self, request: &ChatRequest) -> String {
        match request.model.as_deref().map(str::trim).filter(|model| !model.is_empty()) {
            Some(own) => own.chars().take(MAX_MODEL_LABEL).collect(),
            None => self.model.clone(),
        }
    }

    fn model_call(&self, request: &ChatRequest, response: &ChatResponse) {
        let model = self.label(request);
        let mut state = lock(&self.state);
        let price = state.prices.price(&model);
        let usage = ModelUsage {
            input_tokens: response.usage.input_tokens,
            output_tokens: response.usage.output_tokens,
            cache_read_tokens: response.usage.cache_read_tokens,
            cache_write_tokens: response.usage.cache_write_tokens,
            model_calls: 1,
            cost_nanos: price.map_or(0, |price| price.cost_nanos(&response.usage)),
            unpriced_calls: u64::from(price.is_none()),
        };
        state.models.entry(model).or_default().add(&usage);
    }

    fn execution(&self, outcome: &ExecOutcome) {
        let mut state = lock(&self.state);
        state.executions += 1;
        state.sandbox_ms += u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX);
    }

    pub(in crate::turn) fn mark_commit_unknown(&self) {
        lock(&self.state).commit_unknown = true;
    }

    /// The spend so far, for the UTC day of `now`.
    pub(in crate::turn) fn usage(&self, now: OffsetDateTime, committed: bool) -> TurnUsage {
        let state = lock(&self.state);
        TurnUsage {
            day: utc_day(now),
            models: state.models.clone(),
            executions: state.executions,
            sandbox_ms: state.sandbox_ms,
            committed,
            reserved: state.reserved,
            reserved_cost: state.reserved_cost,
            grading: false,
        }
    }

    /// What the attempt's calls cost so far: dollars over the priced calls (`None` when none was
    /// priced), and the models without a price.
    pub(in crate::turn) fn cost(&self) -> TurnCost {
        cost_of(&lock(&self.state).models)
    }

    /// The client request token of the failed spend's write: derived from the attempt's, so an SDK
    /// retry of the write is recognised, and distinct from the commit's.
    pub(super) fn spend_token(&self) -> String {
        hex::encode(&sha2::Sha256::digest(format!("spend:{}", self.token).as_bytes())[..16])
    }
}

/// The cost of `models`' calls, as a turn's reply gives it.
pub(in crate::turn) fn cost_of(models: &BTreeMap<String, ModelUsage>) -> TurnCost {
    let priced = models.values().any(|usage| usage.model_calls > usage.unpriced_calls);
    let nanos: u64 = models.values().map(|usage| usage.cost_nanos).sum();
    TurnCost {
        usd: priced.then(|| crate::store::nanos_to_usd(nanos)),
        unpriced_models: models
            .iter()
            .filter(|(_, usage)| usage.unpriced_calls > 0)
            .map(|(model, _)| model.clone())
            .collect(),
    }
}

/// The model every turn calls through: reserves what each call may cost under a daily budget, and
/// counts each answered call on the attempt's meter.
pub(in crate::turn) struct MeteredModel {
    pub(in crate::turn) inner: Arc<dyn ChatModel>,
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
pub(in crate::turn) struct MeteredSandbox {
    pub(in crate::turn) inner: Arc<dyn Sandbox>,
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
