//! A Converse reply as a core response: text, tool calls, usage, stop reason, a structured output's tool input.

use super::*;

/// One block of a reply the loop has a use for.
pub(super) enum Block {
    Text(String),
    ToolUse { id: String, name: String, input: Value },
}

/// A reply in a provider-neutral shape, from `Converse` or assembled from `ConverseStream`.
pub(super) struct Reply {
    pub(super) blocks: Vec<Block>,
    pub(super) stop: Option<wire::StopReason>,
    pub(super) usage: Usage,
}

/// Bedrock's `inputTokens` leaves out the cache's reads and writes; the core's input counts them.
pub(super) fn usage(tokens: Option<wire::TokenUsage>) -> Usage {
    let count = |n: Option<i32>| n.and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
    tokens
        .map(|t| {
            let (read, write) = (count(t.cache_read_input_tokens), count(t.cache_write_input_tokens));
            Usage {
                input_tokens: count(Some(t.input_tokens)) + read + write,
                output_tokens: count(Some(t.output_tokens)),
                cache_read_tokens: read,
                cache_write_tokens: write,
            }
        })
        .unwrap_or_default()
}

impl Reply {
    pub(super) fn from_output(
        output: Option<ConverseOutput>,
        stop: wire::StopReason,
        tokens: Option<wire::TokenUsage>,
    ) -> Result<Reply, ModelError> {
        let message = match output {
            Some(ConverseOutput::Message(message)) => message,
            _ => return Err(ModelError::InvalidResponse(format!("{PROVIDER}: the response has no output message"))),
        };
        let mut blocks = Vec::with_capacity(message.content.len());
        for block in message.content {
            match block {
                ContentBlock::Text(text) => blocks.push(Block::Text(text)),
                ContentBlock::ToolUse(call) => blocks.push(Block::ToolUse {
                    id: call.tool_use_id,
                    name: call.name,
                    input: from_document(call.input),
                }),
                // Reasoning, citations and blocks added to the API later.
                _ => {}
            }
        }
        Ok(Reply { blocks, stop: Some(stop), usage: usage(tokens) })
    }

    /// The core's response. With `structured` (the name of the forced structured-output tool), that
    /// tool's input becomes the reply's `content` as a JSON document, is not reported as a tool call,
    /// and the call counts as a finished turn; any text around it is dropped, as `content` must be the JSON.
    pub(super) fn into_response(self, structured: Option<&str>) -> Result<ChatResponse, ModelError> {
        let mut content = String::new();
        let mut structured_input = None;
        let mut tool_calls = Vec::new();
        for block in self.blocks {
            match block {
                // Text split into several blocks is one text, so no separator.
                Block::Text(text) => content.push_str(&text),
                Block::ToolUse { name, input, .. }
                    if structured == Some(name.as_str()) && structured_input.is_none() =>
                {
                    structured_input = Some(object_or_empty(input));
                }
                Block::ToolUse { id, name, input } => {
                    if id.is_empty() || name.is_empty() {
                        return Err(ModelError::InvalidResponse(format!(
                            "{PROVIDER}: a toolUse block without its id or name"
                        )));
                    }
                    tool_calls.push(ToolCall { id, name, arguments: object_or_empty(input) });
                }
            }
        }
        let mut stop_reason = structured::stop_reason(self.stop.as_ref().map(|stop| stop.as_str()));
        if let Some(name) = structured {
            let raw_stop = self.stop.as_ref().map_or("none", |stop| stop.as_str());
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
        Ok(ChatResponse { content, tool_calls, usage: self.usage, stop_reason })
    }
}
