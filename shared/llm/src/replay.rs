//! Recorded model replies: replay them from a JSON Lines file, or record a live model's replies into one.
//!
//! The format is one [`ChatResponse`] in its serde JSON form per line, in call order; blank lines are
//! skipped. A line may also carry `deltas`, the reply's text in the pieces it streamed in, which a
//! streamed call replays in order. A file written by [`RecordingModel`] can be served back by [`ReplayModel`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_ports::{ChatModel, ChatRequest, ChatResponse, DeltaSink, FileInput, ModelError};
use async_trait::async_trait;
use tokio::io::AsyncWriteExt;

/// Serves recorded replies in order, ignoring the requests; for tests and offline runs.
pub struct ReplayModel {
    source: String,
    replies: Vec<ChatResponse>,
    /// For each reply, the pieces its text streamed in, when recorded.
    deltas: Vec<Option<Vec<String>>>,
    cursor: Mutex<usize>,
    /// Once every reply was served: answer with a reply saying so rather than fail the call.
    exhausted_answers: bool,
    /// What the model it stands in for could be shown; text only unless told.
    file_input: FileInput,
}

impl ReplayModel {
    /// Loads every reply up front, so a malformed file fails at startup rather than mid-conversation.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ModelError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ModelError::Config(format!("could not read replay file {}: {e}", path.display())))?;
        Self::from_jsonl(path.display().to_string(), &text)
    }

    /// Parses replies from JSON Lines text; `source` names it in error messages.
    pub fn from_jsonl(source: impl Into<String>, text: &str) -> Result<Self, ModelError> {
        let source = source.into();
        let mut replies = Vec::new();
        let mut deltas = Vec::new();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let not_a_reply = |e: serde_json::Error| {
                ModelError::Config(format!("replay file {source} line {}: not a chat response: {e}", index + 1))
            };
            let mut value: serde_json::Value = serde_json::from_str(line).map_err(not_a_reply)?;
            let pieces = match value.as_object_mut().and_then(|fields| fields.remove("deltas")) {
                None => None,
                Some(pieces) => Some(serde_json::from_value::<Vec<String>>(pieces).map_err(not_a_reply)?),
            };
            let reply: ChatResponse = serde_json::from_value(value).map_err(not_a_reply)?;
            // A streamed reply's text is its deltas joined; a file that says otherwise was edited wrongly.
            if pieces.as_ref().is_some_and(|pieces| pieces.concat() != reply.content) {
                return Err(ModelError::Config(format!(
                    "replay file {source} line {}: the deltas do not join up to the content",
                    index + 1
                )));
            }
            replies.push(reply);
            deltas.push(pieces);
        }
        Ok(ReplayModel {
            source,
            replies,
            deltas,
            cursor: Mutex::new(0),
            exhausted_answers: false,
            file_input: FileInput::TEXT_ONLY,
        })
    }

    /// Replies in the same order as they will be served.
    pub fn from_replies(source: impl Into<String>, replies: Vec<ChatResponse>) -> Self {
        let deltas = vec![None; replies.len()];
        ReplayModel {
            source: source.into(),
            replies,
            deltas,
            cursor: Mutex::new(0),
            exhausted_answers: false,
            file_input: FileInput::TEXT_ONLY,
        }
    }

    /// With `answers`, a call after the last reply gets a final reply saying the file is used up
    /// (so a client sees why, not a bare 502) instead of an error; for the local cargo-lambda loop.
    pub fn answering_when_exhausted(mut self, answers: bool) -> Self {
        self.exhausted_answers = answers;
        self
    }

    /// Says the model takes these files, so that the core sends them as it would to a real model.
    pub fn with_file_input(mut self, file_input: FileInput) -> Self {
        self.file_input = file_input;
        self
    }

    /// The next reply and its recorded pieces, advancing the cursor.
    fn next_reply(&self) -> Result<(ChatResponse, Option<Vec<String>>), ModelError> {
        let mut cursor = self.lock_cursor();
        let Some(reply) = self.replies.get(*cursor).cloned() else {
            let served = self.replies.len();
            if self.exhausted_answers {
                tracing::warn!(provider = "replay", source = %self.source, served, "replay file used up; answering so");
                let content = format!(
                    "[replay model] The replay file {} has no more replies: all {served} were served since this \
                     function started. Restart the function (or `cargo lambda watch`) to play it again, or set \
                     LLM_PROVIDER for a real model.",
                    self.source
                );
                let reply = ChatResponse {
                    content,
                    tool_calls: Vec::new(),
                    usage: agent_ports::Usage::default(),
                    stop_reason: agent_ports::StopReason::EndTurn,
                };
                return Ok((reply, None));
            }
            return Err(ModelError::Config(format!("replay file {} exhausted after {served} replies", self.source)));
        };
        let pieces = self.deltas.get(*cursor).cloned().flatten();
        *cursor += 1;
        tracing::debug!(
            provider = "replay",
            reply = *cursor,
            input_tokens = reply.usage.input_tokens,
            output_tokens = reply.usage.output_tokens,
            "model call done"
        );
        Ok((reply, pieces))
    }

    /// How many replies have not been served yet.
    pub fn remaining(&self) -> usize {
        self.replies.len() - *self.lock_cursor()
    }

    fn lock_cursor(&self) -> std::sync::MutexGuard<'_, usize> {
        // The cursor is a plain counter, so a panic elsewhere cannot leave it inconsistent.
        self.cursor.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl ChatModel for ReplayModel {
    fn file_input(&self) -> FileInput {
        self.file_input
    }

    async fn complete(&self, _request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        Ok(self.next_reply()?.0)
    }

    /// Hands over the recorded pieces in order, or the whole text as one when none were recorded.
    async fn complete_streaming(
        &self,
        _request: &ChatRequest,
        sink: &dyn DeltaSink,
    ) -> Result<ChatResponse, ModelError> {
        let (reply, pieces) = self.next_reply()?;
        match pieces {
            Some(pieces) => pieces.iter().filter(|piece| !piece.is_empty()).for_each(|piece| sink.delta(piece)),
            None if !reply.content.is_empty() => sink.delta(&reply.content),
            None => {}
        }
        Ok(reply)
    }
}

