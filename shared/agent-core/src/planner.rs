//! The planner strategy (seed 003, with its known defects fixed): plan a request as tasks for expert
//! MCP servers, discover and score each expert's prompts, fetch the selected prompt's content, run
//! the expert's tools, assess completion, and answer from the whole plan. The plan and a pending
//! prompt choice live in the session, so a plan survives across turns.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::agent::{self, Ending, Limits, ToolOutput, TurnEnv};
use crate::events::{DeltaEvents, TurnObserver, WithoutDeltas};
use crate::expert::{ExpertInfo, ExpertSession, PromptInfo};
use crate::message::{ChatRequest, JsonSchemaFormat, Message, ToolCall, ToolSpec, Usage};
use crate::model::{ChatModel, ModelError};
use crate::prompt::{Section, SectionKind, SystemPrompt};

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
}

impl Bounds {
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

const PLANNER_INSTRUCTIONS: &str = "You plan how to answer the user's request with the available experts. \
Each task goes to exactly one expert, by its name. Reply with JSON: `decision` is \"continue\" to keep the current \
plan (when the new message continues it) or \"replace\" to start a new plan; `plan` lists the tasks in order; \
`next_task` is the index of the task to work on next; `clarification` is a question for the user when the request \
is too unclear to plan, otherwise null. Use only experts from the list.";

const DISCOVERY_INSTRUCTIONS: &str = "You match an expert's prompts to a task. For every prompt listed, give \
`match_confidence` from 0 to 1 for how well it fits the task and the conversation, and propose a value for each of \
its declared arguments taken from the conversation (an empty string when unknown). Reply with JSON.";

const ASSESSMENT_INSTRUCTIONS: &str = "You check whether a task was completed. Reply with JSON: `is_completed`, a \
short `explanation` of what is missing or why it is done, and your `confidence` from 0 to 1.";

const RESPONSE_INSTRUCTIONS: &str = "Write the final answer to the user's request from the results of the plan's \
tasks. Be complete and concise, in the user's language; say plainly what could not be done.";

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
            Err((Stop::OutOfBudget, plan)) => {
                let reply = match &plan {
                    Some(plan) => {
                        let done = plan.tasks.iter().filter(|t| t.status != TaskStatus::Pending).count();
                        format!(
                            "I have worked through {done} of {} tasks so far and ran out of room in this turn. \
                             I will continue with the rest in the next turn.",
                            plan.tasks.len()
                        )
                    }
                    None => "I ran out of room in this turn before I could plan. Send the request again.".to_owned(),
                };
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

        // The answer to a pending prompt choice: a number, a prompt name, or "none".
        let mut answered_choice = false;
        if let Some(state) = plan.as_mut() {
            if let Some(options) = state.pending_choice.take() {
                if let Some(choice) = read_choice(message, &options) {
                    tracing::info!(choice = ?choice.as_ref().map(|c| &c.name), "the user answered the prompt choice");
                    state.selection = Some(Selection::from_choice(choice));
                    answered_choice = true;
                }
            }
        }

        if !answered_choice {
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
                Err(stop) => return Err((stop, Some(state))),
            }
        }

