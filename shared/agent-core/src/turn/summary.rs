//! History summaries: when the history grows past its threshold, older turns are summarised
//! once by the model, and the model is given the summary in their place.

use tokio::time::Instant;
use tracing::Instrument;

use super::TurnService;
use crate::budget;
use crate::message::{ChatRequest, Message, Usage};
use crate::store::{HistorySummary, Session};
use crate::telemetry;

/// The system prompt of the summarisation call.
const SUMMARY_INSTRUCTIONS: &str = "You condense conversations. Summarise the conversation below for the \
    assistant who will continue it: the user's goals and requests, facts and data given, decisions taken, \
    files written, and what is still pending. Be factual and concise; write in the conversation's language. \
    Do not include instructions of skills or tools.";

/// Messages added after a failed summary attempt before the next one.
const SUMMARY_RETRY_MESSAGES: usize = 8;

impl TurnService {
    /// Fix 6 of seed 002: when the unsummarised history passes the threshold, the older part is
    /// summarised once by the model and the summary is stored with the session. Only history is
    /// summarised, never the system prompt, so skill instructions are never inside it. A failed
    /// summary is logged, the turn goes on with the budget's trimming, and the next attempt waits
    /// until [`SUMMARY_RETRY_MESSAGES`] more messages were added. Returns the summary and the retry mark.
    pub(super) async fn summarise_if_needed(
        &self,
        session: &Session,
        deadline: Option<Instant>,
        usage: &mut Usage,
    ) -> (Option<HistorySummary>, Option<usize>) {
        let previous = session.state.summary.clone();
        let retry_at = session.state.summary_retry_at;
        let unchanged = (previous.clone(), retry_at);
        if retry_at.is_some_and(|at| session.history_end() < at) {
            return unchanged;
        }
        let failed = (previous.clone(), Some(session.history_end() + SUMMARY_RETRY_MESSAGES));
        let visible = unsummarised(session, previous.as_ref());
        let start = session.history_end() - visible.len();
        let threshold = self.config.summary_threshold();
        let tokens: usize = visible.iter().map(budget::estimate_message).sum();
        if tokens <= threshold {
            return unchanged;
        }
        // Keep the most recent messages worth about half the threshold, starting at a user message.
        let mut kept_tokens = 0;
        let mut cut = visible.len();
        while cut > 0 && kept_tokens + budget::estimate_message(&visible[cut - 1]) <= threshold / 2 {
            cut -= 1;
            kept_tokens += budget::estimate_message(&visible[cut]);
        }
        while cut < visible.len() && !matches!(visible[cut], Message::User { .. }) {
            cut += 1;
        }
        if cut == 0 {
            return unchanged;
        }
        // The summariser gets the same model, so its one message must fit that model's input budget.
        let room = self.config.input_tokens().saturating_sub(budget::estimate_text(SUMMARY_INSTRUCTIONS) + 16) * 3;
        let transcript = transcript(previous.as_ref().map(|s| s.text.as_str()), &visible[..cut], room);
        let request = ChatRequest {
            system: SUMMARY_INSTRUCTIONS.to_owned(),
            messages: vec![Message::user(transcript)],
            tools: Vec::new(),
            ..Default::default()
        };
        // The summary is measured in a span of its own, its model call a child of it.
        let span = telemetry::summarize_span();
        let outcome = |outcome: &str| span.record(telemetry::field::OUTCOME, outcome);
        // The summary must leave the turn its time: it gives up at half the time that is left.
        let call = self.model.complete(&request).instrument(span.clone());
        let response = match deadline {
            Some(deadline) => {
                let left =
                    deadline.saturating_duration_since(Instant::now()).saturating_sub(self.config.deadline_reserve);
                match tokio::time::timeout(left / 2, call).await {
                    Ok(response) => response,
                    Err(_) => {
                        outcome("timeout");
                        tracing::warn!("no time left to summarise the history; keeping it as it is");
                        return failed;
                    }
                }
            }
            None => call.await,
        };
        outcome(match &response {
            Ok(response) if !response.content.trim().is_empty() => telemetry::outcome::OK,
            Ok(_) => "empty",
            Err(_) => telemetry::outcome::ERROR,
        });
        match response {
            Ok(response) if !response.content.trim().is_empty() => {
                usage.add(response.usage);
                let covers = start + cut;
                tracing::info!(covers, summarised_tokens = tokens, "summarised older turns of the history");
                // The cut is at a user message, which is where a turn starts; when it is the end of
                // the history, the turn about to be committed starts there.
                let from_turn = session
                    .turn_starts
                    .iter()
                    .find(|(_, start)| *start == covers)
                    .map(|(turn, _)| *turn)
                    .or_else(|| (covers == session.history_end()).then_some(session.version + 1));
                let text = response.content.trim().to_owned();
                (Some(HistorySummary { text, covers, from_turn }), None)
            }
            Ok(_) => {
                tracing::warn!("the summary came back empty; keeping the history as it is");
                failed
            }
            Err(err) => {
                tracing::warn!(error = %err, "could not summarise the history; keeping it as it is");
                failed
            }
        }
    }
}

