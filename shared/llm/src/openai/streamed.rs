//! A streamed reply assembled from `chat.completion.chunk` events: text handed over as it arrives,
//! tool calls put together from their fragments, bounded in number.

use agent_ports::{ChatResponse, DeltaSink, ModelError, ToolCall};
use serde::Deserialize;
use serde_json::Value;

use super::response::{
    decode_arguments, from_wire, generate_call_id, Choice, CompletionResponse, ResponseMessage, WireUsage, PROVIDER,
};
use crate::stream::{Assembler, StreamFault};

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
pub(super) struct StreamedReply {
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
