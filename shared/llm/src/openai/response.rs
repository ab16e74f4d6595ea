//! A Chat Completions reply back in core types: its text, tool calls (arguments that are not JSON
//! kept as they came, missing ids made up), usage and stop reason.

use agent_ports::{ChatResponse, ModelError, StopReason, ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;

/// The provider's name in logs and errors.
pub(super) const PROVIDER: &str = "openai";

#[derive(Deserialize)]
pub(super) struct CompletionResponse {
    #[serde(default)]
    pub(super) choices: Vec<Choice>,
    #[serde(default)]
    pub(super) usage: Option<WireUsage>,
}

#[derive(Deserialize)]
pub(super) struct Choice {
    pub(super) message: ResponseMessage,
    #[serde(default)]
    pub(super) finish_reason: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct ResponseMessage {
    #[serde(default)]
    pub(super) content: Option<String>,
    #[serde(default)]
    pub(super) tool_calls: Option<Vec<ResponseToolCall>>,
}

#[derive(Deserialize)]
pub(super) struct ResponseToolCall {
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

/// `prompt_tokens` is every input token; the cached ones are counted apart, and OpenAI reports no writes.
#[derive(Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub(super) prompt_tokens: Option<u64>,
    #[serde(default)]
    pub(super) completion_tokens: Option<u64>,
    #[serde(default)]
    pub(super) prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
pub(super) struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl WireUsage {
    fn usage(&self) -> Usage {
        let cached = self.prompt_tokens_details.as_ref().and_then(|details| details.cached_tokens).unwrap_or(0);
        let mut usage = Usage::new(self.prompt_tokens.unwrap_or(0), self.completion_tokens.unwrap_or(0));
        // A server that counts more cached tokens than it was sent is not believed past the total.
        usage.cache_read_tokens = cached.min(usage.input_tokens);
        usage
    }
}

pub(super) fn from_wire(response: CompletionResponse) -> Result<ChatResponse, ModelError> {
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
    let usage = response.usage.as_ref().map(WireUsage::usage).unwrap_or_default();
    Ok(ChatResponse { content: choice.message.content.unwrap_or_default(), tool_calls, usage, stop_reason })
}

/// Parses the arguments string; a string that is not JSON is kept as is so the tool can report it.
pub(super) fn decode_arguments(arguments: Option<Value>) -> Value {
    match arguments {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(Value::String(raw)) if raw.trim().is_empty() => Value::Object(Default::default()),
        Some(Value::String(raw)) => serde_json::from_str(&raw).unwrap_or(Value::String(raw)),
        Some(other) => other,
    }
}

/// An id for a tool call the server sent without one; the loop needs ids to pair results.
pub(super) fn generate_call_id() -> String {
    format!("call_{:016x}", rand::random::<u64>())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn arguments_decoding() {
        assert_eq!(decode_arguments(Some(json!("{\"a\":1}"))), json!({"a": 1}));
        assert_eq!(decode_arguments(Some(json!("{oops"))), json!("{oops"));
        assert_eq!(decode_arguments(Some(json!({"a": 1}))), json!({"a": 1}));
        assert_eq!(decode_arguments(Some(json!(""))), json!({}));
        assert_eq!(decode_arguments(None), json!({}));
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
    fn cached_tokens_are_a_part_of_the_prompt() {
        let wire: CompletionResponse = serde_json::from_value(json!({
            "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
                      "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0}}
        }))
        .unwrap();
        let usage = from_wire(wire).unwrap().usage;
        assert_eq!(
            usage,
            Usage { input_tokens: 2006, output_tokens: 300, cache_read_tokens: 1920, cache_write_tokens: 0 }
        );
    }

    #[test]
    fn no_choices_is_invalid() {
        let wire: CompletionResponse = serde_json::from_value(json!({"choices": []})).unwrap();
        assert!(matches!(from_wire(wire), Err(ModelError::InvalidResponse(_))));
    }
}
