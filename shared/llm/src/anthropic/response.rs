//! A Messages API reply back in core types: text joined, tool uses as tool calls (a structured
//! output's forced tool as the reply's JSON content), usage and stop reason.

use agent_ports::{ChatResponse, ModelError, ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;

use crate::structured::{self, object_or_empty};

/// The provider's name in logs and errors.
pub(super) const PROVIDER: &str = "anthropic";

#[derive(Deserialize)]
pub(super) struct MessagesResponse {
    #[serde(default)]
    pub(super) content: Vec<ResponseBlock>,
    #[serde(default)]
    pub(super) usage: Option<WireUsage>,
    #[serde(default)]
    pub(super) stop_reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ResponseBlock {
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

/// Anthropic's `input_tokens` counts only the input neither read from nor written to the cache.
#[derive(Deserialize, Default)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub(super) input_tokens: u64,
    #[serde(default)]
    pub(super) output_tokens: u64,
    #[serde(default)]
    pub(super) cache_creation_input_tokens: u64,
    #[serde(default)]
    pub(super) cache_read_input_tokens: u64,
}

impl WireUsage {
    /// As the core counts it: the input is every input token, the cache's included.
    pub(super) fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens,
            output_tokens: self.output_tokens,
            cache_read_tokens: self.cache_read_input_tokens,
            cache_write_tokens: self.cache_creation_input_tokens,
        }
    }
}

/// Converts a reply. With `structured` (the name of the forced structured-output tool), that tool's
/// input becomes the reply's `content` as a JSON document, is not reported as a tool call, and the
/// call counts as a finished turn; any text around it is dropped, as `content` must be the JSON.
pub(super) fn from_wire(response: MessagesResponse, structured: Option<&str>) -> Result<ChatResponse, ModelError> {
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
    let usage = response.usage.as_ref().map(WireUsage::usage).unwrap_or_default();
    Ok(ChatResponse { content, tool_calls, usage, stop_reason })
}

#[cfg(test)]
mod tests {
    use agent_ports::StopReason;
    use serde_json::json;

    use super::*;

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
    fn cache_reads_and_writes_are_parts_of_the_input() {
        let wire: MessagesResponse = serde_json::from_value(json!({
            "content": [{"type": "text", "text": "ok"}],
            "usage": {"input_tokens": 5, "cache_creation_input_tokens": 20, "cache_read_input_tokens": 100,
                      "output_tokens": 3}
        }))
        .unwrap();
        let usage = from_wire(wire, None).unwrap().usage;
        assert_eq!(
            usage,
            Usage { input_tokens: 125, output_tokens: 3, cache_read_tokens: 100, cache_write_tokens: 20 }
        );
        assert_eq!(usage.uncached_input_tokens(), 5);
    }
}
