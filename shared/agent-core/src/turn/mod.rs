//! One turn end to end, over the ports: load the session and the catalog, run the loop,
//! then commit the turn with the per-turn state reset, or change nothing at all.
//!
//! A file per step: `skills` (a turn of the skills strategy, slash commands), `planner` (a turn of
//! the planner strategy), `summary` (history summaries), `commit` (storing the turn), `files` and
//! `memories` (a session's workspace files and the user's memories, for the HTTP API), `approval`
//! (a turn paused for approval, taken back); this file
//! holds the types, the service and the idempotency claim and panic boundary around a turn.

mod approval;
mod commit;
mod files;
mod memories;
mod planner;
mod skills;
mod summary;
mod usage;

pub use approval::MAX_SHOWN_ARGUMENT_BYTES;
pub use commit::INLINE_TOOL_RESULT_BYTES;
pub use files::{FileDownload, DOWNLOAD_LINK_LIFETIME};
pub use memories::MemoryFile;
pub use skills::parse_slash_command;
pub use usage::{seconds_to_next_utc_day, utc_day, DEFAULT_MODEL_LABEL};

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde::{Deserialize, Serialize};
use thiserror::Error;
pub use time::OffsetDateTime;
use tokio::time::Instant;

use crate::agent::Decisions;
use crate::agent::Ending;
use crate::budget;
use crate::events::ApprovalCall;
use crate::events::{NoObserver, TurnEvent, TurnObserver};
use crate::expert::Experts;
use crate::ids::{SessionId, SkillPath, TicketId, UserId};
use crate::message::Usage;
use crate::model::{ChatModel, ModelError};
use crate::planner::PlannerConfig;
use crate::prompt::{PromptTemplate, SkillPromptMode, TemplateError, DEFAULT_TEMPLATE};
use crate::sandbox::Sandbox;
use crate::skills::{Catalog, CatalogView, SkillLibrary};
use crate::store::{
    Accepted, Claim, HistoryPage, IdempotencyKey, ObjectStore, Session, SessionStore, StoreError, TurnStatus,
};
use crate::tools::{ApprovalPolicy, SubagentConfig};
use crate::vfs::BlobCache;

/// Longest user message accepted, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// Settings that do not change between turns.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub max_steps: u32,
    pub prompt_mode: SkillPromptMode,
    /// Time kept back before the invocation deadline to persist and answer.
    pub deadline_reserve: Duration,
    /// `{language}` when the user's identity does not say.
    pub default_language: String,
    /// The model's context window in tokens (`LLM_CONTEXT_TOKENS`).
    pub context_tokens: usize,
    /// Tokens kept free for the model's answer (`LLM_MAX_TOKENS`).
    pub output_tokens: usize,
    /// History size, in estimated tokens, above which older turns are summarised
    /// (`HISTORY_SUMMARY_TOKENS`; default half of the input budget).
    pub summary_threshold: Option<usize>,
    /// Tokens the state-1 skill listing may take (`SKILL_LISTING_TOKENS`; default derived from the
    /// input budget, see [`AgentConfig::listing_tokens`]).
    pub skill_listing_tokens: Option<usize>,
    /// `AGENT_STRATEGY`: skills (default) or planner.
    pub strategy: Strategy,
    pub planner: PlannerConfig,
    /// The configured model's id (`LLM_MODEL`), the label its calls are counted under in the
    /// tenant's usage; empty counts them under [`DEFAULT_MODEL_LABEL`].
    pub model_id: String,
    /// Tokens (input and output) a tenant may use a UTC day unless an operator set its own
    /// (`DAILY_TOKEN_BUDGET`); `None`: no budget, and no read of the usage before a turn.
    pub daily_token_budget: Option<u64>,
    /// The provider's name (`LLM_PROVIDER`: `openai`, `anthropic`, `bedrock`...), recorded on each
    /// model call's span; empty when unknown.
    pub model_provider: String,
    /// The bounds of subagents started by `task` (`SUBAGENT_MAX_DEPTH`, `SUBAGENTS_PER_TURN`,
    /// `SUBAGENT_MAX_STEPS`); a depth of 0 offers no `task`.
    pub subagents: SubagentConfig,
    /// Which tool calls wait for a person's approval (`APPROVAL_REQUIRED`, `APPROVAL_ALLOW`).
    pub approvals: ApprovalPolicy,
}

