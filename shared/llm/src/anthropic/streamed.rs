//! A message assembled from the Messages API's stream events: text blocks handed over as they
//! arrive, tool inputs put together from their JSON fragments, blocks bounded in number.

use agent_ports::{ChatResponse, DeltaSink, ModelError};
use serde_json::Value;

use super::response::{from_wire, MessagesResponse, ResponseBlock, WireUsage, PROVIDER};
use crate::stream::{Assembler, StreamFault};

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
pub(super) struct StreamedMessage {
    blocks: Vec<PartialBlock>,
    usage: WireUsage,
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
    /// Takes the counts of `message_start` or `message_delta`. They are cumulative, and the input and
    /// cache counts are only sometimes repeated in `message_delta`, so each keeps its largest value.
    fn count(&mut self, usage: Option<&Value>) {
        let Some(usage) = usage else { return };
        let fields = [
            ("input_tokens", &mut self.usage.input_tokens),
            ("output_tokens", &mut self.usage.output_tokens),
            ("cache_creation_input_tokens", &mut self.usage.cache_creation_input_tokens),
            ("cache_read_input_tokens", &mut self.usage.cache_read_input_tokens),
        ];
        for (field, count) in fields {
            if let Some(tokens) = usage.get(field).and_then(Value::as_u64) {
                *count = (*count).max(tokens);
            }
        }
    }

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
            "message_start" => self.count(event.pointer("/message/usage")),
            "content_block_start" => self.start_block(&event, sink)?,
            "content_block_delta" => self.block_delta(&event, sink)?,
            "content_block_stop" => self.stop_block(&event)?,
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                self.count(event.pointer("/usage"));
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
        from_wire(MessagesResponse { content, usage: Some(self.usage), stop_reason: self.stop_reason }, None)
    }
}
