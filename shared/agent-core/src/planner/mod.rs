//! The planner strategy (seed 003, with its known defects fixed): plan a request as tasks for expert
//! MCP servers, discover and score each expert's prompts, fetch the selected prompt's content, run
//! the expert's tools, assess completion, and answer from the whole plan. The plan and a pending
//! question (a prompt choice, a prompt's missing arguments, or an expert tool's request for the
//! user's input) live in the session, so a plan survives across turns.

mod arguments;
mod assess;
mod discover;
mod input;
mod orchestrate;
mod plan;
mod respond;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;

use crate::agent::{Ending, Limits};
use crate::events::TurnObserver;
use crate::expert::{ExpertSession, PromptArgument};
use crate::message::{ChatRequest, JsonSchemaFormat, Message, Usage};
use crate::model::{ChatModel, ModelError};
use arguments::{arguments_question, read_arguments, ArgumentAnswer, MAX_ARGUMENT_CHARS};
use discover::read_choice;
pub use input::PendingInput;
use input::{input_question, read_input_answer, InputAnswer, Resumed};
use orchestrate::TaskStep;
use plan::Planned;

/// Settings of the planner strategy.
#[derive(Debug, Clone)]
pub struct PlannerConfig {
    pub planner_model: Option<String>,
    pub discovery_model: Option<String>,
    pub assessment_model: Option<String>,
    pub response_model: Option<String>,
    /// At or above it the best prompt is taken without asking (`PROMPT_CONFIDENCE_THRESHOLD`).
    pub prompt_confidence_threshold: f64,
    /// At or above it a prompt is offered to the user (`PROMPT_SUGGESTION_THRESHOLD`).
    pub prompt_suggestion_threshold: f64,
    /// A task is done when assessed complete with at least this confidence (`TASK_COMPLETION_THRESHOLD`).
    pub task_completion_threshold: f64,
    /// Orchestrate-and-assess rounds per task before it is given up.
    pub max_task_rounds: u32,
}

impl Default for PlannerConfig {
    fn default() -> Self {
        Self {
            planner_model: None,
            discovery_model: None,
            assessment_model: None,
            response_model: None,
            prompt_confidence_threshold: 0.7,
            prompt_suggestion_threshold: 0.4,
            task_completion_threshold: 0.7,
            max_task_rounds: 3,
        }
    }
}

/// The plan as stored in the session's `plan` attribute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanState {
    /// The user's request the plan answers.
    pub request: String,
    pub tasks: Vec<PlanTask>,
    /// Index of the task being worked on.
    pub position: usize,
    /// Prompts offered to the user, waiting for their answer.
    #[serde(default)]
    pub pending_choice: Option<Vec<PromptCandidate>>,
    /// The prompt decided for the current task, once decided.
    #[serde(default)]
    pub selection: Option<Selection>,
    /// Arguments of the selected prompt asked of the user, waiting for their answer.
    #[serde(default)]
    pub pending_arguments: Option<PendingArguments>,
    /// An expert's tool call waiting for the user's input, with the expert's questions and state.
    #[serde(default)]
    pub pending_input: Option<PendingInput>,
    /// What that call returned once answered, for the current task's next round.
    #[serde(default)]
    pub resumed: Option<String>,
}

/// A question to the user for arguments the selected prompt needs: required ones discovery could
/// not fill, or values the expert refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingArguments {
    /// The prompt, with the argument values known so far.
    pub prompt: PromptCandidate,
    /// The arguments asked for, in the order the question lists them.
    pub asked: Vec<String>,
    /// The expert's refusal of the values tried, when that is why the user was asked.
    #[serde(default)]
    pub refusal: Option<String>,
}

/// What was decided for the current task's prompt. An explicit enum, because `Option<Option<_>>`
/// would not survive a JSON round trip (`Some(None)` and `None` both become `null`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Selection {
    NoPrompt,
    Prompt { prompt: PromptCandidate },
}

impl Selection {
    fn from_choice(choice: Option<PromptCandidate>) -> Self {
        match choice {
            Some(prompt) => Selection::Prompt { prompt },
            None => Selection::NoPrompt,
        }
    }