/// The loaded messages the summary does not cover (all of them without a summary).
fn unsummarised<'s>(session: &'s Session, summary: Option<&HistorySummary>) -> &'s [Message] {
    let covers = summary.map_or(0, |summary| summary.covers);
    let skip = covers.saturating_sub(session.history_offset).min(session.history.len());
    &session.history[skip..]
}

/// What the model is given of the past: the summary, then the messages it does not cover.
pub(super) fn history_for_model(session: &Session, summary: Option<&HistorySummary>) -> Vec<Message> {
    let mut history = Vec::new();
    if let Some(summary) = summary {
        history.push(Message::user(format!("[Summary of the earlier conversation]\n{}", summary.text)));
    }
    history.extend_from_slice(unsummarised(session, summary));
    history
}

/// Characters of one tool result, one message's text or one call's arguments the transcript shows.
const MAX_RESULT_CHARS: usize = 2000;
const MAX_TEXT_CHARS: usize = 8000;
const MAX_ARGUMENT_BYTES: usize = 2000;

/// The text given to the summariser: the previous summary and the messages, without tool results
/// that carry skill files (`load_skill`, reads under /skills), so skill instructions stay out. Long
/// texts and results are cut, a call's large arguments are replaced by a note of their size (as the
/// context budget does), and a transcript still over `max_bytes` loses its middle, with a note.
fn transcript(previous: Option<&str>, messages: &[Message], max_bytes: usize) -> String {
    let mut skill_reads = std::collections::HashSet::new();
    let mut out = String::new();
    if let Some(previous) = previous {
        out.push_str(&format!("Summary so far:\n{previous}\n\nConversation since then:\n"));
    }
    for message in messages {
        match message {
            Message::User { content } => out.push_str(&format!("User: {}\n", head(content, MAX_TEXT_CHARS))),
            Message::Assistant { content, tool_calls } => {
                if !content.is_empty() {
                    out.push_str(&format!("Assistant: {}\n", head(content, MAX_TEXT_CHARS)));
                }
                for call in tool_calls {
                    let path = call.arguments.get("file_path").or_else(|| call.arguments.get("path"));
                    let reads_skill =
                        path.and_then(|p| p.as_str()).is_some_and(|p| p.trim_start().starts_with("/skills"));
                    if call.name == crate::tools::LOAD_SKILL || reads_skill {
                        skill_reads.insert(call.id.clone());
                    }
                    let mut arguments = call.arguments.to_string();
                    if arguments.len() > MAX_ARGUMENT_BYTES {
                        if let Some(cut) = budget::cut::cut_arguments(&call.name, &call.arguments) {
                            arguments = cut.to_string();
                        }
                    }
                    out.push_str(&format!(
                        "Assistant called {}({})\n",
                        call.name,
                        head(&arguments, MAX_ARGUMENT_BYTES)
                    ));
                }
            }
            Message::Tool { tool_call_id, name, content } => {
                if skill_reads.contains(tool_call_id) {
                    out.push_str(&format!("Tool {name}: (skill content omitted)\n"));
                } else {
                    out.push_str(&format!("Tool {name}: {}\n", head(content, MAX_RESULT_CHARS)));
                }
            }
        }
    }
    cut_middle(out, max_bytes)
}

/// The first `chars` characters of `text`, and a note of how many more there were.
fn head(text: &str, chars: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{} [{} more bytes cut]", &text[..at], text.len() - at).into(),
        None => text.into(),
    }
}

/// `text` within `max_bytes`: its start (the previous summary and the oldest messages) and its end
/// (the newest), the middle replaced by a note of what was cut.
fn cut_middle(text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let note = format!("\n[{} bytes of the conversation cut here to fit the model's context]\n", text.len());
    let keep = max_bytes.saturating_sub(note.len()) / 2;
    let mut start = keep;
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = text.len() - keep;
    while !text.is_char_boundary(end) {
        end += 1;
    }
    format!("{}{note}{}", &text[..start], &text[end..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    #[test]
    fn large_arguments_and_texts_are_cut_and_the_whole_stays_within_its_room() {
        let content = "x".repeat(200 * 1024);
        let call = |i: usize| ToolCall {
            id: format!("c{i}"),
            name: "write_file".into(),
            arguments: serde_json::json!({"file_path": format!("/workspace/p{i}.md"), "content": content}),
        };
        let messages = vec![
            Message::user("y".repeat(100_000)),
            Message::Assistant { content: String::new(), tool_calls: (0..4).map(call).collect() },
        ];
        let text = transcript(None, &messages, 1_000_000);
        assert!(text.len() < 20_000, "{}", text.len());
        assert!(text.contains("/workspace/p3.md") && text.contains("204800 bytes cut"), "{text}");
        let text = transcript(Some("earlier"), &messages, 3_000);
        assert!(text.len() <= 3_000, "{}", text.len());
        assert!(text.starts_with("Summary so far:\nearlier") && text.contains("cut here to fit"), "{text}");
    }
}
