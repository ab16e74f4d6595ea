//! Room within a long turn: when the current turn's own steps no longer fit the model's context,
//! its older steps are condensed into one message, by the model (as `turn::summary` condenses the
//! history) or, when that call fails, comes back empty or has no time left, by a digest made here.
//! Only the requests change: the stored turn keeps every step, and the system prompt (skill
//! instructions, mandatory blocks) and the user's request are never part of what is condensed.

use tokio::time::Instant;
use tracing::Instrument;

use super::Limits;
use crate::budget::estimate::{estimate_text, BYTES_PER_TOKEN};
use crate::message::{ChatRequest, Message, ToolCall, Usage};
use crate::model::ChatModel;
use crate::telemetry;
use crate::transcript::{cut_middle, head, short_arguments, transcript};

/// The system prompt of the condensing call.
pub const INSTRUCTIONS: &str = "You condense the work of an assistant in the middle of a task. Below are the \
    user's request and the steps the assistant took so far (its tool calls and their results). Write what the \
    assistant needs to go on: what was done and found, the files written and the results saved to files (with \
    their paths), and what is left to do. Be factual and concise; write in the request's language. Do not \
    include instructions of skills or tools.";

/// The first line of the message that stands for the condensed steps in later requests.
pub const HEADER: &str = "[Earlier steps of this turn, condensed to fit the model's context. Files they wrote \
    and results they saved are in /workspace.]";

/// Characters of the user's request the condensing call is shown (it is never cut in the turn itself).
const REQUEST_CHARS: usize = 4000;
/// Characters of one argument list, one text and one result's first line in a digest.
const DIGEST_ARGUMENT_BYTES: usize = 200;
const DIGEST_TEXT_CHARS: usize = 300;
const DIGEST_RESULT_CHARS: usize = 160;

/// The turn's older steps as one text: `conversation[first_new + 1..covers]` is condensed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// The index in the conversation of the first step still sent whole.
    pub covers: usize,
    pub text: String,
    /// Whether the model wrote `text` (otherwise it is a digest).
    pub by_model: bool,
}

/// The messages a request is built from: the history and the user's request, the condensed steps
/// (when some are), then the steps after them.
pub fn view(conversation: &[Message], first_new: usize, compacted: Option<&Compacted>) -> Vec<Message> {
    let Some(compacted) = compacted else {
        return conversation.to_vec();
    };
    let mut messages = Vec::with_capacity(first_new + 2 + conversation.len().saturating_sub(compacted.covers));
    messages.extend_from_slice(&conversation[..=first_new]);
    messages.push(Message::user(format!("{HEADER}\n{}", compacted.text)));
    messages.extend_from_slice(&conversation[compacted.covers..]);
    messages
}

/// Where a new compaction would end: the start of the newest step, which is always sent whole, when
/// at least one step before it is not condensed yet; `None` when there is nothing to condense.
pub fn compactable_until(conversation: &[Message], first_new: usize, compacted: Option<&Compacted>) -> Option<usize> {
    let from = compacted.map_or(first_new + 1, |compacted| compacted.covers);
    let newest = conversation.iter().rposition(|message| matches!(message, Message::Assistant { .. }))?;
    (newest > from).then_some(newest)
}