    fn prompt(&self) -> Option<&PromptCandidate> {
        match self {
            Selection::Prompt { prompt } => Some(prompt),
            Selection::NoPrompt => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanTask {
    pub expert: String,
    pub task: String,
    pub status: TaskStatus,
    #[serde(default)]
    pub result: Option<String>,
    #[serde(default)]
    pub rounds: u32,
    /// The selected prompt could not be fetched, so the task ran without it: the line that says so
    /// in the final reply.
    #[serde(default)]
    pub prompt_failure: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    Done,
    Failed,
}

/// A scored prompt of an expert, with the argument values discovery proposed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptCandidate {
    pub name: String,
    pub description: String,
    pub match_confidence: f64,
    pub arguments: BTreeMap<String, String>,
    /// The prompt's declared arguments (`prompts/list`, bounded), so that required ones nobody
    /// filled are asked for before `prompts/get`. Empty in plans stored before they were kept.
    #[serde(default)]
    pub declared: Vec<PromptArgument>,
}

/// How a planner turn ended, before it is committed.
#[derive(Debug)]
pub struct PlannerOutcome {
    pub reply: String,
    pub plan: Option<PlanState>,
    pub steps: u32,
    pub usage: Usage,
    pub ending: Ending,
}

/// Model calls left and the deadline, shared by every step of the turn.
struct Bounds {
    steps_left: u32,
    deadline: Option<Instant>,
    reserve: Duration,
    input_tokens: usize,
    /// Model calls that returned, so a turn cut before any can say so instead of committing.
    calls_made: u32,
}

impl Bounds {
    /// How long an expert's call may run as a task: the turn's deadline less its reserve.
    fn task_deadline(&self) -> Option<std::time::Instant> {
        self.deadline.map(|deadline| deadline.checked_sub(self.reserve).unwrap_or(deadline).into_std())
    }

    fn exhausted(&self) -> bool {
        self.steps_left == 0
            || self
                .deadline
                .is_some_and(|deadline| deadline.checked_sub(self.reserve).is_none_or(|at| at <= Instant::now()))
    }
}

/// Why a planner step stopped the turn early.
enum Stop {
    /// A bound was hit: save the plan and continue next turn.
    OutOfBudget,
    /// A structured reply failed its schema twice.
    Invalid(String),
    Model(ModelError),
}

impl From<ModelError> for Stop {
    fn from(err: ModelError) -> Self {
        Stop::Model(err)
    }
}

/// Runs one planner turn over the opened experts.
pub struct Planner<'a> {
    pub model: &'a dyn ChatModel,
    pub experts: &'a dyn ExpertSession,
    pub config: &'a PlannerConfig,
    /// Hears tool calls of the expert rounds, and the final answer's text as it arrives.
    pub events: &'a dyn TurnObserver,
}

impl Planner<'_> {
    /// One turn: interpret a pending choice, (re)plan, then work through the tasks until the plan is
    /// done, a choice is needed, or a bound is hit.
    pub async fn run(
        &self,
        plan: Option<PlanState>,
        history: &[Message],
        message: &str,
        limits: &Limits,
    ) -> Result<PlannerOutcome, ModelError> {
        let mut bounds = Bounds {
            steps_left: limits.max_steps,
            deadline: limits.deadline,
            reserve: limits.reserve,
            input_tokens: limits.input_tokens,
            calls_made: 0,
        };
        let mut usage = Usage::default();
        let result = self.run_inner(plan, history, message, &mut bounds, &mut usage).await;
        let steps = limits.max_steps - bounds.steps_left;
        match result {
            Ok((reply, plan, ending)) => Ok(PlannerOutcome { reply, plan, steps, usage, ending }),
            Err((Stop::Model(err), _)) => Err(err),
            Err((Stop::Invalid(message), plan)) => {
                Ok(PlannerOutcome { reply: message, plan, steps, usage, ending: Ending::PlanFailed })
            }
            // No model call came back, or none that left a plan, so this turn did nothing worth
            // storing: the caller answers 503 `out_of_time` and commits nothing, as for the skills
            // strategy, and the user's message is not used up by a canned "send it again".
            Err((Stop::OutOfBudget, plan)) if bounds.calls_made == 0 || plan.is_none() => {
                Ok(PlannerOutcome { reply: String::new(), plan, steps, usage, ending: Ending::Deadline })
            }
            Err((Stop::OutOfBudget, plan)) => {
                let done = plan.iter().flat_map(|plan| &plan.tasks).filter(|t| t.status != TaskStatus::Pending).count();
                let total = plan.as_ref().map_or(0, |plan| plan.tasks.len());
                let reply = format!(
                    "I have worked through {done} of {total} tasks so far and ran out of room in this turn. \
                     I will continue with the rest in the next turn."
                );
                Ok(PlannerOutcome { reply, plan, steps, usage, ending: Ending::PlanContinues })
            }
        }
    }