/// How turns are answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Strategy {
    /// The two-state skills prompt with `load_skill` and the virtual filesystem.
    #[default]
    Skills,
    /// Plans across expert MCP servers.
    Planner,
}

impl std::str::FromStr for Strategy {
    type Err = String;
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "skills" => Ok(Self::Skills),
            "planner" => Ok(Self::Planner),
            other => Err(format!("AGENT_STRATEGY must be `skills` or `planner`, not `{other}`")),
        }
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            max_steps: 15,
            prompt_mode: SkillPromptMode::Replace,
            deadline_reserve: Duration::from_secs(3),
            default_language: "the language the user writes in".to_owned(),
            context_tokens: budget::DEFAULT_CONTEXT_TOKENS,
            output_tokens: 4096,
            summary_threshold: None,
            skill_listing_tokens: None,
            strategy: Strategy::Skills,
            planner: PlannerConfig::default(),
            model_id: String::new(),
            daily_token_budget: None,
            model_provider: String::new(),
            subagents: SubagentConfig::default(),
            approvals: ApprovalPolicy::default(),
        }
    }
}

impl AgentConfig {
    /// Most tokens one request may carry.
    pub fn input_tokens(&self) -> usize {
        self.context_tokens.saturating_sub(self.output_tokens).max(1024)
    }

    /// The listing's budget: `SKILL_LISTING_TOKENS`, or an eighth of the input budget between 500 and
    /// 4,000 tokens, so the listing never crowds out the conversation.
    pub fn listing_tokens(&self) -> usize {
        self.skill_listing_tokens.unwrap_or_else(|| (self.input_tokens() / 8).clamp(500, 4000))
    }

    fn summary_threshold(&self) -> usize {
        self.summary_threshold.unwrap_or(self.input_tokens() / 2)
    }
}

/// Who is asking, as far as the prompt cares; taken from the authenticated identity.
#[derive(Debug, Clone, Default)]
pub struct UserProfile {
    pub name: Option<String>,
    pub language: Option<String>,
    pub description: Option<String>,
}

/// A validated request for one turn.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    pub user: UserId,
    pub session: SessionId,
    pub message: String,
    pub ticket: Option<TicketId>,
    pub profile: UserProfile,
    pub deadline: Option<Instant>,
    pub now: OffsetDateTime,
    /// The client's idempotency key: a repeated key replays the committed reply instead of
    /// running the turn again.
    pub idempotency: Option<IdempotencyKey>,
    /// A person's decisions on the calls a paused turn waits on; the turn then goes on instead
    /// of starting from `message` (which is empty).
    pub decisions: Option<Decisions>,
}

/// How long a claim on an idempotency key outlives the invocation's deadline (or lasts, without
/// one): a turn killed mid-run gives its key up after this, so a redelivery can run it.
const CLAIM_LEASE_MARGIN_SECS: i64 = 60;
const CLAIM_LEASE_WITHOUT_DEADLINE_SECS: i64 = 15 * 60;

/// The result of a committed turn; its JSON is the HTTP API's 200 body and the stored replay.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TurnReply {
    pub session_id: SessionId,
    pub reply: String,
    /// The skill the turn ended in; the stored session is reset to none.
    pub current_skill: Option<SkillPath>,
    /// The skill forced by a slash command, if any.
    pub forced_skill: Option<SkillPath>,
    /// Tool calls refused because the tool was not offered.
    pub refused_tool_calls: u32,
    pub steps: u32,
    pub usage: Usage,
    pub ending: Ending,
    /// The session's version after this turn.
    pub version: u64,
    /// The workspace files this turn wrote (by a file tool or a command) that it kept, downloadable
    /// from `GET /sessions/{id}/files/{path}`.
    #[serde(default)]
    pub files: Vec<ReplyFile>,
    /// Commands run in the sandbox.
    #[serde(default)]
    pub executions: u32,
    /// With ending `awaiting_approval`: the calls that wait (large arguments replaced by their
    /// size; the whole call is the last assistant message of the session's history).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_approval: Vec<ApprovalCall>,
    /// True when this is the stored reply of an earlier delivery with the same idempotency key.
    #[serde(skip)]
    pub replayed: bool,
}

