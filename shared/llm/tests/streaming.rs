//! Streamed provider calls against scripted Server-Sent Events servers on 127.0.0.1: deltas arrive
//! while the reply is still being sent, tool calls and usage are assembled, failures before the
//! first delta are retried and failures after it are not, malformed streams are errors, not panics.

use std::sync::Arc;
use std::time::Duration;

use agent_ports::{ChatModel, ChatRequest, ChatResponse, JsonSchemaFormat, ModelError, StopReason};
use llm::{AnthropicModel, LlmConfig, OpenAiModel, ProviderKind, RecordingModel, ReplayModel};
use serde_json::{json, Value};

mod support;
use support::server::{ok, status, Answer, Piece, Server};
use support::{request_with_system, Collect};

const KEY: &str = "sk-stream-key-0123456789";

/// A streamed reply: its events sent piece by piece.
fn events(pieces: Vec<Piece>) -> Answer {
    Answer::stream("text/event-stream", pieces)
}

/// An error status with a JSON error body that names the key (which must not leak) and, when
/// given, `Retry-After`.
fn failure(code: u16, retry_after: Option<&str>) -> Answer {
    let answer = status(code, json!({"error": {"message": format!("scripted {code} for {KEY}"), "type": "api_error"}}));
    match retry_after {
        Some(wait) => answer.header("retry-after", wait),
        None => answer,
    }
}

fn config(server: &Server, provider: ProviderKind) -> LlmConfig {
    let base = match provider {
        ProviderKind::OpenAi => format!("{}/v1", server.base),
        _ => server.base.clone(),
    };
    let mut config = support::config(provider, base, "test-model");
    config.api_key = Some(KEY.to_owned());
    config
}

fn openai(server: &Server) -> OpenAiModel {
    OpenAiModel::new(&config(server, ProviderKind::OpenAi)).unwrap()
}

fn anthropic(server: &Server) -> AnthropicModel {
    AnthropicModel::new(&config(server, ProviderKind::Anthropic)).unwrap()
}

/// Streams one call on a fresh sink, returning the deltas it got along with the result.
async fn stream(model: &dyn ChatModel, server: &Server) -> (Vec<String>, Result<ChatResponse, ModelError>) {
    let sink = Collect::new(server.first_delta.clone());
    let result = model.complete_streaming(&request_with_system(), &sink).await;
    (sink.deltas(), result)
}

fn assert_invalid(result: Result<ChatResponse, ModelError>, expected: &str) {
    match result {
        Err(ModelError::InvalidResponse(message)) => assert!(message.contains(expected), "{message}"),
        other => panic!("expected InvalidResponse with {expected:?}, got {other:?}"),
    }
}

fn assert_broke_after_reply_began(result: Result<ChatResponse, ModelError>) {
    match result {
        Err(ModelError::Unavailable { attempts, message }) => {
            assert_eq!(attempts, 1);
            assert!(message.contains("after the reply began"), "{message}");
            assert!(!message.contains(KEY), "{message}");
        }
        other => panic!("expected Unavailable after the reply began, got {other:?}"),
    }
}

// ---- OpenAI ----

fn sse(data: Value) -> Piece {
    Piece::text(format!("data: {data}\n\n"))
}

fn openai_text(text: &str) -> Piece {
    sse(json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}))
}

fn openai_end(reason: &str) -> Vec<Piece> {
    vec![
        sse(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})),
        sse(json!({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7}})),
        Piece::text("data: [DONE]\n\n"),
    ]
}

fn openai_reply(texts: &[&str]) -> Answer {
    let mut pieces: Vec<Piece> = texts.iter().map(|text| openai_text(text)).collect();
    pieces.extend(openai_end("stop"));
    events(pieces)
}

fn openai_call(index: u64, id: Option<&str>, name: Option<&str>, arguments: &str) -> Piece {
    let mut function = json!({"arguments": arguments});
    if let Some(name) = name {
        function["name"] = json!(name);
    }
    let mut fragment = json!({"index": index, "function": function});
    if let Some(id) = id {
        fragment["id"] = json!(id);
        fragment["type"] = json!("function");
    }
    sse(json!({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]}))
}