    async fn run_inner(
        &self,
        plan: Option<PlanState>,
        history: &[Message],
        message: &str,
        bounds: &mut Bounds,
        usage: &mut Usage,
    ) -> Result<(String, Option<PlanState>, Ending), (Stop, Option<PlanState>)> {
        let experts = self.experts.experts();
        let mut plan = plan;

        // The answer to a pending question: to a prompt choice a number, a prompt name, or "none";
        // to a prompt's arguments their values, or "none"/"skip". Anything else is a new message for
        // the planner.
        let mut answered = false;
        let mut ask_again = None;
        if let Some(state) = plan.as_mut() {
            if let Some(options) = state.pending_choice.take() {
                if let Some(choice) = read_choice(message, &options) {
                    tracing::info!(choice = ?choice.as_ref().map(|c| &c.name), "the user answered the prompt choice");
                    state.selection = Some(Selection::from_choice(choice));
                    answered = true;
                }
            } else if let Some(pending) = state.pending_arguments.take() {
                match read_arguments(message, &pending) {
                    ArgumentAnswer::Skip => {
                        tracing::info!(prompt = %pending.prompt.name, "the user chose to go on without the prompt");
                        state.selection = Some(Selection::NoPrompt);
                        answered = true;
                    }
                    ArgumentAnswer::Filled(prompt) => {
                        // Names only: the values are the user's data.
                        tracing::info!(prompt = %prompt.name, asked = ?pending.asked, "the user gave prompt arguments");
                        state.selection = Some(Selection::Prompt { prompt });
                        answered = true;
                    }
                    ArgumentAnswer::TooLong => {
                        if let Some(task) = state.tasks.get(state.position) {
                            ask_again = Some(format!(
                                "That answer is longer than the {MAX_ARGUMENT_CHARS} characters a prompt argument \
                                 may have.\n{}",
                                arguments_question(task, &pending)
                            ));
                            state.pending_arguments = Some(pending);
                        }
                    }
                    ArgumentAnswer::NotAnAnswer => {}
                }
            } else if let Some(pending) = state.pending_input.take() {
                match read_input_answer(message, &pending.request) {
                    InputAnswer::Again(why) => {
                        if let Some(task) = state.tasks.get(state.position) {
                            ask_again = Some(format!("{why}\n{}", input_question(task, &pending)));
                            state.pending_input = Some(pending);
                        }
                    }
                    InputAnswer::Answers(answers) => {
                        // Boxed: the turn's future is deep already, and this path is taken once a turn.
                        let resumed = Box::pin(self.resume_input(state, pending, answers, bounds.task_deadline()));
                        match resumed.await {
                            Resumed::Note(note) => {
                                state.resumed = Some(note);
                                answered = true;
                            }
                            Resumed::AskAgain(question) => ask_again = Some(question),
                        }
                    }
                }
            }
        }
        if let Some(question) = ask_again {
            return Ok((question, plan, Ending::AwaitingClarification));
        }

        if !answered {
            match self.plan(plan.clone(), history, message, &experts, bounds, usage).await {
                Ok(Planned::Plan(new_plan)) => plan = Some(new_plan),
                Ok(Planned::Ask(question, kept)) => return Ok((question, kept, Ending::AwaitingClarification)),
                Err(stop) => return Err((stop, plan)),
            }
        }
        let mut state = plan.expect("planned above");

        while state.position < state.tasks.len() {
            match self.work_on_task(&mut state, history, bounds, usage).await {
                Ok(TaskStep::Advanced) => continue,
                Ok(TaskStep::AskUser(question)) => return Ok((question, Some(state), Ending::AwaitingChoice)),
                Ok(TaskStep::AskArguments(question)) | Ok(TaskStep::AskInput(question)) => {
                    return Ok((question, Some(state), Ending::AwaitingClarification))
                }
                Err(stop) => return Err((stop, Some(state))),
            }
        }

        let reply = self.respond(&state, bounds, usage).await.map_err(|stop| (stop, Some(state.clone())))?;
        tracing::info!(tasks = state.tasks.len(), "plan finished");
        Ok((reply, None, Ending::Answered))
    }