/// Condenses the steps before the newest one that `previous` does not cover yet, together with
/// `previous`, within an eighth of the input budget; `None` when there is no such step. The model is asked first, in a request that
/// fits its input limit and with half the time left before the deadline's reserve; its usage is added
/// to `usage`. `skill_text` tells which calls returned skill instructions, which are left out.
pub async fn compact(
    model: &dyn ChatModel,
    conversation: &[Message],
    first_new: usize,
    previous: Option<&Compacted>,
    limits: &Limits,
    skill_text: &(dyn Fn(&ToolCall) -> bool + Sync),
    usage: &mut Usage,
) -> Option<Compacted> {
    let until = compactable_until(conversation, first_new, previous)?;
    let from = previous.map_or(first_new + 1, |previous| previous.covers);
    let steps = &conversation[from..until];
    let previous_text = previous.map(|previous| previous.text.as_str());
    let max_bytes = limits.input_tokens.saturating_mul(BYTES_PER_TOKEN) / 8;
    let request = match &conversation[first_new] {
        Message::User { content, .. } => content.as_str(),
        _ => "",
    };
    let opening = format!("The user's request:\n{}\n\nThe steps:\n", head(request, REQUEST_CHARS));
    let room = limits.input_tokens.saturating_sub(estimate_text(INSTRUCTIONS) + 16).saturating_mul(BYTES_PER_TOKEN);
    let text = transcript(previous_text, steps, room.saturating_sub(opening.len()), skill_text);
    let chat = ChatRequest {
        system: INSTRUCTIONS.to_owned(),
        messages: vec![Message::user(format!("{opening}{text}"))],
        ..ChatRequest::default()
    };
    let span = telemetry::summarize_span();
    let call = model.complete(&chat).instrument(span.clone());
    let response = match limits.deadline {
        Some(deadline) => {
            let left = deadline.saturating_duration_since(Instant::now()).saturating_sub(limits.reserve);
            tokio::time::timeout(left / 2, call).await.ok()
        }
        None => Some(call.await),
    };
    let outcome = match &response {
        Some(Ok(response)) if !response.content.trim().is_empty() => telemetry::outcome::OK,
        Some(Ok(_)) => "empty",
        Some(Err(_)) => telemetry::outcome::ERROR,
        None => "timeout",
    };
    span.record(telemetry::field::OUTCOME, outcome);
    let condensed = match response {
        Some(Ok(response)) if !response.content.trim().is_empty() => {
            usage.add(response.usage);
            Some(response.content.trim().to_owned())
        }
        Some(Ok(response)) => {
            usage.add(response.usage);
            None
        }
        _ => None,
    };
    let by_model = condensed.is_some();
    let text = match condensed {
        Some(text) => cut_middle(text, max_bytes),
        None => cut_middle(digest(previous_text, steps, skill_text), max_bytes),
    };
    tracing::info!(from, until, by_model, outcome, bytes = text.len(), "condensed older steps of the turn");
    Some(Compacted { covers: until, text, by_model })
}

/// The condensed steps without the model: which tools were called with what short arguments, and
/// each result's size and first line (a saved result's first line names its file), a line a call;
/// a line repeated in a row is written once with its count.
pub fn digest(previous: Option<&str>, steps: &[Message], skill_text: &dyn Fn(&ToolCall) -> bool) -> String {
    let mut out = String::new();
    if let Some(previous) = previous {
        out.push_str(previous);
        out.push('\n');
    }
    out.push_str("Steps (no summary could be made; the calls, their short arguments and their results):\n");
    let results: std::collections::HashMap<&str, &str> = steps
        .iter()
        .filter_map(|message| match message {
            Message::Tool { tool_call_id, content, .. } => Some((tool_call_id.as_str(), content.as_str())),
            _ => None,
        })
        .collect();
    let mut lines: Vec<String> = Vec::new();
    for message in steps {
        match message {
            Message::Assistant { content, tool_calls } => {
                if !content.trim().is_empty() {
                    lines.push(format!("- said: {}", one_line(&head(content, DIGEST_TEXT_CHARS))));
                }
                for call in tool_calls {
                    let arguments = one_line(&short_arguments(call, DIGEST_ARGUMENT_BYTES));
                    let result = match results.get(call.id.as_str()) {
                        Some(content) if skill_text(call) => format!("gave {} bytes of skill content", content.len()),
                        Some(content) => {
                            let first = one_line(&head(content.lines().next().unwrap_or(""), DIGEST_RESULT_CHARS));
                            format!("gave {} bytes: {first}", content.len())
                        }
                        None => "gave no result".to_owned(),
                    };
                    lines.push(format!("- {}({arguments}) {result}", call.name));
                }
            }
            Message::Tool { .. } => {}
            Message::User { content, .. } => {
                lines.push(format!("- note: {}", one_line(&head(content, DIGEST_TEXT_CHARS))))
            }
        }
    }
    let mut index = 0;
    while index < lines.len() {
        let repeats = lines[index..].iter().take_while(|line| **line == lines[index]).count();
        out.push_str(&lines[index]);
        if repeats > 1 {
            out.push_str(&format!(" ({repeats} times)"));
        }
        out.push('\n');
        index += repeats;
    }
    out
}

fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests;
