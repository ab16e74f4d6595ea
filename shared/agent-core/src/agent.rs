//! The bounded ReAct loop: call the model, run the tools it asks for, repeat until it answers,
//! the step bound is hit, or the invocation's deadline draws near.

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::budget::{self, Trim};
use crate::message::{ChatRequest, Message, ToolCall, ToolSpec, Usage};
use crate::model::{ChatModel, ModelError};
use crate::prompt::SystemPrompt;

/// Tool results longer than this are cut, so one huge file cannot swamp the context.
pub const MAX_TOOL_RESULT_BYTES: usize = 64 * 1024;

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
}

/// What a tool call produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    /// Set by `abort`: end the turn now with this reply.
    pub abort: Option<String>,
}

impl From<String> for ToolOutput {
    fn from(content: String) -> Self {
        Self { content, abort: None }
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
}

/// A finished loop: the reply, every message the turn added (starting with the user's), and counts.
#[derive(Debug, Clone)]
pub struct LoopOutcome {
    pub reply: String,
    pub messages: Vec<Message>,
    pub steps: u32,
    pub usage: Usage,
    pub ending: Ending,
}

/// Runs one turn. Only a model failure is an error; tool failures are tool results, and hitting a
/// bound ends the turn normally with a reply that says so.
pub async fn run(
    model: &dyn ChatModel,
    env: &mut dyn TurnEnv,
    history: &[Message],
    user_message: Message,
    limits: &Limits,
) -> Result<LoopOutcome, ModelError> {
    let mut conversation = Vec::with_capacity(history.len() + 8);
    conversation.extend_from_slice(history);
    let first_new = conversation.len();
    conversation.push(user_message);
    let mut usage = Usage::default();
    let mut steps = 0;

    let mut aborted = None;
    let ending = loop {
        if steps >= limits.max_steps {
            break Ending::StepLimit;
        }
        let call_deadline = limits.deadline.map(|deadline| deadline.checked_sub(limits.reserve).unwrap_or(deadline));
        if call_deadline.is_some_and(|at| at <= Instant::now()) {
            break Ending::Deadline;
        }
        let tools = env.tools();
        let mut system = env.system_prompt();
        let mut messages = conversation.clone();
        if let Some(reminder) = env.reminder(steps) {
            messages.push(Message::user(reminder));
        }
        for trim in budget::fit(&mut system, &mut messages, first_new, &tools, limits.input_tokens) {
            log_trim(&trim, steps);
        }
        let request = ChatRequest { system: system.render(), messages, tools, ..ChatRequest::default() };
        let response = match call_deadline {
            Some(at) => match tokio::time::timeout_at(at, model.complete(&request)).await {
                Ok(response) => response?,
                Err(_) => break Ending::Deadline,
            },
            None => model.complete(&request).await?,
        };
        steps += 1;
        usage.add(response.usage);
        let calls = response.tool_calls;
        conversation.push(Message::Assistant { content: response.content.clone(), tool_calls: calls.clone() });
        if calls.is_empty() {
            break Ending::Answered;
        }
        for call in &calls {
            tracing::info!(tool = %call.name, step = steps, "tool call");
            // After an abort the remaining calls are answered without running, so every call keeps
            // its result and the stored history stays well-formed.
            let output = match &aborted {
                Some(_) => ToolOutput::from("Not run: the turn was aborted.".to_owned()),
                None => env.call_tool(call).await,
            };
            let mut content = output.content;
            truncate_tool_result(&mut content);
            conversation.push(Message::Tool { tool_call_id: call.id.clone(), name: call.name.clone(), content });
            if aborted.is_none() {
                aborted = output.abort;
            }
        }
        if aborted.is_some() {
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
        Ending::StepLimit => {
            let notice = format!(
                "I stopped after {steps} steps, the limit for one turn, before finishing. \
                 Send another message and I will continue."
            );
            conversation.push(Message::assistant(notice.clone()));
            notice
        }
        Ending::Aborted => {
            let reason = aborted.unwrap_or_default();
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
    };
    let messages = conversation.split_off(first_new);
    Ok(LoopOutcome { reply, messages, steps, usage, ending })
}

fn log_trim(trim: &Trim, step: u32) {
    match trim {
        Trim::DroppedMessages { count, tokens } => {
            tracing::info!(step, count, tokens, "context budget: dropped the oldest messages of earlier turns")
        }
        Trim::DroppedSection { tokens } => {
            tracing::info!(step, tokens, "context budget: dropped a non-skill section of the system prompt")
        }
        Trim::ShrunkListing { tokens } => {
            tracing::warn!(step, tokens, "context budget: shrank the skill listing to its next smaller tier")
        }
        Trim::TruncatedMessage { index, tokens } => {
            tracing::info!(step, index, tokens, "context budget: truncated the largest message")
        }
        Trim::StillOver { tokens, limit } => {
            tracing::warn!(step, tokens, limit, "context budget: still over the limit with nothing left to trim")
        }
    }
}

fn truncate_tool_result(content: &mut String) {
    if content.len() <= MAX_TOOL_RESULT_BYTES {
        return;
    }
    let mut cut = MAX_TOOL_RESULT_BYTES;
    while !content.is_char_boundary(cut) {
        cut -= 1;
    }
    let total = content.len();
    content.truncate(cut);
    content.push_str(&format!("\n[truncated: showing {cut} of {total} bytes; read a smaller range]"));
}