    /// One model call that gives up, as a bound, when the invocation's deadline (less the reserve) comes.
    async fn complete(&self, request: &ChatRequest, bounds: &mut Bounds) -> Result<crate::message::ChatResponse, Stop> {
        let response = match bounds.deadline.map(|deadline| deadline.checked_sub(bounds.reserve).unwrap_or(deadline)) {
            Some(at) => match tokio::time::timeout_at(at, self.model.complete(request)).await {
                Ok(response) => response?,
                Err(_) => return Err(Stop::OutOfBudget),
            },
            None => self.model.complete(request).await?,
        };
        bounds.calls_made += 1;
        Ok(response)
    }

    /// A structured call: the reply must parse as `T` and pass `validate`; a failing reply is
    /// retried once with the error, then the turn ends with a clear message.
    #[allow(clippy::too_many_arguments)]
    async fn structured<T: DeserializeOwned>(
        &self,
        model: Option<&str>,
        instructions: &str,
        content: String,
        name: &str,
        schema: Value,
        bounds: &mut Bounds,
        usage: &mut Usage,
        validate: impl Fn(&T) -> Result<(), String>,
    ) -> Result<T, Stop> {
        let mut messages = vec![Message::user(content)];
        let mut last_error = String::new();
        for attempt in 0..2 {
            if bounds.exhausted() {
                return Err(Stop::OutOfBudget);
            }
            let request = ChatRequest {
                system: instructions.to_owned(),
                messages: messages.clone(),
                model: model.map(str::to_owned),
                response_format: Some(JsonSchemaFormat { name: name.to_owned(), schema: schema.clone() }),
                ..ChatRequest::default()
            };
            bounds.steps_left -= 1;
            let response = self.complete(&request, bounds).await?;
            usage.add(response.usage);
            let parsed = serde_json::from_str::<T>(response.content.trim())
                .map_err(|err| format!("the reply is not valid JSON for the schema: {err}"))
                .and_then(|value| validate(&value).map(|()| value));
            match parsed {
                Ok(value) => return Ok(value),
                Err(error) => {
                    tracing::warn!(step = name, attempt, %error, "structured reply failed validation");
                    messages.push(Message::assistant(response.content));
                    messages.push(Message::user(format!(
                        "Your reply was invalid: {error}. Reply again with only JSON that follows the schema."
                    )));
                    last_error = error;
                }
            }
        }
        Err(Stop::Invalid(format!(
            "I could not complete the {} step: the model's answer did not have the expected form twice ({last_error}). \
             Please try again.",
            name.replace('_', " ")
        )))
    }
}

/// User and assistant texts of the last `limit` messages, for the planner's context.
fn conversation_text(messages: &[Message], limit: usize) -> String {
    let start = messages.len().saturating_sub(limit);
    let mut out = String::new();
    for message in &messages[start..] {
        match message {
            Message::User { content, .. } => out.push_str(&format!("User: {content}\n")),
            Message::Assistant { content, tool_calls } => {
                if !content.is_empty() {
                    out.push_str(&format!("Assistant: {content}\n"));
                }
                for call in tool_calls {
                    out.push_str(&format!("Assistant called {}({})\n", call.name, call.arguments));
                }
            }
            Message::Tool { name, content, .. } => {
                let shown: String = content.chars().take(1500).collect();
                out.push_str(&format!("Tool {name}: {shown}\n"));
            }
        }
    }
    if out.is_empty() {
        out.push_str("(nothing yet)\n");
    }
    out
}

#[cfg(test)]
mod tests;
