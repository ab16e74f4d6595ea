//! One turn end to end, over the ports: load the session and the catalog, run the loop,
//! then commit the turn with the per-turn state reset, or change nothing at all.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use thiserror::Error;
pub use time::OffsetDateTime;
use tokio::time::Instant;

use crate::agent::{self, Ending, Limits};
use crate::ids::{SessionId, SkillPath, TicketId, UserId};
use crate::message::{Message, Usage};
use crate::model::{ChatModel, ModelError};
use crate::prompt::{PromptTemplate, PromptVars, SkillPromptMode, TemplateError, DEFAULT_TEMPLATE};
use crate::skills::SkillCache;
use crate::store::{ObjectStore, Session, SessionState, SessionStore, StoreError, TurnCommit};
use crate::tools::SkillsEnv;
use crate::vfs::Vfs;

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
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            max_steps: 15,
            prompt_mode: SkillPromptMode::Replace,
            deadline_reserve: Duration::from_secs(3),
            default_language: "the language the user writes in".to_owned(),
        }
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
}

/// The result of a committed turn.
#[derive(Debug, Clone, Serialize)]
pub struct TurnReply {
    pub session_id: SessionId,
    pub reply: String,
    /// The skill the turn ended in; the stored session is reset to none.
    pub current_skill: Option<SkillPath>,
    pub steps: u32,
    pub usage: Usage,
    pub ending: Ending,
    /// The session's version after this turn.
    pub version: u64,
}

/// Why a turn failed. Whatever the variant, the session is as it was before the turn.
#[derive(Debug, Error)]
pub enum TurnError {
    #[error("{0}")]
    InvalidInput(String),
    #[error("the session was changed by a concurrent turn; retry")]
    Conflict,
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Store(StoreError),
    #[error("configuration error: {0}")]
    Config(#[from] TemplateError),
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
    skills: SkillCache,
    default_template: PromptTemplate,
    config: AgentConfig,
}

impl TurnService {
    pub fn new(
        sessions: Arc<dyn SessionStore>,
        objects: Arc<dyn ObjectStore>,
        model: Arc<dyn ChatModel>,
        config: AgentConfig,
    ) -> Self {
        let default_template = PromptTemplate::parse(DEFAULT_TEMPLATE).expect("the built-in template is valid");
        Self { sessions, objects, model, skills: SkillCache::new(), default_template, config }
    }

    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The session as stored, for its owner; `None` when it does not exist.
    pub async fn session(&self, user: &UserId, session: &SessionId) -> Result<Option<Session>, TurnError> {
        Ok(self.sessions.load(user, session).await?)
    }

    pub async fn run_turn(&self, request: TurnRequest) -> Result<TurnReply, TurnError> {
        if request.message.trim().is_empty() {
            return Err(TurnError::InvalidInput("`message` must not be empty".to_owned()));
        }
        if request.message.len() > MAX_MESSAGE_BYTES {
            return Err(TurnError::InvalidInput(format!("`message` is larger than {MAX_MESSAGE_BYTES} bytes")));
        }
        // The session and the catalog are independent reads: fetch them concurrently.
        let (session, catalog) = tokio::try_join!(
            self.sessions.load(&request.user, &request.session),
            self.skills.load_catalog(self.objects.as_ref(), &request.user),
        )?;
        let session = session.unwrap_or_else(|| Session::new(request.user.clone(), request.session.clone()));
        let custom_template = catalog.base_prompt().map(PromptTemplate::parse).transpose()?;
        let template = custom_template.as_ref().unwrap_or(&self.default_template);
        let vars = self.prompt_vars(&request);

        let vfs = Vfs::new(
            self.objects.as_ref(),
            request.user.clone(),
            request.session.clone(),
            request.ticket.clone(),
            session.state.workspace.clone(),
        );
        let mut env = SkillsEnv::new(vfs, &catalog, template, &vars, self.config.prompt_mode);
        // A session stored mid-skill (by a strategy that keeps one) resumes in state 2.
        for skill in &session.state.loaded_skills {
            let _ = env.load_skill(&skill.to_string());
        }
        if let Some(skill) = &session.state.current_skill {
            let _ = env.load_skill(&skill.to_string());
        }

        let limits =
            Limits { max_steps: self.config.max_steps, deadline: request.deadline, reserve: self.config.deadline_reserve };
        let outcome =
            agent::run(self.model.as_ref(), &mut env, &session.history, Message::user(request.message), &limits).await?;
        let ended_in = env.current_skill().map(|doc| doc.path.clone());
        let workspace = env.vfs.into_workspace();

        // The cleanup of seed 001: the loaded skill lasts one turn.
        let state = SessionState { current_skill: None, loaded_skills: Vec::new(), plan: session.state.plan, workspace };
        let commit = TurnCommit {
            expected_version: session.version,
            new_messages: outcome.messages,
            state,
            now: request.now.unix_timestamp(),
        };
        self.sessions.commit(&request.user, &request.session, &commit).await?;
        tracing::info!(
            session = %request.session,
            steps = outcome.steps,
            input_tokens = outcome.usage.input_tokens,
            output_tokens = outcome.usage.output_tokens,
            ending = ?outcome.ending,
            skill = ?ended_in.as_ref().map(ToString::to_string),
            "turn committed"
        );
        Ok(TurnReply {
            session_id: request.session,
            reply: outcome.reply,
            current_skill: ended_in,
            steps: outcome.steps,
            usage: outcome.usage,
            ending: outcome.ending,
            version: session.version + 1,
        })
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
