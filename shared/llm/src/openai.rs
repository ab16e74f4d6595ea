//! OpenAI-compatible Chat Completions provider (OpenAI, Ollama, vLLM, ...), converting to and from core types.

use agent_ports::{
    ChatModel, ChatRequest, ChatResponse, DeltaSink, JsonSchemaFormat, Message, ModelError, StopReason, ToolCall, Usage,
};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::LlmConfig;
use crate::retry::{http_client, send_with_retry, streaming_client, RetryPolicy};
use crate::stream::{stream_with_retry, Assembler, StreamFault};

const PROVIDER: &str = "openai";

/// A chat model reached through `POST {base_url}/chat/completions`.
pub struct OpenAiModel {
    client: reqwest::Client,
    streaming: reqwest::Client,
    endpoint: String,
    model: String,
    api_key: Option<String>,
    max_tokens: u32,
    /// OpenAI's own API wants `max_completion_tokens` (newer models reject `max_tokens`),
    /// while compatible servers generally only know `max_tokens`.
    official_api: bool,
    retry: RetryPolicy,
}

impl OpenAiModel {
    pub fn new(config: &LlmConfig) -> Result<Self, ModelError> {
        let base_url = config.base_url.trim_end_matches('/');
        Ok(OpenAiModel {
            client: http_client(config.timeout)?,
            streaming: streaming_client(config.timeout)?,
            endpoint: format!("{base_url}/chat/completions"),
            model: config.model.clone(),
            api_key: config.api_key.clone(),
            max_tokens: config.max_tokens,
            official_api: base_url.starts_with("https://api.openai.com"),
            retry: RetryPolicy::from_config(config),
        })
    }

    /// The model identifier sent with each request.
    pub fn model_name(&self) -> &str {
        &self.model
    }
}

#[async_trait]
impl ChatModel for OpenAiModel {
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let (max_tokens, max_completion_tokens) =
            if self.official_api { (None, Some(self.max_tokens)) } else { (Some(self.max_tokens), None) };
        let model = crate::effective_model(request, &self.model);
        let body = to_wire(model, request, max_tokens, max_completion_tokens);
        tracing::debug!(
            provider = PROVIDER,
            model,
            response_format = request.response_format.as_ref().map(|f| f.name.as_str()),
            "model call"
        );
        let bytes = send_with_retry(&self.retry, PROVIDER, self.api_key.as_deref(), || {
            let builder = self.client.post(&self.endpoint).json(&body);
            match &self.api_key {
                Some(key) => builder.bearer_auth(key),
                None => builder,
            }
        })
        .await?;
        let wire: CompletionResponse = serde_json::from_slice(&bytes)
            .map_err(|e| ModelError::InvalidResponse(format!("{PROVIDER}: could not parse the response: {e}")))?;
        let response = from_wire(wire)?;
        crate::log_call_done(PROVIDER, model, &response);
        Ok(response)
    }

    async fn complete_streaming(
        &self,
        request: &ChatRequest,
        sink: &dyn DeltaSink,
    ) -> Result<ChatResponse, ModelError> {
        let (max_tokens, max_completion_tokens) =
            if self.official_api { (None, Some(self.max_tokens)) } else { (Some(self.max_tokens), None) };
        let model = crate::effective_model(request, &self.model);
        let mut body = serde_json::to_value(to_wire(model, request, max_tokens, max_completion_tokens))
            .map_err(|e| ModelError::Config(format!("{PROVIDER}: could not encode the request: {e}")))?;
        body["stream"] = Value::Bool(true);
        body["stream_options"] = serde_json::json!({"include_usage": true});
        tracing::debug!(provider = PROVIDER, model, "streamed model call");
        let make_request = || {
            let builder = self.streaming.post(&self.endpoint).json(&body);
            match &self.api_key {
                Some(key) => builder.bearer_auth(key),
                None => builder,
            }
        };
        let response = stream_with_retry(
            &self.retry,
            PROVIDER,
            self.api_key.as_deref(),
            make_request,
            StreamedReply::default,
            sink,
        )
        .await?;
        crate::log_call_done(PROVIDER, model, &response);
        Ok(response)
    }
}

// ---- Streamed response ----

/// Most tool calls one streamed reply may carry (their `index`).
const MAX_STREAMED_TOOL_CALLS: usize = 64;

#[derive(Deserialize)]
struct Chunk {
    /// Empty in the closing usage chunk, and null from some compatible servers.
    #[serde(default)]
    choices: Option<Vec<ChunkChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<ChunkDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChunkDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ChunkToolCall>>,
}

#[derive(Deserialize)]
struct ChunkToolCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<ChunkFunction>,
}

#[derive(Deserialize)]
struct ChunkFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// A tool call as its fragments arrive.
#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// A reply assembled from `chat.completion.chunk` events.
#[derive(Default)]
struct StreamedReply {
    content: String,
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<WireUsage>,
}