/// Wraps a model and appends each of its replies to a JSON Lines file that [`ReplayModel`] can serve.
pub struct RecordingModel {
    inner: Arc<dyn ChatModel>,
    path: PathBuf,
    /// Serialises appends so concurrent calls cannot interleave their lines.
    write_lock: tokio::sync::Mutex<()>,
}

impl RecordingModel {
    pub fn new(inner: Arc<dyn ChatModel>, path: impl Into<PathBuf>) -> Self {
        RecordingModel { inner, path: path.into(), write_lock: tokio::sync::Mutex::new(()) }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn append(&self, reply: &ChatResponse, deltas: Option<Vec<String>>) -> std::io::Result<()> {
        let mut value = serde_json::to_value(reply)?;
        if let (Some(fields), Some(deltas)) = (value.as_object_mut(), deltas) {
            fields.insert("deltas".to_owned(), serde_json::Value::from(deltas));
        }
        let mut line = serde_json::to_vec(&value)?;
        line.push(b'\n');
        let _guard = self.write_lock.lock().await;
        let mut file = tokio::fs::OpenOptions::new().create(true).append(true).open(&self.path).await?;
        file.write_all(&line).await?;
        file.flush().await
    }
}

#[async_trait]
impl ChatModel for RecordingModel {
    fn file_input(&self) -> FileInput {
        self.inner.file_input()
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let reply = self.inner.complete(request).await?;
        // A recording with a hole would replay the wrong replies later, so a failed write fails the call.
        self.append(&reply, None)
            .await
            .map_err(|e| ModelError::Config(format!("could not append to record file {}: {e}", self.path.display())))?;
        Ok(reply)
    }

    /// Passes every delta through and records them with the reply.
    async fn complete_streaming(
        &self,
        request: &ChatRequest,
        sink: &dyn DeltaSink,
    ) -> Result<ChatResponse, ModelError> {
        let recorder = Recorder { inner: sink, pieces: Mutex::new(Vec::new()) };
        let reply = self.inner.complete_streaming(request, &recorder).await?;
        let pieces = recorder.pieces.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.append(&reply, Some(pieces))
            .await
            .map_err(|e| ModelError::Config(format!("could not append to record file {}: {e}", self.path.display())))?;
        Ok(reply)
    }
}

/// Forwards deltas and keeps a copy of each.
struct Recorder<'a> {
    inner: &'a dyn DeltaSink,
    pieces: Mutex<Vec<String>>,
}

impl DeltaSink for Recorder<'_> {
    fn delta(&self, text: &str) {
        self.pieces.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(text.to_owned());
        self.inner.delta(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_ports::{StopReason, Usage};

    fn request() -> ChatRequest {
        ChatRequest::default()
    }

    #[tokio::test]
    async fn answering_when_exhausted_says_so_in_a_final_reply() {
        let text = r#"{"content":"one","tool_calls":[],"usage":{"input_tokens":1,"output_tokens":2},"stop_reason":"end_turn"}"#;
        let model = ReplayModel::from_jsonl("local.jsonl", text).unwrap().answering_when_exhausted(true);
        assert_eq!(model.complete(&request()).await.unwrap().content, "one");
        for _ in 0..2 {
            let reply = model.complete(&request()).await.unwrap();
            assert!(reply.content.contains("local.jsonl has no more replies: all 1 were served"), "{}", reply.content);
            assert!(reply.tool_calls.is_empty());
            assert_eq!(reply.stop_reason, StopReason::EndTurn);
        }
    }

    #[tokio::test]
    async fn serves_in_order_then_reports_exhaustion() {
        let text = concat!(
            r#"{"content":"one","tool_calls":[],"usage":{"input_tokens":1,"output_tokens":2},"stop_reason":"end_turn"}"#,
            "\n\n   \n",
            r#"{"content":"two","tool_calls":[],"usage":{"input_tokens":3,"output_tokens":4},"stop_reason":"max_tokens"}"#,
            "\n"
        );
        let model = ReplayModel::from_jsonl("mem", text).unwrap();
        assert_eq!(model.remaining(), 2);
        let first = model.complete(&request()).await.unwrap();
        assert_eq!(first.content, "one");
        assert_eq!(first.usage, Usage::new(1, 2));
        let second = model.complete(&request()).await.unwrap();
        assert_eq!(second.content, "two");
        assert_eq!(second.stop_reason, StopReason::MaxTokens);
        assert_eq!(model.remaining(), 0);
        match model.complete(&request()).await {
            Err(ModelError::Config(message)) => {
                assert_eq!(message, "replay file mem exhausted after 2 replies")
            }
            other => panic!("expected exhaustion, got {other:?}"),
        }
    }

    #[test]
    fn malformed_line_is_named() {
        let text = "\n{\"content\":\"\",\"tool_calls\":[],\"usage\":{\"input_tokens\":0,\"output_tokens\":0},\"stop_reason\":\"end_turn\"}\n// comment\n";
        match ReplayModel::from_jsonl("mem", text) {
            Err(ModelError::Config(message)) => assert!(message.contains("line 3"), "{message}"),
            other => panic!("expected a Config error, got {:?}", other.map(|m| m.remaining())),
        }
    }
}
