//! The bounded ReAct loop: call the model, run the tools it asks for, repeat until it answers,
//! the step bound is hit, or the invocation's deadline draws near.
//!
//! Once the model has been called the turn always ends with a reply: a large tool result is saved to
//! a file (`results`), the turn's older steps are condensed when the context fills (`compact`), and a
//! turn that still cannot go on ends [`Ending::ContextFull`]. Only a request that does not fit before
//! the first call is an error.
//!
//! A call the environment says needs a person's approval stops the loop before it runs
//! ([`Ending::AwaitingApproval`]); [`resume`] goes on from the stored conversation with the
//! person's decisions (`approval`).

mod approval;
mod calls;
pub mod compact;
mod drive;
pub mod results;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::events::{ListingShown, TurnEvent, TurnObserver};
use crate::message::{FileBytes, FileRef, Message, ToolCall, ToolSpec, Usage};
use crate::model::{ChatModel, ModelError};
use crate::prompt::SystemPrompt;
use crate::store::PausedSubagent;
pub use approval::{CallDecision, Decision, Decisions, MAX_REJECTION_MESSAGE_BYTES, SUBAGENT_CALL_SEPARATOR};
use drive::{drive, Start};

/// Tool results longer than this are cut when they cannot be saved to a file, so one huge file
/// cannot swamp the context.
pub const MAX_TOOL_RESULT_BYTES: usize = 64 * 1024;
/// Tool calls run from one model reply; later calls of the reply get an error result.
pub const MAX_TOOL_CALLS_PER_REPLY: usize = 16;
/// Bytes of tool results one turn keeps; once spent, further calls get an error result.
pub const MAX_TURN_TOOL_RESULT_BYTES: usize = 1024 * 1024;
/// A tool call whose JSON arguments are longer than this (or that would take the turn's arguments
/// past [`MAX_TURN_ARGUMENT_BYTES`]) is not run, and its stored arguments are replaced by
/// `{"_omitted_bytes": n}`.
pub const MAX_TOOL_ARGUMENT_BYTES: usize = 256 * 1024;
/// Bytes of tool-call arguments one turn keeps.
pub const MAX_TURN_ARGUMENT_BYTES: usize = 1024 * 1024;
/// The model's text in one reply is kept (stored, returned) up to this many bytes.
pub const MAX_REPLY_BYTES: usize = 256 * 1024;
/// Longest tool-call id and tool name kept; longer ids are replaced, longer names cut.
const MAX_TOOL_CALL_ID_BYTES: usize = 128;
const MAX_TOOL_NAME_BYTES: usize = 128;

/// What a strategy provides to the loop: the prompt and tools for the next call, and tool execution.
/// The prompt is asked for before every model call, so a tool that changes state (load_skill)
/// takes effect on the very next call.
#[async_trait]
pub trait TurnEnv: Send {
    fn system_prompt(&self) -> SystemPrompt;
    fn tools(&self) -> Arc<[ToolSpec]>;
    /// The tokens [`TurnEnv::tools`] add to a request ([`crate::budget::estimate_tools`]); an
    /// environment whose tools rarely change may count them once.
    fn tools_tokens(&self) -> usize {
        crate::budget::estimate_tools(&self.tools())
    }
    /// A short reminder added after the conversation for the model call numbered `step` (0-based);
    /// it is part of that request only, never of the history.
    fn reminder(&self, _step: u32) -> Option<String> {
        None
    }
    /// Runs one tool call; failures are returned as text for the model, never as an error.
    async fn call_tool(&mut self, call: &ToolCall) -> ToolOutput;
    /// The bytes of the files a request shows, read at most once per turn; a file left out is sent
    /// as a note. The default holds none.
    async fn file_bytes(&mut self, _files: &[&FileRef]) -> Arc<FileBytes> {
        Arc::default()
    }
    /// The workspace files (`/workspace` path, size) written since the last call, so the loop can
    /// report them as they appear.
    fn take_written_files(&mut self) -> Vec<(String, u64)> {
        Vec::new()
    }
    /// The prompt state of the next model call, for its [`TurnEvent::ModelCall`]. Asked after
    /// [`TurnEnv::system_prompt`] for the same call. The default, `None`, is for an environment
    /// without the two prompt states (the planner's expert rounds): its calls send no `model.call`.
    fn prompt_state(&self) -> Option<PromptState> {
        None
    }
    /// Whose prompts these are (the tenant), for the provider's prompt-cache key: requests of one
    /// scope and prompt state share a key. `None` sends no key.
    fn cache_scope(&self) -> Option<String> {
        None
    }
    /// Whether `call` returns skill instructions: its result is never saved to a file and is left
    /// out of a condensed step.
    fn reads_skill_text(&self, _call: &ToolCall) -> bool {
        false
    }
    /// Saves `content`, the result of `call`, too large for the conversation, as a file the model
    /// can read back; returns the file's path, or `None` when the environment keeps no such files,
    /// the model could not read it, or it could not be written (the result is then cut instead).
    async fn save_result(&mut self, _call: &ToolCall, _content: &str) -> Option<String> {
        None
    }
    /// Whether `call` must wait for a person's approval before it runs. Asked only of calls the
    /// loop would run (within the reply's bounds, not yet decided); an environment that would
    /// refuse the call anyway says no, so nobody is asked about a call that cannot run.
    fn needs_approval(&self, _call: &ToolCall) -> bool {
        false
    }
    /// Whether `call` runs together with the reply's other such calls (a `task`, whose subagent
    /// spends its time waiting on the model): they all run at once where the first of them stands
    /// in the reply, so the calls before it have run and those after it run once they are done.
    fn runs_concurrently(&self, _call: &ToolCall) -> bool {
        false
    }
    /// Runs `calls`, all of which [`TurnEnv::runs_concurrently`], at the same time, reporting what
    /// they do to `events`; one output per call, in order. The default runs them one by one.
    async fn call_concurrently(&mut self, calls: &[&ToolCall], _events: &dyn TurnObserver) -> Vec<ToolOutput> {
        let mut outputs = Vec::with_capacity(calls.len());
        for call in calls {
            outputs.push(self.call_tool(call).await);
        }
        outputs
    }
}

