//! Anthropic Messages API provider, converting to and from core types.

use agent_ports::{
    ChatModel, ChatRequest, ChatResponse, DeltaSink, JsonSchemaFormat, Message, ModelError, ToolCall, Usage,
};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::LlmConfig;
use crate::retry::{http_client, send_with_retry, streaming_client, RetryPolicy};
use crate::stream::{stream_with_retry, Assembler, StreamFault};
use crate::structured::{self, object_or_empty};

const PROVIDER: &str = "anthropic";
const API_VERSION: &str = "2023-06-01";
/// Description of the tool that carries a structured reply (see [`JsonSchemaFormat`]).
const STRUCTURED_TOOL_DESCRIPTION: &str = "Respond with the structured result.";

/// A chat model reached through `POST {base_url}/v1/messages`.
pub struct AnthropicModel {
    client: reqwest::Client,
    streaming: reqwest::Client,
    endpoint: String,
    model: String,
    api_key: String,
    max_tokens: u32,
    retry: RetryPolicy,
}

impl AnthropicModel {
    /// Fails with [`ModelError::Config`] when no API key is configured, since the API requires one.
    pub fn new(config: &LlmConfig) -> Result<Self, ModelError> {
        let api_key = config
            .api_key
            .clone()
            .filter(|key| !key.is_empty())
            .ok_or_else(|| ModelError::Config("an API key is required for provider anthropic".to_string()))?;
        Ok(AnthropicModel {
            client: http_client(config.timeout)?,
            streaming: streaming_client(config.timeout)?,
            endpoint: format!("{}/v1/messages", config.base_url.trim_end_matches('/')),
            model: config.model.clone(),
            api_key,
            max_tokens: config.max_tokens,
            retry: RetryPolicy::from_config(config),
        })
    }

    /// The model identifier sent with each request.
    pub fn model_name(&self) -> &str {
        &self.model
    }
}

#[async_trait]
impl ChatModel for AnthropicModel {
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let model = crate::effective_model(request, &self.model);
        let body = to_wire(model, self.max_tokens, request)?;
        let structured = request.response_format.as_ref().map(|format| format.name.as_str());
        tracing::debug!(provider = PROVIDER, model, response_format = structured, "model call");
        let bytes = send_with_retry(&self.retry, PROVIDER, Some(&self.api_key), || {
            self.client
                .post(&self.endpoint)
                .header("x-api-key", &self.api_key)
                .header("anthropic-version", API_VERSION)
                .json(&body)
        })
        .await?;
        let wire: MessagesResponse = serde_json::from_slice(&bytes)
            .map_err(|e| ModelError::InvalidResponse(format!("{PROVIDER}: could not parse the response: {e}")))?;
        let response = from_wire(wire, structured)?;
        crate::log_call_done(PROVIDER, model, &response);
        Ok(response)
    }

    async fn complete_streaming(
        &self,
        request: &ChatRequest,
        sink: &dyn DeltaSink,
    ) -> Result<ChatResponse, ModelError> {
        // A structured reply arrives as a forced tool's input, not as text: nothing to stream.
        if request.response_format.is_some() {
            return agent_ports::complete_as_one_delta(self, request, sink).await;
        }
        let model = crate::effective_model(request, &self.model);
        let mut body = serde_json::to_value(to_wire(model, self.max_tokens, request)?)
            .map_err(|e| ModelError::Config(format!("{PROVIDER}: could not encode the request: {e}")))?;
        body["stream"] = Value::Bool(true);
        tracing::debug!(provider = PROVIDER, model, "streamed model call");
        let make_request = || {
            self.streaming
                .post(&self.endpoint)
                .header("x-api-key", &self.api_key)
                .header("anthropic-version", API_VERSION)
                .json(&body)
        };
        let response =
            stream_with_retry(&self.retry, PROVIDER, Some(&self.api_key), make_request, StreamedMessage::default, sink)
                .await?;
        crate::log_call_done(PROVIDER, model, &response);
        Ok(response)
    }
}

// ---- Streamed response ----

/// Most content blocks one streamed reply may carry (their `index`).
const MAX_STREAMED_BLOCKS: usize = 64;

/// A content block as its deltas arrive.
enum PartialBlock {
    /// An index no `content_block_start` has opened (yet).
    Missing,
    Text(String),
    /// A tool call: its input arrives as pieces of JSON, parsed when the block stops.
    ToolUse {
        id: String,
        name: String,
        json: String,
        input: Option<Value>,
    },
    /// Blocks the loop has no use for, such as `thinking`.
    Other,
}

/// A message assembled from the Messages API's stream events.
#[derive(Default)]
struct StreamedMessage {
    blocks: Vec<PartialBlock>,
    input_tokens: u64,
    output_tokens: u64,
    stop_reason: Option<String>,
}