fn openai_error() -> Piece {
    sse(json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error"}}))
}

#[tokio::test]
async fn openai_text_streams_before_the_reply_ends() {
    let mut pieces = vec![
        sse(json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})),
        openai_text("Hola"),
        Piece::AwaitFirstDelta,
        Piece::Pause(Duration::from_millis(20)),
        openai_text(", "),
        Piece::Pause(Duration::from_millis(20)),
        // One network chunk carrying two events, and an event split over two chunks.
        Piece::text(format!(
            "data: {}\n\ndata: {}",
            json!({"choices": [{"index": 0, "delta": {"content": "mun"}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "do"}}]})
        )),
        Piece::Pause(Duration::from_millis(20)),
        Piece::text("\n\n"),
        openai_text("."),
    ];
    pieces.extend(openai_end("stop"));
    let buffered = json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}]
    });
    let server = Server::start(vec![ok(buffered), events(pieces)]).await;
    let model = openai(&server);
    model.complete(&request_with_system()).await.unwrap();
    let (deltas, result) = stream(&model, &server).await;
    let response = result.unwrap();
    assert_eq!(deltas, ["Hola", ", ", "mun", "do", "."]);
    assert_eq!(response.content, deltas.concat());
    assert_eq!(response.content, "Hola, mundo.");
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!((response.usage.input_tokens, response.usage.output_tokens), (11, 7));

    let requests = server.requests();
    let (mut buffered, streamed) = (requests[0].body.clone(), &requests[1]);
    assert_eq!(streamed.body["stream"], true);
    assert_eq!(streamed.body["stream_options"], json!({"include_usage": true}));
    buffered["stream"] = json!(true);
    buffered["stream_options"] = json!({"include_usage": true});
    assert_eq!(streamed.body, buffered, "the streamed request is the buffered one plus the stream switches");
    assert_eq!(streamed.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
}

#[tokio::test]
async fn openai_tool_calls_are_assembled_from_interleaved_fragments() {
    let mut pieces = vec![
        openai_text("Leo dos cosas."),
        openai_call(0, Some("call_a"), Some("read_file"), ""),
        openai_call(1, Some("call_b"), Some("ls"), "{\"pa"),
        openai_call(0, None, None, "{\"file_path\": "),
        openai_call(1, None, None, "th\": \"/\"}"),
        openai_call(0, None, None, "\"/workspace/a.md\"}"),
    ];
    pieces.extend(openai_end("tool_calls"));
    let server = Server::start(vec![events(pieces)]).await;
    let (deltas, result) = stream(&openai(&server), &server).await;
    let response = result.unwrap();
    assert_eq!(deltas, ["Leo dos cosas."]);
    assert_eq!(response.content, "Leo dos cosas.");
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    let calls: Vec<(String, String, Value)> =
        response.tool_calls.into_iter().map(|c| (c.id, c.name, c.arguments)).collect();
    assert_eq!(
        calls,
        [
            ("call_a".into(), "read_file".into(), json!({"file_path": "/workspace/a.md"})),
            ("call_b".into(), "ls".into(), json!({"path": "/"})),
        ]
    );
}

#[tokio::test]
async fn openai_tool_calls_out_of_order_without_ids_or_done() {
    // Index 1 arrives first, no call carries an id, and the server ends without `[DONE]`.
    let pieces = vec![
        openai_call(1, None, Some("ls"), "{}"),
        openai_call(0, None, Some("read_file"), "{\"file_path\": \"/a\"}"),
        openai_call(2, Some("call_c"), Some("grep"), "{oops"),
        sse(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
    ];
    let server = Server::start(vec![events(pieces)]).await;
    let (deltas, result) = stream(&openai(&server), &server).await;
    let response = result.unwrap();
    assert!(deltas.is_empty());
    assert_eq!(response.content, "");
    let names: Vec<&str> = response.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["read_file", "ls", "grep"]);
    assert_eq!(response.tool_calls[0].arguments, json!({"file_path": "/a"}));
    assert!(response.tool_calls[0].id.starts_with("call_") && response.tool_calls[1].id.starts_with("call_"));
    assert_ne!(response.tool_calls[0].id, response.tool_calls[1].id);
    assert_eq!(response.tool_calls[2].arguments, json!("{oops"), "unparseable arguments are kept, as complete does");
    assert_eq!(response.usage, Default::default());
}

