//! The Messages API request: consecutive messages of one role merged, tool results first in their
//! user message, arguments that are not an object wrapped, a structured output as a forced tool, and
//! images and PDFs as base64 `image` and `document` blocks after a message's text.

use std::borrow::Cow;

use agent_ports::{ChatRequest, FileInput, JsonSchemaFormat, Message, ModelError};
use serde::Serialize;
use serde_json::Value;

use crate::config::PromptCache;
use crate::files::{split, Shown};

/// Description of the tool that carries a structured reply (see [`JsonSchemaFormat`]).
const STRUCTURED_TOOL_DESCRIPTION: &str = "Respond with the structured result.";

#[derive(Serialize)]
pub(super) struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    /// The stable part marked for the cache, then the tail (see [`super::cache::system`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<Value>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
    /// Where the moving breakpoint goes: the last block of the messages the next call will repeat,
    /// as (message, block).
    #[serde(skip)]
    pub(super) breakpoint: Option<(usize, usize)>,
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
    /// For each block, whether it comes from a message the next call repeats (not a transient one).
    #[serde(skip)]
    lasting: Vec<bool>,
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
    Text { text: Cow<'a, str> },
    Image { source: Source },
    Document { source: Source },
    ToolUse { id: &'a str, name: &'a str, input: Value },
    ToolResult { tool_use_id: &'a str, content: ToolResultContent<'a> },
}

/// A tool result's content: its text alone as a string, as before files, or blocks when it shows files.
#[derive(Serialize)]
#[serde(untagged)]
enum ToolResultContent<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
}

#[derive(Serialize)]
struct Source {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'static str,
    data: String,
}

/// A file's block: an `image`, or a `document` for a PDF.
fn file_block<'a>(shown: &Shown<'_>) -> Block<'a> {
    let source = Source { kind: "base64", media_type: shown.file.media_type.mime(), data: shown.base64() };
    if shown.file.media_type.is_image() {
        Block::Image { source }
    } else {
        Block::Document { source }
    }
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
pub(super) fn to_wire<'a>(
    model: &'a str,
    max_tokens: u32,
    request: &'a ChatRequest,
    input: FileInput,
    cache: &PromptCache,
) -> Result<MessagesRequest<'a>, ModelError> {
    let mut messages: Vec<WireMessage<'a>> = Vec::with_capacity(request.messages.len());
    let lasting_count = request.messages.len().saturating_sub(request.transient_messages);
    for (index, message) in request.messages.iter().enumerate() {
        let (role, blocks) = match message {
            Message::User { content, files } => {
                let split = split(content, files, &request.files, input);
                let mut blocks: Vec<Block<'a>> = text_block(split.text).into_iter().collect();
                blocks.extend(split.shown.iter().map(file_block));
                (Role::User, blocks)
            }
            Message::Assistant { content, tool_calls } => {
                let mut blocks: Vec<Block<'a>> = text_block(Cow::Borrowed(content)).into_iter().collect();
                blocks.extend(tool_calls.iter().map(|call| Block::ToolUse {
                    id: &call.id,
                    name: &call.name,
                    input: tool_input(&call.arguments),
                }));
                (Role::Assistant, blocks)
            }
            Message::Tool { tool_call_id, content, files, .. } => {
                let split = split(content, files, &request.files, input);
                let content = if split.shown.is_empty() {
                    ToolResultContent::Text(split.text)
                } else {
                    let mut blocks: Vec<Block<'a>> = text_block(split.text).into_iter().collect();
                    blocks.extend(split.shown.iter().map(file_block));
                    ToolResultContent::Blocks(blocks)
                };
                (Role::User, vec![Block::ToolResult { tool_use_id: tool_call_id, content }])
            }
        };
        // The API rejects empty content, so a message with nothing to say is left out.
        if blocks.is_empty() {
            continue;
        }
        let lasting = vec![index < lasting_count; blocks.len()];
        // Roles must alternate, so consecutive messages of one role (tool results above all) are merged.
        match messages.last_mut() {
            Some(last) if last.role == role => {
                last.content.extend(blocks);
                last.lasting.extend(lasting);
            }
            _ => messages.push(WireMessage { role, content: blocks, lasting }),
        }
    }
    // Within a user message the API wants tool results before any text; the sort is stable.
    for message in messages.iter_mut().filter(|m| m.role == Role::User) {
        let mut blocks: Vec<(Block<'a>, bool)> = message.content.drain(..).zip(message.lasting.drain(..)).collect();
        blocks.sort_by_key(|(block, _)| !matches!(block, Block::ToolResult { .. }));
        (message.content, message.lasting) = blocks.into_iter().unzip();
    }
    let breakpoint =
        messages.iter().enumerate().rev().find_map(|(index, message)| {
            message.lasting.iter().rposition(|lasting| *lasting).map(|block| (index, block))
        });
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
    let system = super::cache::system(&request.system, &request.system_tail, cache);
    Ok(MessagesRequest { model, max_tokens, system, messages, tools, tool_choice, breakpoint })
}

/// The request's JSON body, its cache breakpoints set.
pub(super) fn encode(
    model: &str,
    max_tokens: u32,
    request: &ChatRequest,
    input: FileInput,
    cache: &PromptCache,
) -> Result<Value, ModelError> {
    let wire = to_wire(model, max_tokens, request, input, cache)?;
    let breakpoint = wire.breakpoint;
    let mut body = serde_json::to_value(wire)
        .map_err(|e| ModelError::Config(format!("anthropic: could not encode the request: {e}")))?;
    super::cache::mark(&mut body, breakpoint, cache);
    Ok(body)
}

/// The API rejects empty text blocks.
fn text_block(text: Cow<'_, str>) -> Option<Block<'_>> {
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

#[cfg(test)]
mod tests {
    use agent_ports::ToolCall;
    use serde_json::json;

    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.to_string(), name: "read".to_string(), arguments: json!({"path": id}) }
    }

    fn tool(id: &str) -> Message {
        Message::tool(id, "read", format!("result {id}"))
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
            tools: Default::default(),
            ..Default::default()
        };
        let body =
            serde_json::to_value(to_wire("m", 100, &request, FileInput::TEXT_ONLY, &PromptCache::default()).unwrap())
                .unwrap();
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
}
