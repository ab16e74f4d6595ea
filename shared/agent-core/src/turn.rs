//! One turn end to end, over the ports: load the session and the catalog, run the loop,
//! then commit the turn with the per-turn state reset, or change nothing at all.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use thiserror::Error;
pub use time::OffsetDateTime;
use tokio::time::Instant;

use crate::agent::{self, Ending, Limits};
use crate::budget;
use crate::events::{NoObserver, TurnEvent, TurnObserver};
use crate::expert::{ExpertSession, Experts, NoExperts};
use crate::ids::{SessionId, SkillPath, TicketId, UserId};
use crate::message::{ChatRequest, Message, Usage};
use crate::model::{ChatModel, ModelError};
use crate::planner::{PlanState, Planner, PlannerConfig};
use crate::prompt::{PromptTemplate, PromptVars, SkillPromptMode, TemplateError, DEFAULT_TEMPLATE};
use crate::skills::{Catalog, Resolved, SkillDoc, SkillLibrary};
use crate::store::{
    Accepted, Claim, CommitKey, HistoryPage, HistorySummary, IdempotencyKey, ObjectStore, Session, SessionState,
    SessionStore, StoreError, TurnCommit, TurnStatus,
};
use crate::tools::{LoadSkillError, SkillSource, SkillsEnv};
use crate::vfs::{BlobCache, Vfs};

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

/// The system prompt of the summarisation call.
const SUMMARY_INSTRUCTIONS: &str = "You condense conversations. Summarise the conversation below for the \
    assistant who will continue it: the user's goals and requests, facts and data given, decisions taken, \
    files written, and what is still pending. Be factual and concise; write in the conversation's language. \
    Do not include instructions of skills or tools.";

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
    /// True when this is the stored reply of an earlier delivery with the same idempotency key.
    #[serde(skip)]
    pub replayed: bool,
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
    /// A turn with the same idempotency key is running now.
    #[error("a turn with this idempotency key is still running; retry later")]
    InProgress,
    /// The idempotency key was used before with a different request.
    #[error("this idempotency key was used with a different request")]
    IdempotencyMismatch,
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

/// Splits `/name rest` or `/category/name rest` into the command and the request.
pub fn parse_slash_command(message: &str) -> Option<(&str, &str)> {
    let rest = message.trim_start().strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let command = &rest[..end];
    (!command.is_empty()).then(|| (command, rest[end..].trim()))
}

/// The skill a slash command names: `category/name`, `name`, or a name that only one skill has.
async fn resolve_command(source: &SkillSource<'_>, command: &str) -> Result<Arc<SkillDoc>, TurnError> {
    let wanted = command.trim_end_matches('/');
    let unknown = |suggestions: Vec<String>| TurnError::UnknownSkill { command: format!("/{command}"), suggestions };
    match source.catalog.resolve(wanted) {
        Resolved::Found(_) => {}
        Resolved::NotFound => {
            return Err(unknown(source.catalog.closest(wanted, 3).iter().map(|path| format!("/{path}")).collect()))
        }
        Resolved::Ambiguous(many) => return Err(unknown(many.iter().map(|e| format!("/{}", e.path)).collect())),
    }
    source.load(wanted).await.map_err(|err| match err {
        LoadSkillError::Storage(store) => TurnError::from(store),
        LoadSkillError::NotFound(_) => unknown(Vec::new()),
    })
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
}

impl TurnService {
    pub fn new(
        sessions: Arc<dyn SessionStore>,
        objects: Arc<dyn ObjectStore>,
        model: Arc<dyn ChatModel>,
        config: AgentConfig,
    ) -> Self {
        let default_template = PromptTemplate::parse(DEFAULT_TEMPLATE).expect("the built-in template is valid");
        Self {
            sessions,
            objects,
            model,
            skills: SkillLibrary::new(),
            blobs: BlobCache::default(),
            default_template,
            config,
            experts: None,
        }
    }

