//! A stored session as the session store port carries it: its state between turns, its loaded
//! history and the bounds of that load, a page of older turns, and what a finished turn commits.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::idempotency::CommitKey;
use super::usage::TurnUsage;
use crate::ids::{SessionId, SkillPath, TicketId, UserId};
use crate::message::{Message, ToolCall};

/// A file of a session's `/workspace`: its content lives in the object store under its hash,
/// so the manifest can be committed atomically with the rest of the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceFile {
    pub sha256: String,
    pub size: u64,
}

/// The session state that survives between turns, apart from the history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    /// The skill whose SKILL.md drives the prompt; reset to `None` at the end of every turn.
    pub current_skill: Option<SkillPath>,
    /// Skills visible under `/skills`; reset with `current_skill`.
    #[serde(default)]
    pub loaded_skills: Vec<SkillPath>,
    /// The planner's plan, opaque to the skills strategy.
    #[serde(default)]
    pub plan: Option<serde_json::Value>,
    /// `/workspace`: path relative to the root -> file.
    #[serde(default)]
    pub workspace: BTreeMap<String, WorkspaceFile>,
    /// The todo list kept by `todowrite`, carried across turns.
    #[serde(default)]
    pub todos: Vec<TodoItem>,
    /// The model's summary of the oldest part of the history, so it is not recomputed every turn.
    #[serde(default)]
    pub summary: Option<HistorySummary>,
    /// After a summary attempt failed: no new attempt until the history holds this many messages,
    /// so a model that cannot summarise costs one extra call per few turns, not one per turn.
    #[serde(default)]
    pub summary_retry_at: Option<usize>,
    /// The sandbox's own session for this agent session, when its backend keeps one (an AgentCore
    /// code interpreter session), so the next turn's commands reuse it.
    #[serde(default)]
    pub sandbox_session: Option<String>,
    /// A turn paused for a person's decision on some of its tool calls: the turn's messages so far
    /// are in the history, and the next turn request must answer these calls.
    #[serde(default)]
    pub pending_approval: Option<PendingApproval>,
}

/// A turn that stopped before running tool calls that need a person's approval. The calls
/// themselves (their arguments) are the last assistant message of the history, or of a paused
/// subagent's conversation; this says which of them wait and what the turn needs to go on where it
/// stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The calls waiting for a decision, in the reply's order, a subagent's after its parent's.
    pub calls: Vec<PendingCall>,
    /// The index, in the whole history, of the paused turn's first message (its user message).
    pub turn_start: usize,
    /// The model calls the turn has made so far; its step bound counts them.
    pub steps: u32,
    /// The skill a slash command forced on the turn, enforced again when it goes on.
    #[serde(default)]
    pub forced_skill: Option<SkillPath>,
    /// The ticket the turn was about.
    #[serde(default)]
    pub ticket: Option<TicketId>,
    /// The turn's subagents that paused inside a `task` call, which has no result yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subagents: Vec<PausedSubagent>,
    /// Subagents the turn had started when it paused: the turn's bound counts them, and new ones
    /// are numbered after them.
    #[serde(default)]
    pub subagents_started: u32,
}

impl PendingApproval {
    /// A subagent's waiting call as its model made it, from the subagent's kept conversation (the
    /// turn's own calls are in the session's history); `None` for the turn's own calls.
    pub fn subagent_call(&self, call: &PendingCall) -> Option<&ToolCall> {
        let subagent = call.subagent.as_deref()?;
        let own_id = call.id.strip_prefix(subagent)?.strip_prefix('/')?;
        let paused = self.subagents.iter().find(|paused| paused.id == subagent)?;
        let calls = paused.conversation.iter().rev().find_map(|message| match message {
            Message::Assistant { tool_calls, .. } => Some(tool_calls),
            _ => None,
        })?;
        calls.iter().find(|made| made.id == own_id)
    }
}

/// One tool call waiting for approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingCall {
    /// The model's call id; a subagent's call is `{subagent}/{call id}`, unique within the turn.
    pub id: String,
    pub name: String,
    /// The subagent (`sa-1`...) that made the call; `None` for the turn's own agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<String>,
}

