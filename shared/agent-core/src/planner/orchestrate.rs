//! Orchestration: for the current task, the prompt is selected (or the user asked), fetched, and
//! the expert's tools run in `agent::run` rounds until the assessment finds the task done.

use std::sync::Arc;

use async_trait::async_trait;

use super::arguments::Fetched;
use super::discover::choice_question;
use super::input::{input_question, PendingInput};
use super::{Bounds, PlanState, PlanTask, Planner, PromptCandidate, Selection, Stop, TaskStatus};
use crate::agent::{self, Ending, Limits, ToolOutput, TurnEnv};
use crate::events::WithoutDeltas;
use crate::expert::{ExpertCallOutcome, ExpertSession, ExpertToolCall};
use crate::message::{Message, ToolCall, ToolSpec, Usage};
use crate::prompt::{Section, SectionKind, SystemPrompt};

impl Planner<'_> {
    pub(super) async fn work_on_task(
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
            Some(prompt) => match self.fetch_prompt(&task, prompt).await {
                Fetched::Instructions(text) => {
                    state.tasks[index].prompt_failure = None;
                    Some(text)
                }
                Fetched::Ask(pending, question) => {
                    // Undecided until the user answers: an answer decides it, and a new message
                    // instead goes back through discovery.
                    state.selection = None;
                    state.pending_arguments = Some(pending);
                    return Ok(TaskStep::AskArguments(question));
                }
                Fetched::Unavailable(note) => {
                    state.tasks[index].prompt_failure = Some(note);
                    None
                }
            },
            None => None,
        };
        let tools: Arc<[ToolSpec]> = match self.experts.tools(&task.expert).await {
            Ok(tools) => tools.into(),
            Err(err) => {
                tracing::warn!(expert = %task.expert, error = %err, "could not list the expert's tools");
                Arc::default()
            }
        };

        // A call answered with the user's input since the last round: its result leads the next one.
        let mut feedback: Option<String> = state.resumed.take();
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
                deadline: bounds.task_deadline(),
                needs_input: None,
            };
            let limits = Limits {
                max_steps: bounds.steps_left,
                deadline: bounds.deadline,
                reserve: bounds.reserve,
                input_tokens: bounds.input_tokens,
            };
            let opening = Message::user(format!("Request: {}\nYour task: {}", state.request, task.task));
            let outcome =
                agent::run(self.model, &mut env, Vec::new(), opening, &limits, &WithoutDeltas(self.events)).await?;
            bounds.steps_left -= outcome.steps.min(bounds.steps_left);
            bounds.calls_made += outcome.steps;
            usage.add(outcome.usage);
            if let Some(pending) = env.needs_input.take() {
                // The round stops at the call; the answer resumes that call, and a new round the task.
                let question = input_question(&task, &pending);
                state.pending_input = Some(pending);
                return Ok(TaskStep::AskInput(question));
            }
            if matches!(outcome.ending, Ending::StepLimit | Ending::Deadline | Ending::ContextFull) {
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
        state.pending_arguments = None;
        state.pending_input = None;
        state.resumed = None;
    }
}

pub(super) enum TaskStep {
    Advanced,
    /// Ask the user to choose one of the expert's prompts.
    AskUser(String),
    /// Ask the user for arguments the selected prompt needs.
    AskArguments(String),
    /// Ask the user what an expert's tool needs to go on.
    AskInput(String),
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
    tools: Arc<[ToolSpec]>,
    /// How long a call the expert runs as a task may take.
    deadline: Option<std::time::Instant>,
    /// Set when a call needs the user's input: the round ends there.
    needs_input: Option<PendingInput>,
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

    fn tools(&self) -> Arc<[ToolSpec]> {
        self.tools.clone()
    }

    async fn call_tool(&mut self, call: &ToolCall) -> ToolOutput {
        if !self.tools.iter().any(|tool| tool.name == call.name) {
            let content = format!("Error: there is no tool named `{}`", call.name);
            return ToolOutput { content, refused: true, ..ToolOutput::default() };
        }
        let mut request = ExpertToolCall::new(call.name.clone(), call.arguments.clone());
        request.deadline = self.deadline;
        let content = match self.experts.call_tool(request).await {
            Ok(ExpertCallOutcome::Done(result)) if result.is_error => {
                format!("Error (the tool reported a failure): {}", result.text)
            }
            Ok(ExpertCallOutcome::Done(result)) => result.text,
            Ok(ExpertCallOutcome::NeedsInput(request)) => {
                let pending =
                    PendingInput { tool: call.name.clone(), arguments: call.arguments.clone(), request, rounds: 0 };
                let question = input_question(self.task, &pending);
                self.needs_input = Some(pending);
                // Ends the round here: the turn asks the user, and the answer resumes this call.
                return ToolOutput {
                    content: "The expert needs the user's answer before this call can finish; the user is asked."
                        .to_owned(),
                    abort: Some(question),
                    ..ToolOutput::default()
                };
            }
            Err(err) => format!("Error: {err}"),
        };
        ToolOutput::from(content)
    }
}