impl Assembler for StreamedReply {
    fn event(&mut self, _name: &str, data: &str, sink: &dyn DeltaSink) -> Result<bool, StreamFault> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            StreamFault::Fatal(ModelError::InvalidResponse(format!("{PROVIDER}: a streamed chunk is not valid: {e}")))
        })?;
        if let Some(error) = chunk.error {
            let message = crate::retry::error_message(error.to_string().as_bytes(), None);
            return Err(StreamFault::Retryable(format!("{PROVIDER}: the stream reported an error: {message}")));
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        let Some(choice) = chunk.choices.unwrap_or_default().into_iter().next() else { return Ok(false) };
        if let Some(delta) = choice.delta {
            if let Some(text) = delta.content.filter(|text| !text.is_empty()) {
                sink.delta(&text);
                self.content.push_str(&text);
            }
            for fragment in delta.tool_calls.unwrap_or_default() {
                let index = fragment.index.unwrap_or(self.calls.len().saturating_sub(1));
                if index >= MAX_STREAMED_TOOL_CALLS {
                    return Err(StreamFault::Fatal(ModelError::InvalidResponse(format!(
                        "{PROVIDER}: a streamed tool call has index {index}, over {MAX_STREAMED_TOOL_CALLS}"
                    ))));
                }
                if self.calls.len() <= index {
                    self.calls.resize_with(index + 1, PartialCall::default);
                }
                let call = &mut self.calls[index];
                if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
                    call.id = Some(id);
                }
                if let Some(function) = fragment.function {
                    // The name comes whole in the call's first fragment; some servers repeat it later.
                    if let Some(name) = function.name.filter(|_| call.name.is_empty()) {
                        call.name = name;
                    }
                    if let Some(arguments) = function.arguments {
                        call.arguments.push_str(&arguments);
                    }
                }
            }
        }
        if choice.finish_reason.is_some() {
            self.finish_reason = choice.finish_reason;
        }
        Ok(false)
    }

    fn finish(self) -> Result<ChatResponse, ModelError> {
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, call) in self.calls.into_iter().enumerate() {
            if call.name.is_empty() {
                // An index no fragment named is a gap left by a later index, not a call.
                if call.id.is_none() && call.arguments.is_empty() {
                    continue;
                }
                return Err(ModelError::InvalidResponse(format!(
                    "{PROVIDER}: streamed tool call {index} has no function name"
                )));
            }
            tool_calls.push(ToolCall {
                id: call.id.unwrap_or_else(generate_call_id),
                name: call.name,
                arguments: decode_arguments(Some(Value::String(call.arguments))),
            });
        }
        let wire = CompletionResponse {
            choices: vec![Choice {
                message: ResponseMessage { content: Some(self.content), tool_calls: Some(Vec::new()) },
                finish_reason: self.finish_reason,
            }],
            usage: self.usage,
        };
        let mut response = from_wire(wire)?;
        response.tool_calls = tool_calls;
        Ok(response)
    }

    /// Some compatible servers end the stream after the finish reason without `[DONE]`.
    fn complete_without_end(&self) -> bool {
        self.finish_reason.is_some()
    }
}

// ---- Request wire types ----

#[derive(Serialize)]
struct CompletionRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<WireResponseFormat<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireResponseFormat<'a> {
    JsonSchema { json_schema: WireJsonSchema<'a> },
}

#[derive(Serialize)]
struct WireJsonSchema<'a> {
    name: &'a str,
    schema: &'a Value,
    strict: bool,
}

/// The caller's schema travels untouched. Strict mode rejects schemas that do not close their
/// objects (`additionalProperties: false`, every property required), so it is only asked for when
/// the top-level object is closed; otherwise the server validates loosely rather than failing the call.
fn response_format(format: &JsonSchemaFormat) -> WireResponseFormat<'_> {
    let strict = format.schema.get("additionalProperties") == Some(&Value::Bool(false));
    WireResponseFormat::JsonSchema {
        json_schema: WireJsonSchema { name: &format.name, schema: &format.schema, strict },
    }
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// Null rather than empty when the turn is only tool calls, as OpenAI itself sends it.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    /// A JSON document encoded as a string, as the API requires.
    arguments: String,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

fn to_wire<'a>(
    model: &'a str,
    request: &'a ChatRequest,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
) -> CompletionRequest<'a> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(WireMessage::System { content: &request.system });
    }
    for message in &request.messages {
        messages.push(match message {
            Message::User { content } => WireMessage::User { content },
            Message::Assistant { content, tool_calls } => WireMessage::Assistant {
                content: if content.is_empty() && !tool_calls.is_empty() { None } else { Some(content) },
                tool_calls: tool_calls
                    .iter()
                    .map(|call| WireToolCall {
                        id: &call.id,
                        kind: "function",
                        function: WireFunctionCall { name: &call.name, arguments: encode_arguments(&call.arguments) },
                    })
                    .collect(),
            },
            Message::Tool { tool_call_id, content, .. } => WireMessage::Tool { tool_call_id, content },
        });
    }
    let tools = request
        .tools
        .iter()
        .map(|tool| WireTool {
            kind: "function",
            function: WireFunction { name: &tool.name, description: &tool.description, parameters: &tool.parameters },
        })
        .collect();
    let response_format = request.response_format.as_ref().map(response_format);
    CompletionRequest { model, messages, tools, max_tokens, max_completion_tokens, response_format }
}