        let reply = self.respond(&state, bounds, usage).await.map_err(|stop| (stop, Some(state.clone())))?;
        tracing::info!(tasks = state.tasks.len(), "plan finished");
        Ok((reply, None, Ending::Answered))
    }

    async fn plan(
        &self,
        current: Option<PlanState>,
        history: &[Message],
        message: &str,
        experts: &[ExpertInfo],
        bounds: &mut Bounds,
        usage: &mut Usage,
    ) -> Result<Planned, Stop> {
        let listing: String =
            experts.iter().map(|expert| format!("- {}: {}\n", expert.name, expert.description)).collect();
        let current_text = match &current {
            Some(plan) => serde_json::to_string_pretty(&json!({
                "request": plan.request,
                "tasks": plan.tasks.iter().map(|t| json!({"expert": t.expert, "task": t.task, "status": t.status})).collect::<Vec<_>>(),
                "next_task": plan.position,
            }))
            .unwrap_or_default(),
            None => "none".to_owned(),
        };
        let content = format!(
            "Available experts:\n{}\nCurrent plan: {current_text}\n\nConversation so far:\n{}\nNew message from the user:\n{message}",
            if listing.is_empty() { "(none)\n".to_owned() } else { listing },
            conversation_text(history, 12)
        );
        let names: Vec<&str> = experts.iter().map(|e| e.name.as_str()).collect();
        let reply: PlanReply = self
            .structured(
                self.config.planner_model.as_deref(),
                PLANNER_INSTRUCTIONS,
                content,
                "plan",
                plan_schema(),
                bounds,
                usage,
                |reply: &PlanReply| {
                    if reply.decision != "continue" && reply.decision != "replace" {
                        return Err(format!(
                            "`decision` must be \"continue\" or \"replace\", not {:?}",
                            reply.decision
                        ));
                    }
                    for (i, task) in reply.plan.iter().enumerate() {
                        if !names.contains(&task.expert.as_str()) {
                            return Err(format!(
                                "task {i} names the expert {:?}, which is not in the list",
                                task.expert
                            ));
                        }
                        if task.task.trim().is_empty() {
                            return Err(format!("task {i} has an empty `task`"));
                        }
                    }
                    if !reply.plan.is_empty() && reply.next_task as usize >= reply.plan.len() {
                        return Err(format!(
                            "`next_task` is {} but the plan has {} tasks",
                            reply.next_task,
                            reply.plan.len()
                        ));
                    }
                    Ok(())
                },
            )
            .await?;

        let keep_current = reply.decision == "continue" && current.is_some();
        let question = reply.clarification.as_deref().map(str::trim).filter(|q| !q.is_empty()).map(str::to_owned);
        if keep_current {
            let mut plan = current.expect("checked");
            plan.pending_choice = None;
            tracing::info!(position = plan.position, "continuing the current plan");
            return Ok(match question {
                Some(question) => Planned::Ask(question, Some(plan)),
                None => Planned::Plan(plan),
            });
        }
        let tasks: Vec<PlanTask> = reply
            .plan
            .into_iter()
            .map(|t| PlanTask { expert: t.expert, task: t.task, status: TaskStatus::Pending, result: None, rounds: 0 })
            .collect();
        if tasks.is_empty() {
            let question = question.unwrap_or_else(|| {
                "None of the available experts can help with this request. Could you rephrase it or tell me more?"
                    .to_owned()
            });
            return Ok(Planned::Ask(question, None));
        }
        // Tasks before `next_task` are taken as already done by earlier turns.
        let position = reply.next_task as usize;
        let mut plan =
            PlanState { request: message.to_owned(), tasks, position, pending_choice: None, selection: None };
        for task in &mut plan.tasks[..position] {
            task.status = TaskStatus::Done;
        }
        tracing::info!(tasks = plan.tasks.len(), position, "new plan");
        Ok(match question {
            Some(question) => Planned::Ask(question, Some(plan)),
            None => Planned::Plan(plan),
        })
    }

    async fn work_on_task(
        &self,
        state: &mut PlanState,
        history: &[Message],
        bounds: &mut Bounds,
        usage: &mut Usage,
    ) -> Result<TaskStep, Stop> {
        let index = state.position;
        let task = state.tasks[index].clone();

        if state.selection.is_none() {
            let prompts = match self.experts.list_prompts(&task.expert).await {
                Ok(prompts) => prompts,
                Err(err) => {
                    tracing::warn!(expert = %task.expert, error = %err, "could not list the expert's prompts");
                    self.finish_task(
                        state,
                        TaskStatus::Failed,
                        format!("The expert {} was not available: {err}", task.expert),
                    );
                    return Ok(TaskStep::Advanced);
                }
            };
            let candidates = if prompts.is_empty() {
                Vec::new()
            } else {
                self.discover(&task, &prompts, history, bounds, usage).await?
            };
            let best = candidates.first();
            if let Some(best) = best.filter(|c| c.match_confidence >= self.config.prompt_confidence_threshold) {
                tracing::info!(prompt = %best.name, confidence = best.match_confidence, "prompt selected");
                state.selection = Some(Selection::Prompt { prompt: best.clone() });
            } else {
                let offered: Vec<PromptCandidate> = candidates
                    .into_iter()
                    .filter(|c| c.match_confidence >= self.config.prompt_suggestion_threshold)
                    .collect();
                if !offered.is_empty() {
                    let question = choice_question(&task, &offered);
                    state.pending_choice = Some(offered);
                    return Ok(TaskStep::AskUser(question));
                }
                state.selection = Some(Selection::NoPrompt);
            }
        }

        let selected = state.selection.as_ref().and_then(Selection::prompt).cloned();
        let instructions = match &selected {
            Some(prompt) => match self.experts.get_prompt(&task.expert, &prompt.name, &prompt.arguments).await {
                Ok(messages) => {
                    Some(messages.iter().map(|m| format!("[{}] {}", m.role, m.text)).collect::<Vec<_>>().join("\n\n"))
                }
                Err(err) => {
                    tracing::warn!(expert = %task.expert, prompt = %prompt.name, error = %err, "could not fetch the prompt");
                    None
                }
            },
            None => None,
        };
        let tools = match self.experts.tools(&task.expert).await {
            Ok(tools) => tools,
            Err(err) => {
                tracing::warn!(expert = %task.expert, error = %err, "could not list the expert's tools");
                Vec::new()
            }
        };

        let mut feedback: Option<String> = None;
        loop {
            if bounds.exhausted() {
                return Err(Stop::OutOfBudget);
            }
            let mut env = ExpertEnv {
                experts: self.experts,
                task: &task,
                request: &state.request,
                instructions: instructions.as_deref(),
                prompt_name: selected.as_ref().map(|p| p.name.as_str()),
                feedback: feedback.as_deref(),
                tools: tools.clone(),
            };
            let limits = Limits {
                max_steps: bounds.steps_left,
                deadline: bounds.deadline,
                reserve: bounds.reserve,
                input_tokens: bounds.input_tokens,
            };
            let opening = Message::user(format!("Request: {}\nYour task: {}", state.request, task.task));
            let outcome = agent::run(self.model, &mut env, &[], opening, &limits, &WithoutDeltas(self.events)).await?;
            bounds.steps_left -= outcome.steps.min(bounds.steps_left);
            usage.add(outcome.usage);
            if matches!(outcome.ending, Ending::StepLimit | Ending::Deadline) {
                return Err(Stop::OutOfBudget);
            }
            state.tasks[index].rounds += 1;

            let assessment =
                self.assess(&task, instructions.as_deref(), &outcome.messages, &outcome.reply, bounds, usage).await?;
            let done = assessment.is_completed && assessment.confidence >= self.config.task_completion_threshold;
            tracing::info!(
                task = index,
                completed = assessment.is_completed,
                confidence = assessment.confidence,
                done,
                "task assessed"
            );
            if done {
                self.finish_task(state, TaskStatus::Done, outcome.reply);
                return Ok(TaskStep::Advanced);
            }
            if state.tasks[index].rounds >= self.config.max_task_rounds {
                let result =
                    format!("Not completed after {} rounds: {}", state.tasks[index].rounds, assessment.explanation);
                self.finish_task(state, TaskStatus::Failed, result);
                return Ok(TaskStep::Advanced);
            }
            feedback = Some(format!(
                "A review found the task not finished yet: {}\nYour previous answer was:\n{}",
                assessment.explanation, outcome.reply
            ));
        }
    }

    fn finish_task(&self, state: &mut PlanState, status: TaskStatus, result: String) {
        let task = &mut state.tasks[state.position];
        task.status = status;
        task.result = Some(result);
        state.position += 1;
        state.selection = None;
        state.pending_choice = None;
    }

    async fn discover(
        &self,
        task: &PlanTask,
        prompts: &[PromptInfo],
        history: &[Message],
        bounds: &mut Bounds,
        usage: &mut Usage,
    ) -> Result<Vec<PromptCandidate>, Stop> {
        let listing = serde_json::to_string_pretty(prompts).unwrap_or_default();
        let content = format!(
            "Task: {}\nExpert: {}\n\nPrompts of the expert:\n{listing}\n\nLast messages:\n{}",
            task.task,
            task.expert,
            conversation_text(history, 6)
        );
        let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
        let reply: DiscoveryReply = self
            .structured(
                self.config.discovery_model.as_deref(),
                DISCOVERY_INSTRUCTIONS,
                content,
                "prompt_scores",
                discovery_schema(),
                bounds,
                usage,
                |reply: &DiscoveryReply| {
                    for scored in &reply.prompts {
                        if !(0.0..=1.0).contains(&scored.match_confidence) {
                            return Err(format!("match_confidence of {:?} must be between 0 and 1", scored.name));
                        }
                    }
                    Ok(())
                },
            )
            .await?;
        let mut candidates: Vec<PromptCandidate> = reply
            .prompts
            .into_iter()
            .filter(|scored| names.contains(&scored.name.as_str()))
            .map(|scored| {
                let info = prompts.iter().find(|p| p.name == scored.name).expect("filtered");
                // Only the prompt's declared arguments are passed on, and empty proposals are dropped.
                let arguments = scored
                    .arguments
                    .into_iter()
                    .filter(|arg| {
                        info.arguments.iter().any(|declared| declared.name == arg.name) && !arg.value.is_empty()
                    })
                    .map(|arg| (arg.name, arg.value))
                    .collect();
                PromptCandidate {
                    name: scored.name,
                    description: info.description.clone(),
                    match_confidence: scored.match_confidence,
                    arguments,
                }
            })
            .collect();
        candidates.sort_by(|a, b| b.match_confidence.total_cmp(&a.match_confidence));
        Ok(candidates)
    }

    async fn assess(
        &self,
        task: &PlanTask,
        instructions: Option<&str>,
        work: &[Message],
        answer: &str,
        bounds: &mut Bounds,
        usage: &mut Usage,
    ) -> Result<Assessment, Stop> {
        let content = format!(
            "Task: {}\nInstructions followed: {}\n\nWork done:\n{}\nFinal answer of the round:\n{answer}",
            task.task,
            instructions.unwrap_or("(none)"),
            conversation_text(work, 40)
        );
        self.structured(
            self.config.assessment_model.as_deref(),
            ASSESSMENT_INSTRUCTIONS,
            content,
            "assessment",
            assessment_schema(),
            bounds,
            usage,
            |reply: &Assessment| {
                if (0.0..=1.0).contains(&reply.confidence) {
                    Ok(())
                } else {
                    Err("`confidence` must be between 0 and 1".to_owned())
                }
            },
        )
        .await
    }

    async fn respond(&self, state: &PlanState, bounds: &mut Bounds, usage: &mut Usage) -> Result<String, Stop> {
        if bounds.exhausted() {
            return Err(Stop::OutOfBudget);
        }
        let results: String = state
            .tasks
            .iter()
            .enumerate()
            .map(|(i, task)| {
                format!(
                    "Task {} ({}, expert {}): {}\nResult: {}\n\n",
                    i + 1,
                    match task.status {
                        TaskStatus::Done => "done",
                        TaskStatus::Failed => "failed",
                        TaskStatus::Pending => "not done",
                    },
                    task.expert,
                    task.task,
                    task.result.as_deref().unwrap_or("(none)")
                )
            })
            .collect();
        let request = ChatRequest {
            system: RESPONSE_INSTRUCTIONS.to_owned(),
            messages: vec![Message::user(format!("Request: {}\n\n{results}", state.request))],
            model: self.config.response_model.clone(),
            ..ChatRequest::default()
        };
        bounds.steps_left -= 1;
        let response = self.complete_answer(&request, bounds).await?;
        usage.add(response.usage);
        Ok(response.content)
    }

    /// One model call that gives up, as a bound, when the invocation's deadline (less the reserve) comes.
    async fn complete(&self, request: &ChatRequest, bounds: &Bounds) -> Result<crate::message::ChatResponse, Stop> {
        match bounds.deadline.map(|deadline| deadline.checked_sub(bounds.reserve).unwrap_or(deadline)) {
            Some(at) => match tokio::time::timeout_at(at, self.model.complete(request)).await {
                Ok(response) => Ok(response?),
                Err(_) => Err(Stop::OutOfBudget),
            },
            None => Ok(self.model.complete(request).await?),
        }
    }

    /// The final answer's call: its text is the reply, so it streams to the observer when wanted.
    async fn complete_answer(
        &self,
        request: &ChatRequest,
        bounds: &Bounds,
    ) -> Result<crate::message::ChatResponse, Stop> {
        if !self.events.wants_deltas() {
            return self.complete(request, bounds).await;
        }
        let deltas = DeltaEvents::new(self.events, crate::agent::MAX_REPLY_BYTES);
        let call = self.model.complete_streaming(request, &deltas);
        match bounds.deadline.map(|deadline| deadline.checked_sub(bounds.reserve).unwrap_or(deadline)) {
            Some(at) => match tokio::time::timeout_at(at, call).await {
                Ok(response) => Ok(response?),
                Err(_) => Err(Stop::OutOfBudget),
            },
            None => Ok(call.await?),
        }
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

enum Planned {
    Plan(PlanState),
    /// Ask the user; keep this plan (if any) for the next turn.
    Ask(String, Option<PlanState>),
}

enum TaskStep {
    Advanced,
    AskUser(String),
}

#[derive(Debug, Deserialize)]
struct PlanReply {
    decision: String,
    plan: Vec<PlannedTask>,
    next_task: u32,
    #[serde(default)]
    clarification: Option<String>,
}

#[derive(Debug, Deserialize)]
struct PlannedTask {
    expert: String,
    task: String,
}

#[derive(Debug, Deserialize)]
struct DiscoveryReply {
    prompts: Vec<ScoredPrompt>,
}

#[derive(Debug, Deserialize)]
struct ScoredPrompt {
    name: String,
    match_confidence: f64,
    #[serde(default)]
    arguments: Vec<ArgumentValue>,
}

#[derive(Debug, Deserialize)]
struct ArgumentValue {
    name: String,
    value: String,
}

#[derive(Debug, Deserialize)]
struct Assessment {
    is_completed: bool,
    explanation: String,
    confidence: f64,
}

fn plan_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": ["continue", "replace"]},
            "plan": {"type": "array", "items": {
                "type": "object",
                "properties": {"expert": {"type": "string"}, "task": {"type": "string"}},
                "required": ["expert", "task"],
                "additionalProperties": false
            }},
            "next_task": {"type": "integer", "minimum": 0},
            "clarification": {"type": ["string", "null"]}
        },
        "required": ["decision", "plan", "next_task", "clarification"],
        "additionalProperties": false
    })
}

