//! Bedrock's Converse: the wire shape, stop reasons, structured output, retries and errors.

use super::*;

#[tokio::test]
async fn converse_request_wire_shape_and_signature() {
    let server = ModelServer::start_with(vec![converse(
        json!([
            {"text": "Both read. "},
            {"toolUse": {"toolUseId": "tooluse_3", "name": "read_file", "input": {"path": "more.md", "n": [1, 2.5]}}},
            {"reasoningContent": {"reasoningText": {"text": "ignored"}}}
        ]),
        "tool_use",
    )])
    .await;
    let response = bedrock(&server).complete(&full_request()).await.unwrap();

    let received = server.received();
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
    assert_eq!(response.usage, Usage::new(21, 9));
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
    let server =
        ModelServer::start_with(cases.iter().map(|(wire, _)| converse(json!([{"text": "x"}]), wire)).collect()).await;
    let model = bedrock(&server);
    for (wire, expected) in cases {
        assert_eq!(model.complete(&request_with_system()).await.unwrap().stop_reason, expected, "{wire}");
    }
}

#[tokio::test]
async fn structured_output_is_a_forced_tool_whose_input_is_the_reply() {
    let server = ModelServer::start_with(vec![converse(
        json!([
            {"text": "Here is the plan."},
            {"toolUse": {"toolUseId": "tooluse_p", "name": "plan", "input": {"steps": ["read", "write"]}}}
        ]),
        "tool_use",
    )])
    .await;
    let request = ChatRequest { response_format: Some(plan_format()), ..full_request() };
    let response = bedrock(&server).complete(&request).await.unwrap();

    let body = &server.received()[0].body;
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
    let server = ModelServer::start_with(vec![converse(json!([{"text": "no tool"}]), "end_turn")]).await;
    let request = ChatRequest { response_format: Some(plan_format()), ..request_with_system() };
    match bedrock(&server).complete(&request).await {
        Err(ModelError::InvalidResponse(message)) => assert!(message.contains("\"plan\""), "{message}"),
        other => panic!("expected InvalidResponse, got {other:?}"),
    }
}

#[tokio::test]
async fn throttling_and_unavailability_are_retried_then_succeed() {
    let server = ModelServer::start_with(vec![
        throttled(),
        error(503, "ServiceUnavailableException", "busy"),
        converse_text("finally"),
    ])
    .await;
    let response = bedrock(&server).complete(&request_with_system()).await.unwrap();
    assert_eq!(response.content, "finally");
    assert_eq!(server.received().len(), 3, "the policy's attempts, not the SDK's");
}

#[tokio::test]
async fn retries_stop_at_the_policys_attempts() {
    let server = ModelServer::start_with(vec![
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
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn validation_and_access_errors_are_rejected_at_once() {
    let server = ModelServer::start_with(vec![
        error(400, "ValidationException", "The model returned the following errors: bad input"),
        error(403, "AccessDeniedException", "You don't have access to the model"),
        error(404, "ResourceNotFoundException", "Model not found"),
    ])
    .await;
    let model = bedrock(&server);
    assert_rejected(model.complete(&request_with_system()).await, 400, "ValidationException: The model returned");
    assert_eq!(server.received().len(), 1, "no retry on a validation error");
    assert_rejected(model.complete(&request_with_system()).await, 403, "AccessDeniedException");
    assert_rejected(model.complete(&request_with_system()).await, 404, "ResourceNotFoundException");
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn a_slow_attempt_times_out_and_is_retried() {
    let server = ModelServer::start_with(vec![
        converse_text("too late").delayed(Duration::from_secs(3)),
        converse_text("in time"),
    ])
    .await;
    let mut config = config(&server, MODEL);
    config.timeout = Duration::from_millis(500);
    let model = BedrockModel::from_sdk_config(&sdk_config(), &config).unwrap();
    assert_eq!(model.complete(&request_with_system()).await.unwrap().content, "in time");
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn a_per_call_model_overrides_the_configured_one() {
    let server = ModelServer::start_with(vec![converse_text("planned"), converse_text("default")]).await;
    let model = bedrock(&server);
    let planner =
        ChatRequest { model: Some("us.anthropic.claude-sonnet-4-20250514-v1:0".into()), ..request_with_system() };
    assert_eq!(model.complete(&planner).await.unwrap().content, "planned");
    let blank = ChatRequest { model: Some(" ".into()), ..request_with_system() };
    assert_eq!(model.complete(&blank).await.unwrap().content, "default");
    let paths: Vec<String> = server.received().iter().map(|r| r.path.clone()).collect();
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
    let server = ModelServer::start_with(vec![converse_text("via profile")]).await;
    let model = BedrockModel::from_sdk_config(&sdk_config(), &config(&server, arn)).unwrap();
    assert_eq!(model.complete(&request_with_system()).await.unwrap().content, "via profile");
    let path = &server.received()[0].path;
    assert!(!path[1..].contains("arn:aws"), "the id is one encoded path segment: {path}");
    assert_eq!(decoded(path), format!("/model/{arn}/converse"));
}

#[tokio::test]
async fn malformed_replies_are_errors_not_panics() {
    let server = ModelServer::start_with(vec![
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
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn a_missing_region_is_a_config_error() {
    let sdk =
        SdkConfig::builder().behavior_version(BehaviorVersion::latest()).http_client(aws_http::http_client()).build();
    let config = LlmConfig::new(ProviderKind::Bedrock, "", MODEL);
    match BedrockModel::from_sdk_config(&sdk, &config) {
        Err(ModelError::Config(message)) => assert!(message.contains("AWS_REGION"), "{message}"),
        Err(other) => panic!("expected a Config error, got {other:?}"),
        Ok(_) => panic!("a client without a region must not build"),
    }
}
