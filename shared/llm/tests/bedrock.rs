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

mod support;
use support::server::{ok, status, Answer, Piece, Server};
use support::{plan_format, request_with_system, Collect};

const MODEL: &str = "anthropic.claude-3-5-sonnet-20240620-v1:0";
const SECRET: &str = "test-secret-access-key-0123456789";

// ---- The wire format ----

/// A `ConverseStream` reply: its event-stream frames sent piece by piece.
fn frames(pieces: Vec<Piece>) -> Answer {
    Answer::stream("application/vnd.amazon.eventstream", pieces)
}

/// An error status with its error type (`x-amzn-ErrorType`) and message, as Bedrock sends them.
fn error(code: u16, kind: &str, message: &str) -> Answer {
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

fn config(server: &Server, model: &str) -> LlmConfig {
    let mut config = support::config(ProviderKind::Bedrock, server.base.clone(), model);
    config.max_tokens = 256;
    config
}

fn bedrock(server: &Server) -> BedrockModel {
    BedrockModel::from_sdk_config(&sdk_config(), &config(server, MODEL)).unwrap()
}

/// Static credentials and a region, given to the SDK directly rather than through the process environment.
fn sdk_config() -> SdkConfig {
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
    Message::Tool { tool_call_id: id.to_string(), name: "read_file".to_string(), content: content.to_string() }
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
fn converse(content: Value, stop_reason: &str) -> Answer {
    ok(json!({
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason,
        "usage": {"inputTokens": 21, "outputTokens": 9, "totalTokens": 30},
        "metrics": {"latencyMs": 120}
    }))
}

fn converse_text(text: &str) -> Answer {
    converse(json!([{ "text": text }]), "end_turn")
}

fn throttled() -> Answer {
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

fn stream_text(texts: &[&str]) -> Answer {
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

// ---- Converse ----

#[tokio::test]
async fn converse_request_wire_shape_and_signature() {
    let server = Server::start(vec![converse(
        json!([
            {"text": "Both read. "},
            {"toolUse": {"toolUseId": "tooluse_3", "name": "read_file", "input": {"path": "more.md", "n": [1, 2.5]}}},
            {"reasoningContent": {"reasoningText": {"text": "ignored"}}}
        ]),
        "tool_use",
    )])
    .await;
    let response = bedrock(&server).complete(&full_request()).await.unwrap();

    let received = server.requests();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].path, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse");
    let authorization = received[0].headers["authorization"].to_str().unwrap();
    assert!(authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDTESTBEDROCK/"), "{authorization}");
    assert!(authorization.contains("/us-east-1/bedrock/aws4_request"), "{authorization}");
    assert!(!authorization.contains(SECRET));
    assert_eq!(
        received[0].body,
        json!({
            "system": [{"text": "You are terse."}],
            "messages": [
                {"role": "user", "content": [{"text": "Summarise notes.md and todo.md"}]},
                {"role": "assistant", "content": [
                    {"text": "Reading both."},
                    {"toolUse": {"toolUseId": "tooluse_1", "name": "read_file", "input": {"path": "notes.md"}}},
                    {"toolUse": {"toolUseId": "tooluse_2", "name": "read_file", "input": {"path": "todo.md"}}}
                ]},
                {"role": "user", "content": [
                    {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "# Notes"}]}},
                    {"toolResult": {"toolUseId": "tooluse_2", "content": [{"text": "- [ ] ship"}]}}
                ]}
            ],
            "toolConfig": {"tools": [{"toolSpec": {
                "name": "read_file",
                "description": "Read a file from the workspace.",
                "inputSchema": {"json": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
            }}]},
            "inferenceConfig": {"maxTokens": 256}
        })
    );

    assert_eq!(response.content, "Both read. ");
    assert_eq!(
        response.tool_calls,
        [ToolCall {
            id: "tooluse_3".into(),
            name: "read_file".into(),
            arguments: json!({"path": "more.md", "n": [1, 2.5]})
        }]
    );
    assert_eq!(response.usage, Usage { input_tokens: 21, output_tokens: 9 });
    assert_eq!(response.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn stop_reasons_map_to_the_cores() {
    let cases = [
        ("end_turn", StopReason::EndTurn),
        ("stop_sequence", StopReason::EndTurn),
        ("max_tokens", StopReason::MaxTokens),
        ("guardrail_intervened", StopReason::Other),
        ("content_filtered", StopReason::Other),
        ("something_new", StopReason::Other),
    ];
    let server = Server::start(cases.iter().map(|(wire, _)| converse(json!([{"text": "x"}]), wire)).collect()).await;
    let model = bedrock(&server);
    for (wire, expected) in cases {
        assert_eq!(model.complete(&request_with_system()).await.unwrap().stop_reason, expected, "{wire}");
    }
}

#[tokio::test]
async fn structured_output_is_a_forced_tool_whose_input_is_the_reply() {
    let server = Server::start(vec![converse(
        json!([
            {"text": "Here is the plan."},
            {"toolUse": {"toolUseId": "tooluse_p", "name": "plan", "input": {"steps": ["read", "write"]}}}
        ]),
        "tool_use",
    )])
    .await;
    let request = ChatRequest { response_format: Some(plan_format()), ..full_request() };
    let response = bedrock(&server).complete(&request).await.unwrap();

    let body = &server.requests()[0].body;
    assert_eq!(body["toolConfig"]["toolChoice"], json!({"tool": {"name": "plan"}}));
    let tools = body["toolConfig"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2, "the caller's tools stay listed: {tools:?}");
    assert_eq!(tools[1]["toolSpec"]["name"], "plan");
    assert_eq!(tools[1]["toolSpec"]["inputSchema"]["json"], plan_format().schema);

    assert_eq!(serde_json::from_str::<Value>(&response.content).unwrap(), json!({"steps": ["read", "write"]}));
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.stop_reason, StopReason::EndTurn);
}

#[tokio::test]
async fn a_forced_tool_the_reply_lacks_is_an_invalid_response() {
    let server = Server::start(vec![converse(json!([{"text": "no tool"}]), "end_turn")]).await;
    let request = ChatRequest { response_format: Some(plan_format()), ..request_with_system() };
    match bedrock(&server).complete(&request).await {
        Err(ModelError::InvalidResponse(message)) => assert!(message.contains("\"plan\""), "{message}"),
        other => panic!("expected InvalidResponse, got {other:?}"),
    }
}

#[tokio::test]
async fn throttling_and_unavailability_are_retried_then_succeed() {
    let server =
        Server::start(vec![throttled(), error(503, "ServiceUnavailableException", "busy"), converse_text("finally")])
            .await;
    let response = bedrock(&server).complete(&request_with_system()).await.unwrap();
    assert_eq!(response.content, "finally");
    assert_eq!(server.requests().len(), 3, "the policy's attempts, not the SDK's");
}

#[tokio::test]
async fn retries_stop_at_the_policys_attempts() {
    let server = Server::start(vec![
        error(429, "ModelNotReadyException", "loading"),
        throttled(),
        error(500, "InternalServerException", "oops"),
        converse_text("never"),
    ])
    .await;
    match bedrock(&server).complete(&request_with_system()).await {
        Err(ModelError::Unavailable { attempts, message }) => {
            assert_eq!(attempts, 3);
            assert!(message.contains("InternalServerException: oops"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn validation_and_access_errors_are_rejected_at_once() {
    let server = Server::start(vec![
        error(400, "ValidationException", "The model returned the following errors: bad input"),
        error(403, "AccessDeniedException", "You don't have access to the model"),
        error(404, "ResourceNotFoundException", "Model not found"),
    ])
    .await;
    let model = bedrock(&server);
    assert_rejected(model.complete(&request_with_system()).await, 400, "ValidationException: The model returned");
    assert_eq!(server.requests().len(), 1, "no retry on a validation error");
    assert_rejected(model.complete(&request_with_system()).await, 403, "AccessDeniedException");
    assert_rejected(model.complete(&request_with_system()).await, 404, "ResourceNotFoundException");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_slow_attempt_times_out_and_is_retried() {
    let server =
        Server::start(vec![converse_text("too late").delayed(Duration::from_secs(3)), converse_text("in time")]).await;
    let mut config = config(&server, MODEL);
    config.timeout = Duration::from_millis(500);
    let model = BedrockModel::from_sdk_config(&sdk_config(), &config).unwrap();
    assert_eq!(model.complete(&request_with_system()).await.unwrap().content, "in time");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_per_call_model_overrides_the_configured_one() {
    let server = Server::start(vec![converse_text("planned"), converse_text("default")]).await;
    let model = bedrock(&server);
    let planner =
        ChatRequest { model: Some("us.anthropic.claude-sonnet-4-20250514-v1:0".into()), ..request_with_system() };
    assert_eq!(model.complete(&planner).await.unwrap().content, "planned");
    let blank = ChatRequest { model: Some(" ".into()), ..request_with_system() };
    assert_eq!(model.complete(&blank).await.unwrap().content, "default");
    let paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse",
            "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"
        ]
    );
}

#[tokio::test]
async fn an_inference_profile_arn_is_the_model_id() {
    let arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0";
    let server = Server::start(vec![converse_text("via profile")]).await;
    let model = BedrockModel::from_sdk_config(&sdk_config(), &config(&server, arn)).unwrap();
    assert_eq!(model.complete(&request_with_system()).await.unwrap().content, "via profile");
    let path = &server.requests()[0].path;
    assert!(!path[1..].contains("arn:aws"), "the id is one encoded path segment: {path}");
    assert_eq!(decoded(path), format!("/model/{arn}/converse"));
}

#[tokio::test]
async fn malformed_replies_are_errors_not_panics() {
    let server = Server::start(vec![
        ok(json!({"stopReason": "end_turn", "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}})),
        ok(json!("not an object")),
        converse(json!([{"toolUse": {"toolUseId": "", "name": "read_file", "input": {}}}]), "tool_use"),
    ])
    .await;
    let model = bedrock(&server);
    for _ in 0..3 {
        match model.complete(&request_with_system()).await {
            Err(ModelError::InvalidResponse(_)) => {}
            other => panic!("expected InvalidResponse, got {other:?}"),
        }
    }
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_missing_region_is_a_config_error() {
    let sdk = SdkConfig::builder().behavior_version(BehaviorVersion::latest()).build();
    let config = LlmConfig::new(ProviderKind::Bedrock, "", MODEL);
    match BedrockModel::from_sdk_config(&sdk, &config) {
        Err(ModelError::Config(message)) => assert!(message.contains("AWS_REGION"), "{message}"),
        Err(other) => panic!("expected a Config error, got {other:?}"),
        Ok(_) => panic!("a client without a region must not build"),
    }
}

// ---- ConverseStream ----

#[tokio::test]
async fn converse_stream_hands_deltas_over_as_they_arrive() {
    let mut pieces = vec![
        event("messageStart", json!({"role": "assistant"})),
        text_delta(0, "Let me "),
        // The server sends nothing more until the client has shown the first piece.
        Piece::AwaitFirstDelta,
        text_delta(0, "look."),
        event("contentBlockStop", json!({"contentBlockIndex": 0})),
        event(
            "contentBlockStart",
            json!({"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "tooluse_s", "name": "read_file"}}}),
        ),
        event("contentBlockDelta", json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{\"path\":"}}})),
        event("contentBlockDelta", json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "\"a.md\"}"}}})),
        event("contentBlockStop", json!({"contentBlockIndex": 1})),
    ];
    pieces.extend(stream_end("tool_use"));
    let server = Server::start(vec![frames(pieces)]).await;
    let sink = Collect::new(server.first_delta.clone());
    let response = bedrock(&server).complete_streaming(&full_request(), &sink).await.unwrap();

    assert_eq!(sink.deltas(), ["Let me ", "look."]);
    assert_eq!(response.content, "Let me look.");
    assert_eq!(
        response.tool_calls,
        [ToolCall { id: "tooluse_s".into(), name: "read_file".into(), arguments: json!({"path": "a.md"}) }]
    );
    assert_eq!(response.usage, Usage { input_tokens: 40, output_tokens: 12 });
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    let received = server.requests();
    assert_eq!(received[0].path, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream");
    assert_eq!(received[0].body["inferenceConfig"], json!({"maxTokens": 256}));
    assert_eq!(received[0].body["messages"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn stream_failures_before_the_first_delta_are_retried() {
    let server = Server::start(vec![
        throttled(),
        frames(vec![
            event("messageStart", json!({"role": "assistant"})),
            exception("modelStreamErrorException", "the model stumbled"),
        ]),
        frames(vec![event("messageStart", json!({"role": "assistant"})), Piece::Drop]),
        stream_text(&["at ", "last"]),
    ])
    .await;
    let mut config = config(&server, MODEL);
    config.max_attempts = 4;
    let model = BedrockModel::from_sdk_config(&sdk_config(), &config).unwrap();
    let sink = Collect::new(server.first_delta.clone());
    let response = model.complete_streaming(&request_with_system(), &sink).await.unwrap();
    assert_eq!(sink.deltas(), ["at ", "last"]);
    assert_eq!(response.content, "at last");
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn stream_failures_after_the_first_delta_are_final() {
    let server = Server::start(vec![
        frames(vec![text_delta(0, "Hal"), Piece::AwaitFirstDelta, exception("throttlingException", "slow down")]),
        frames(vec![text_delta(0, "Hal"), Piece::AwaitFirstDelta, Piece::Drop]),
        stream_text(&["never sent"]),
    ])
    .await;
    let model = bedrock(&server);
    for expected_requests in [1, 2] {
        let sink = Collect::new(server.first_delta.clone());
        match model.complete_streaming(&request_with_system(), &sink).await {
            Err(ModelError::Unavailable { attempts, message }) => {
                assert_eq!(attempts, 1);
                assert!(message.contains("after the reply began"), "{message}");
            }
            other => panic!("expected Unavailable after the reply began, got {other:?}"),
        }
        assert_eq!(sink.deltas(), ["Hal"]);
        assert_eq!(server.requests().len(), expected_requests, "no second attempt once text was shown");
    }
}

#[tokio::test]
async fn stream_rejections_are_final() {
    let server = Server::start(vec![
        error(400, "ValidationException", "messages: bad"),
        frames(vec![exception("validationException", "input too long")]),
    ])
    .await;
    let model = bedrock(&server);
    let sink = Collect::new(server.first_delta.clone());
    assert_rejected(
        model.complete_streaming(&request_with_system(), &sink).await,
        400,
        "ValidationException: messages",
    );
    assert_rejected(model.complete_streaming(&request_with_system(), &sink).await, 400, "input too long");
    assert_eq!(server.requests().len(), 2);
    assert!(sink.deltas().is_empty());
}

#[tokio::test]
async fn malformed_streams_are_errors_not_panics() {
    let tool_start = |index: u64| {
        event(
            "contentBlockStart",
            json!({"contentBlockIndex": index, "start": {"toolUse": {"toolUseId": "t", "name": "read_file"}}}),
        )
    };
    let cases: Vec<(Vec<Piece>, &str)> = vec![
        (
            vec![event("contentBlockDelta", json!({"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{}"}}}))],
            "toolUse delta",
        ),
        (vec![text_delta(64, "far")], "index 64"),
        (vec![tool_start(0), tool_start(0)], "started twice"),
        (vec![tool_start(0), text_delta(0, "x")], "text delta"),
        (
            {
                let mut pieces = vec![
                    tool_start(0),
                    event(
                        "contentBlockDelta",
                        json!({"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{oops"}}}),
                    ),
                ];
                pieces.extend(stream_end("tool_use"));
                pieces
            },
            "not JSON",
        ),
        (vec![event("contentBlockDelta", json!({"contentBlockIndex": "zero"}))], "ContentBlockDelta"),
    ];
    for (pieces, expected) in cases {
        let server = Server::start(vec![frames(pieces)]).await;
        let sink = Collect::new(server.first_delta.clone());
        match bedrock(&server).complete_streaming(&request_with_system(), &sink).await {
            Err(ModelError::InvalidResponse(message)) => assert!(message.contains(expected), "{expected}: {message}"),
            other => panic!("{expected}: expected InvalidResponse, got {other:?}"),
        }
        assert_eq!(server.requests().len(), 1, "{expected}: not retried");
    }
}

#[tokio::test]
async fn a_stream_without_its_end_is_retried_and_then_unavailable() {
    let server = Server::start(vec![
        frames(vec![event("messageStart", json!({"role": "assistant"}))]),
        frames(vec![Piece::Bytes(vec![0, 0, 0, 64, 0, 0])]),
        frames(vec![]),
    ])
    .await;
    let sink = Collect::new(server.first_delta.clone());
    match bedrock(&server).complete_streaming(&request_with_system(), &sink).await {
        Err(ModelError::Unavailable { attempts, message }) => {
            assert_eq!(attempts, 3);
            assert!(message.contains("ended before the reply was complete"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn structured_output_streams_as_one_buffered_delta() {
    let server = Server::start(vec![converse(
        json!([{"toolUse": {"toolUseId": "tooluse_p", "name": "plan", "input": {"steps": ["read"]}}}]),
        "tool_use",
    )])
    .await;
    let sink = Collect::new(server.first_delta.clone());
    let request = ChatRequest { response_format: Some(plan_format()), ..request_with_system() };
    let response = bedrock(&server).complete_streaming(&request, &sink).await.unwrap();
    assert_eq!(sink.deltas(), [r#"{"steps":["read"]}"#]);
    assert_eq!(response.content, r#"{"steps":["read"]}"#);
    assert!(server.requests()[0].path.ends_with("/converse"));
}

#[tokio::test]
async fn the_timeout_bounds_the_silence_between_events_not_the_whole_stream() {
    let slow = |texts: &[&'static str]| {
        let mut pieces = vec![event("messageStart", json!({"role": "assistant"}))];
        for text in texts {
            pieces.push(Piece::Pause(Duration::from_millis(300)));
            pieces.push(text_delta(0, text));
        }
        pieces.extend(stream_end("end_turn"));
        frames(pieces)
    };
    let server = Server::start(vec![
        // Silent for longer than the timeout before anything was shown: another attempt.
        frames(vec![event("messageStart", json!({"role": "assistant"})), Piece::Pause(Duration::from_secs(3))]),
        // Longer in all than the timeout, but never silent for that long.
        slow(&["one ", "two ", "three ", "four"]),
    ])
    .await;
    let mut config = config(&server, MODEL);
    config.timeout = Duration::from_millis(800);
    let model = BedrockModel::from_sdk_config(&sdk_config(), &config).unwrap();
    let sink = Collect::new(server.first_delta.clone());
    let response = model.complete_streaming(&request_with_system(), &sink).await.unwrap();
    assert_eq!(response.content, "one two three four");
    assert_eq!(sink.deltas().len(), 4);
    assert_eq!(server.requests().len(), 2);
}