/// A file a turn wrote: its `/workspace` path and size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyFile {
    pub path: String,
    pub size: u64,
}

/// Why a turn failed. Whatever the variant, the session is as it was before the turn.
#[derive(Debug, Error)]
pub enum TurnError {
    #[error("{0}")]
    InvalidInput(String),
    /// A slash command that names no skill of the tenant; nothing was sent to the model.
    #[error("{}", unknown_skill_message(command, suggestions))]
    UnknownSkill { command: String, suggestions: Vec<String> },
    #[error("the session was changed by a concurrent turn; retry")]
    Conflict,
    /// The session's last turn waits for decisions on these calls; a new message cannot start.
    #[error("the session waits for decisions on the tool calls {}", calls.join(", "))]
    ApprovalPending { calls: Vec<String> },
    /// The decisions do not answer the calls that wait (or none wait).
    #[error("{0}")]
    NotPending(String),
    /// A turn with the same idempotency key is running now.
    #[error("a turn with this idempotency key is still running; retry later")]
    InProgress,
    /// The idempotency key was used before with a different request.
    #[error("this idempotency key was used with a different request")]
    IdempotencyMismatch,
    /// The tenant has used its daily token budget (`used` of `budget` tokens); nothing was sent to
    /// the model. The budget renews at the next UTC midnight, `retry_after_secs` from now.
    #[error("the daily token budget is spent ({used} of {budget} tokens); it renews at 00:00 UTC")]
    QuotaExceeded { used: u64, budget: u64, retry_after_secs: u64 },
    /// The background turn with this idempotency key failed for good; `error` is what it answered.
    #[error("the turn with this idempotency key failed: {error}")]
    AlreadyFailed { error: serde_json::Value },
    /// The invocation's deadline came before a single model call could be made; nothing was
    /// committed, and a retry with more time runs the turn.
    #[error("no time was left for a model call before the invocation's deadline")]
    OutOfTime,
    /// A defect (a panic) inside the turn; nothing was committed.
    #[error("internal error: {0}")]
    Internal(String),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Store(StoreError),
    #[error("configuration error: {0}")]
    Config(#[from] TemplateError),
}

fn unknown_skill_message(command: &str, suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        format!("unknown skill command `{command}`: no skill has that name")
    } else {
        format!("unknown skill command `{command}`; did you mean {}?", suggestions.join(", "))
    }
}

impl From<StoreError> for TurnError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict => TurnError::Conflict,
            other => TurnError::Store(other),
        }
    }
}

/// Runs turns for any storage and model. Cheap to share: build it once per process.
pub struct TurnService {
    sessions: Arc<dyn SessionStore>,
    objects: Arc<dyn ObjectStore>,
    model: Arc<dyn ChatModel>,
    skills: SkillLibrary,
    blobs: BlobCache,
    default_template: PromptTemplate,
    config: AgentConfig,
    experts: Option<Arc<dyn Experts>>,
    sandbox: Option<Arc<dyn Sandbox>>,
    /// Counts a configuration error by its metric name (an operator's unusable budget item), so
    /// an alarm can watch it; the core itself writes no metrics.
    config_alarm: Option<ConfigAlarm>,
}

/// Counts one configuration error under a metric name.
pub type ConfigAlarm = Arc<dyn Fn(&str) + Send + Sync>;

impl TurnService {
    pub fn new(
        sessions: Arc<dyn SessionStore>,
        objects: Arc<dyn ObjectStore>,
        model: Arc<dyn ChatModel>,
        config: AgentConfig,
    ) -> Self {
        let default_template = PromptTemplate::parse(DEFAULT_TEMPLATE).expect("the built-in template is valid");
        // Every call goes through the meter, so each turn knows what it spent.
        let model: Arc<dyn ChatModel> = Arc::new(usage::MeteredModel { inner: model });
        // And through a `chat` span, so every call is measured (see `telemetry`).
        let named = |name: &str| Some(name.trim().to_owned()).filter(|name| !name.is_empty());
        let model: Arc<dyn ChatModel> = Arc::new(crate::telemetry::InstrumentedModel::new(
            model,
            named(&config.model_provider),
            named(&config.model_id),
        ));
        Self {
            sessions,
            objects,
            model,
            skills: SkillLibrary::new().with_listing_budget(config.listing_tokens()),
            blobs: BlobCache::default(),
            default_template,
            config,
            experts: None,
            sandbox: None,
            config_alarm: None,
        }
    }

