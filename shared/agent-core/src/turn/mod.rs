//! One turn end to end, over the ports: load the session and the catalog, run the loop,
//! then commit the turn with the per-turn state reset, or change nothing at all.
//!
//! A file per step: `skills` (a turn of the skills strategy, slash commands), `planner` (a turn of
//! the planner strategy), `summary` (history summaries), `commit` (storing the turn), `files` and
//! `memories` (a session's workspace files and the user's memories, for the HTTP API), `approval`
//! (a turn paused for approval, taken back), `usage` (token accounting and budgets), `evals` (a
//! published skill version's evals run as turns and graded); `config` (the
//! agent's settings) and `request` (a turn's request, reply and errors) hold the types; this file
//! holds the service and the idempotency claim and panic boundary around a turn.

mod approval;
mod commit;
mod config;
pub mod evals;
mod files;
mod memories;
mod planner;
mod request;
mod skills;
mod summary;
mod uploads;
mod usage;

pub use approval::MAX_SHOWN_ARGUMENT_BYTES;
pub use commit::INLINE_TOOL_RESULT_BYTES;
pub use config::{AgentConfig, Strategy, MAX_MESSAGE_BYTES};
pub use files::{FileDownload, DOWNLOAD_LINK_LIFETIME};
pub use memories::MemoryFile;
pub use request::{ReplyFile, TurnCost, TurnError, TurnReply, TurnRequest, UserProfile};
pub use skills::parse_slash_command;
pub use uploads::{
    sniffed_type, Attachment, PresignedUpload, Upload, MAX_ATTACHMENTS, MAX_UPLOAD_BYTES, UPLOAD_LINK_LIFETIME,
};
pub use usage::{seconds_to_next_utc_day, utc_day, DEFAULT_MODEL_LABEL};

use std::sync::{Arc, OnceLock};

use futures::FutureExt;
pub use time::OffsetDateTime;
use tokio::time::Instant;

use crate::events::{NoObserver, TurnEvent, TurnObserver};
use crate::expert::Experts;
use crate::ids::{SessionId, UserId};
use crate::model::ChatModel;
use crate::prompt::{PromptTemplate, DEFAULT_TEMPLATE};
use crate::sandbox::Sandbox;
use crate::skills::{Catalog, CatalogView, SkillLibrary};
use crate::store::{
    Accepted, Claim, HistoryPage, IdempotencyKey, ObjectStore, Session, SessionStore, StoreError, TurnStatus,
};
use crate::vfs::FileCache;

/// How long a claim on an idempotency key outlives the invocation's deadline (or lasts, without
/// one): a turn killed mid-run gives its key up after this, so a redelivery can run it.
const CLAIM_LEASE_MARGIN_SECS: i64 = 60;
const CLAIM_LEASE_WITHOUT_DEADLINE_SECS: i64 = 15 * 60;

/// Runs turns for any storage and model. Cheap to share: build it once per process.
pub struct TurnService {
    sessions: Arc<dyn SessionStore>,
    objects: Arc<dyn ObjectStore>,
    model: Arc<dyn ChatModel>,
    skills: SkillLibrary,
    files: FileCache,
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
            files: FileCache::default(),
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
        match (&request.decisions, request.message.trim().is_empty() && request.attachments.is_empty()) {
            (None, true) => {
                return Err(TurnError::InvalidInput("`message` must not be empty without attachments".to_owned()))
            }
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
                let lease_until = lease_until(&request, now);
                match self.sessions.claim(&request.user, &request.session, key, now, lease_until).await? {
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
        let claims = Claims { key: claim, pause: OnceLock::new() };
        let (user, session, started) = (request.user.clone(), request.session.clone(), request.now);
        let meter = Arc::new(usage::Meter::priced(&self.config.model_id, Arc::clone(&self.config.prices)));
        let attempt = meter
            .clone()
            .scope(std::panic::AssertUnwindSafe(self.run_claimed(request, &claims, events)).catch_unwind())
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
        if result.is_err() {
            for claim in claims.key.iter().chain(claims.pause.get()) {
                // Best effort: a claim that stays behind expires with its lease.
                if let Err(err) = self.sessions.release(&user, &session, &claim.key, &claim.owner).await {
                    tracing::warn!(session = %session, error = %err, "could not release an idempotency claim");
                }
            }
        }
        result
    }
}

/// When a claim taken `now` for `request` lapses: the invocation's deadline and a margin, so a
/// turn killed mid-run gives its claim up and a redelivery can run it.
fn lease_until(request: &TurnRequest, now: i64) -> i64 {
    let lease = match request.deadline {
        Some(deadline) => {
            let left = deadline.saturating_duration_since(Instant::now()).as_secs();
            i64::try_from(left).unwrap_or(i64::MAX).saturating_add(CLAIM_LEASE_MARGIN_SECS)
        }
        None => CLAIM_LEASE_WITHOUT_DEADLINE_SECS,
    };
    now.saturating_add(lease)
}

/// A claim this turn holds on an idempotency key.
#[derive(Debug, Clone)]
struct Claimed {
    key: IdempotencyKey,
    owner: String,
}

/// The claims a turn holds: on the client's idempotency key, taken before anything is read; and,
/// for a turn that answers a pause, on the pause itself (see [`IdempotencyKey::for_paused_turn`]),
/// taken once the session's version is known. Both are given back when the turn fails.
struct Claims {
    key: Option<Claimed>,
    pause: OnceLock<Claimed>,
}

/// The text of a caught panic, for the log (never for the client).
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}
