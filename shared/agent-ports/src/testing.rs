//! The workspace's fake models, for tests and benchmarks (feature `test-support`): [`FnModel`]
//! answers from a closure over the request, [`ScriptedModel`] from a queue of replies. Both count
//! and keep every request, so a test can check what the model was sent.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::Notify;

use crate::message::{ChatRequest, ChatResponse, ToolCall};
use crate::model::{ChatModel, FileInput, ModelError};

type Answer = dyn Fn(&ChatRequest) -> Result<ChatResponse, ModelError> + Send + Sync;

/// A model that answers each call with a closure over its request. A closure that panics makes
/// the call panic, as a defect in a provider would.
pub struct FnModel {
    answer: Box<Answer>,
    calls: AtomicUsize,
    requests: Mutex<Vec<ChatRequest>>,
    keep_requests: bool,
    hold: Option<Arc<Notify>>,
    file_input: FileInput,
}

impl FnModel {
    pub fn new(answer: impl Fn(&ChatRequest) -> Result<ChatResponse, ModelError> + Send + Sync + 'static) -> Self {
        FnModel {
            answer: Box::new(answer),
            calls: AtomicUsize::new(0),
            requests: Mutex::default(),
            keep_requests: true,
            hold: None,
            file_input: FileInput::TEXT_ONLY,
        }
    }

    /// The same model, able to see what `input` says (text only by default).
    pub fn seeing(self, input: FileInput) -> Self {
        FnModel { file_input: input, ..self }
    }

    /// The same model, whose every call waits for a permit of `gate` (`notify_one`) before it
    /// answers: a test holds a call in flight while it does something else.
    pub fn held(self, gate: Arc<Notify>) -> Self {
        FnModel { hold: Some(gate), ..self }
    }

    /// The same model, keeping no requests: a benchmark's time and memory figures should not
    /// count a record that grows with every call.
    pub fn keeping_no_requests(self) -> Self {
        FnModel { keep_requests: false, ..self }
    }

    /// How many calls have begun, answered or not.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Every request so far, in order (none when it keeps no requests).
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[async_trait]
impl ChatModel for FnModel {
    fn file_input(&self) -> FileInput {
        self.file_input
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.keep_requests {
            self.requests.lock().unwrap().push(request.clone());
        }
        if let Some(gate) = &self.hold {
            gate.notified().await;
        }
        (self.answer)(request)
    }
}

/// Replies given in order, shared by whoever holds a clone: answers, or failures of the provider;
/// taking one past the end fails as a provider's invalid response would.
#[derive(Clone, Default)]
pub struct Script(Arc<Mutex<VecDeque<Result<ChatResponse, ModelError>>>>);

impl Script {
    pub fn push(&self, reply: ChatResponse) {
        self.then(Ok(reply));
    }

    /// Adds a failure: the call that takes it fails with `error`, as a provider would.
    pub fn fail(&self, error: ModelError) {
        self.then(Err(error));
    }

    /// Adds an answer or a failure.
    pub fn then(&self, reply: Result<ChatResponse, ModelError>) {
        self.0.lock().unwrap().push_back(reply);
    }

    /// How many replies are left.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes the next reply.
    pub fn next_reply(&self) -> Result<ChatResponse, ModelError> {
        self.0
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| Err(ModelError::InvalidResponse("script exhausted".into())))
    }
}

/// A model that answers from a [`Script`] whatever it is asked, and keeps every request; a call past
/// the end of the script fails.
pub struct ScriptedModel {
    script: Script,
    model: FnModel,
}

impl Default for ScriptedModel {
    fn default() -> Self {
        let script = Script::default();
        let model = FnModel::new({
            let script = script.clone();
            move |_| script.next_reply()
        });
        ScriptedModel { script, model }
    }
}

impl ScriptedModel {
    /// Adds this reply.
    pub fn reply(self, reply: ChatResponse) -> Self {
        self.script.push(reply);
        self
    }

    /// Adds a reply that calls the tool `name` with `arguments` (the call's id empty).
    pub fn tool(self, name: &str, arguments: Value) -> Self {
        self.reply(ChatResponse::calling(vec![ToolCall::new("", name, arguments)]))
    }

    /// Adds a reply of text only.
    pub fn text(self, text: &str) -> Self {
        self.reply(ChatResponse::text(text))
    }

    /// Adds replies of text only, in order.
    pub fn push(&self, texts: impl IntoIterator<Item = String>) {
        for text in texts {
            self.script.push(ChatResponse::text(text));
        }
    }

    /// The script it answers from, to add answers or failures to a model already shared with the
    /// code under test.
    pub fn script(&self) -> &Script {
        &self.script
    }

    pub fn requests(&self) -> Vec<ChatRequest> {
        self.model.requests()
    }

    /// The same model, able to see what `input` says (text only by default).
    pub fn seeing(self, input: FileInput) -> Self {
        ScriptedModel { model: self.model.seeing(input), ..self }
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn file_input(&self) -> FileInput {
        self.model.file_input()
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        self.model.complete(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_script_answers_in_order_then_fails_and_every_request_is_kept() {
        let model = ScriptedModel::default().tool("ls", serde_json::json!({})).text("done");
        let request = ChatRequest { system: "s".into(), ..ChatRequest::default() };
        assert_eq!(model.complete(&request).await.unwrap().tool_calls[0].name, "ls");
        assert_eq!(model.complete(&request).await.unwrap(), ChatResponse::text("done"));
        assert!(matches!(model.complete(&request).await, Err(ModelError::InvalidResponse(_))));
        assert_eq!(model.requests(), vec![request; 3]);
    }

    #[tokio::test]
    async fn a_scripted_failure_fails_that_call_only() {
        let model = ScriptedModel::default();
        model.script().fail(ModelError::Rejected { status: 400, message: "bad".into() });
        model.script().push(ChatResponse::text("after"));
        let request = ChatRequest::default();
        assert!(matches!(model.complete(&request).await, Err(ModelError::Rejected { status: 400, .. })));
        assert_eq!(model.complete(&request).await.unwrap(), ChatResponse::text("after"));
        assert!(model.script().is_empty());
    }

    #[tokio::test]
    async fn a_held_model_answers_once_let_go() {
        let gate = Arc::new(Notify::new());
        let model = Arc::new(FnModel::new(|request| Ok(ChatResponse::text(&request.system))).held(gate.clone()));
        let call = tokio::spawn({
            let model = model.clone();
            async move { model.complete(&ChatRequest { system: "hi".into(), ..ChatRequest::default() }).await }
        });
        while model.calls() == 0 {
            tokio::task::yield_now().await;
        }
        assert!(!call.is_finished());
        gate.notify_one();
        assert_eq!(call.await.unwrap().unwrap().content, "hi");
    }
}
