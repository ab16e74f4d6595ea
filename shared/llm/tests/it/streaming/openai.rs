//! OpenAI's streamed calls: deltas, tool-call fragments, retries before the first delta, malformed streams.

use super::*;

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

pub(super) fn openai_reply(texts: &[&str]) -> Reply {
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
    let server = ModelServer::start_with(vec![ok(buffered), events(pieces)]).await;
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

    let requests = server.received();
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
    let server = ModelServer::start_with(vec![events(pieces)]).await;
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
    let server = ModelServer::start_with(vec![events(pieces)]).await;
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
    let server =
        ModelServer::start_with(vec![failure(429, Some("0")), failure(500, None), openai_reply(&["Por fin."])]).await;
    let (deltas, result) = stream(&openai(&server), &server).await;
    assert_eq!(result.unwrap().content, "Por fin.");
    assert_eq!(deltas, ["Por fin."]);
    assert_eq!(server.received().len(), 3);

    // Attempts run out on statuses alone.
    let server = ModelServer::start_with((0..3).map(|_| failure(503, None)).collect()).await;
    match stream(&openai(&server), &server).await.1 {
        Err(ModelError::Unavailable { attempts: 3, message }) => {
            assert!(message.contains("503") && !message.contains(KEY), "{message}")
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn openai_rejection_is_final_and_redacted() {
    let server = ModelServer::start_with(vec![failure(400, None), openai_reply(&["never"])]).await;
    match stream(&openai(&server), &server).await {
        (deltas, Err(ModelError::Rejected { status: 400, message })) => {
            assert!(deltas.is_empty());
            assert!(message.contains("scripted 400") && !message.contains(KEY), "{message}");
        }
        other => panic!("expected Rejected, got {:?}", other.1),
    }
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn openai_a_stream_broken_before_any_delta_is_retried() {
    let server = ModelServer::start_with(vec![
        events(vec![Piece::Drop]),
        events(vec![openai_error()]),
        openai_reply(&["Otra ", "vez."]),
    ])
    .await;
    let (deltas, result) = stream(&openai(&server), &server).await;
    assert_eq!(result.unwrap().content, "Otra vez.");
    assert_eq!(deltas, ["Otra ", "vez."]);
    assert_eq!(server.received().len(), 3, "a dropped stream and an error chunk before any delta were retried");

    // A stream that just ends, before its finish reason, is incomplete.
    let server = ModelServer::start_with(vec![
        events(vec![openai_call(0, Some("call_a"), Some("ls"), "{")]),
        openai_reply(&["Completa."]),
    ])
    .await;
    let (_, result) = stream(&openai(&server), &server).await;
    assert_eq!(result.unwrap().content, "Completa.");
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn openai_a_stream_broken_after_the_first_delta_is_final() {
    let server = ModelServer::start_with(vec![
        events(vec![openai_text("Empiezo"), Piece::AwaitFirstDelta, Piece::Drop]),
        openai_reply(&["never"]),
    ])
    .await;
    let (deltas, result) = stream(&openai(&server), &server).await;
    assert_broke_after_reply_began(result);
    assert_eq!(deltas, ["Empiezo"]);
    assert_eq!(server.received().len(), 1, "a stream broken after a delta is not retried");

    let server =
        ModelServer::start_with(vec![events(vec![openai_text("Empiezo"), openai_error()]), openai_reply(&["never"])])
            .await;
    let (deltas, result) = stream(&openai(&server), &server).await;
    assert_broke_after_reply_began(result);
    assert_eq!(deltas, ["Empiezo"]);
    assert_eq!(server.received().len(), 1, "an error chunk after a delta is not retried");
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
    let server = ModelServer::start_with(vec![events(pieces)]).await;
    let mut config = config(&server, ProviderKind::OpenAi);
    config.timeout = Duration::from_millis(800);
    let model = OpenAiModel::new(&config).unwrap();
    let (deltas, result) = stream(&model, &server).await;
    assert_eq!(result.unwrap().content, "uno dos tres cuatro cinco");
    assert_eq!(deltas.len(), 5);
}

#[tokio::test]
async fn openai_a_stalled_stream_times_out() {
    let server = ModelServer::start_with(vec![
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
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn openai_malformed_streams_are_errors_not_panics() {
    let huge_event = format!("data: \"{}\"\n\n", "x".repeat(2 * 1024 * 1024));
    let many_lines = format!("data: {}\n\n", vec!["x".repeat(1000); 1100].join("\ndata: "));
    let big_reply: Vec<Piece> = (0..100).map(|_| openai_text(&"y".repeat(100 * 1024))).collect();
    let server = ModelServer::start_with(vec![
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
    assert_eq!(server.received().len(), 9, "malformed streams are not retried");
}
