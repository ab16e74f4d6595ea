//! A ConverseStream reply assembled from its events, deltas handed on as they arrive, bounded in blocks and bytes.

use super::*;

/// A content block as its deltas arrive. Text blocks have no start event: their first delta opens them.
pub(super) enum PartialBlock {
    Missing,
    Text(String),
    /// A tool call: its input arrives as pieces of JSON, parsed at the end.
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    /// Blocks the loop has no use for, such as reasoning.
    Other,
}

/// A reply assembled from `ConverseStream` events; `stop` is set by `messageStop`.
#[derive(Default)]
pub(super) struct StreamedReply {
    pub(super) blocks: Vec<PartialBlock>,
    pub(super) stop: Option<wire::StopReason>,
    pub(super) usage: Option<wire::TokenUsage>,
    /// Text and tool input received so far, bounded by [`MAX_STREAM_BYTES`].
    pub(super) bytes: usize,
}

pub(super) fn invalid(message: impl std::fmt::Display) -> ModelError {
    ModelError::InvalidResponse(format!("{PROVIDER}: {message}"))
}

impl StreamedReply {
    pub(super) fn block(&mut self, index: i32) -> Result<&mut PartialBlock, ModelError> {
        let index = usize::try_from(index).map_err(|_| invalid(format!("a content block has index {index}")))?;
        if index >= MAX_STREAMED_BLOCKS {
            return Err(invalid(format!("a content block has index {index}, over {MAX_STREAMED_BLOCKS}")));
        }
        if self.blocks.len() <= index {
            self.blocks.resize_with(index + 1, || PartialBlock::Missing);
        }
        Ok(&mut self.blocks[index])
    }

    pub(super) fn count(&mut self, piece: &str) -> Result<(), ModelError> {
        self.bytes += piece.len();
        if self.bytes > MAX_STREAM_BYTES {
            return Err(invalid(format!("the streamed reply is larger than {MAX_STREAM_BYTES} bytes")));
        }
        Ok(())
    }

    /// Takes one event, handing any text in it to `sink`.
    pub(super) fn event(&mut self, event: ConverseStreamOutput, sink: &dyn DeltaSink) -> Result<(), ModelError> {
        if self.stop.is_some() && !matches!(event, ConverseStreamOutput::Metadata(_)) {
            return Err(invalid("content after messageStop"));
        }
        match event {
            ConverseStreamOutput::ContentBlockStart(start) => {
                let slot = self.block(start.content_block_index)?;
                if !matches!(slot, PartialBlock::Missing) {
                    return Err(invalid(format!("content block {} started twice", start.content_block_index)));
                }
                *slot = match start.start {
                    Some(ContentBlockStart::ToolUse(tool)) => {
                        if tool.tool_use_id.is_empty() || tool.name.is_empty() {
                            return Err(invalid("a streamed toolUse block without its id or name"));
                        }
                        PartialBlock::ToolUse { id: tool.tool_use_id, name: tool.name, json: String::new() }
                    }
                    _ => PartialBlock::Other,
                };
            }
            ConverseStreamOutput::ContentBlockDelta(delta) => {
                let index = delta.content_block_index;
                match delta.delta {
                    Some(ContentBlockDelta::Text(text)) => {
                        self.count(&text)?;
                        let slot = self.block(index)?;
                        if matches!(slot, PartialBlock::Missing) {
                            *slot = PartialBlock::Text(String::new());
                        }
                        let PartialBlock::Text(content) = slot else {
                            return Err(invalid(format!("a text delta that does not fit content block {index}")));
                        };
                        if !text.is_empty() {
                            sink.delta(&text);
                            content.push_str(&text);
                        }
                    }
                    Some(ContentBlockDelta::ToolUse(piece)) => {
                        self.count(&piece.input)?;
                        let PartialBlock::ToolUse { json, .. } = self.block(index)? else {
                            return Err(invalid(format!("a toolUse delta that does not fit content block {index}")));
                        };
                        json.push_str(&piece.input);
                    }
                    // Reasoning, citations, and deltas added to the API later.
                    _ => {
                        let slot = self.block(index)?;
                        if matches!(slot, PartialBlock::Missing) {
                            *slot = PartialBlock::Other;
                        }
                    }
                }
            }
            ConverseStreamOutput::MessageStop(stop) => self.stop = Some(stop.stop_reason),
            ConverseStreamOutput::Metadata(metadata) if metadata.usage.is_some() => self.usage = metadata.usage,
            // `messageStart`, `contentBlockStop`, and event types added to the API later.
            _ => {}
        }
        Ok(())
    }

    pub(super) fn finish(self) -> Result<Reply, ModelError> {
        let mut blocks = Vec::with_capacity(self.blocks.len());
        for block in self.blocks {
            match block {
                PartialBlock::Text(text) => blocks.push(Block::Text(text)),
                PartialBlock::ToolUse { id, name, json } => {
                    // No input at all means no arguments.
                    let input = if json.trim().is_empty() {
                        Value::Object(Map::new())
                    } else {
                        serde_json::from_str(&json)
                            .map_err(|e| invalid(format!("a streamed tool input is not JSON: {e}")))?
                    };
                    blocks.push(Block::ToolUse { id, name, input });
                }
                PartialBlock::Missing | PartialBlock::Other => {}
            }
        }
        Ok(Reply { blocks, stop: self.stop, usage: usage(self.usage) })
    }
}
