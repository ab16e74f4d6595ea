//! Anthropic's streamed calls: text and tool use, retries before the first delta, malformed streams.

use super::*;

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

fn anthropic_reply(texts: &[&str]) -> Reply {
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
    let server = ModelServer::start_with(vec![events(pieces)]).await;
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

    let sent = &server.received()[0];
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["model"], "test-model");
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
}

#[tokio::test]
async fn anthropic_failures_before_the_first_delta_are_retried() {
    let server = ModelServer::start_with(vec![
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
    assert_eq!(server.received().len(), 6);
}

#[tokio::test]
async fn anthropic_failures_after_the_first_delta_are_final() {
    let server = ModelServer::start_with(vec![
        events(vec![message_start(), text_start(0), anthropic_text(0, "Hola"), Piece::AwaitFirstDelta, Piece::Drop]),
        anthropic_reply(&["never"]),
    ])
    .await;
    let (deltas, result) = stream(&anthropic(&server), &server).await;
    assert_broke_after_reply_began(result);
    assert_eq!(deltas, ["Hola"]);
    assert_eq!(server.received().len(), 1, "a connection dropped after a delta is not retried");

    let server = ModelServer::start_with(vec![
        events(vec![message_start(), text_start(0), anthropic_text(0, "Hola"), stream_error("overloaded_error")]),
        anthropic_reply(&["never"]),
    ])
    .await;
    let (deltas, result) = stream(&anthropic(&server), &server).await;
    assert_broke_after_reply_began(result);
    assert_eq!(deltas, ["Hola"]);
    assert_eq!(server.received().len(), 1, "an overloaded error after a delta is not retried");
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
    let server = ModelServer::start_with(scripts.into_iter().map(events).collect()).await;
    let model = anthropic(&server);
    for expected in expected {
        let (deltas, result) = stream(&model, &server).await;
        assert!(deltas.is_empty());
        assert_invalid(result, expected);
    }
    assert_eq!(server.received().len(), count, "malformed streams are not retried");
}

#[tokio::test]
async fn anthropic_structured_output_uses_the_buffered_call() {
    let reply = json!({
        "id": "msg_s", "type": "message", "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_p", "name": "plan", "input": {"steps": ["read"]}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 50, "output_tokens": 12}
    });
    let server = ModelServer::start_with(vec![ok(reply)]).await;
    let format = JsonSchemaFormat { name: "plan".into(), schema: json!({"type": "object"}) };
    let request = ChatRequest { response_format: Some(format), ..request_with_system() };
    let sink = Collect::new(server.first_delta());
    let response = anthropic(&server).complete_streaming(&request, &sink).await.unwrap();
    assert_eq!(response.content, r#"{"steps":["read"]}"#);
    assert_eq!(sink.deltas(), [r#"{"steps":["read"]}"#], "the whole structured reply is one delta");
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(server.received()[0].body.get("stream"), None);
}