#[tokio::test]
async fn openai_statuses_before_the_stream_are_retried() {
    let server = Server::start(vec![failure(429, Some("0")), failure(500, None), openai_reply(&["Por fin."])]).await;
    let (deltas, result) = stream(&openai(&server), &server).await;
    assert_eq!(result.unwrap().content, "Por fin.");
    assert_eq!(deltas, ["Por fin."]);
    assert_eq!(server.requests().len(), 3);

    // Attempts run out on statuses alone.
    let server = Server::start((0..3).map(|_| failure(503, None)).collect()).await;
    match stream(&openai(&server), &server).await.1 {
        Err(ModelError::Unavailable { attempts: 3, message }) => {
            assert!(message.contains("503") && !message.contains(KEY), "{message}")
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn openai_rejection_is_final_and_redacted() {
    let server = Server::start(vec![failure(400, None), openai_reply(&["never"])]).await;
    match stream(&openai(&server), &server).await {
        (deltas, Err(ModelError::Rejected { status: 400, message })) => {
            assert!(deltas.is_empty());
            assert!(message.contains("scripted 400") && !message.contains(KEY), "{message}");
        }
        other => panic!("expected Rejected, got {:?}", other.1),
    }
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn openai_a_stream_broken_before_any_delta_is_retried() {
    let server =
        Server::start(vec![events(vec![Piece::Drop]), events(vec![openai_error()]), openai_reply(&["Otra ", "vez."])])
            .await;
    let (deltas, result) = stream(&openai(&server), &server).await;
    assert_eq!(result.unwrap().content, "Otra vez.");
    assert_eq!(deltas, ["Otra ", "vez."]);
    assert_eq!(server.requests().len(), 3, "a dropped stream and an error chunk before any delta were retried");

    // A stream that just ends, before its finish reason, is incomplete.
    let server = Server::start(vec![
        events(vec![openai_call(0, Some("call_a"), Some("ls"), "{")]),
        openai_reply(&["Completa."]),
    ])
    .await;
    let (_, result) = stream(&openai(&server), &server).await;
    assert_eq!(result.unwrap().content, "Completa.");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn openai_a_stream_broken_after_the_first_delta_is_final() {
    let server = Server::start(vec![
        events(vec![openai_text("Empiezo"), Piece::AwaitFirstDelta, Piece::Drop]),
        openai_reply(&["never"]),
    ])
    .await;
    let (deltas, result) = stream(&openai(&server), &server).await;
    assert_broke_after_reply_began(result);
    assert_eq!(deltas, ["Empiezo"]);
    assert_eq!(server.requests().len(), 1, "a stream broken after a delta is not retried");

    let server =
        Server::start(vec![events(vec![openai_text("Empiezo"), openai_error()]), openai_reply(&["never"])]).await;
    let (deltas, result) = stream(&openai(&server), &server).await;
    assert_broke_after_reply_began(result);
    assert_eq!(deltas, ["Empiezo"]);
    assert_eq!(server.requests().len(), 1, "an error chunk after a delta is not retried");
}

#[tokio::test]
async fn openai_a_long_stream_is_not_cut_by_the_timeout() {
    // The whole reply takes longer than the timeout, but no silence is that long.
    let mut pieces = Vec::new();
    for word in ["uno ", "dos ", "tres ", "cuatro ", "cinco"] {
        pieces.push(openai_text(word));
        pieces.push(Piece::Pause(Duration::from_millis(250)));
    }
    pieces.extend(openai_end("stop"));
    let server = Server::start(vec![events(pieces)]).await;
    let mut config = config(&server, ProviderKind::OpenAi);
    config.timeout = Duration::from_millis(800);
    let model = OpenAiModel::new(&config).unwrap();
    let (deltas, result) = stream(&model, &server).await;
    assert_eq!(result.unwrap().content, "uno dos tres cuatro cinco");
    assert_eq!(deltas.len(), 5);
}

#[tokio::test]
async fn openai_a_stalled_stream_times_out() {
    let server = Server::start(vec![
        events(vec![Piece::Stall]),
        events(vec![openai_text("Hola"), Piece::Stall]),
        openai_reply(&["never"]),
    ])
    .await;
    let mut config = config(&server, ProviderKind::OpenAi);
    config.timeout = Duration::from_millis(300);
    let model = OpenAiModel::new(&config).unwrap();
    let (deltas, result) = stream(&model, &server).await;
    // The first attempt timed out before any delta and was retried; the second broke after one.
    match result {
        Err(ModelError::Unavailable { attempts: 2, message }) => {
            assert!(message.contains("after the reply began") && message.contains("timed out"), "{message}")
        }
        other => panic!("expected Unavailable after the reply began, got {other:?}"),
    }
    assert_eq!(deltas, ["Hola"]);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn openai_malformed_streams_are_errors_not_panics() {
    let huge_event = format!("data: \"{}\"\n\n", "x".repeat(2 * 1024 * 1024));
    let many_lines = format!("data: {}\n\n", vec!["x".repeat(1000); 1100].join("\ndata: "));
    let big_reply: Vec<Piece> = (0..100).map(|_| openai_text(&"y".repeat(100 * 1024))).collect();
    let server = Server::start(vec![
        events(vec![Piece::text("data: {not json\n\n")]),
        events(vec![sse(json!({"choices": [{"delta": {"tool_calls": [{"index": 9999}]}}]}))]),
        events(vec![sse(json!({"choices": [{"delta": {"tool_calls": [{"index": -1}]}}]}))]),
        events(vec![sse(json!({"choices": "none"}))]),
        events(vec![Piece::text(huge_event)]),
        events(vec![Piece::text(many_lines)]),
        events(vec![Piece::Bytes(b"data: \xff\xfe\n\n".to_vec())]),
        events(big_reply),
        events({
            let mut pieces = vec![openai_call(0, Some("call_a"), None, "{}")];
            pieces.extend(openai_end("tool_calls"));
            pieces
        }),
    ])
    .await;
    let model = openai(&server);
    for expected in [
        "not valid",
        "index 9999",
        "not valid",
        "not valid",
        "larger than 1048576",
        "larger than 1048576",
        "malformed event stream",
        "larger than 8388608",
        "no function name",
    ] {
        let (_, result) = stream(&model, &server).await;
        // After the first delta a malformed stream is still reported as malformed, and not retried.
        assert_invalid(result, expected);
    }
    assert_eq!(server.requests().len(), 9, "malformed streams are not retried");
}

// ---- Anthropic ----

fn event(name: &str, data: Value) -> Piece {
    Piece::text(format!("event: {name}\ndata: {data}\n\n"))
}

fn message_start() -> Piece {
    event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
               "content": [], "usage": {"input_tokens": 25, "output_tokens": 1}}}),
    )
}

fn text_start(index: u64) -> Piece {
    event(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
    )
}

fn anthropic_text(index: u64, text: &str) -> Piece {
    event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}),
    )
}