/// A subagent stopped at a call that needs approval: its own conversation (its task, then its
/// steps; the last assistant message holds the calls that wait, or the `task` calls of its own
/// paused subagents), kept until the decisions come.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PausedSubagent {
    /// The subagent's id within the turn (`sa-2`).
    pub id: String,
    /// The agent that started it: `None` for the turn's own agent, or a subagent's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The parent's `task` call that the subagent's answer will be the result of.
    pub task_call_id: String,
    pub conversation: Vec<Message>,
    /// Model calls it has made.
    pub steps: u32,
    /// Skills it had loaded, the current one last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaded_skills: Vec<SkillPath>,
}

/// One entry of the todo list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    pub content: String,
    pub status: TodoStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

/// A summary that stands in for the first `covers` messages of the history when prompts are built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistorySummary {
    pub text: String,
    /// How many messages from the start of the whole history (expired turns included) the summary replaces.
    pub covers: usize,
    /// The turn whose first message is message `covers`: lets a store read back exactly the
    /// turns after the summary in one request. Absent in summaries written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_turn: Option<u64>,
}

/// A session as loaded at the start of a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub user_id: UserId,
    pub session_id: SessionId,
    /// Number of committed turns; 0 for a session that does not exist yet.
    pub version: u64,
    /// The recent part of the history a turn needs: every message the summary does not cover
    /// (within the load bounds). Older messages stay in storage; see
    /// [`SessionStore::history_page`](crate::store::SessionStore::history_page).
    pub history: Vec<Message>,
    /// The index, in the whole history, of `history[0]`.
    pub history_offset: usize,
    /// The loaded turns: (turn number, index of its first message in the whole history), oldest first.
    pub turn_starts: Vec<(u64, usize)>,
    pub state: SessionState,
    /// Unix seconds of the last commit, 0 for a new session.
    pub updated_at: i64,
}

impl Session {
    pub fn new(user_id: UserId, session_id: SessionId) -> Self {
        Self {
            user_id,
            session_id,
            version: 0,
            history: Vec::new(),
            history_offset: 0,
            turn_starts: Vec::new(),
            state: SessionState::default(),
            updated_at: 0,
        }
    }

    /// Messages in the whole history, stored turns before `history` included.
    pub fn history_end(&self) -> usize {
        self.history_offset + self.history.len()
    }
}

/// Most turns a session load reads back when the summary does not bound it sooner.
pub const MAX_LOADED_TURNS: usize = 200;
/// Most bytes of stored messages a session load reads back (at least one turn is always read).
pub const MAX_LOADED_HISTORY_BYTES: usize = 4 * 1024 * 1024;

/// One page of a session's stored turns, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage {
    /// (turn number, its messages), newest turn first.
    pub turns: Vec<(u64, Vec<Message>)>,
    /// The published version of each skill a turn of this page loaded, by turn number (turns that
    /// loaded none are left out).
    pub skill_versions: BTreeMap<u64, BTreeMap<String, u32>>,
    /// The turn number to pass as `before` for the next (older) page; `None` on the last page.
    pub next_before: Option<u64>,
}

/// What a finished turn writes: the turn's messages and the state after cleanup.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnCommit {
    /// The version read at the start of the turn; the write succeeds only if it is still current.
    pub expected_version: u64,
    pub new_messages: Vec<Message>,
    /// Messages the whole history held before this turn: the index of this turn's first message.
    pub history_len: usize,
    pub state: SessionState,
    /// Unix seconds of this commit.
    pub now: i64,
    /// Unique to this turn's attempt: lets the store recognise its own commit when a retried
    /// request finds it already applied, and serves as DynamoDB's `ClientRequestToken`.
    pub commit_token: String,
    /// The idempotency record to complete, when the turn came with a key.
    pub idempotency: Option<CommitKey>,
    /// What the turn spent, added to the tenant's usage in the same atomic write; `None` counts nothing.
    pub usage: Option<TurnUsage>,
    /// The published version of each skill the turn loaded, by skill path; kept with the turn.
    pub skill_versions: BTreeMap<String, u32>,
}