    /// The experts the planner strategy works with.
    pub fn with_experts(mut self, experts: Arc<dyn Experts>) -> Self {
        self.experts = Some(experts);
        self
    }

    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The tenant's skill catalog (usable and skipped skills), as turns see it.
    pub async fn skill_catalog(&self, user: &UserId) -> Result<Arc<Catalog>, TurnError> {
        Ok(self.skills.catalog(self.objects.as_ref(), user).await?)
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
        if request.message.trim().is_empty() {
            return Err(TurnError::InvalidInput("`message` must not be empty".to_owned()));
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
        let (user, session) = (request.user.clone(), request.session.clone());
        let attempt =
            std::panic::AssertUnwindSafe(self.run_claimed(request, claim.as_ref(), events)).catch_unwind().await;
        let result = attempt.unwrap_or_else(|panic| {
            let message = panic_message(panic.as_ref());
            tracing::error!(session = %session, panic = %message, "the turn panicked; nothing was committed");
            Err(TurnError::Internal(message))
        });
        if let (Err(_), Some(claim)) = (&result, &claim) {
            // Best effort: a claim that stays behind expires with its lease.
            if let Err(err) = self.sessions.release(&user, &session, &claim.key, &claim.owner).await {
                tracing::warn!(session = %session, error = %err, "could not release the idempotency claim");
            }
        }
        result
    }

    async fn run_claimed(
        &self,
        request: TurnRequest,
        claim: Option<&Claimed>,
        events: &dyn TurnObserver,
    ) -> Result<TurnReply, TurnError> {
        if self.config.strategy == Strategy::Planner {
            return self.run_planner_turn(request, claim, events).await;
        }
        // The session and the catalog are independent reads: fetch them concurrently.
        let (session, catalog) = tokio::try_join!(
            self.sessions.load(&request.user, &request.session),
            self.skills.catalog(self.objects.as_ref(), &request.user),
        )?;
        let session = session.unwrap_or_else(|| Session::new(request.user.clone(), request.session.clone()));
        let source = SkillSource {
            library: &self.skills,
            objects: self.objects.as_ref(),
            user: &request.user,
            catalog: &catalog,
        };
        let forced = match parse_slash_command(&request.message) {
            Some((command, _)) => Some(resolve_command(&source, command).await?),
            None => None,
        };
        let custom_template = catalog.base_prompt().map(PromptTemplate::parse).transpose()?;
        let template = custom_template.as_ref().unwrap_or(&self.default_template);
        let vars = self.prompt_vars(&request);
        let user_message = match (&forced, parse_slash_command(&request.message)) {
            (Some(doc), Some((_, ""))) => {
                format!("(The user started the skill /{} without further instructions.)", doc.path.name())
            }
            (Some(_), Some((_, rest))) => rest.to_owned(),
            _ => request.message.clone(),
        };

        let mut usage = Usage::default();
        let (summary, summary_retry_at) = self.summarise_if_needed(&session, request.deadline, &mut usage).await;
        let history = history_for_model(&session, summary.as_ref());

        let vfs = Vfs::new(
            self.objects.as_ref(),
            request.user.clone(),
            request.session.clone(),
            request.ticket.clone(),
            session.state.workspace.clone(),
        )
        .with_blob_cache(&self.blobs);
        let mut env = SkillsEnv::new(
            vfs,
            source,
            self.config.listing_tokens(),
            template,
            &vars,
            self.config.prompt_mode,
            session.state.todos.clone(),
        );
        // A session stored mid-skill (by a strategy that keeps one) resumes in state 2.
        for skill in &session.state.loaded_skills {
            let _ = env.load_skill(&skill.to_string()).await;
        }
        if let Some(skill) = &session.state.current_skill {
            let _ = env.load_skill(&skill.to_string()).await;
        }
        if let Some(doc) = forced {
            events.event(TurnEvent::SkillLoaded { skill: doc.path.to_string(), forced: true });
            env.force(doc);
        }

        let limits = Limits {
            max_steps: self.config.max_steps,
            deadline: request.deadline,
            reserve: self.config.deadline_reserve,
            input_tokens: self.config.input_tokens(),
        };
        let outcome =
            agent::run(self.model.as_ref(), &mut env, &history, Message::user(user_message), &limits, events).await?;
        // A turn that never reached the model has nothing to say: a canned "out of time" reply
        // committed in its place would hide the failure and use up the user's message.
        if outcome.steps == 0 && outcome.ending == Ending::Deadline {
            return Err(TurnError::OutOfTime);
        }
        usage.add(outcome.usage);
        let ended_in = env.current_skill().map(|doc| doc.path.clone());
        let forced_skill = env.forced_skill().map(|doc| doc.path.clone());
        let refused_tool_calls = env.refused_tool_calls();
        let (vfs, todos) = env.into_parts();
        let workspace = vfs.into_workspace();

        // The cleanup of seed 001: the loaded (or forced) skill lasts one turn.
        let state = SessionState {
            current_skill: None,
            loaded_skills: Vec::new(),
            plan: session.state.plan.clone(),
            workspace,
            todos,
            summary,
            summary_retry_at,
        };
        let reply = TurnReply {
            session_id: request.session.clone(),
            reply: outcome.reply,
            current_skill: ended_in.clone(),
            forced_skill: forced_skill.clone(),
            refused_tool_calls,
            steps: outcome.steps,
            usage,
            ending: outcome.ending,
            version: session.version + 1,
            replayed: false,
        };
        self.commit(&request, &session, outcome.messages, state, &reply, claim).await?;
        tracing::info!(
            session = %request.session,
            steps = outcome.steps,
            input_tokens = usage.input_tokens,
            output_tokens = usage.output_tokens,
            ending = ?outcome.ending,
            skill = ?ended_in.as_ref().map(ToString::to_string),
            forced_skill = ?forced_skill.as_ref().map(ToString::to_string),
            refused_tool_calls,
            "turn committed"
        );
        Ok(reply)
    }

    /// Stores the turn, conditional on the version read at its start.
    async fn commit(
        &self,
        request: &TurnRequest,
        session: &Session,
        new_messages: Vec<Message>,
        state: SessionState,
        reply: &TurnReply,
        claim: Option<&Claimed>,
    ) -> Result<(), TurnError> {
        let idempotency = match claim {
            Some(claim) => Some(CommitKey {
                key: claim.key.clone(),
                owner: claim.owner.clone(),
                reply: serde_json::to_value(reply)
                    .map_err(|err| TurnError::Internal(format!("encoding the reply: {err}")))?,
            }),
            None => None,
        };
        let new_messages = self.keep_large_results_by_reference(request, new_messages).await?;
        let commit = TurnCommit {
            expected_version: session.version,
            new_messages,
            history_len: session.history_end(),
            state,
            now: request.now.unix_timestamp(),
            commit_token: hex::encode(rand::random::<[u8; 16]>()),
            idempotency,
        };
        Ok(self.sessions.commit(&request.user, &request.session, &commit).await?)
    }

    /// Tool results over [`INLINE_TOOL_RESULT_BYTES`] are stored as objects of their own (content-
    /// addressed, so a retried or failed turn leaves at most an unreferenced object), and the history
    /// keeps a preview with the key: later turns and `GET /sessions/{id}` read the preview only.
    async fn keep_large_results_by_reference(
        &self,
        request: &TurnRequest,
        mut messages: Vec<Message>,
    ) -> Result<Vec<Message>, TurnError> {
        for message in &mut messages {
            let Message::Tool { content, .. } = message else { continue };
            if content.len() <= INLINE_TOOL_RESULT_BYTES {
                continue;
            }
            let sha = hex::encode(sha2::Sha256::digest(content.as_bytes()));
            let key = crate::keys::tool_result_key(&request.user, &request.session, &sha);
            self.objects.put(&key, content.as_bytes().to_vec()).await?;
            let mut cut = TOOL_RESULT_PREVIEW_BYTES;
            while !content.is_char_boundary(cut) {
                cut -= 1;
            }
            let total = content.len();
            content.truncate(cut);
            content.push_str(&format!(
                "\n[... {} more bytes of this result are not kept in the conversation; run the tool again to \
                 see them. Stored as result {sha}]",
                total - cut
            ));
        }
        Ok(messages)
    }

    /// A turn of the planner strategy. Only the user's message and the final reply enter the
    /// history; the plan, with its position and any pending prompt choice, is stored in `plan`.
    async fn run_planner_turn(
        &self,
        request: TurnRequest,
        claim: Option<&Claimed>,
        events: &dyn TurnObserver,
    ) -> Result<TurnReply, TurnError> {
        let session = self.sessions.load(&request.user, &request.session).await?;
        let session = session.unwrap_or_else(|| Session::new(request.user.clone(), request.session.clone()));
        let plan: Option<PlanState> = match &session.state.plan {
            None | Some(serde_json::Value::Null) => None,
            Some(value) => match serde_json::from_value(value.clone()) {
                Ok(plan) => Some(plan),
                Err(err) => {
                    // A plan written by another version is dropped rather than failing every turn.
                    tracing::warn!(error = %err, "the stored plan does not decode; starting without it");
                    None
                }
            },
        };
        let opened: Box<dyn ExpertSession> = match &self.experts {
            Some(experts) => experts.open(&request.user).await,
            None => Box::new(NoExperts),
        };
        let planner =
            Planner { model: self.model.as_ref(), experts: opened.as_ref(), config: &self.config.planner, events };
        let limits = Limits {
            max_steps: self.config.max_steps,
            deadline: request.deadline,
            reserve: self.config.deadline_reserve,
            input_tokens: self.config.input_tokens(),
        };
        let outcome = planner.run(plan, &session.history, &request.message, &limits).await;
        opened.close().await;
        let outcome = outcome?;

        let plan = outcome
            .plan
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(|err| TurnError::Internal(format!("encoding the plan: {err}")))?;
        let state = SessionState { current_skill: None, loaded_skills: Vec::new(), plan, ..session.state.clone() };
        let new_messages = vec![Message::user(request.message.clone()), Message::assistant(outcome.reply.clone())];
        let reply = TurnReply {
            session_id: request.session.clone(),
            reply: outcome.reply,
            current_skill: None,
            forced_skill: None,
            refused_tool_calls: 0,
            steps: outcome.steps,
            usage: outcome.usage,
            ending: outcome.ending,
            version: session.version + 1,
            replayed: false,
        };
        self.commit(&request, &session, new_messages, state, &reply, claim).await?;
        tracing::info!(
            session = %request.session,
            steps = outcome.steps,
            input_tokens = outcome.usage.input_tokens,
            output_tokens = outcome.usage.output_tokens,
            ending = ?outcome.ending,
            plan_tasks = outcome.plan.as_ref().map_or(0, |plan| plan.tasks.len()),
            "planner turn committed"
        );
        Ok(reply)
    }

    /// Fix 6 of seed 002: when the unsummarised history passes the threshold, the older part is
    /// summarised once by the model and the summary is stored with the session. Only history is
    /// summarised, never the system prompt, so skill instructions are never inside it. A failed
    /// summary is logged, the turn goes on with the budget's trimming, and the next attempt waits
    /// until [`SUMMARY_RETRY_MESSAGES`] more messages were added. Returns the summary and the retry mark.
    async fn summarise_if_needed(
        &self,
        session: &Session,
        deadline: Option<Instant>,
        usage: &mut Usage,
    ) -> (Option<HistorySummary>, Option<usize>) {
        let previous = session.state.summary.clone();
        let retry_at = session.state.summary_retry_at;
        let unchanged = (previous.clone(), retry_at);
        if retry_at.is_some_and(|at| session.history_end() < at) {
            return unchanged;
        }
        let failed = (previous.clone(), Some(session.history_end() + SUMMARY_RETRY_MESSAGES));
        let visible = unsummarised(session, previous.as_ref());
        let start = session.history_end() - visible.len();
        let threshold = self.config.summary_threshold();
        let tokens: usize = visible.iter().map(budget::estimate_message).sum();
        if tokens <= threshold {
            return unchanged;
        }
        // Keep the most recent messages worth about half the threshold, starting at a user message.
        let mut kept_tokens = 0;
        let mut cut = visible.len();
        while cut > 0 && kept_tokens + budget::estimate_message(&visible[cut - 1]) <= threshold / 2 {
            cut -= 1;
            kept_tokens += budget::estimate_message(&visible[cut]);
        }
        while cut < visible.len() && !matches!(visible[cut], Message::User { .. }) {
            cut += 1;
        }
        if cut == 0 {
            return unchanged;
        }
        let transcript = transcript(previous.as_ref().map(|s| s.text.as_str()), &visible[..cut]);
        let request = ChatRequest {
            system: SUMMARY_INSTRUCTIONS.to_owned(),
            messages: vec![Message::user(transcript)],
            tools: Vec::new(),
            ..Default::default()
        };
        // The summary must leave the turn its time: it gives up at half the time that is left.
        let call = self.model.complete(&request);
        let response = match deadline {
            Some(deadline) => {
                let left =
                    deadline.saturating_duration_since(Instant::now()).saturating_sub(self.config.deadline_reserve);
                match tokio::time::timeout(left / 2, call).await {
                    Ok(response) => response,
                    Err(_) => {
                        tracing::warn!("no time left to summarise the history; keeping it as it is");
                        return failed;
                    }
                }
            }
            None => call.await,
        };
        match response {
            Ok(response) if !response.content.trim().is_empty() => {
                usage.add(response.usage);
                let covers = start + cut;
                tracing::info!(covers, summarised_tokens = tokens, "summarised older turns of the history");
                // The cut is at a user message, which is where a turn starts; when it is the end of
                // the history, the turn about to be committed starts there.
                let from_turn = session
                    .turn_starts
                    .iter()
                    .find(|(_, start)| *start == covers)
                    .map(|(turn, _)| *turn)
                    .or_else(|| (covers == session.history_end()).then_some(session.version + 1));
                let text = response.content.trim().to_owned();
                (Some(HistorySummary { text, covers, from_turn }), None)
            }
            Ok(_) => {
                tracing::warn!("the summary came back empty; keeping the history as it is");
                failed
            }
            Err(err) => {
                tracing::warn!(error = %err, "could not summarise the history; keeping it as it is");
                failed
            }
        }
    }

    fn prompt_vars(&self, request: &TurnRequest) -> PromptVars {
        let date = request.now.date();
        let profile = &request.profile;
        let (title, description) = match &request.ticket {
            Some(ticket) => (
                format!("Ticket {ticket}"),
                "This conversation is about a ticket; its files are under /ticket (read-only).".to_owned(),
            ),
            None => ("No ticket".to_owned(), "This conversation has no ticket attached.".to_owned()),
        };
        PromptVars {
            date: format!("{}-{:02}-{:02}", date.year(), u8::from(date.month()), date.day()),
            name: profile.name.clone().unwrap_or_else(|| "the user".to_owned()),
            language: profile.language.clone().unwrap_or_else(|| self.config.default_language.clone()),
            profile: profile.description.clone().unwrap_or_else(|| "No profile information.".to_owned()),
            initial_context_title: title,
            initial_context_description: description,
        }
    }
}

/// Tool results longer than this are kept by reference in the stored history.
pub const INLINE_TOOL_RESULT_BYTES: usize = 16 * 1024;
/// What the stored history keeps of such a result.
const TOOL_RESULT_PREVIEW_BYTES: usize = 4 * 1024;

/// Messages added after a failed summary attempt before the next one.
const SUMMARY_RETRY_MESSAGES: usize = 8;

/// The loaded messages the summary does not cover (all of them without a summary).
fn unsummarised<'s>(session: &'s Session, summary: Option<&HistorySummary>) -> &'s [Message] {
    let covers = summary.map_or(0, |summary| summary.covers);
    let skip = covers.saturating_sub(session.history_offset).min(session.history.len());
    &session.history[skip..]
}