/// Arguments that arrived as an unparseable string are sent back verbatim, so the model
/// sees exactly what it produced; everything else is encoded as JSON.
fn encode_arguments(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

// ---- Response wire types ----

#[derive(Deserialize)]
struct CompletionResponse {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ResponseMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ResponseMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ResponseToolCall>>,
}

#[derive(Deserialize)]
struct ResponseToolCall {
    #[serde(default)]
    id: Option<String>,
    function: ResponseFunction,
}

#[derive(Deserialize)]
struct ResponseFunction {
    name: String,
    /// Normally a string; some compatible servers send an object instead.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

fn from_wire(response: CompletionResponse) -> Result<ChatResponse, ModelError> {
    let choice = response
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ModelError::InvalidResponse(format!("{PROVIDER}: the response has no choices")))?;
    let tool_calls = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|call| ToolCall {
            id: call.id.filter(|id| !id.is_empty()).unwrap_or_else(generate_call_id),
            name: call.function.name,
            arguments: decode_arguments(call.function.arguments),
        })
        .collect();
    let stop_reason = match choice.finish_reason.as_deref() {
        Some("stop") => StopReason::EndTurn,
        Some("tool_calls") | Some("function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        _ => StopReason::Other,
    };
    let usage = response
        .usage
        .map(|u| Usage { input_tokens: u.prompt_tokens.unwrap_or(0), output_tokens: u.completion_tokens.unwrap_or(0) })
        .unwrap_or_default();
    Ok(ChatResponse { content: choice.message.content.unwrap_or_default(), tool_calls, usage, stop_reason })
}

/// Parses the arguments string; a string that is not JSON is kept as is so the tool can report it.
fn decode_arguments(arguments: Option<Value>) -> Value {
    match arguments {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(Value::String(raw)) if raw.trim().is_empty() => Value::Object(Default::default()),
        Some(Value::String(raw)) => serde_json::from_str(&raw).unwrap_or(Value::String(raw)),
        Some(other) => other,
    }
}

/// An id for a tool call the server sent without one; the loop needs ids to pair results.
fn generate_call_id() -> String {
    format!("call_{:016x}", rand::random::<u64>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_decoding() {
        assert_eq!(decode_arguments(Some(json!("{\"a\":1}"))), json!({"a": 1}));
        assert_eq!(decode_arguments(Some(json!("{oops"))), json!("{oops"));
        assert_eq!(decode_arguments(Some(json!({"a": 1}))), json!({"a": 1}));
        assert_eq!(decode_arguments(Some(json!(""))), json!({}));
        assert_eq!(decode_arguments(None), json!({}));
    }

    #[test]
    fn preserved_raw_arguments_round_trip() {
        assert_eq!(encode_arguments(&json!("{oops")), "{oops");
        assert_eq!(encode_arguments(&json!({"a": [1, 2]})), r#"{"a":[1,2]}"#);
    }

    #[test]
    fn missing_ids_are_generated_and_unique() {
        let wire: CompletionResponse = serde_json::from_value(json!({
            "choices": [{"message": {"content": null, "tool_calls": [
                {"type": "function", "function": {"name": "a", "arguments": "{}"}},
                {"id": "", "type": "function", "function": {"name": "b", "arguments": "{}"}}
            ]}, "finish_reason": "tool_calls"}]
        }))
        .unwrap();
        let response = from_wire(wire).unwrap();
        assert_eq!(response.tool_calls.len(), 2);
        assert!(response.tool_calls.iter().all(|c| c.id.starts_with("call_")));
        assert_ne!(response.tool_calls[0].id, response.tool_calls[1].id);
        assert_eq!(response.usage, Usage::default());
        assert_eq!(response.content, "");
    }

    #[test]
    fn no_choices_is_invalid() {
        let wire: CompletionResponse = serde_json::from_value(json!({"choices": []})).unwrap();
        assert!(matches!(from_wire(wire), Err(ModelError::InvalidResponse(_))));
    }

    #[test]
    fn official_api_uses_max_completion_tokens() {
        let request = ChatRequest {
            system: String::new(),
            messages: vec![Message::user("hi")],
            tools: vec![],
            ..Default::default()
        };
        let body = serde_json::to_value(to_wire("m", &request, None, Some(10))).unwrap();
        assert_eq!(
            body,
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 10})
        );
    }
}