fn invalid(message: String) -> StreamFault {
    StreamFault::Fatal(ModelError::InvalidResponse(format!("{PROVIDER}: {message}")))
}

/// A string field of an event, empty when absent.
fn text(value: Option<&Value>) -> String {
    value.and_then(Value::as_str).unwrap_or("").to_owned()
}

/// A tool's streamed input: nothing means no arguments.
fn parse_input(json: &str) -> Result<Value, ModelError> {
    if json.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(json)
        .map_err(|e| ModelError::InvalidResponse(format!("{PROVIDER}: a streamed tool input is not JSON: {e}")))
}

impl StreamedMessage {
    /// The block an event's `index` names; indices may arrive out of order, within a fixed bound.
    fn block(&mut self, event: &Value) -> Result<(usize, &mut PartialBlock), StreamFault> {
        let index =
            event.get("index").and_then(Value::as_u64).ok_or_else(|| invalid("an event without its index".into()))?;
        let index = usize::try_from(index).unwrap_or(usize::MAX);
        if index >= MAX_STREAMED_BLOCKS {
            return Err(invalid(format!("a content block has index {index}, over {MAX_STREAMED_BLOCKS}")));
        }
        if self.blocks.len() <= index {
            self.blocks.resize_with(index + 1, || PartialBlock::Missing);
        }
        Ok((index, &mut self.blocks[index]))
    }

    fn start_block(&mut self, event: &Value, sink: &dyn DeltaSink) -> Result<(), StreamFault> {
        let started = event.get("content_block").unwrap_or(&Value::Null);
        let block = match started.get("type").and_then(Value::as_str) {
            Some("text") => PartialBlock::Text(text(started.get("text"))),
            Some("tool_use") => {
                let (id, name) = (text(started.get("id")), text(started.get("name")));
                if id.is_empty() || name.is_empty() {
                    return Err(invalid("a streamed tool_use block without its id or name".into()));
                }
                PartialBlock::ToolUse { id, name, json: String::new(), input: None }
            }
            _ => PartialBlock::Other,
        };
        let (index, slot) = self.block(event)?;
        if !matches!(slot, PartialBlock::Missing) {
            return Err(invalid(format!("content block {index} started twice")));
        }
        if let PartialBlock::Text(initial) = &block {
            if !initial.is_empty() {
                sink.delta(initial);
            }
        }
        *slot = block;
        Ok(())
    }

    fn block_delta(&mut self, event: &Value, sink: &dyn DeltaSink) -> Result<(), StreamFault> {
        let delta = event.get("delta").unwrap_or(&Value::Null);
        let kind = delta.get("type").and_then(Value::as_str).unwrap_or("");
        match (kind, self.block(event)?) {
            ("text_delta", (_, PartialBlock::Text(content))) => {
                let piece = text(delta.get("text"));
                if !piece.is_empty() {
                    sink.delta(&piece);
                    content.push_str(&piece);
                }
            }
            ("input_json_delta", (_, PartialBlock::ToolUse { json, input: None, .. })) => {
                json.push_str(&text(delta.get("partial_json")));
            }
            (_, (index, PartialBlock::Missing)) => {
                return Err(invalid(format!("a delta for content block {index} before its start")))
            }
            ("text_delta" | "input_json_delta", (index, _)) => {
                return Err(invalid(format!("a {kind} that does not fit content block {index}")))
            }
            // Deltas of blocks the loop ignores (thinking, signatures).
            _ => {}
        }
        Ok(())
    }

