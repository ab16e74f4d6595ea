//! What one turn is asked and answers: the validated request, the reply (the HTTP API's 200 body),
//! and why a turn failed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use time::OffsetDateTime;
use tokio::time::Instant;

use crate::agent::{Decisions, Ending};
use crate::events::ApprovalCall;
use crate::ids::{SessionId, SkillPath, TicketId, UserId};
use crate::message::Usage;
use crate::model::ModelError;
use crate::prompt::TemplateError;
use crate::store::{BudgetUnit, IdempotencyKey, StoreError};

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
    /// Uploads of this session attached to the message: put in `/workspace` and shown to the model.
    pub attachments: Vec<super::uploads::Attachment>,
    /// Published versions this turn uses in place of the defaults (an A/B test, an eval), at most
    /// [`crate::skills::versions::MAX_PINS`].
    pub pins: BTreeMap<SkillPath, u32>,
}

impl TurnRequest {
    /// A plain turn: `user` says `message` in `session` at `now`, with no ticket, profile, deadline,
    /// idempotency key, decisions, attachments or pins (set those with struct update syntax).
    pub fn new(user: UserId, session: SessionId, message: impl Into<String>, now: OffsetDateTime) -> Self {
        Self {
            user,
            session,
            message: message.into(),
            ticket: None,
            profile: UserProfile::default(),
            deadline: None,
            now,
            idempotency: None,
            decisions: None,
            attachments: Vec::new(),
            pins: BTreeMap::new(),
        }
    }
}

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
    /// Tokens of every model call of the turn (subagents' and summaries' too), as the providers
    /// split them.
    pub usage: Usage,
    /// What those calls cost at the price table's prices.
    #[serde(default)]
    pub cost: TurnCost,
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
    /// The published version of each skill the turn loaded (or had forced), by skill path.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub skill_versions: BTreeMap<String, u32>,
    /// True when this is the stored reply of an earlier delivery with the same idempotency key.
    #[serde(skip)]
    pub replayed: bool,
}

/// What a turn's model calls cost, at the deployment's price table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnCost {
    /// US dollars over the calls of models with a price; `None` when no call's model has one.
    pub usd: Option<f64>,
    /// Models called that have no price: their tokens are counted, their cost is not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpriced_models: Vec<String>,
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
    /// A file over an upload or workspace bound; nothing was stored.
    #[error("{0}")]
    TooLarge(String),
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
    /// The tenant has used its daily budget of `unit` (`used` of `budget` tokens, or billionths of
    /// a dollar for money); nothing was sent to the model. The budget renews at the next UTC
    /// midnight, `retry_after_secs` from now.
    #[error("the daily {} budget is spent ({}); it renews at 00:00 UTC", quota_name(*unit), quota_figures(*unit, *used, *budget))]
    QuotaExceeded { unit: BudgetUnit, used: u64, budget: u64, retry_after_secs: u64 },
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

/// `token` or `money`: which daily budget a refusal is about.
fn quota_name(unit: BudgetUnit) -> &'static str {
    match unit {
        BudgetUnit::Tokens => "token",
        BudgetUnit::Cost => "money",
    }
}

/// `used` of `budget` as a person reads it: tokens, or dollars to the cent (to the billionth below one).
fn quota_figures(unit: BudgetUnit, used: u64, budget: u64) -> String {
    match unit {
        BudgetUnit::Tokens => format!("{used} of {budget} tokens"),
        BudgetUnit::Cost => format!("{} of {}", dollars(used), dollars(budget)),
    }
}

/// Billionths of a dollar as `$2.50`, or with every digit needed below a cent.
fn dollars(nanos: u64) -> String {
    if nanos.is_multiple_of(10_000_000) || nanos >= crate::store::NANOS_PER_USD {
        format!("${:.2}", crate::store::nanos_to_usd(nanos))
    } else {
        let text = format!("{:.9}", crate::store::nanos_to_usd(nanos));
        format!("${}", text.trim_end_matches('0'))
    }
}

fn unknown_skill_message(command: &str, suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        format!("unknown skill command `{command}`: no skill has that name")
    } else {
        format!("unknown skill command `{command}`; did you mean {}?", suggestions.join(", "))
    }
}

impl TurnError {
    /// For a refusal by a daily budget: which budget (`token` or `money`), and its figures as a
    /// person reads them (`330 of 300 tokens`, `$1.02 of $1.00`).
    pub fn quota(&self) -> Option<(&'static str, String)> {
        match self {
            TurnError::QuotaExceeded { unit, used, budget, .. } => {
                Some((quota_name(*unit), quota_figures(*unit, *used, *budget)))
            }
            _ => None,
        }
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
