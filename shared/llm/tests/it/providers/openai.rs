//! The OpenAI-compatible provider: its wire shape, parsing, retries and errors.

use super::*;

#[tokio::test]
async fn openai_request_wire_shape_and_auth() {
    let server = ModelServer::start_with(vec![ok(openai_text("done"))]).await;
    openai(&server).complete(&full_request()).await.unwrap();

    assert_eq!(server.received().len(), 1);
    let request = &server.received()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(
        request.body,
        json!({
            "model": "test-model",
            "max_tokens": 256,
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Summarise notes.md and todo.md"},
                {"role": "assistant", "content": "Reading both.", "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"notes.md\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"todo.md\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "# Notes"},
                {"role": "tool", "tool_call_id": "call_2", "content": "- [ ] ship"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "read_file",
                "description": "Read a file from the workspace.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
            }}]
        })
    );
}

#[tokio::test]
async fn openai_omits_empty_tools_system_and_missing_key() {
    let server = ModelServer::start_with(vec![ok(openai_text("hello"))]).await;
    let mut config = config(ProviderKind::OpenAi, format!("{}/v1/", server.endpoint()));
    config.api_key = None;
    OpenAiModel::new(&config).unwrap().complete(&simple_request()).await.unwrap();

    let request = &server.received()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("authorization"), None);
    assert_eq!(
        request.body,
        json!({"model": "test-model", "max_tokens": 256, "messages": [{"role": "user", "content": "hi"}]})
    );
}

#[tokio::test]
async fn openai_parses_text_reply_and_usage() {
    let server = ModelServer::start_with(vec![ok(openai_text("Hello there."))]).await;
    let response = openai(&server).complete(&simple_request()).await.unwrap();
    assert_eq!(
        response,
        ChatResponse {
            content: "Hello there.".to_string(),
            tool_calls: vec![],
            usage: Usage::new(12, 5),
            stop_reason: StopReason::EndTurn,
        }
    );
}

#[tokio::test]
async fn openai_parses_tool_calls_and_keeps_unparseable_arguments() {
    let server = ModelServer::start_with(vec![
        ok(json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant",
                "content": null,
                "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.md\"}"}},
                    {"id": "call_b", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"b.md\""}},
                    {"type": "function", "function": {"name": "list", "arguments": "{}"}}
                ]
            }}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9}
        })),
        ok(json!({"choices": [{"message": {"content": "cut"}, "finish_reason": "length"}]})),
    ])
    .await;
    let model = openai(&server);

    let response = model.complete(&simple_request()).await.unwrap();
    assert_eq!(response.content, "");
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.usage, Usage::new(40, 9));
    assert_eq!(response.tool_calls.len(), 3);
    assert_eq!(
        response.tool_calls[0],
        ToolCall { id: "call_a".to_string(), name: "read_file".to_string(), arguments: json!({"path": "a.md"}) }
    );
    assert_eq!(response.tool_calls[1].arguments, Value::String("{\"path\": \"b.md\"".to_string()));
    assert_eq!(response.tool_calls[2].name, "list");
    assert!(response.tool_calls[2].id.starts_with("call_"), "generated id: {}", response.tool_calls[2].id);

    // `length` means the output was cut off, and a missing usage counts as zero.
    let truncated = model.complete(&simple_request()).await.unwrap();
    assert_eq!(truncated.stop_reason, StopReason::MaxTokens);
    assert_eq!(truncated.usage, Usage::default());
}

/// A conversation whose earlier tool call kept arguments that are not JSON (`{"path": `).
pub(super) fn raw_arguments_request() -> ChatRequest {
    ChatRequest {
        system: String::new(),
        messages: vec![
            Message::user("go"),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c".to_string(),
                    name: "read_file".to_string(),
                    arguments: Value::String("{\"path\": ".to_string()),
                }],
            },
            Message::tool("c", "read_file", "bad arguments"),
        ],
        tools: Default::default(),
        ..Default::default()
    }
}

#[tokio::test]
async fn openai_sends_preserved_raw_arguments_verbatim() {
    let server = ModelServer::start_with(vec![ok(openai_text("ok"))]).await;
    let request = raw_arguments_request();
    openai(&server).complete(&request).await.unwrap();
    let body = server.received().remove(0).body;
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": "}}
        ]})
    );
}

#[tokio::test]
async fn openai_model_override_and_strict_json_schema() {
    let reply = r#"{"steps":["read notes.md","summarise"]}"#;
    let server = ModelServer::start_with(vec![ok(openai_text(reply))]).await;
    let request = ChatRequest {
        model: Some("planner-model".to_string()),
        response_format: Some(plan_format()),
        ..simple_request()
    };
    let response = openai(&server).complete(&request).await.unwrap();
    assert_eq!(response.content, reply, "the JSON content is returned as is");
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.stop_reason, StopReason::EndTurn);

    let body = server.received().remove(0).body;
    assert_eq!(
        body,
        json!({
            "model": "planner-model",
            "max_tokens": 256,
            "messages": [{"role": "user", "content": "hi"}],
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "plan",
                "schema": plan_format().schema,
                "strict": true
            }}
        })
    );
}