/// Which of the two prompt states a model call is made in, as its environment knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptState {
    /// State 1: no skill is current; the base prompt carries the skill listing chosen for the
    /// turn, with these counts (from [`crate::skills::Listing`]).
    Listing { total: usize, shown_in_full: usize, search: bool },
    /// State 2: the skill at `path` is current and its SKILL.md is in the prompt; `forced` when a
    /// slash command chose it.
    Skill { path: String, forced: bool },
}

impl PromptState {
    /// The `model.call` event of call number `step` (from 1) in this state; `shrunk` is how many
    /// times the context budget shrank the listing for the call.
    fn event(self, step: u32, shrunk: usize, tools: &[ToolSpec], prompt_tokens: usize) -> TurnEvent {
        let tools = tools.iter().map(|tool| tool.name.clone()).collect();
        match self {
            PromptState::Listing { total, shown_in_full, search } => TurnEvent::ModelCall {
                step,
                state: 1,
                skill: None,
                forced: false,
                listing: Some(ListingShown { total, shown_in_full, search, tier: shrunk }),
                tools,
                prompt_tokens,
            },
            PromptState::Skill { path, forced } => {
                TurnEvent::ModelCall { step, state: 2, skill: Some(path), forced, listing: None, tools, prompt_tokens }
            }
        }
    }
}

/// What a tool call produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    pub content: String,
    /// Set by `abort`: end the turn now with this reply.
    pub abort: Option<String>,
    /// Set by `load_skill` when a skill became current.
    pub loaded_skill: Option<String>,
    /// The published version of that skill, when it is one.
    pub loaded_version: Option<u32>,
    /// The model tokens the call itself spent (a subagent's loop), counted in the turn's usage.
    pub usage: Usage,
    /// Set by a `task` whose subagent stopped at a call that needs approval: the call has no
    /// result yet, and the turn pauses with what waits.
    pub paused: Option<Box<Pause>>,
    /// Set when the call was refused without running (a tool that was not offered, a command a
    /// forced skill does not allow), so the loop tells a refusal from a failure.
    pub refused: bool,
    /// Images and documents the result shows the model (`read_file` of a picture); the
    /// environment holds their bytes ([`TurnEnv::file_bytes`]).
    pub files: Vec<FileRef>,
}

/// A call that waits for a person's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitingCall {
    /// The call as a decision names it: a subagent's has the id `{subagent}/{call id}`.
    pub call: ToolCall,
    /// The subagent that made it; `None` for the loop's own agent.
    pub subagent: Option<String>,
}

