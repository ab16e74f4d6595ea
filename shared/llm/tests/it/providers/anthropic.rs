//! The Anthropic provider: its wire shape, parsing, structured output, retries and errors.

use super::openai::raw_arguments_request;
use super::*;

#[tokio::test]
async fn anthropic_request_wire_shape_and_headers() {
    let server = ModelServer::start_with(vec![ok(anthropic_text("done"))]).await;
    anthropic(&server).complete(&full_request()).await.unwrap();

    assert_eq!(server.received().len(), 1);
    let request = &server.received()[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some(KEY));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("authorization"), None);
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(
        request.body,
        json!({
            "model": "test-model",
            "max_tokens": 256,
            "system": "You are terse.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Summarise notes.md and todo.md"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Reading both."},
                    {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "notes.md"}},
                    {"type": "tool_use", "id": "call_2", "name": "read_file", "input": {"path": "todo.md"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "# Notes"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "- [ ] ship"}
                ]}
            ],
            "tools": [{
                "name": "read_file",
                "description": "Read a file from the workspace.",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
            }]
        })
    );
}

#[tokio::test]
async fn anthropic_omits_empty_system_and_tools() {
    let server = ModelServer::start_with(vec![ok(anthropic_text("hello"))]).await;
    anthropic(&server).complete(&simple_request()).await.unwrap();
    let body = server.received().remove(0).body;
    assert_eq!(
        body,
        json!({"model": "test-model", "max_tokens": 256, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})
    );
}

#[tokio::test]
async fn anthropic_parses_text_and_tool_use_replies() {
    let server = ModelServer::start_with(vec![
        ok(anthropic_text("Hello there.")),
        ok(json!({
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.md"}},
                {"type": "tool_use", "id": "toolu_2", "name": "list", "input": {}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 100, "output_tokens": 30, "cache_read_input_tokens": 0}
        })),
        ok(json!({"content": [{"type": "text", "text": "cut"}], "stop_reason": "max_tokens", "usage": {"input_tokens": 1, "output_tokens": 256}})),
    ])
    .await;
    let model = anthropic(&server);

    let text = model.complete(&simple_request()).await.unwrap();
    assert_eq!(
        text,
        ChatResponse {
            content: "Hello there.".to_string(),
            tool_calls: vec![],
            usage: Usage::new(20, 7),
            stop_reason: StopReason::EndTurn,
        }
    );

    let tools = model.complete(&simple_request()).await.unwrap();
    assert_eq!(
        tools,
        ChatResponse {
            content: "Let me look.".to_string(),
            tool_calls: vec![
                ToolCall {
                    id: "toolu_1".to_string(),
                    name: "read_file".to_string(),
                    arguments: json!({"path": "a.md"})
                },
                ToolCall { id: "toolu_2".to_string(), name: "list".to_string(), arguments: json!({}) },
            ],
            usage: Usage::new(100, 30),
            stop_reason: StopReason::ToolUse,
        }
    );

    let truncated = model.complete(&simple_request()).await.unwrap();
    assert_eq!(truncated.stop_reason, StopReason::MaxTokens);
}

#[tokio::test]
async fn anthropic_keeps_unparseable_arguments_from_history() {
    // Anthropic requires an object input, so a raw string (from an OpenAI-compatible model, say)
    // travels wrapped rather than being dropped.
    let server = ModelServer::start_with(vec![ok(anthropic_text("ok"))]).await;
    let request = raw_arguments_request();
    anthropic(&server).complete(&request).await.unwrap();
    let body = server.received().remove(0).body;
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "c", "name": "read_file", "input": {"raw_arguments": "{\"path\": "}}
        ]})
    );
}

fn anthropic_structured(stop_reason: &str, content: Value) -> Value {
    json!({
        "id": "msg_s",
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": stop_reason,
        "usage": {"input_tokens": 50, "output_tokens": 12}
    })
}

#[tokio::test]
async fn anthropic_structured_output_is_a_forced_tool() {
    let server = ModelServer::start_with(vec![ok(anthropic_structured(
        "tool_use",
        json!([
            {"type": "text", "text": "Here is the plan."},
            {"type": "tool_use", "id": "toolu_p", "name": "plan", "input": {"steps": ["read", "summarise"]}}
        ]),
    ))])
    .await;
    let request = ChatRequest {
        model: Some("claude-planner".to_string()),
        response_format: Some(plan_format()),
        ..full_request()
    };
    let response = anthropic(&server).complete(&request).await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&response.content).unwrap(), json!({"steps": ["read", "summarise"]}));
    assert_eq!(
        response,
        ChatResponse {
            content: response.content.clone(),
            tool_calls: vec![],
            usage: Usage::new(50, 12),
            stop_reason: StopReason::EndTurn,
        }
    );

    let body = server.received().remove(0).body;
    assert_eq!(body["model"], "claude-planner");
    assert_eq!(body["messages"].as_array().unwrap().len(), 3, "the history is sent as usual");
    assert_eq!(
        body["tools"],
        json!([
            {
                "name": "read_file",
                "description": "Read a file from the workspace.",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
            },
            {"name": "plan", "description": "Respond with the structured result.", "input_schema": plan_format().schema}
        ])
    );
    assert_eq!(body["tool_choice"], json!({"type": "tool", "name": "plan"}));
}