fn block_stop(index: u64) -> Piece {
    event("content_block_stop", json!({"type": "content_block_stop", "index": index}))
}

fn message_end(stop_reason: &str) -> Vec<Piece> {
    vec![
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {"output_tokens": 30}}),
        ),
        event("message_stop", json!({"type": "message_stop"})),
    ]
}

fn anthropic_reply(texts: &[&str]) -> Answer {
    let mut pieces = vec![message_start(), text_start(0)];
    pieces.extend(texts.iter().map(|text| anthropic_text(0, text)));
    pieces.push(block_stop(0));
    pieces.extend(message_end("end_turn"));
    events(pieces)
}

fn stream_error(kind: &str) -> Piece {
    event("error", json!({"type": "error", "error": {"type": kind, "message": "busy"}}))
}

#[tokio::test]
async fn anthropic_text_and_tool_use_stream() {
    let mut pieces = vec![
        message_start(),
        event("ping", json!({"type": "ping"})),
        text_start(0),
        anthropic_text(0, "Voy a "),
        Piece::AwaitFirstDelta,
        Piece::Pause(Duration::from_millis(20)),
        anthropic_text(0, "leerlo."),
        block_stop(0),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1,
                   "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "input_json_delta", "partial_json": "{\"file_path\": \"/a"}}),
        ),
        Piece::Pause(Duration::from_millis(20)),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ".md\"}"}}),
        ),
        block_stop(1),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 2,
                   "content_block": {"type": "tool_use", "id": "toolu_2", "name": "ls", "input": {}}}),
        ),
        block_stop(2),
    ];
    pieces.extend(message_end("tool_use"));
    let server = Server::start(vec![events(pieces)]).await;
    let (deltas, result) = stream(&anthropic(&server), &server).await;
    let response = result.unwrap();
    assert_eq!(deltas, ["Voy a ", "leerlo."]);
    assert_eq!(response.content, deltas.concat());
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    let calls: Vec<(String, String, Value)> =
        response.tool_calls.into_iter().map(|c| (c.id, c.name, c.arguments)).collect();
    assert_eq!(
        calls,
        [
            ("toolu_1".into(), "read_file".into(), json!({"file_path": "/a.md"})),
            ("toolu_2".into(), "ls".into(), json!({})),
        ]
    );
    assert_eq!((response.usage.input_tokens, response.usage.output_tokens), (25, 30));

    let sent = &server.requests()[0];
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["model"], "test-model");
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
}

