//! The plan step: the planner model turns the user's message into tasks for experts, keeps or
//! replaces the current plan, or asks a clarifying question.

use serde::Deserialize;
use serde_json::{json, Value};

use super::{conversation_text, Bounds, PlanState, PlanTask, Planner, Stop, TaskStatus};
use crate::expert::ExpertInfo;
use crate::message::{Message, Usage};

const PLANNER_INSTRUCTIONS: &str = "You plan how to answer the user's request with the available experts. \
Each task goes to exactly one expert, by its name. Reply with JSON: `decision` is \"continue\" to keep the current \
plan (when the new message continues it) or \"replace\" to start a new plan; `plan` lists the tasks in order; \
`next_task` is the index of the task to work on next; `clarification` is a question for the user when the request \
is too unclear to plan, otherwise null. Use only experts from the list.";

impl Planner<'_> {
    pub(super) async fn plan(
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
            plan.pending_arguments = None;
            tracing::info!(position = plan.position, "continuing the current plan");
            return Ok(match question {
                Some(question) => Planned::Ask(question, Some(plan)),
                None => Planned::Plan(plan),
            });
        }
        let tasks: Vec<PlanTask> = reply
            .plan
            .into_iter()
            .map(|t| PlanTask {
                expert: t.expert,
                task: t.task,
                status: TaskStatus::Pending,
                result: None,
                rounds: 0,
                prompt_failure: None,
            })
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
        let mut plan = PlanState {
            request: message.to_owned(),
            tasks,
            position,
            pending_choice: None,
            selection: None,
            pending_arguments: None,
            pending_input: None,
            resumed: None,
        };
        for task in &mut plan.tasks[..position] {
            task.status = TaskStatus::Done;
        }
        tracing::info!(tasks = plan.tasks.len(), position, "new plan");
        Ok(match question {
            Some(question) => Planned::Ask(question, Some(plan)),
            None => Planned::Plan(plan),
        })
    }
}

pub(super) enum Planned {
    Plan(PlanState),
    /// Ask the user; keep this plan (if any) for the next turn.
    Ask(String, Option<PlanState>),
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

pub(super) fn plan_schema() -> Value {
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
