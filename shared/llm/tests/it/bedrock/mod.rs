//! The Bedrock provider against a scripted Converse server on 127.0.0.1 that speaks the real wire
//! format: JSON bodies on `POST /model/{modelId}/converse`, restJson errors, and on
//! `/converse-stream` the binary `application/vnd.amazon.eventstream` framing, signed requests in.

use std::time::Duration;

use agent_ports::{ChatModel, ChatRequest, ChatResponse, Message, ModelError, StopReason, ToolCall, ToolSpec, Usage};
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_bedrockruntime::config::{Credentials, SharedCredentialsProvider};
use aws_smithy_types::event_stream::{Header, HeaderValue, Message as Frame};
use llm::{BedrockModel, LlmConfig, ProviderKind};
use serde_json::{json, Value};

use crate::fixtures::{plan_format, request_with_system, Collect};
use local_stack::model_server::{ok, status, ModelServer, Piece, Reply};

const MODEL: &str = "anthropic.claude-3-5-sonnet-20240620-v1:0";
const SECRET: &str = "test-secret-access-key-0123456789";

// ---- The wire format ----

/// A `ConverseStream` reply: its event-stream frames sent piece by piece.
fn frames(pieces: Vec<Piece>) -> Reply {
    Reply::stream("application/vnd.amazon.eventstream", pieces)
}

/// An error status with its error type (`x-amzn-ErrorType`) and message, as Bedrock sends them.
fn error(code: u16, kind: &str, message: &str) -> Reply {
    let kind = format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/");
    status(code, json!({ "message": message })).header("x-amzn-errortype", &kind)
}

fn frame(headers: [(&'static str, &'static str); 3], payload: &Value) -> Vec<u8> {
    let mut message = Frame::new(payload.to_string().into_bytes());
    for (name, value) in headers {
        message = message.add_header(Header::new(name, HeaderValue::String(value.into())));
    }
    let mut bytes = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut bytes).expect("encode a frame");
    bytes
}

/// An event frame: its `:event-type` and JSON payload.
fn event(kind: &'static str, payload: Value) -> Piece {
    Piece::Bytes(frame(
        [(":message-type", "event"), (":event-type", kind), (":content-type", "application/json")],
        &payload,
    ))
}

/// An exception frame: its `:exception-type` (such as `throttlingException`) and message.
fn exception(kind: &'static str, message: &str) -> Piece {
    Piece::Bytes(frame(
        [(":message-type", "exception"), (":exception-type", kind), (":content-type", "application/json")],
        &json!({ "message": message }),
    ))
}

fn config(server: &ModelServer, model: &str) -> LlmConfig {
    let mut config = crate::fixtures::config(ProviderKind::Bedrock, server.endpoint(), model);
    config.max_tokens = 256;
    config
}

fn bedrock(server: &ModelServer) -> BedrockModel {
    BedrockModel::from_sdk_config(&sdk_config(), &config(server, MODEL)).unwrap()
}

/// Static credentials and a region, given to the SDK directly rather than through the process environment.
pub(crate) fn sdk_config() -> SdkConfig {
    SdkConfig::builder()
        .region(Region::new("us-east-1"))
        .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
            "AKIDTESTBEDROCK",
            SECRET,
            None,
            None,
            "test",
        )))
        .behavior_version(BehaviorVersion::latest())
        .http_client(aws_http::http_client())
        .build()
}

// ---- Fixtures ----

fn read_tool() -> ToolSpec {
    ToolSpec {
        name: "read_file".to_string(),
        description: "Read a file from the workspace.".to_string(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    }
}

fn call(id: &str, path: &str) -> ToolCall {
    ToolCall { id: id.to_string(), name: "read_file".to_string(), arguments: json!({ "path": path }) }
}

fn result(id: &str, content: &str) -> Message {
    Message::tool(id, "read_file", content)
}

/// A conversation with every kind of message: system prompt, user, assistant text plus tool calls,
/// and two tool results.
fn full_request() -> ChatRequest {
    ChatRequest {
        system: "You are terse.".to_string(),
        messages: vec![
            Message::user("Summarise notes.md and todo.md"),
            Message::Assistant {
                content: "Reading both.".to_string(),
                tool_calls: vec![call("tooluse_1", "notes.md"), call("tooluse_2", "todo.md")],
            },
            result("tooluse_1", "# Notes"),
            result("tooluse_2", "- [ ] ship"),
        ],
        tools: vec![read_tool()].into(),
        ..Default::default()
    }
}

/// A `Converse` reply with these content blocks.
fn converse(content: Value, stop_reason: &str) -> Reply {
    ok(json!({
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason,
        "usage": {"inputTokens": 21, "outputTokens": 9, "totalTokens": 30},
        "metrics": {"latencyMs": 120}
    }))
}

fn converse_text(text: &str) -> Reply {
    converse(json!([{ "text": text }]), "end_turn")
}

fn throttled() -> Reply {
    error(429, "ThrottlingException", "Too many requests, please wait before trying again.")
}

/// The path the SDK sends for `model` and `operation`, decoded for comparison.
fn decoded(path: &str) -> String {
    let mut out = Vec::new();
    let bytes = path.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            out.push(u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap(), 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

fn text_delta(index: u64, text: &str) -> Piece {
    event("contentBlockDelta", json!({"contentBlockIndex": index, "delta": {"text": text}}))
}

fn stream_end(stop_reason: &str) -> Vec<Piece> {
    vec![
        event("messageStop", json!({ "stopReason": stop_reason })),
        event(
            "metadata",
            json!({"usage": {"inputTokens": 40, "outputTokens": 12, "totalTokens": 52}, "metrics": {"latencyMs": 80}}),
        ),
    ]
}

fn stream_text(texts: &[&str]) -> Reply {
    let mut pieces = vec![event("messageStart", json!({"role": "assistant"}))];
    pieces.extend(texts.iter().map(|text| text_delta(0, text)));
    pieces.push(event("contentBlockStop", json!({"contentBlockIndex": 0})));
    pieces.extend(stream_end("end_turn"));
    frames(pieces)
}

fn assert_rejected(result: Result<ChatResponse, ModelError>, expected_status: u16, expected: &str) {
    match result {
        Err(ModelError::Rejected { status, message }) => {
            assert_eq!(status, expected_status, "{message}");
            assert!(message.contains(expected), "{message}");
            assert!(!message.contains(SECRET), "{message}");
        }
        other => panic!("expected Rejected({expected_status}), got {other:?}"),
    }
}

mod converse;
mod stream;
