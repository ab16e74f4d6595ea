//! History summaries: when the history grows past its threshold, older turns are summarised
//! once by the model, and the model is given the summary in their place.

use std::sync::Arc;

use tokio::time::Instant;
use tracing::Instrument;

use super::TurnService;
use crate::budget;
use crate::message::{ChatRequest, Message, Usage};
use crate::store::{HistorySummary, Session};
use crate::telemetry;
use crate::transcript::transcript;

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
        let room = self.config.input_tokens().saturating_sub(budget::estimate_text(SUMMARY_INSTRUCTIONS) + 16)
            * budget::estimate::BYTES_PER_TOKEN;
        let transcript = transcript(
            previous.as_ref().map(|s| s.text.as_str()),
            &visible[..cut],
            room,
            &crate::tools::reads_skill_text,
        );
        let request = ChatRequest {
            system: SUMMARY_INSTRUCTIONS.to_owned(),
            messages: vec![Message::user(transcript)],
            tools: Arc::default(),
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
