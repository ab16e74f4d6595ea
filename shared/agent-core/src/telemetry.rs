//! The spans a turn is measured by: their names and fields (a contract with the metrics layer and
//! the OpenTelemetry export in `agent-app`), and [`InstrumentedModel`], the decorator that gives
//! every model call its `chat` span. Spans only: the core still does no I/O.
//!
//! Names follow the OpenTelemetry GenAI semantic conventions where one exists. Prompt and
//! completion text are never recorded.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use async_trait::async_trait;
use tracing::field::Empty;
use tracing::{Instrument, Span};

use crate::message::{ChatRequest, ChatResponse, StopReason, Usage};
use crate::model::{ChatModel, DeltaSink, ModelError};

/// A turn's session read (`SessionStore::load`).
pub const SESSION_LOAD: &str = "session.load";
/// A turn's catalog read (`SkillLibrary::catalog`).
pub const CATALOG: &str = "catalog";
/// A turn's commit (`SessionStore::commit`, large tool results stored first).
pub const COMMIT: &str = "commit";
/// One model call, whoever makes it (the loop, the planner, a summary).
pub const CHAT: &str = "chat";
/// One tool call the model asked for, run or refused.
pub const EXECUTE_TOOL: &str = "execute_tool";
/// A summary of older history (its `chat` span is a child).
pub const SUMMARIZE: &str = "summarize";
/// A subagent's loop (its `chat` and `execute_tool` spans are children), in the `task` call's span.
pub const INVOKE_AGENT: &str = "invoke_agent";

/// Span fields, as the GenAI conventions name them.
pub mod field {
    pub const OPERATION_NAME: &str = "gen_ai.operation.name";
    pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
    pub const REQUEST_MODEL: &str = "gen_ai.request.model";
    pub const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    pub const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// Input tokens read from the provider's prompt cache (included in [`INPUT_TOKENS`]).
    pub const CACHE_READ_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
    /// Input tokens written to the provider's prompt cache (included in [`INPUT_TOKENS`]).
    pub const CACHE_WRITE_TOKENS: &str = "gen_ai.usage.cache_creation.input_tokens";
    /// A turn's cost in US dollars at the price table's prices; not the conventions', and only
    /// recorded when some call of the turn had a price.
    pub const TURN_COST_USD: &str = "agent.turn.cost_usd";
    pub const AGENT_NAME: &str = "gen_ai.agent.name";
    pub const AGENT_ID: &str = "gen_ai.agent.id";
    pub const FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    pub const TIME_TO_FIRST_TOKEN_MS: &str = "time_to_first_token_ms";
    /// Images and PDF documents a model request carries with their bytes.
    pub const REQUEST_IMAGES: &str = "request.images";
    pub const REQUEST_DOCUMENTS: &str = "request.documents";
    pub const ERROR_TYPE: &str = "error.type";
    pub const TOOL_NAME: &str = "gen_ai.tool.name";
    pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
    /// `execute_tool`: `ok`, `error` (the result is an error for the model) or `refused` (not run).
    /// `summarize`: `ok`, `empty`, `error` or `timeout`.
    pub const OUTCOME: &str = "outcome";
}

/// The outcomes of a tool call (field [`field::OUTCOME`]).
pub mod outcome {
    pub const OK: &str = "ok";
    pub const ERROR: &str = "error";
    pub const REFUSED: &str = "refused";
    /// A `task` whose subagent stopped for a person's approval: it has no result yet.
    pub const PAUSED: &str = "paused";
}

/// The `execute_tool` span of one call, its outcome to be recorded.
pub fn tool_span(name: &str, call_id: &str) -> Span {
    tracing::info_span!(
        "execute_tool",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = call_id,
        outcome = Empty,
        // Set by `load_skill` when the skill loaded is a published version.
        skill.path = Empty,
        skill.version = Empty,
    )
}

/// The `invoke_agent` span of subagent `id` of type `agent_type`, its usage to be recorded
/// ([`record_usage`]) when its loop ends.
pub fn subagent_span(id: &str, agent_type: &str) -> Span {
    tracing::info_span!(
        "invoke_agent",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = agent_type,
        gen_ai.agent.id = id,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
    )
}

/// Records `usage` on a span that declares the GenAI usage fields (`chat`, `invoke_agent`).
pub fn record_usage(span: &Span, usage: &Usage) {
    record_reply(span, usage, None);
}

/// Records `usage` and, on a `chat` span, why the model stopped, in one record: the JSON log layer
/// re-reads a span's fields at every record.
fn record_reply(span: &Span, usage: &Usage, finish_reason: Option<&str>) {
    tracing::record_all!(
        span,
        gen_ai.usage.input_tokens = usage.input_tokens,
        gen_ai.usage.output_tokens = usage.output_tokens,
        gen_ai.usage.cache_read.input_tokens = usage.cache_read_tokens,
        gen_ai.usage.cache_creation.input_tokens = usage.cache_write_tokens,
        gen_ai.response.finish_reasons = finish_reason,
    );
}

/// The `summarize` span of a history summary, its outcome to be recorded.
pub fn summarize_span() -> Span {
    tracing::info_span!("summarize", outcome = Empty)
}

/// The span of a storage step of a turn: [`SESSION_LOAD`], [`CATALOG`] or [`COMMIT`].
pub fn storage_span(name: &'static str) -> Span {
    match name {
        SESSION_LOAD => tracing::info_span!("session.load", "error.type" = Empty),
        CATALOG => tracing::info_span!("catalog", "error.type" = Empty),
        _ => tracing::info_span!("commit", "error.type" = Empty),
    }
}