    /// Where configuration errors found while serving a turn are counted (see [`ConfigAlarm`]).
    pub fn with_config_alarm(mut self, alarm: ConfigAlarm) -> Self {
        self.config_alarm = Some(alarm);
        self
    }

    /// The sandbox `execute` runs commands in; without one, `execute` is not offered.
    pub fn with_sandbox(mut self, sandbox: Arc<dyn Sandbox>) -> Self {
        self.sandbox = Some(Arc::new(usage::MeteredSandbox { inner: sandbox }));
        self
    }

    /// The experts the planner strategy works with.
    pub fn with_experts(mut self, experts: Arc<dyn Experts>) -> Self {
        self.experts = Some(experts);
        self
    }

    /// The sandbox `execute` runs in ("local", "lambda"), when there is one.
    pub fn sandbox_name(&self) -> Option<&'static str> {
        self.sandbox.as_ref().map(|sandbox| sandbox.name())
    }

    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The tenant's skill catalog (usable and skipped skills), as turns see it.
    pub async fn skill_catalog(&self, user: &UserId) -> Result<Arc<Catalog>, TurnError> {
        Ok(self.skills.catalog(self.objects.as_ref(), user).await?)
    }

    /// The tenant's whole catalog (every part of its index read), with the snapshot it comes from.
    pub async fn skill_catalog_view(&self, user: &UserId) -> Result<(Arc<Catalog>, Arc<CatalogView>), TurnError> {
        let catalog = self.skills.catalog(self.objects.as_ref(), user).await?;
        let view = catalog.view(self.objects.as_ref()).await?;
        Ok((catalog, view))
    }

    /// The session as stored, for its owner; `None` when it does not exist.
    pub async fn session(&self, user: &UserId, session: &SessionId) -> Result<Option<Session>, TurnError> {
        Ok(self.sessions.load(user, session).await?)
    }

    /// The session's state and one page of its stored turns, newest first (see
    /// [`SessionStore::history_page`]); `None` when it does not exist.
    pub async fn session_page(
        &self,
        user: &UserId,
        session: &SessionId,
        before: Option<u64>,
        max_turns: usize,
        max_bytes: usize,
    ) -> Result<Option<(Session, HistoryPage)>, TurnError> {
        Ok(self.sessions.history_page(user, session, before, max_turns, max_bytes).await?)
    }

    /// One page of the user's own sessions, most recently updated first (see
    /// [`SessionStore::list_sessions`]).
    pub async fn list_sessions(
        &self,
        user: &UserId,
        after: Option<&crate::store::SessionCursor>,
        limit: usize,
    ) -> Result<crate::store::SessionList, TurnError> {
        Ok(self.sessions.list_sessions(user, after, limit).await?)
    }

    /// Records a turn to run in the background under `key` (see [`SessionStore::accept`]).
    pub async fn accept_background(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        now: OffsetDateTime,
    ) -> Result<Accepted, TurnError> {
        Ok(self.sessions.accept(user, session, key, now.unix_timestamp()).await?)
    }

    /// Where the turn whose idempotency key hashes to `turn_id` stands, for its owner only.
    pub async fn turn_status(
        &self,
        user: &UserId,
        session: &SessionId,
        turn_id: &str,
        now: OffsetDateTime,
    ) -> Result<Option<TurnStatus>, TurnError> {
        Ok(self.sessions.turn_status(user, session, turn_id, now.unix_timestamp()).await?)
    }

    /// Records that the queued background turn under `key` failed for good with `error` (the body
    /// a synchronous turn would have answered); false when the key is not a queued background turn.
    pub async fn fail_background(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        error: &serde_json::Value,
        now: OffsetDateTime,
    ) -> Result<bool, TurnError> {
        Ok(self.sessions.fail_queued(user, session, key, error, now.unix_timestamp()).await?)
    }

    /// Runs one turn exactly once per idempotency key: a committed key replays its reply, a
    /// running one is refused, and a failed (or panicking) turn gives its key back.
    pub async fn run_turn(&self, request: TurnRequest) -> Result<TurnReply, TurnError> {
        self.run_turn_observed(request, &NoObserver).await
    }

    /// [`TurnService::run_turn`], reporting the turn's progress to `events` as it runs: the model's
    /// text as it arrives, skills loaded, tool calls and results. The commit is the same.
    pub async fn run_turn_observed(
        &self,
        request: TurnRequest,
        events: &dyn TurnObserver,
    ) -> Result<TurnReply, TurnError> {
        match (&request.decisions, request.message.trim().is_empty()) {
            (None, true) => return Err(TurnError::InvalidInput("`message` must not be empty".to_owned())),
            (Some(_), false) => {
                return Err(TurnError::InvalidInput(
                    "send either `message` or `decisions`: the decisions go on with the paused turn".to_owned(),
                ))
            }
            _ => {}
        }
        if request.message.len() > MAX_MESSAGE_BYTES {
            return Err(TurnError::InvalidInput(format!("`message` is larger than {MAX_MESSAGE_BYTES} bytes")));
        }
        events.event(TurnEvent::Started { session_id: request.session.to_string() });
        let now = request.now.unix_timestamp();
        let claim = match &request.idempotency {
            None => None,
            Some(key) => {
                let lease = match request.deadline {
                    Some(deadline) => {
                        let left = deadline.saturating_duration_since(Instant::now()).as_secs();
                        i64::try_from(left).unwrap_or(i64::MAX).saturating_add(CLAIM_LEASE_MARGIN_SECS)
                    }
                    None => CLAIM_LEASE_WITHOUT_DEADLINE_SECS,
                };
                let claim =
                    self.sessions.claim(&request.user, &request.session, key, now, now.saturating_add(lease)).await?;
                match claim {
                    Claim::Claimed { owner } => Some(Claimed { key: key.clone(), owner }),
                    Claim::Committed { reply } => {
                        let mut reply: TurnReply = serde_json::from_value(reply)
                            .map_err(|err| TurnError::Store(StoreError::Corrupt(format!("stored reply: {err}"))))?;
                        reply.replayed = true;
                        tracing::info!(session = %request.session, version = reply.version, "replayed a committed turn");
                        return Ok(reply);
                    }
                    Claim::Running => return Err(TurnError::InProgress),
                    Claim::Mismatch => return Err(TurnError::IdempotencyMismatch),
                    Claim::Failed { error } => return Err(TurnError::AlreadyFailed { error }),
                }
            }
        };
        let (user, session, started) = (request.user.clone(), request.session.clone(), request.now);
        let meter = Arc::new(usage::Meter::new(&self.config.model_id));
        let attempt = meter
            .clone()
            .scope(std::panic::AssertUnwindSafe(self.run_claimed(request, claim.as_ref(), events)).catch_unwind())
            .await;
        let result = attempt.unwrap_or_else(|panic| {
            let message = panic_message(panic.as_ref());
            tracing::error!(session = %session, panic = %message, "the turn panicked; nothing was committed");
            Err(TurnError::Internal(message))
        });
        // A model call refused by the budget (or whose reservation failed in storage) is the
        // turn's error, whatever the loop made of the refused call.
        let result = match (result, meter.stopped()) {
            (Err(_), Some(stopped)) => Err(stopped),
            (result, _) => result,
        };
        if result.is_err() {
            self.record_failed_spend(&user, &meter, started).await;
        }
        if let (Err(_), Some(claim)) = (&result, &claim) {
            // Best effort: a claim that stays behind expires with its lease.
            if let Err(err) = self.sessions.release(&user, &session, &claim.key, &claim.owner).await {
                tracing::warn!(session = %session, error = %err, "could not release the idempotency claim");
            }
        }
        result
    }
}

/// A claim this turn holds on its idempotency key.
#[derive(Debug, Clone)]
struct Claimed {
    key: IdempotencyKey,
    owner: String,
}

/// The text of a caught panic, for the log (never for the client).
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}
