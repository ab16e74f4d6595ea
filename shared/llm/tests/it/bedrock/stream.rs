//! Bedrock's ConverseStream: deltas as they arrive, retries before the first delta, malformed streams.

use super::*;

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
    let server = ModelServer::start_with(vec![frames(pieces)]).await;
    let sink = Collect::new(server.first_delta());
    let response = bedrock(&server).complete_streaming(&full_request(), &sink).await.unwrap();

    assert_eq!(sink.deltas(), ["Let me ", "look."]);
    assert_eq!(response.content, "Let me look.");
    assert_eq!(
        response.tool_calls,
        [ToolCall { id: "tooluse_s".into(), name: "read_file".into(), arguments: json!({"path": "a.md"}) }]
    );
    assert_eq!(response.usage, Usage::new(40, 12));
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    let received = server.received();
    assert_eq!(received[0].path, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream");
    assert_eq!(received[0].body["inferenceConfig"], json!({"maxTokens": 256}));
    assert_eq!(received[0].body["messages"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn stream_failures_before_the_first_delta_are_retried() {
    let server = ModelServer::start_with(vec![
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
    let sink = Collect::new(server.first_delta());
    let response = model.complete_streaming(&request_with_system(), &sink).await.unwrap();
    assert_eq!(sink.deltas(), ["at ", "last"]);
    assert_eq!(response.content, "at last");
    assert_eq!(server.received().len(), 4);
}

#[tokio::test]
async fn stream_failures_after_the_first_delta_are_final() {
    let server = ModelServer::start_with(vec![
        frames(vec![text_delta(0, "Hal"), Piece::AwaitFirstDelta, exception("throttlingException", "slow down")]),
        frames(vec![text_delta(0, "Hal"), Piece::AwaitFirstDelta, Piece::Drop]),
        stream_text(&["never sent"]),
    ])
    .await;
    let model = bedrock(&server);
    for expected_requests in [1, 2] {
        let sink = Collect::new(server.first_delta());
        match model.complete_streaming(&request_with_system(), &sink).await {
            Err(ModelError::Unavailable { attempts, message }) => {
                assert_eq!(attempts, 1);
                assert!(message.contains("after the reply began"), "{message}");
            }
            other => panic!("expected Unavailable after the reply began, got {other:?}"),
        }
        assert_eq!(sink.deltas(), ["Hal"]);
        assert_eq!(server.received().len(), expected_requests, "no second attempt once text was shown");
    }
}

#[tokio::test]
async fn stream_rejections_are_final() {
    let server = ModelServer::start_with(vec![
        error(400, "ValidationException", "messages: bad"),
        frames(vec![exception("validationException", "input too long")]),
    ])
    .await;
    let model = bedrock(&server);
    let sink = Collect::new(server.first_delta());
    assert_rejected(
        model.complete_streaming(&request_with_system(), &sink).await,
        400,
        "ValidationException: messages",
    );
    assert_rejected(model.complete_streaming(&request_with_system(), &sink).await, 400, "input too long");
    assert_eq!(server.received().len(), 2);
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
        let server = ModelServer::start_with(vec![frames(pieces)]).await;
        let sink = Collect::new(server.first_delta());
        match bedrock(&server).complete_streaming(&request_with_system(), &sink).await {
            Err(ModelError::InvalidResponse(message)) => assert!(message.contains(expected), "{expected}: {message}"),
            other => panic!("{expected}: expected InvalidResponse, got {other:?}"),
        }
        assert_eq!(server.received().len(), 1, "{expected}: not retried");
    }
}

#[tokio::test]
async fn a_stream_without_its_end_is_retried_and_then_unavailable() {
    let server = ModelServer::start_with(vec![
        frames(vec![event("messageStart", json!({"role": "assistant"}))]),
        frames(vec![Piece::Bytes(vec![0, 0, 0, 64, 0, 0])]),
        frames(vec![]),
    ])
    .await;
    let sink = Collect::new(server.first_delta());
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
    let server = ModelServer::start_with(vec![converse(
        json!([{"toolUse": {"toolUseId": "tooluse_p", "name": "plan", "input": {"steps": ["read"]}}}]),
        "tool_use",
    )])
    .await;
    let sink = Collect::new(server.first_delta());
    let request = ChatRequest { response_format: Some(plan_format()), ..request_with_system() };
    let response = bedrock(&server).complete_streaming(&request, &sink).await.unwrap();
    assert_eq!(sink.deltas(), [r#"{"steps":["read"]}"#]);
    assert_eq!(response.content, r#"{"steps":["read"]}"#);
    assert!(server.received()[0].path.ends_with("/converse"));
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
    let server = ModelServer::start_with(vec![
        // Silent for longer than the timeout before anything was shown: another attempt.
        frames(vec![event("messageStart", json!({"role": "assistant"})), Piece::Pause(Duration::from_secs(3))]),
        // Longer in all than the timeout, but never silent for that long.
        slow(&["one ", "two ", "three ", "four"]),
    ])
    .await;
    let mut config = config(&server, MODEL);
    config.timeout = Duration::from_millis(800);
    let model = BedrockModel::from_sdk_config(&sdk_config(), &config).unwrap();
    let sink = Collect::new(server.first_delta());
    let response = model.complete_streaming(&request_with_system(), &sink).await.unwrap();
    assert_eq!(response.content, "one two three four");
    assert_eq!(sink.deltas().len(), 4);
    assert_eq!(server.received().len(), 2);
}
