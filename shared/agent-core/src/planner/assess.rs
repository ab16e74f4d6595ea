//! The assessment step: after each orchestration round a structured reply says whether the task
//! is complete, how sure the model is, and what is missing.

use serde::Deserialize;
use serde_json::{json, Value};

use super::{conversation_text, Bounds, PlanTask, Planner, Stop};
use crate::message::{Message, Usage};

const ASSESSMENT_INSTRUCTIONS: &str = "You check whether a task was completed. Reply with JSON: `is_completed`, a \
short `explanation` of what is missing or why it is done, and your `confidence` from 0 to 1.";

impl Planner<'_> {
    pub(super) async fn assess(
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
}

#[derive(Debug, Deserialize)]
pub(super) struct Assessment {
    pub(super) is_completed: bool,
    pub(super) explanation: String,
    pub(super) confidence: f64,
}

pub(super) fn assessment_schema() -> Value {
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