fn discovery_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"prompts": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "description": {"type": "string"},
                "match_confidence": {"type": "number", "minimum": 0, "maximum": 1},
                "arguments": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
                    "required": ["name", "value"],
                    "additionalProperties": false
                }}
            },
            "required": ["name", "description", "match_confidence", "arguments"],
            "additionalProperties": false
        }}},
        "required": ["prompts"],
        "additionalProperties": false
    })
}

fn assessment_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "is_completed": {"type": "boolean"},
            "explanation": {"type": "string"},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1}
        },
        "required": ["is_completed", "explanation", "confidence"],
        "additionalProperties": false
    })
}

/// Reads the user's answer to a prompt choice: its number, its name, or "none" (`Some(None)`).
/// Anything else is `None`: a new request for the planner.
fn read_choice(message: &str, options: &[PromptCandidate]) -> Option<Option<PromptCandidate>> {
    let answer = message.trim().trim_end_matches('.').trim();
    if answer.eq_ignore_ascii_case("none") {
        return Some(None);
    }
    if let Ok(number) = answer.parse::<usize>() {
        return options.get(number.checked_sub(1)?).cloned().map(Some);
    }
    options.iter().find(|option| option.name.eq_ignore_ascii_case(answer)).cloned().map(Some)
}

fn choice_question(task: &PlanTask, options: &[PromptCandidate]) -> String {
    let mut question = format!(
        "For the task \"{}\" the expert {} has several prompts that might fit. Which one should I use?\n",
        task.task, task.expert
    );
    for (i, option) in options.iter().enumerate() {
        question.push_str(&format!("{}. {} — {}\n", i + 1, option.name, option.description));
    }
    question.push_str("Answer with the number or the name, or \"none\" to go on without a prompt.");
    question
}