    fn stop_block(&mut self, event: &Value) -> Result<(), StreamFault> {
        match self.block(event)? {
            (index, PartialBlock::Missing) => Err(invalid(format!("content block {index} stopped before its start"))),
            (_, PartialBlock::ToolUse { json, input, .. }) => {
                *input = Some(parse_input(json).map_err(StreamFault::Fatal)?);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

impl Assembler for StreamedMessage {
    fn event(&mut self, name: &str, data: &str, sink: &dyn DeltaSink) -> Result<bool, StreamFault> {
        let event: Value =
            serde_json::from_str(data).map_err(|e| invalid(format!("a streamed event is not valid JSON: {e}")))?;
        let kind = event.get("type").and_then(Value::as_str).unwrap_or(name);
        match kind {
            "message_start" => {
                let usage = event.pointer("/message/usage");
                let tokens = |field: &str| usage.and_then(|u| u.get(field)).and_then(Value::as_u64).unwrap_or(0);
                self.input_tokens = tokens("input_tokens");
                self.output_tokens = tokens("output_tokens");
            }
            "content_block_start" => self.start_block(&event, sink)?,
            "content_block_delta" => self.block_delta(&event, sink)?,
            "content_block_stop" => self.stop_block(&event)?,
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                // These counts are cumulative; the input count is only sometimes repeated here.
                if let Some(tokens) = event.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    self.output_tokens = tokens;
                }
                if let Some(tokens) = event.pointer("/usage/input_tokens").and_then(Value::as_u64) {
                    self.input_tokens = tokens;
                }
            }
            "message_stop" => return Ok(true),
            "error" => {
                let kind = event.pointer("/error/type").and_then(Value::as_str).unwrap_or("error");
                let message =
                    format!("{PROVIDER}: the stream reported {kind}: {}", text(event.pointer("/error/message")));
                return Err(match kind {
                    "overloaded_error" | "api_error" | "rate_limit_error" => StreamFault::Retryable(message),
                    _ => StreamFault::Fatal(ModelError::InvalidResponse(message)),
                });
            }
            // `ping`, and event types added to the API later.
            _ => {}
        }
        Ok(false)
    }

    fn finish(self) -> Result<ChatResponse, ModelError> {
        let mut content = Vec::with_capacity(self.blocks.len());
        for block in self.blocks {
            content.push(match block {
                PartialBlock::Text(text) => ResponseBlock::Text { text },
                PartialBlock::ToolUse { id, name, input: Some(input), .. } => {
                    ResponseBlock::ToolUse { id, name, input }
                }
                // A block the stream never stopped: its input is whatever arrived.
                PartialBlock::ToolUse { id, name, json, input: None } => {
                    ResponseBlock::ToolUse { id, name, input: parse_input(&json)? }
                }
                PartialBlock::Missing | PartialBlock::Other => ResponseBlock::Other,
            });
        }
        let usage = Some(WireUsage { input_tokens: self.input_tokens, output_tokens: self.output_tokens });
        from_wire(MessagesResponse { content, usage, stop_reason: self.stop_reason }, None)
    }
}

// ---- Request wire types ----

#[derive(Serialize)]
struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireToolChoice<'a> {
    /// The model must call this tool (and only it).
    Tool { name: &'a str },
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: Role,
    content: Vec<Block<'a>>,
}

#[derive(Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Role {
    User,
    Assistant,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text { text: &'a str },
    ToolUse { id: &'a str, name: &'a str, input: Value },
    ToolResult { tool_use_id: &'a str, content: &'a str },
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

/// Structured output has no native switch in the Messages API, so a [`JsonSchemaFormat`] becomes a
/// tool whose input schema is the format's schema, and `tool_choice` forces the model to call it.
/// The caller's own tools stay listed (the history may refer to them) but cannot be chosen.
fn to_wire<'a>(model: &'a str, max_tokens: u32, request: &'a ChatRequest) -> Result<MessagesRequest<'a>, ModelError> {
    let mut messages: Vec<WireMessage<'a>> = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        let (role, blocks) = match message {
            Message::User { content } => (Role::User, text_block(content).into_iter().collect()),
            Message::Assistant { content, tool_calls } => {
                let mut blocks: Vec<Block<'a>> = text_block(content).into_iter().collect();
                blocks.extend(tool_calls.iter().map(|call| Block::ToolUse {
                    id: &call.id,
                    name: &call.name,
                    input: tool_input(&call.arguments),
                }));
                (Role::Assistant, blocks)
            }
            Message::Tool { tool_call_id, content, .. } => {
                (Role::User, vec![Block::ToolResult { tool_use_id: tool_call_id, content }])
            }
        };
        // The API rejects empty content, so a message with nothing to say is left out.
        if blocks.is_empty() {
            continue;
        }
        // Roles must alternate, so consecutive messages of one role (tool results above all) are merged.
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => messages.push(WireMessage { role, content: blocks }),
        }
    }
    // Within a user message the API wants tool results before any text; the sort is stable.
    for message in messages.iter_mut().filter(|m| m.role == Role::User) {
        message.content.sort_by_key(|block| !matches!(block, Block::ToolResult { .. }));
    }
    let mut tools: Vec<WireTool<'a>> = request
        .tools
        .iter()
        .map(|tool| WireTool { name: &tool.name, description: &tool.description, input_schema: &tool.parameters })
        .collect();
    let mut tool_choice = None;
    if let Some(JsonSchemaFormat { name, schema }) = &request.response_format {
        // The API rejects duplicate tool names, and the reply could not tell the two apart.
        if tools.iter().any(|tool| tool.name == name) {
            return Err(ModelError::Config(format!(
                "response format {name:?} has the same name as one of the request's tools"
            )));
        }
        tools.push(WireTool { name, description: STRUCTURED_TOOL_DESCRIPTION, input_schema: schema });
        tool_choice = Some(WireToolChoice::Tool { name });
    }
    Ok(MessagesRequest { model, max_tokens, system: &request.system, messages, tools, tool_choice })
}

/// The API rejects empty text blocks.
fn text_block(text: &str) -> Option<Block<'_>> {
    (!text.is_empty()).then_some(Block::Text { text })
}