#[tokio::test]
async fn anthropic_failures_before_the_first_delta_are_retried() {
    let server = Server::start(vec![
        failure(529, None),
        failure(429, Some("0")),
        events(vec![message_start(), text_start(0), stream_error("overloaded_error")]),
        events(vec![message_start(), text_start(0), Piece::Drop]),
        // Ends before `message_stop`.
        events(vec![message_start(), text_start(0), block_stop(0)]),
        anthropic_reply(&["Ya ", "está."]),
    ])
    .await;
    let mut config = config(&server, ProviderKind::Anthropic);
    config.max_attempts = 6;
    let (deltas, result) = stream(&AnthropicModel::new(&config).unwrap(), &server).await;
    let response = result.unwrap();
    assert_eq!(deltas, ["Ya ", "está."]);
    assert_eq!(response.content, "Ya está.");
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(server.requests().len(), 6);
}

#[tokio::test]
async fn anthropic_failures_after_the_first_delta_are_final() {
    let server = Server::start(vec![
        events(vec![message_start(), text_start(0), anthropic_text(0, "Hola"), Piece::AwaitFirstDelta, Piece::Drop]),
        anthropic_reply(&["never"]),
    ])
    .await;
    let (deltas, result) = stream(&anthropic(&server), &server).await;
    assert_broke_after_reply_began(result);
    assert_eq!(deltas, ["Hola"]);
    assert_eq!(server.requests().len(), 1, "a connection dropped after a delta is not retried");

    let server = Server::start(vec![
        events(vec![message_start(), text_start(0), anthropic_text(0, "Hola"), stream_error("overloaded_error")]),
        anthropic_reply(&["never"]),
    ])
    .await;
    let (deltas, result) = stream(&anthropic(&server), &server).await;
    assert_broke_after_reply_began(result);
    assert_eq!(deltas, ["Hola"]);
    assert_eq!(server.requests().len(), 1, "an overloaded error after a delta is not retried");
}

#[tokio::test]
async fn anthropic_malformed_streams_are_errors_not_panics() {
    let tool_start = event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}}),
    );
    let bad_input = event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"a\": "}}),
    );
    let scripts = vec![
        (vec![message_start(), Piece::text("event: content_block_start\ndata: {oops\n\n")], "not valid JSON"),
        (vec![message_start(), anthropic_text(0, "sin empezar")], "before its start"),
        (vec![message_start(), text_start(9999)], "index 9999"),
        (vec![message_start(), event("content_block_delta", json!({"type": "content_block_delta"}))], "index"),
        (vec![message_start(), tool_start, bad_input, block_stop(0)], "not JSON"),
        (
            vec![
                message_start(),
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use"}}),
                ),
            ],
            "without its id or name",
        ),
        (vec![message_start(), text_start(0), text_start(0)], "started twice"),
        (vec![message_start(), stream_error("invalid_request_error")], "invalid_request_error"),
    ];
    let count = scripts.len();
    let (scripts, expected): (Vec<_>, Vec<_>) = scripts.into_iter().unzip();
    let server = Server::start(scripts.into_iter().map(events).collect()).await;
    let model = anthropic(&server);
    for expected in expected {
        let (deltas, result) = stream(&model, &server).await;
        assert!(deltas.is_empty());
        assert_invalid(result, expected);
    }
    assert_eq!(server.requests().len(), count, "malformed streams are not retried");
}