/// Awaits `step` in `span`, recording `error.type` = `error` when it fails.
pub async fn measured<T, E>(span: Span, step: impl std::future::Future<Output = Result<T, E>>) -> Result<T, E> {
    let result = step.instrument(span.clone()).await;
    if result.is_err() {
        record_error(&span, "error");
    }
    result
}

/// Records a failed step's error kind (a short, bounded name, never a message) on `span`.
pub fn record_error(span: &Span, kind: &str) {
    span.record(field::ERROR_TYPE, kind);
}

/// A short, bounded name for a model failure (`error.type`).
pub fn model_error_type(err: &ModelError) -> &'static str {
    match err {
        ModelError::Unavailable { .. } => "unavailable",
        ModelError::Rejected { .. } => "rejected",
        ModelError::InvalidResponse(_) => "invalid_response",
        ModelError::Config(_) => "config",
        ModelError::ContextTooLarge { .. } => "context_too_large",
    }
}

/// The GenAI name of why the model stopped.
pub fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn => "stop",
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        StopReason::Other => "other",
    }
}

/// A [`ChatModel`] whose every call runs in a `chat` span that records the model, the token
/// counts, the finish reason, the time to the first delta of a streamed call, and the error kind
/// of a failure. The turn service wraps its model in one, so no call site can be missed.
pub struct InstrumentedModel {
    inner: Arc<dyn ChatModel>,
    provider: Option<String>,
    model: Option<String>,
}

impl InstrumentedModel {
    /// Wraps `inner`; `provider` and `model` (the model used when a request names none) are
    /// recorded when known.
    pub fn new(inner: Arc<dyn ChatModel>, provider: Option<String>, model: Option<String>) -> Self {
        Self { inner, provider, model }
    }

    /// The call's span, with everything known before the call among its first fields, so that
    /// nothing is recorded on it until the reply.
    fn span(&self, request: &ChatRequest) -> Span {
        let model = request.model.as_deref().or(self.model.as_deref()).unwrap_or("");
        let (mut images, mut documents) = (0u64, 0u64);
        for file in request.messages.iter().flat_map(|message| message.files()) {
            if request.files.contains_key(&file.sha256) {
                match file.media_type.is_image() {
                    true => images += 1,
                    false => documents += 1,
                }
            }
        }
        tracing::info_span!(
            "chat",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = self.provider.as_deref(),
            gen_ai.request.model = model,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.usage.cache_read.input_tokens = Empty,
            gen_ai.usage.cache_creation.input_tokens = Empty,
            gen_ai.response.finish_reasons = Empty,
            time_to_first_token_ms = Empty,
            "error.type" = Empty,
            request.images = (images > 0).then_some(images),
            request.documents = (documents > 0).then_some(documents),
        )
    }
}

fn record_result(span: &Span, result: &Result<ChatResponse, ModelError>) {
    match result {
        Ok(response) => record_reply(span, &response.usage, Some(finish_reason(response.stop_reason))),
        Err(err) => record_error(span, model_error_type(err)),
    }
}

/// Passes deltas on, noting when the first one arrived.
struct FirstDelta<'a> {
    inner: &'a dyn DeltaSink,
    started: Instant,
    first: OnceLock<f64>,
}

impl DeltaSink for FirstDelta<'_> {
    fn delta(&self, text: &str) {
        if !text.is_empty() {
            self.first.get_or_init(|| self.started.elapsed().as_secs_f64() * 1000.0);
        }
        self.inner.delta(text);
    }
}

#[async_trait]
impl ChatModel for InstrumentedModel {
    fn file_input(&self) -> crate::model::FileInput {
        self.inner.file_input()
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let span = self.span(request);
        let result = self.inner.complete(request).instrument(span.clone()).await;
        record_result(&span, &result);
        result
    }

    async fn complete_streaming(
        &self,
        request: &ChatRequest,
        sink: &dyn DeltaSink,
    ) -> Result<ChatResponse, ModelError> {
        let span = self.span(request);
        let first = FirstDelta { inner: sink, started: Instant::now(), first: OnceLock::new() };
        let result = self.inner.complete_streaming(request, &first).instrument(span.clone()).await;
        if let Some(millis) = first.first.get() {
            span.record(field::TIME_TO_FIRST_TOKEN_MS, *millis);
        }
        record_result(&span, &result);
        result
    }
}

#[cfg(test)]
mod tests {
    use agent_ports::testing::FnModel;

    use super::*;

    struct Collect(std::sync::Mutex<String>);

    impl DeltaSink for Collect {
        fn delta(&self, text: &str) {
            self.0.lock().unwrap().push_str(text);
        }
    }

    #[tokio::test]
    async fn the_decorator_passes_replies_and_deltas_through() {
        let fixed = FnModel::new(|_| Ok(ChatResponse::text("hola").with_usage(Usage::new(3, 2))));
        let model = InstrumentedModel::new(Arc::new(fixed), Some("openai".into()), Some("m".into()));
        let reply = model.complete(&ChatRequest::default()).await.unwrap();
        assert_eq!(reply.usage, Usage::new(3, 2));
        let sink = Collect(Default::default());
        let streamed = model.complete_streaming(&ChatRequest::default(), &sink).await.unwrap();
        assert_eq!((streamed.content.as_str(), sink.0.lock().unwrap().as_str()), ("hola", "hola"));
    }

    #[test]
    fn error_types_and_finish_reasons_are_short_names() {
        assert_eq!(model_error_type(&ModelError::Rejected { status: 400, message: "x".into() }), "rejected");
        assert_eq!(finish_reason(StopReason::ToolUse), "tool_calls");
    }
}