#[tokio::test]
async fn openai_open_schema_is_not_strict_and_tools_stay() {
    let server = ModelServer::start_with(vec![ok(openai_text(r#"{"topic":"leases"}"#)), ok(openai_text("{}"))]).await;
    let model = openai(&server);
    let request = ChatRequest { response_format: Some(open_format()), ..full_request() };
    assert_eq!(model.complete(&request).await.unwrap().content, r#"{"topic":"leases"}"#);
    let body = server.received().remove(0).body;
    assert_eq!(body["model"], "test-model", "no override means the configured model");
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "discovery", "schema": open_format().schema, "strict": false}})
    );
    assert_eq!(body["tools"][0]["function"]["name"], "read_file");

    // `additionalProperties` anywhere but the top level does not make the schema closed.
    let nested = JsonSchemaFormat {
        name: "nested".to_string(),
        schema: json!({"type": "object", "properties": {"a": {"type": "object", "additionalProperties": false}}}),
    };
    let request = ChatRequest { model: Some(String::new()), response_format: Some(nested), ..simple_request() };
    model.complete(&request).await.unwrap();
    let body = server.received().remove(1).body;
    assert_eq!(body["model"], "test-model", "an empty override is no override");
    assert_eq!(body["response_format"]["json_schema"]["strict"], false);
}

#[tokio::test]
async fn openai_retries_429_with_retry_after_then_succeeds() {
    let server = ModelServer::start_with(vec![
        status(429, json!({"error": {"message": "Rate limit reached"}})).header("retry-after", "0"),
        ok(openai_text("after the wait")),
    ])
    .await;
    let response = openai(&server).complete(&simple_request()).await.unwrap();
    assert_eq!(response.content, "after the wait");
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn retry_after_seconds_are_honoured() {
    // With a 1 ms backoff the only reason to wait a full second is the server's Retry-After.
    let server = ModelServer::start_with(vec![
        status(503, json!({"error": {"message": "busy"}})).header("retry-after", "1"),
        ok(openai_text("ok")),
    ])
    .await;
    let started = Instant::now();
    openai(&server).complete(&simple_request()).await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1), "waited only {:?}", started.elapsed());
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn openai_500s_exhaust_attempts() {
    let server = ModelServer::start_with(
        (0..3).map(|_| status(500, json!({"error": {"message": "upstream exploded"}}))).collect(),
    )
    .await;
    match openai(&server).complete(&simple_request()).await {
        Err(ModelError::Unavailable { attempts, message }) => {
            assert_eq!(attempts, 3);
            assert!(message.contains("500") && message.contains("upstream exploded"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn openai_400_is_rejected_at_once_without_leaking_the_key() {
    let server = ModelServer::start_with(vec![
        status(
            400,
            json!({"error": {"message": format!("Invalid 'tools[0]' for key {KEY}"), "type": "invalid_request_error"}}),
        ),
        ok(openai_text("never")),
    ])
    .await;
    match openai(&server).complete(&full_request()).await {
        Err(ModelError::Rejected { status, message }) => {
            assert_eq!(status, 400);
            assert!(message.starts_with("Invalid 'tools[0]' for key"), "{message}");
            assert!(!message.contains(KEY), "{message}");
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    assert_eq!(server.received().len(), 1);
    assert_eq!(server.remaining(), 1);
}

#[tokio::test]
async fn openai_invalid_body_is_invalid_response() {
    let server = ModelServer::start_with(vec![Reply::json_text(200, "<html>")]).await;
    let result = openai(&server).complete(&simple_request()).await;
    assert!(matches!(result, Err(ModelError::InvalidResponse(_))), "{result:?}");
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn timeouts_are_retried() {
    let server = ModelServer::start_with(vec![
        ok(openai_text("too late")).delayed(Duration::from_secs(3)),
        ok(openai_text("in time")),
    ])
    .await;
    let mut config = config(ProviderKind::OpenAi, format!("{}/v1", server.endpoint()));
    config.timeout = Duration::from_millis(300);
    let response = OpenAiModel::new(&config).unwrap().complete(&simple_request()).await.unwrap();
    assert_eq!(response.content, "in time");
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn connection_errors_are_retried_then_unavailable() {
    // Bind and drop a listener to get a port that nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut config = config(ProviderKind::OpenAi, format!("http://127.0.0.1:{port}/v1"));
    config.max_attempts = 2;
    match OpenAiModel::new(&config).unwrap().complete(&simple_request()).await {
        Err(ModelError::Unavailable { attempts, message }) => {
            assert_eq!(attempts, 2);
            assert!(!message.contains(KEY), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}