#[tokio::test]
async fn anthropic_structured_output_without_other_tools() {
    let server = ModelServer::start_with(vec![ok(anthropic_structured(
        "tool_use",
        json!([{"type": "tool_use", "id": "toolu_d", "name": "discovery", "input": {"topic": "leases"}}]),
    ))])
    .await;
    let request = ChatRequest { response_format: Some(open_format()), ..simple_request() };
    let response = anthropic(&server).complete(&request).await.unwrap();
    assert_eq!(response.content, r#"{"topic":"leases"}"#);
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let body = server.received().remove(0).body;
    assert_eq!(
        body,
        json!({
            "model": "test-model",
            "max_tokens": 256,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "tools": [{"name": "discovery", "description": "Respond with the structured result.", "input_schema": open_format().schema}],
            "tool_choice": {"type": "tool", "name": "discovery"}
        })
    );
}

#[tokio::test]
async fn anthropic_structured_output_missing_or_truncated() {
    let server = ModelServer::start_with(vec![
        ok(anthropic_structured("end_turn", json!([{"type": "text", "text": "I would rather chat."}]))),
        ok(anthropic_structured("max_tokens", json!([{"type": "text", "text": "Thinking about the pl"}]))),
    ])
    .await;
    let model = anthropic(&server);
    let request = ChatRequest { response_format: Some(plan_format()), ..simple_request() };
    match model.complete(&request).await {
        Err(ModelError::InvalidResponse(message)) => assert!(message.contains("\"plan\""), "{message}"),
        other => panic!("expected InvalidResponse, got {other:?}"),
    }
    let truncated = model.complete(&request).await.unwrap();
    assert_eq!(truncated.stop_reason, StopReason::MaxTokens);
    assert_eq!(truncated.content, "", "partial text is not passed off as the structured reply");
}

#[tokio::test]
async fn anthropic_format_named_like_a_tool_is_refused_before_sending() {
    let server = ModelServer::start_with(vec![ok(anthropic_text("never"))]).await;
    let format = JsonSchemaFormat { name: "read_file".to_string(), schema: json!({"type": "object"}) };
    let request = ChatRequest { response_format: Some(format), ..full_request() };
    match anthropic(&server).complete(&request).await {
        Err(ModelError::Config(message)) => assert!(message.contains("read_file"), "{message}"),
        other => panic!("expected Config, got {other:?}"),
    }
    assert_eq!(server.received().len(), 0);
}

#[tokio::test]
async fn replay_ignores_model_and_response_format() {
    let reply = ChatResponse {
        content: r#"{"steps":[]}"#.to_string(),
        tool_calls: vec![],
        usage: Usage::default(),
        stop_reason: StopReason::EndTurn,
    };
    let replay = llm::ReplayModel::from_replies("mem", vec![reply.clone()]);
    let request =
        ChatRequest { model: Some("planner".to_string()), response_format: Some(plan_format()), ..simple_request() };
    assert_eq!(replay.complete(&request).await.unwrap(), reply);
}

#[tokio::test]
async fn anthropic_retries_429_with_retry_after_then_succeeds() {
    let server = ModelServer::start_with(vec![
        status(429, json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}))
            .header("retry-after", "0"),
        ok(anthropic_text("after the wait")),
    ])
    .await;
    let response = anthropic(&server).complete(&simple_request()).await.unwrap();
    assert_eq!(response.content, "after the wait");
    assert_eq!(server.received().len(), 2);
    // Every attempt carries the credentials.
    for index in 0..2 {
        assert_eq!(server.received()[index].header("x-api-key"), Some(KEY));
    }
}

#[tokio::test]
async fn anthropic_retry_after_http_date_in_the_past_means_now() {
    let server = ModelServer::start_with(vec![
        status(529, json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
            .header("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),
        ok(anthropic_text("fine")),
    ])
    .await;
    let response = anthropic(&server).complete(&simple_request()).await.unwrap();
    assert_eq!(response.content, "fine");
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn anthropic_5xx_exhaust_attempts() {
    let overloaded =
        || status(529, json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}));
    let server = ModelServer::start_with(vec![overloaded(), overloaded(), overloaded()]).await;
    match anthropic(&server).complete(&simple_request()).await {
        Err(ModelError::Unavailable { attempts, message }) => {
            assert_eq!(attempts, 3);
            assert!(message.contains("529") && message.contains("Overloaded"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn anthropic_400_is_rejected_at_once() {
    let server = ModelServer::start_with(vec![
        status(400, json!({"type": "error", "error": {"type": "invalid_request_error", "message": "messages: roles must alternate"}})),
        ok(anthropic_text("never")),
    ])
    .await;
    match anthropic(&server).complete(&full_request()).await {
        Err(ModelError::Rejected { status, message }) => {
            assert_eq!(status, 400);
            assert_eq!(message, "messages: roles must alternate");
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    assert_eq!(server.received().len(), 1);
}
