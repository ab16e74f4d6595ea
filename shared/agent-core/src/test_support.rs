//! Fakes of the core's ports for its unit tests: an in-memory object store that records what it is
//! asked, and a model that answers from a script and keeps every request.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::Value;

use crate::message::{ChatRequest, ChatResponse, StopReason, ToolCall, Usage};
use crate::model::{ChatModel, ModelError};
use crate::store::{Object, ObjectMeta, ObjectStore, StoreError};

/// An in-memory fake of the object-store port that records every key it is asked about.
#[derive(Default)]
pub struct MemStore {
    pub objects: Mutex<BTreeMap<String, Vec<u8>>>,
    calls: Mutex<Vec<String>>,
}

impl MemStore {
    pub fn insert(&self, key: impl Into<String>, bytes: impl Into<Vec<u8>>) {
        self.objects.lock().unwrap().insert(key.into(), bytes.into());
    }

    pub fn keys(&self) -> Vec<String> {
        self.objects.lock().unwrap().keys().cloned().collect()
    }

    /// Every call so far, in order: `list {prefix}`, `get {key}`, `put {key}`.
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait]
impl ObjectStore for MemStore {
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        self.calls.lock().unwrap().push(format!("list {prefix}"));
        Ok(self
            .objects
            .lock()
            .unwrap()
            .iter()
            .filter(|(key, _)| key.starts_with(prefix))
            .map(|(key, bytes)| ObjectMeta { key: key.clone(), etag: "e".into(), size: bytes.len() as u64 })
            .collect())
    }

    async fn get(&self, key: &str) -> Result<Option<Object>, StoreError> {
        self.calls.lock().unwrap().push(format!("get {key}"));
        Ok(self.objects.lock().unwrap().get(key).map(|bytes| Object { bytes: bytes.clone(), etag: "e".into() }))
    }

    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        self.calls.lock().unwrap().push(format!("put {key}"));
        self.objects.lock().unwrap().insert(key.to_owned(), bytes);
        Ok(())
    }
}

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
