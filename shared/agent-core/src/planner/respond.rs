//! The respond step: the final answer, written from every task's result, and streamed to the
//! observer when it wants deltas.

use super::{Bounds, PlanState, Planner, Stop, TaskStatus};
use crate::events::{DeltaEvents, TurnEvent};
use crate::message::{ChatRequest, Message, Usage};

const RESPONSE_INSTRUCTIONS: &str = "Write the final answer to the user's request from the results of the plan's \
tasks. Be complete and concise, in the user's language; say plainly what could not be done.";

impl Planner<'_> {
    pub(super) async fn respond(
        &self,
        state: &PlanState,
        bounds: &mut Bounds,
        usage: &mut Usage,
    ) -> Result<String, Stop> {
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
        let mut reply = response.content;
        // A prompt that could not be fetched is said in the reply itself, not left to the model.
        let notes: Vec<&str> = state.tasks.iter().filter_map(|task| task.prompt_failure.as_deref()).collect();
        if !notes.is_empty() {
            let separator = if reply.is_empty() { "" } else { "\n\n" };
            let tail = format!("{separator}{}", notes.join("\n"));
            if self.events.wants_deltas() {
                self.events.event(TurnEvent::MessageDelta { text: tail.clone() });
            }
            reply.push_str(&tail);
        }
        Ok(reply)
    }

    /// The final answer's call: its text is the reply, so it streams to the observer when wanted.
    async fn complete_answer(
        &self,
        request: &ChatRequest,
        bounds: &mut Bounds,
    ) -> Result<crate::message::ChatResponse, Stop> {
        if !self.events.wants_deltas() {
            return self.complete(request, bounds).await;
        }
        let deltas = DeltaEvents::new(self.events, crate::agent::MAX_REPLY_BYTES);
        let call = self.model.complete_streaming(request, &deltas);
        let response = match bounds.deadline.map(|deadline| deadline.checked_sub(bounds.reserve).unwrap_or(deadline)) {
            Some(at) => match tokio::time::timeout_at(at, call).await {
                Ok(response) => response?,
                Err(_) => return Err(Stop::OutOfBudget),
            },
            None => call.await?,
        };
        bounds.calls_made += 1;
        Ok(response)
    }
}