/// User and assistant texts of the last `limit` messages, for the planner's context.
fn conversation_text(messages: &[Message], limit: usize) -> String {
    let start = messages.len().saturating_sub(limit);
    let mut out = String::new();
    for message in &messages[start..] {
        match message {
            Message::User { content } => out.push_str(&format!("User: {content}\n")),
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

/// The loop environment of one orchestration round: the task, the fetched prompt as protected
/// instructions, and the expert's tools. Every tool call the model makes runs.
struct ExpertEnv<'a> {
    experts: &'a dyn ExpertSession,
    task: &'a PlanTask,
    request: &'a str,
    instructions: Option<&'a str>,
    prompt_name: Option<&'a str>,
    feedback: Option<&'a str>,
    tools: Vec<ToolSpec>,
}

#[async_trait]
impl TurnEnv for ExpertEnv<'_> {
    fn system_prompt(&self) -> SystemPrompt {
        let mut sections = vec![Section::new(
            SectionKind::Base,
            format!(
                "You are completing one task of a plan for the user, with the tools of the expert `{}`.\n\
                 The user's request: {}\nYour task: {}\nWhen the task is done, answer with its result.\n",
                self.task.expert, self.request, self.task.task
            ),
        )];
        if let (Some(instructions), Some(name)) = (self.instructions, self.prompt_name) {
            sections.push(Section::new(
                SectionKind::SkillDocument,
                format!("\n<expert-prompt name=\"{name}\">\n{instructions}\n</expert-prompt>\n"),
            ));
        }
        if let Some(feedback) = self.feedback {
            sections.push(Section::new(SectionKind::Base, format!("\n{feedback}\n")));
        }
        SystemPrompt { sections }
    }

    fn tools(&self) -> Vec<ToolSpec> {
        self.tools.clone()
    }

    async fn call_tool(&mut self, call: &ToolCall) -> ToolOutput {
        if !self.tools.iter().any(|tool| tool.name == call.name) {
            return ToolOutput::from(format!("Error: there is no tool named `{}`", call.name));
        }
        let content = match self.experts.call_tool(&call.name, call.arguments.clone()).await {
            Ok(result) if result.is_error => format!("Error (the tool reported a failure): {}", result.text),
            Ok(result) => result.text,
            Err(err) => format!("Error: {err}"),
        };
        ToolOutput::from(content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn option(name: &str) -> PromptCandidate {
        PromptCandidate {
            name: name.into(),
            description: String::new(),
            match_confidence: 0.5,
            arguments: BTreeMap::new(),
        }
    }

    #[test]
    fn reads_a_choice_by_number_name_or_none() {
        let options = [option("draft_contract"), option("review_clause")];
        assert_eq!(read_choice("2", &options), Some(Some(option("review_clause"))));
        assert_eq!(read_choice(" Draft_Contract ", &options), Some(Some(option("draft_contract"))));
        assert_eq!(read_choice("none", &options), Some(None));
        assert_eq!(read_choice("3", &options), None);
        assert_eq!(read_choice("0", &options), None);
        assert_eq!(read_choice("write me a poem", &options), None);
    }

    #[test]
    fn a_plan_round_trips_through_json_with_its_selection() {
        for selection in [None, Some(Selection::NoPrompt), Some(Selection::Prompt { prompt: option("x") })] {
            let plan = PlanState {
                request: "r".into(),
                tasks: vec![],
                position: 0,
                pending_choice: Some(vec![option("y")]),
                selection,
            };
            let json = serde_json::to_value(&plan).unwrap();
            assert_eq!(serde_json::from_value::<PlanState>(json).unwrap(), plan);
        }
    }

    #[test]
    fn schemas_are_strict_objects() {
        for schema in [plan_schema(), discovery_schema(), assessment_schema()] {
            assert_eq!(schema["additionalProperties"], false);
            let properties = schema["properties"].as_object().unwrap();
            assert_eq!(schema["required"].as_array().unwrap().len(), properties.len());
        }
    }
}