/// `tool_use.input` must be an object; arguments from elsewhere (such as an unparseable string
/// another provider produced) are wrapped so the history stays valid and nothing is lost.
fn tool_input(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::Null => Value::Object(Default::default()),
        other => serde_json::json!({ "raw_arguments": other }),
    }
}

// ---- Response wire types ----

#[derive(Deserialize)]
struct MessagesResponse {
    #[serde(default)]
    content: Vec<ResponseBlock>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResponseBlock {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Blocks the loop has no use for, such as `thinking`.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

/// Converts a reply. With `structured` (the name of the forced structured-output tool), that tool's
/// input becomes the reply's `content` as a JSON document, is not reported as a tool call, and the
/// call counts as a finished turn; any text around it is dropped, as `content` must be the JSON.
fn from_wire(response: MessagesResponse, structured: Option<&str>) -> Result<ChatResponse, ModelError> {
    let mut content = String::new();
    let mut structured_input = None;
    let mut tool_calls = Vec::new();
    for block in response.content {
        match block {
            // Text split into several blocks (around citations, say) is one text, so no separator.
            ResponseBlock::Text { text } => content.push_str(&text),
            ResponseBlock::ToolUse { name, input, .. }
                if structured == Some(name.as_str()) && structured_input.is_none() =>
            {
                structured_input = Some(object_or_empty(input));
            }
            ResponseBlock::ToolUse { id, name, input } => {
                tool_calls.push(ToolCall { id, name, arguments: object_or_empty(input) })
            }
            ResponseBlock::Other => {}
        }
    }
    let mut stop_reason = structured::stop_reason(response.stop_reason.as_deref());
    if let Some(name) = structured {
        let raw_stop = response.stop_reason.as_deref().unwrap_or("none");
        structured::settle(
            PROVIDER,
            name,
            structured_input,
            tool_calls.len(),
            raw_stop,
            &mut content,
            &mut stop_reason,
        )?;
    }
    let usage = response
        .usage
        .map(|u| Usage { input_tokens: u.input_tokens, output_tokens: u.output_tokens })
        .unwrap_or_default();
    Ok(ChatResponse { content, tool_calls, usage, stop_reason })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_ports::{StopReason, ToolCall};
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.to_string(), name: "read".to_string(), arguments: json!({"path": id}) }
    }

    fn tool(id: &str) -> Message {
        Message::Tool { tool_call_id: id.to_string(), name: "read".to_string(), content: format!("result {id}") }
    }

    #[test]
    fn consecutive_roles_are_merged_and_tool_results_come_first() {
        let request = ChatRequest {
            system: String::new(),
            messages: vec![
                Message::user("first"),
                Message::user("second"),
                Message::Assistant { content: String::new(), tool_calls: vec![call("a"), call("b")] },
                tool("a"),
                tool("b"),
                Message::user("and then"),
                Message::assistant(""),
                Message::assistant("done"),
            ],
            tools: vec![],
            ..Default::default()
        };
        let body = serde_json::to_value(to_wire("m", 100, &request).unwrap()).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "m",
                "max_tokens": 100,
                "messages": [
                    {"role": "user", "content": [
                        {"type": "text", "text": "first"},
                        {"type": "text", "text": "second"}
                    ]},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "a", "name": "read", "input": {"path": "a"}},
                        {"type": "tool_use", "id": "b", "name": "read", "input": {"path": "b"}}
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "a", "content": "result a"},
                        {"type": "tool_result", "tool_use_id": "b", "content": "result b"},
                        {"type": "text", "text": "and then"}
                    ]},
                    {"role": "assistant", "content": [{"type": "text", "text": "done"}]}
                ]
            })
        );
    }

    #[test]
    fn non_object_arguments_are_wrapped() {
        assert_eq!(tool_input(&json!("{oops")), json!({"raw_arguments": "{oops"}));
        assert_eq!(tool_input(&Value::Null), json!({}));
        assert_eq!(tool_input(&json!({"a": 1})), json!({"a": 1}));
    }

    #[test]
    fn unknown_blocks_are_ignored_and_text_is_joined() {
        let wire: MessagesResponse = serde_json::from_value(json!({
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "x"},
                {"type": "text", "text": "Hello, "},
                {"type": "text", "text": "world"}
            ],
            "stop_reason": "stop_sequence"
        }))
        .unwrap();
        let response = from_wire(wire, None).unwrap();
        assert_eq!(response.content, "Hello, world");
        assert_eq!(response.stop_reason, StopReason::EndTurn);
        assert_eq!(response.usage, Usage::default());
    }

    #[test]
    fn missing_key_is_a_config_error() {
        let config = LlmConfig::new(crate::ProviderKind::Anthropic, "http://127.0.0.1:1", "m");
        assert!(matches!(AnthropicModel::new(&config), Err(ModelError::Config(_))));
    }
}
