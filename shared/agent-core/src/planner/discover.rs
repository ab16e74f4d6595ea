//! Prompt discovery and selection: the discovery model scores the expert's prompts for the task,
//! and the user's answer to a numbered prompt choice is read.

use serde::Deserialize;
use serde_json::{json, Value};

use super::arguments::bounded_declared;
use super::{conversation_text, Bounds, PlanTask, Planner, PromptCandidate, Stop};
use crate::expert::PromptInfo;
use crate::message::{Message, Usage};

const DISCOVERY_INSTRUCTIONS: &str = "You match an expert's prompts to a task. For every prompt listed, give \
`match_confidence` from 0 to 1 for how well it fits the task and the conversation, and propose a value for each of \
its declared arguments taken from the conversation (an empty string when unknown). Reply with JSON.";

impl Planner<'_> {
    pub(super) async fn discover(
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
                    declared: bounded_declared(&info.arguments),
                }
            })
            .collect();
        candidates.sort_by(|a, b| b.match_confidence.total_cmp(&a.match_confidence));
        Ok(candidates)
    }
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

pub(super) fn discovery_schema() -> Value {
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

/// Reads the user's answer to a prompt choice: its number, its name, or "none" (`Some(None)`).
/// Anything else is `None`: a new request for the planner.
pub(super) fn read_choice(message: &str, options: &[PromptCandidate]) -> Option<Option<PromptCandidate>> {
    let answer = message.trim().trim_end_matches('.').trim();
    if answer.eq_ignore_ascii_case("none") {
        return Some(None);
    }
    if let Ok(number) = answer.parse::<usize>() {
        return options.get(number.checked_sub(1)?).cloned().map(Some);
    }
    options.iter().find(|option| option.name.eq_ignore_ascii_case(answer)).cloned().map(Some)
}

pub(super) fn choice_question(task: &PlanTask, options: &[PromptCandidate]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::tests::option;

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
}
