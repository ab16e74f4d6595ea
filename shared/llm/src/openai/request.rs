//! The Chat Completions request as the server wants it: messages with their tool calls and results,
//! tools, and a structured output's JSON schema (strict only when the schema is closed).

use agent_ports::{ChatRequest, JsonSchemaFormat, Message};
use serde::Serialize;
use serde_json::Value;

#[derive(Serialize)]
pub(super) struct CompletionRequest<'a> {
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

pub(super) fn to_wire<'a>(
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

#[cfg(test)]
mod tests {
    use agent_ports::Message;
    use serde_json::json;

    use super::*;

    #[test]
    fn preserved_raw_arguments_round_trip() {
        assert_eq!(encode_arguments(&json!("{oops")), "{oops");
        assert_eq!(encode_arguments(&json!({"a": [1, 2]})), r#"{"a":[1,2]}"#);
    }

    #[test]
    fn official_api_uses_max_completion_tokens() {
        let request = ChatRequest {
            system: String::new(),
            messages: vec![Message::user("hi")],
            tools: Default::default(),
            ..Default::default()
        };
        let body = serde_json::to_value(to_wire("m", &request, None, Some(10))).unwrap();
        assert_eq!(
            body,
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 10})
        );
    }
}
