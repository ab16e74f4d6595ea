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
pub mod results;

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::budget::{self, Trim};
use crate::events::{DeltaEvents, ListingShown, TurnEvent, TurnObserver};
use crate::message::{ChatRequest, Message, ToolCall, ToolSpec, Usage};
use crate::model::{ChatModel, ModelError};
use crate::prompt::SystemPrompt;
use crate::store::PausedSubagent;
pub use approval::{CallDecision, Decision, Decisions, MAX_REJECTION_MESSAGE_BYTES, SUBAGENT_CALL_SEPARATOR};

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
    fn tools(&self) -> Vec<ToolSpec>;
    /// A short reminder added after the conversation for the model call numbered `step` (0-based);
    /// it is part of that request only, never of the history.
    fn reminder(&self, _step: u32) -> Option<String> {
        None
    }
    /// Runs one tool call; failures are returned as text for the model, never as an error.
    async fn call_tool(&mut self, call: &ToolCall) -> ToolOutput;
    /// The workspace files (`/workspace` path, size) written since the last call, so the loop can
    /// report them as they appear.
    fn take_written_files(&mut self) -> Vec<(String, u64)> {
        Vec::new()
    }
    /// How many tool calls this environment has refused so far (a tool that was not offered, a
    /// command a forced skill does not allow), so the loop can tell a refusal from a failure.
    fn refused_calls(&self) -> u32 {
        0
    }
    /// The prompt state of the next model call, for its [`TurnEvent::ModelCall`]. Asked after
    /// [`TurnEnv::system_prompt`] for the same call. The default, `None`, is for an environment
    /// without the two prompt states (the planner's expert rounds): its calls send no `model.call`.
    fn prompt_state(&self) -> Option<PromptState> {
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
    /// The model tokens the call itself spent (a subagent's loop), counted in the turn's usage.
    pub usage: Usage,
    /// Set by a `task` whose subagent stopped at a call that needs approval: the call has no
    /// result yet, and the turn pauses with what waits.
    pub paused: Option<Box<Pause>>,
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
    history: &[Message],
    user_message: Message,
    limits: &Limits,
    events: &dyn TurnObserver,
) -> Result<LoopOutcome, ModelError> {
    let mut conversation = Vec::with_capacity(history.len() + 8);
    conversation.extend_from_slice(history);
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

/// Where a loop starts: the conversation (history and the turn's messages so far), where the turn
/// starts in it, how much of it is stored already, the steps made, and decisions to apply first.
struct Start<'d> {
    conversation: Vec<Message>,
    first_new: usize,
    stored: usize,
    steps: u32,
    decisions: Option<&'d Decisions>,
}