/// What the model is given of the past: the summary, then the messages it does not cover.
fn history_for_model(session: &Session, summary: Option<&HistorySummary>) -> Vec<Message> {
    let mut history = Vec::new();
    if let Some(summary) = summary {
        history.push(Message::user(format!("[Summary of the earlier conversation]\n{}", summary.text)));
    }
    history.extend_from_slice(unsummarised(session, summary));
    history
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

/// The text given to the summariser: the previous summary and the messages, without tool results
/// that carry skill files (`load_skill`, reads under /skills), so skill instructions stay out.
fn transcript(previous: Option<&str>, messages: &[Message]) -> String {
    const MAX_RESULT_CHARS: usize = 2000;
    let mut skill_reads = std::collections::HashSet::new();
    let mut out = String::new();
    if let Some(previous) = previous {
        out.push_str(&format!("Summary so far:\n{previous}\n\nConversation since then:\n"));
    }
    for message in messages {
        match message {
            Message::User { content } => out.push_str(&format!("User: {content}\n")),
            Message::Assistant { content, tool_calls } => {
                if !content.is_empty() {
                    out.push_str(&format!("Assistant: {content}\n"));
                }
                for call in tool_calls {
                    let path = call.arguments.get("file_path").or_else(|| call.arguments.get("path"));
                    let reads_skill =
                        path.and_then(|p| p.as_str()).is_some_and(|p| p.trim_start().starts_with("/skills"));
                    if call.name == crate::tools::LOAD_SKILL || reads_skill {
                        skill_reads.insert(call.id.clone());
                    }
                    out.push_str(&format!("Assistant called {}({})\n", call.name, call.arguments));
                }
            }
            Message::Tool { tool_call_id, name, content } => {
                if skill_reads.contains(tool_call_id) {
                    out.push_str(&format!("Tool {name}: (skill content omitted)\n"));
                } else {
                    let shown: String = content.chars().take(MAX_RESULT_CHARS).collect();
                    out.push_str(&format!("Tool {name}: {shown}\n"));
                }
            }
        }
    }
    out
}
