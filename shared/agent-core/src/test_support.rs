//! A fake model for the core's unit tests: it answers from a script and keeps every request. The
//! in-memory stores are `local-store`'s, a dev-dependency.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::Value;

use crate::message::{ChatRequest, ChatResponse, StopReason, ToolCall, Usage};
use crate::model::{ChatModel, ModelError};

/// A model that answers from a script (tool calls or text) and keeps every request; a call past
/// the end of the script fails.
#[derive(Default)]
pub struct ScriptedModel {
    replies: Mutex<VecDeque<ChatResponse>>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl ScriptedModel {
    /// Adds a reply that calls the tool `name` with `arguments`.
    pub fn tool(self, name: &str, arguments: Value) -> Self {
        let call = ToolCall { id: String::new(), name: name.into(), arguments };
        self.replies.lock().unwrap().push_back(ChatResponse {
            content: String::new(),
            tool_calls: vec![call],
            usage: Usage::default(),
            stop_reason: StopReason::ToolUse,
        });
        self
    }

    /// Adds a reply of text only.
    pub fn text(self, text: &str) -> Self {
        self.push([text.to_owned()]);
        self
    }

    /// Adds replies of text only, in order.
    pub fn push(&self, texts: impl IntoIterator<Item = String>) {
        self.replies.lock().unwrap().extend(texts.into_iter().map(|content| ChatResponse {
            content,
            tool_calls: Vec::new(),
            usage: Usage::default(),
            stop_reason: StopReason::EndTurn,
        }));
    }

    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        self.requests.lock().unwrap().push(request.clone());
        self.replies.lock().unwrap().pop_front().ok_or_else(|| ModelError::InvalidResponse("script exhausted".into()))
    }
}