#[tokio::test]
async fn anthropic_structured_output_uses_the_buffered_call() {
    let reply = json!({
        "id": "msg_s", "type": "message", "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_p", "name": "plan", "input": {"steps": ["read"]}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 50, "output_tokens": 12}
    });
    let server = Server::start(vec![ok(reply)]).await;
    let format = JsonSchemaFormat { name: "plan".into(), schema: json!({"type": "object"}) };
    let request = ChatRequest { response_format: Some(format), ..request_with_system() };
    let sink = Collect::new(server.first_delta.clone());
    let response = anthropic(&server).complete_streaming(&request, &sink).await.unwrap();
    assert_eq!(response.content, r#"{"steps":["read"]}"#);
    assert_eq!(sink.deltas(), [r#"{"steps":["read"]}"#], "the whole structured reply is one delta");
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(server.requests()[0].body.get("stream"), None);
}

// ---- Replay and recording ----

#[tokio::test]
async fn replay_serves_recorded_deltas_and_recording_writes_them() {
    let text = r#"{"content": "Hola mundo", "tool_calls": [], "usage": {"input_tokens": 1, "output_tokens": 2}, "stop_reason": "end_turn", "deltas": ["Hola", " mundo"]}
{"content": "Sin piezas", "tool_calls": [], "usage": {"input_tokens": 1, "output_tokens": 2}, "stop_reason": "end_turn"}
{"content": "", "tool_calls": [{"id": "c1", "name": "ls", "arguments": {}}], "usage": {"input_tokens": 1, "output_tokens": 2}, "stop_reason": "tool_use"}"#;
    let replay = Arc::new(ReplayModel::from_jsonl("inline", text).unwrap());
    let server = Server::start(vec![]).await;
    let path = std::env::temp_dir().join(format!("streaming-record-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let recording = RecordingModel::new(replay, &path);

    let (deltas, result) = stream(&recording, &server).await;
    assert_eq!(result.unwrap().content, "Hola mundo");
    assert_eq!(deltas, ["Hola", " mundo"]);
    let (deltas, result) = stream(&recording, &server).await;
    assert_eq!(result.unwrap().content, "Sin piezas");
    assert_eq!(deltas, ["Sin piezas"], "a reply without deltas is handed over whole");
    let (deltas, result) = stream(&recording, &server).await;
    assert_eq!(result.unwrap().tool_calls.len(), 1);
    assert!(deltas.is_empty(), "an empty text makes no delta");

    let lines: Vec<Value> =
        std::fs::read_to_string(&path).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["deltas"], json!(["Hola", " mundo"]));
    assert_eq!(lines[1]["deltas"], json!(["Sin piezas"]));
    assert_eq!(lines[2]["deltas"], json!([]));

    // What was recorded replays the same pieces, streamed or buffered.
    let recorded = ReplayModel::from_file(&path).unwrap();
    let (deltas, _) = stream(&recorded, &server).await;
    assert_eq!(deltas, ["Hola", " mundo"]);
    assert_eq!(recorded.complete(&request_with_system()).await.unwrap().content, "Sin piezas");
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn recording_a_live_stream_keeps_its_pieces() {
    let server = Server::start(vec![openai_reply(&["En ", "vivo."])]).await;
    let path = std::env::temp_dir().join(format!("streaming-live-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let recording = RecordingModel::new(Arc::new(openai(&server)), &path);
    let (deltas, result) = stream(&recording, &server).await;
    assert_eq!(result.unwrap().content, "En vivo.");
    assert_eq!(deltas, ["En ", "vivo."]);
    let line: Value = serde_json::from_str(std::fs::read_to_string(&path).unwrap().trim()).unwrap();
    assert_eq!(line["deltas"], json!(["En ", "vivo."]));
    assert_eq!(line["usage"], json!({"input_tokens": 11, "output_tokens": 7}));
    let _ = std::fs::remove_file(&path);
}

#[test]
fn replay_deltas_must_join_up_to_the_content() {
    let text = r#"{"content": "Hola", "tool_calls": [], "usage": {"input_tokens": 0, "output_tokens": 0}, "stop_reason": "end_turn", "deltas": ["Ho", "l"]}"#;
    match ReplayModel::from_jsonl("inline", text) {
        Err(ModelError::Config(message)) => {
            assert!(message.contains("line 1") && message.contains("deltas"), "{message}")
        }
        other => panic!("expected a Config error, got {:?}", other.map(|model| model.remaining())),
    }
    let text = r#"{"content": "Hola", "tool_calls": [], "usage": {"input_tokens": 0, "output_tokens": 0}, "stop_reason": "end_turn", "deltas": "Hola"}"#;
    assert!(matches!(ReplayModel::from_jsonl("inline", text), Err(ModelError::Config(_))));
}