async fn drive(
    model: &dyn ChatModel,
    env: &mut dyn TurnEnv,
    start: Start<'_>,
    limits: &Limits,
    events: &dyn TurnObserver,
) -> Result<LoopOutcome, ModelError> {
    let Start { mut conversation, first_new, stored, mut steps, decisions } = start;
    let mut usage = Usage::default();
    // What the turn's tool calls have spent, and an abort's reason once one was called.
    let mut spent = calls::Spent::default();
    let mut argument_bytes = 0usize;
    let mut compacted: Option<compact::Compacted> = None;
    let offload_bound = results::offload_bound(limits.input_tokens);
    let mut pause = Pause::default();

    let mut resumed = match decisions {
        Some(decisions) => {
            resume_calls(env, &mut conversation, decisions, steps, offload_bound, &mut spent, events).await
        }
        None => calls::Ran::All,
    };
    usage.add(std::mem::take(&mut spent.usage));

    let ending = loop {
        if let calls::Ran::Paused(waiting) = &mut resumed {
            pause = std::mem::take(waiting);
            break Ending::AwaitingApproval;
        }
        if spent.aborted.is_some() {
            break Ending::Aborted;
        }
        if steps >= limits.max_steps {
            break Ending::StepLimit;
        }
        let call_deadline = limits.deadline.map(|deadline| deadline.checked_sub(limits.reserve).unwrap_or(deadline));
        if call_deadline.is_some_and(|at| at <= Instant::now()) {
            break Ending::Deadline;
        }
        let tools = env.tools();
        let (mut system, mut messages, mut trims) =
            prepare(&*env, &conversation, first_new, compacted.as_ref(), steps, &tools, limits.input_tokens);
        // The turn itself would be cut: condense its older steps first, as long as there are some
        // and what is never cut (the prompt as trimmed, the request, the tools) leaves room for them.
        let floor = budget::estimate_request(&system, std::slice::from_ref(&conversation[first_new]), &tools);
        if budget::cuts_the_turn(&trims) && floor < limits.input_tokens {
            // The calls that returned skill instructions, asked of the environment before the call
            // to the model, since the environment is not shared across it.
            let skill_calls: std::collections::HashSet<&str> = conversation[first_new..]
                .iter()
                .flat_map(|message| match message {
                    Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
                    _ => &[],
                })
                .filter(|call| env.reads_skill_text(call))
                .map(|call| call.id.as_str())
                .collect();
            let skill_text = |call: &ToolCall| skill_calls.contains(call.id.as_str());
            let condensed =
                compact::compact(model, &conversation, first_new, compacted.as_ref(), limits, &skill_text, &mut usage)
                    .await;
            if condensed.is_some() {
                compacted = condensed;
                (system, messages, trims) =
                    prepare(&*env, &conversation, first_new, compacted.as_ref(), steps, &tools, limits.input_tokens);
            }
        }
        let mut shrunk = 0;
        let mut full = None;
        for trim in trims {
            log_trim(&trim, steps);
            match trim {
                Trim::StillOver { tokens, limit } => full = Some((tokens, limit)),
                Trim::ShrunkListing { .. } => shrunk += 1,
                _ => {}
            }
        }
        // A provider refuses a request over its context, so none is sent: before the first call
        // the request itself is too large; after it, the turn ends with what it did.
        match full {
            Some((tokens, limit)) if steps == 0 => return Err(ModelError::ContextTooLarge { tokens, limit }),
            Some(_) => break Ending::ContextFull,
            None => {}
        }
        if let Some(state) = env.prompt_state() {
            let tokens = budget::estimate_request(&system, &messages, &tools);
            events.event(state.event(steps + 1, shrunk, &tools, tokens));
        }
        let request = ChatRequest { system: system.render(), messages, tools, ..ChatRequest::default() };
        let deltas = DeltaEvents::new(events, MAX_REPLY_BYTES);
        let call = async {
            if events.wants_deltas() {
                model.complete_streaming(&request, &deltas).await
            } else {
                model.complete(&request).await
            }
        };
        let response = match call_deadline {
            Some(at) => match tokio::time::timeout_at(at, call).await {
                Ok(response) => response?,
                Err(_) => break Ending::Deadline,
            },
            None => call.await?,
        };
        steps += 1;
        usage.add(response.usage);
        let mut content = response.content;
        results::cut_text(&mut content, MAX_REPLY_BYTES, "[reply cut: it was longer than the limit of one reply]");
        let mut calls = response.tool_calls;
        // What the model sent is bounded before it is run or stored.
        let oversized: Vec<Option<usize>> = calls
            .iter_mut()
            .enumerate()
            .map(|(index, call)| {
                if call.id.is_empty() || call.id.len() > MAX_TOOL_CALL_ID_BYTES {
                    call.id = format!("call_{steps}_{index}");
                }
                results::cut_text(&mut call.name, MAX_TOOL_NAME_BYTES, "");
                let size = call.arguments.to_string().len();
                let over = size > MAX_TOOL_ARGUMENT_BYTES || argument_bytes + size > MAX_TURN_ARGUMENT_BYTES;
                if over {
                    call.arguments = serde_json::json!({ "_omitted_bytes": size });
                } else {
                    argument_bytes += size;
                }
                over.then_some(size)
            })
            .collect();
        conversation.push(Message::Assistant { content, tool_calls: calls.clone() });
        if calls.is_empty() {
            break Ending::Answered;
        }
        let indices: Vec<usize> = (0..calls.len()).collect();
        let reply = calls::Reply {
            calls: &calls,
            indices: &indices,
            decisions: None,
            oversized: &oversized,
            step: steps,
            offload_bound,
        };
        let ran = calls::run_reply(env, reply, &mut spent, events, &mut conversation).await;
        usage.add(std::mem::take(&mut spent.usage));
        if let calls::Ran::Paused(waiting) = ran {
            pause = waiting;
            break Ending::AwaitingApproval;
        }
        if spent.aborted.is_some() {
            break Ending::Aborted;
        }
    };

    let reply = match ending {
        // The loop itself only ends answered, at a bound, or aborted; the planner's endings are its own.
        Ending::Answered
        | Ending::PlanContinues
        | Ending::AwaitingChoice
        | Ending::AwaitingClarification
        | Ending::PlanFailed => match conversation.last() {
            Some(Message::Assistant { content, .. }) => content.clone(),
            _ => String::new(),
        },
        // What the model said with the calls that wait.
        Ending::AwaitingApproval => conversation
            .iter()
            .rev()
            .find_map(|message| match message {
                Message::Assistant { content, .. } => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_default(),
        Ending::StepLimit => {
            let notice = format!(
                "I stopped after {steps} steps, the limit for one turn, before finishing. \
                 Send another message and I will continue."
            );
            conversation.push(Message::assistant(notice.clone()));
            notice
        }
        Ending::Aborted => {
            let reason = spent.aborted.take().unwrap_or_default();
            conversation.push(Message::assistant(reason.clone()));
            reason
        }
        Ending::Deadline => {
            let notice = "I ran out of time for this turn before finishing. \
                          Send another message and I will continue."
                .to_owned();
            conversation.push(Message::assistant(notice.clone()));
            notice
        }
        Ending::ContextFull => {
            let notice = format!(
                "I stopped after {steps} steps, before finishing: this turn's work no longer fits in the model's \
                 context, even with its earlier steps condensed. What I did is saved, files included. Send another \
                 message and I will continue from there."
            );
            conversation.push(Message::assistant(notice.clone()));
            notice
        }
    };
    let messages = conversation.split_off(stored.max(first_new));
    Ok(LoopOutcome { reply, messages, steps, usage, ending, pause })
}

/// Runs the calls of a paused turn's last reply that have no result yet, as `decisions` say (a
/// `task` whose subagent paused goes on with it). The reply's message in `conversation` takes the
/// edited arguments, so the model sees what ran.
async fn resume_calls(
    env: &mut dyn TurnEnv,
    conversation: &mut Vec<Message>,
    decisions: &Decisions,
    step: u32,
    offload_bound: usize,
    spent: &mut calls::Spent,
    events: &dyn TurnObserver,
) -> calls::Ran {
    let Some(at) = conversation.iter().rposition(|message| matches!(message, Message::Assistant { .. })) else {
        return calls::Ran::All;
    };
    let answered: std::collections::HashSet<String> = conversation[at + 1..]
        .iter()
        .filter_map(|message| match message {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.clone()),
            _ => None,
        })
        .collect();
    let Message::Assistant { tool_calls, .. } = &mut conversation[at] else { return calls::Ran::All };
    for call in tool_calls.iter_mut() {
        if let Some(Decision::Edit { arguments }) = decisions.get(&call.id) {
            call.arguments = arguments.clone();
        }
    }
    // A batch of subagents can leave a call without a result between two that have one.
    let (indices, remaining): (Vec<usize>, Vec<ToolCall>) = tool_calls
        .iter()
        .enumerate()
        .filter(|(_, call)| !answered.contains(&call.id))
        .map(|(index, call)| (index, call.clone()))
        .unzip();
    if remaining.is_empty() {
        return calls::Ran::All;
    }
    let oversized = vec![None; remaining.len()];
    let reply = calls::Reply {
        calls: &remaining,
        indices: &indices,
        decisions: Some(decisions),
        oversized: &oversized,
        step,
        offload_bound,
    };
    calls::run_reply(env, reply, spent, events, conversation).await
}

/// The system prompt, the messages and the trims of the request for model call `step` (from 0):
/// the conversation as [`compact::view`] gives it, the reminder, and [`budget::fit`].
fn prepare(
    env: &dyn TurnEnv,
    conversation: &[Message],
    first_new: usize,
    compacted: Option<&compact::Compacted>,
    step: u32,
    tools: &[ToolSpec],
    limit: usize,
) -> (SystemPrompt, Vec<Message>, Vec<Trim>) {
    let mut system = env.system_prompt();
    let mut messages = compact::view(conversation, first_new, compacted);
    if let Some(reminder) = env.reminder(step) {
        messages.push(Message::user(reminder));
    }
    let trims = budget::fit(&mut system, &mut messages, first_new, tools, limit);
    (system, messages, trims)
}

fn log_trim(trim: &Trim, step: u32) {
    match trim {
        Trim::CutArguments { calls, tokens } => {
            tracing::info!(step, calls, tokens, "context budget: cut the large arguments of tool calls")
        }
        Trim::DroppedMessages { count, tokens } => {
            tracing::info!(step, count, tokens, "context budget: dropped the oldest messages of earlier turns")
        }
        Trim::DroppedSection { tokens } => {
            tracing::info!(step, tokens, "context budget: dropped a non-skill section of the system prompt")
        }
        Trim::ShrunkListing { tokens } => {
            tracing::warn!(step, tokens, "context budget: shrank the skill listing to its next smaller tier")
        }
        Trim::CutNewestArguments { tokens } => {
            tracing::info!(step, tokens, "context budget: cut the large arguments of a call of the newest reply")
        }
        Trim::TruncatedMessage { index, tokens } => {
            tracing::info!(step, index, tokens, "context budget: truncated the largest message")
        }
        Trim::StillOver { tokens, limit } => {
            tracing::warn!(step, tokens, limit, "context budget: still over the limit with nothing left to trim")
        }
    }
}