impl WaitingCall {
    /// The call as a reply and the `approval.requested` event show it.
    pub fn shown(&self) -> crate::events::ApprovalCall {
        crate::events::ApprovalCall::of(&self.call, self.subagent.as_deref())
    }
}

/// Why a loop stopped for approval: the calls that wait (its own and its subagents'), and the
/// subagents that stopped inside its `task` calls, kept until the decisions come.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pause {
    pub waiting: Vec<WaitingCall>,
    pub subagents: Vec<PausedSubagent>,
}

impl From<String> for ToolOutput {
    fn from(content: String) -> Self {
        Self { content, ..Self::default() }
    }
}

/// The loop's bounds.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Most model calls in one turn.
    pub max_steps: u32,
    /// When the invocation must have returned; `None` for no deadline.
    pub deadline: Option<Instant>,
    /// Time kept back before the deadline to persist the turn and answer.
    pub reserve: Duration,
    /// Most input tokens one request may carry (the model's context minus room for its answer).
    pub input_tokens: usize,
}

/// Why the loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// The model gave its final answer.
    Answered,
    /// `max_steps` model calls were made without a final answer.
    StepLimit,
    /// The deadline came too close to make another model call.
    Deadline,
    /// The model called `abort`.
    Aborted,
    /// Planner: a bound was hit mid-plan; the plan is saved and the next turn resumes it.
    PlanContinues,
    /// Planner: the user is asked to pick one of the expert's prompts.
    AwaitingChoice,
    /// Planner: the user is asked a clarifying question.
    AwaitingClarification,
    /// Planner: a structured reply failed its schema twice.
    PlanFailed,
    /// The turn's own work no longer fits the model's context, even with its older steps condensed;
    /// what it did is committed and the next message continues.
    ContextFull,
    /// Some of the model's tool calls need a person's approval: none of them has run, and the
    /// next turn request answers them ([`LoopOutcome::pause`]).
    AwaitingApproval,
}

/// A finished loop: the reply, every message the turn added (starting with the user's), and counts.
#[derive(Debug, Clone)]
pub struct LoopOutcome {
    pub reply: String,
    pub messages: Vec<Message>,
    pub steps: u32,
    pub usage: Usage,
    pub ending: Ending,
    /// With [`Ending::AwaitingApproval`]: the calls that wait, in the reply's order (a subagent's
    /// in place of its `task` call), and the subagents that paused.
    pub pause: Pause,
}

/// A paused turn as [`resume`] takes it back.
pub struct Paused<'a> {
    /// The conversation as stored: the history, then the paused turn's messages, the last
    /// assistant message holding the calls that wait.
    pub conversation: &'a [Message],
    /// Where the paused turn's messages start in `conversation`.
    pub turn_start: usize,
    /// Model calls the turn made before it paused.
    pub steps: u32,
    pub decisions: &'a Decisions,
}

/// Runs one turn. Only a model failure is an error; tool failures are tool results, and hitting a
/// bound ends the turn normally with a reply that says so. `events` hears the model's text as it
/// arrives (when it wants it), every model call (when `env` knows its prompt state), every tool
/// call and result, and every skill loaded.
pub async fn run(
    model: &dyn ChatModel,
    env: &mut dyn TurnEnv,
    history: Vec<Message>,
    user_message: Message,
    limits: &Limits,
    events: &dyn TurnObserver,
) -> Result<LoopOutcome, ModelError> {
    // The history becomes the conversation itself: a turn copies it once, out of the session.
    let mut conversation = history;
    conversation.reserve(8);
    let first_new = conversation.len();
    conversation.push(user_message);
    let start = Start { conversation, first_new, stored: first_new, steps: 0, decisions: None };
    drive(model, env, start, limits, events).await
}

/// Goes on with a turn that paused for approval: the calls of its last reply that had not run
/// run now as the person decided (approved, with edited arguments, or rejected), then the loop
/// continues where it stopped, its steps counted from where they were. The outcome's messages are
/// the ones added after `paused.conversation`.
pub async fn resume(
    model: &dyn ChatModel,
    env: &mut dyn TurnEnv,
    paused: Paused<'_>,
    limits: &Limits,
    events: &dyn TurnObserver,
) -> Result<LoopOutcome, ModelError> {
    let conversation = paused.conversation.to_vec();
    let stored = conversation.len();
    let first_new = paused.turn_start.min(stored);
    let start = Start { conversation, first_new, stored, steps: paused.steps, decisions: Some(paused.decisions) };
    drive(model, env, start, limits, events).await
}
