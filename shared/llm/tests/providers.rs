//! Provider tests against a scripted HTTP server on 127.0.0.1: wire shapes, parsing, retries, errors and replay.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agent_ports::{
    ChatModel, ChatRequest, ChatResponse, JsonSchemaFormat, Message, ModelError, StopReason, ToolCall, ToolSpec, Usage,
};
use llm::{build, AnthropicModel, LlmConfig, OpenAiModel, ProviderKind};
use serde_json::{json, Value};

mod support;
use support::plan_format;
use support::server::{ok, status, Answer, Received, Server};

const KEY: &str = "sk-test-key-0123456789";

// ---- Fixtures ----

fn config(provider: ProviderKind, base_url: String) -> LlmConfig {
    let mut config = support::config(provider, base_url, "test-model");
    config.api_key = Some(KEY.to_string());
    config.max_tokens = 256;
    config
}

fn openai(server: &Server) -> OpenAiModel {
    OpenAiModel::new(&config(ProviderKind::OpenAi, format!("{}/v1", server.base))).unwrap()
}

fn anthropic(server: &Server) -> AnthropicModel {
    AnthropicModel::new(&config(ProviderKind::Anthropic, server.base.clone())).unwrap()
}

fn read_tool() -> ToolSpec {
    ToolSpec {
        name: "read_file".to_string(),
        description: "Read a file from the workspace.".to_string(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    }
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
                tool_calls: vec![
                    ToolCall {
                        id: "call_1".to_string(),
                        name: "read_file".to_string(),
                        arguments: json!({"path": "notes.md"}),
                    },
                    ToolCall {
                        id: "call_2".to_string(),
                        name: "read_file".to_string(),
                        arguments: json!({"path": "todo.md"}),
                    },
                ],
            },
            Message::Tool {
                tool_call_id: "call_1".to_string(),
                name: "read_file".to_string(),
                content: "# Notes".to_string(),
            },
            Message::Tool {
                tool_call_id: "call_2".to_string(),
                name: "read_file".to_string(),
                content: "- [ ] ship".to_string(),
            },
        ],
        tools: vec![read_tool()].into(),
        ..Default::default()
    }
}

fn simple_request() -> ChatRequest {
    ChatRequest { messages: vec![Message::user("hi")], ..Default::default() }
}

/// An open schema, which strict mode would reject.
fn open_format() -> JsonSchemaFormat {
    JsonSchemaFormat {
        name: "discovery".to_string(),
        schema: json!({"type": "object", "properties": {"topic": {"type": "string"}}}),
    }
}

fn openai_text(content: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    })
}

fn anthropic_text(text: &str) -> Value {
    json!({
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "test-model",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 20, "output_tokens": 7}
    })
}

/// A fresh path under Cargo's per-test temporary directory.
fn temp_path(name: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("llm-{}-{n}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

// ---- OpenAI ----

#[tokio::test]
async fn openai_request_wire_shape_and_auth() {
    let server = Server::start(vec![ok(openai_text("done"))]).await;
    openai(&server).complete(&full_request()).await.unwrap();

    assert_eq!(server.requests().len(), 1);
    let request = &server.requests()[0];
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
    let server = Server::start(vec![ok(openai_text("hello"))]).await;
    let mut config = config(ProviderKind::OpenAi, format!("{}/v1/", server.base));
    config.api_key = None;
    OpenAiModel::new(&config).unwrap().complete(&simple_request()).await.unwrap();

    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("authorization"), None);
    assert_eq!(
        request.body,
        json!({"model": "test-model", "max_tokens": 256, "messages": [{"role": "user", "content": "hi"}]})
    );
}

#[tokio::test]
async fn openai_parses_text_reply_and_usage() {
    let server = Server::start(vec![ok(openai_text("Hello there."))]).await;
    let response = openai(&server).complete(&simple_request()).await.unwrap();
    assert_eq!(
        response,
        ChatResponse {
            content: "Hello there.".to_string(),
            tool_calls: vec![],
            usage: Usage { input_tokens: 12, output_tokens: 5 },
            stop_reason: StopReason::EndTurn,
        }
    );
}

#[tokio::test]
async fn openai_parses_tool_calls_and_keeps_unparseable_arguments() {
    let server = Server::start(vec![
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
    assert_eq!(response.usage, Usage { input_tokens: 40, output_tokens: 9 });
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
fn raw_arguments_request() -> ChatRequest {
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
            Message::Tool {
                tool_call_id: "c".to_string(),
                name: "read_file".to_string(),
                content: "bad arguments".to_string(),
            },
        ],
        tools: Default::default(),
        ..Default::default()
    }
}

#[tokio::test]
async fn openai_sends_preserved_raw_arguments_verbatim() {
    let server = Server::start(vec![ok(openai_text("ok"))]).await;
    let request = raw_arguments_request();
    openai(&server).complete(&request).await.unwrap();
    let body = server.requests().remove(0).body;
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
    let server = Server::start(vec![ok(openai_text(reply))]).await;
    let request = ChatRequest {
        model: Some("planner-model".to_string()),
        response_format: Some(plan_format()),
        ..simple_request()
    };
    let response = openai(&server).complete(&request).await.unwrap();
    assert_eq!(response.content, reply, "the JSON content is returned as is");
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.stop_reason, StopReason::EndTurn);

    let body = server.requests().remove(0).body;
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
    let server = Server::start(vec![ok(openai_text(r#"{"topic":"leases"}"#)), ok(openai_text("{}"))]).await;
    let model = openai(&server);
    let request = ChatRequest { response_format: Some(open_format()), ..full_request() };
    assert_eq!(model.complete(&request).await.unwrap().content, r#"{"topic":"leases"}"#);
    let body = server.requests().remove(0).body;
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
    let body = server.requests().remove(1).body;
    assert_eq!(body["model"], "test-model", "an empty override is no override");
    assert_eq!(body["response_format"]["json_schema"]["strict"], false);
}

#[tokio::test]
async fn openai_retries_429_with_retry_after_then_succeeds() {
    let server = Server::start(vec![
        status(429, json!({"error": {"message": "Rate limit reached"}})).header("retry-after", "0"),
        ok(openai_text("after the wait")),
    ])
    .await;
    let response = openai(&server).complete(&simple_request()).await.unwrap();
    assert_eq!(response.content, "after the wait");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn retry_after_seconds_are_honoured() {
    // With a 1 ms backoff the only reason to wait a full second is the server's Retry-After.
    let server = Server::start(vec![
        status(503, json!({"error": {"message": "busy"}})).header("retry-after", "1"),
        ok(openai_text("ok")),
    ])
    .await;
    let started = Instant::now();
    openai(&server).complete(&simple_request()).await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1), "waited only {:?}", started.elapsed());
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn openai_500s_exhaust_attempts() {
    let server =
        Server::start((0..3).map(|_| status(500, json!({"error": {"message": "upstream exploded"}}))).collect()).await;
    match openai(&server).complete(&simple_request()).await {
        Err(ModelError::Unavailable { attempts, message }) => {
            assert_eq!(attempts, 3);
            assert!(message.contains("500") && message.contains("upstream exploded"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn openai_400_is_rejected_at_once_without_leaking_the_key() {
    let server = Server::start(vec![
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
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.answers_left(), 1);
}

#[tokio::test]
async fn openai_invalid_body_is_invalid_response() {
    let server = Server::start(vec![Answer::json_text(200, "<html>")]).await;
    let result = openai(&server).complete(&simple_request()).await;
    assert!(matches!(result, Err(ModelError::InvalidResponse(_))), "{result:?}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn timeouts_are_retried() {
    let server =
        Server::start(vec![ok(openai_text("too late")).delayed(Duration::from_secs(3)), ok(openai_text("in time"))])
            .await;
    let mut config = config(ProviderKind::OpenAi, format!("{}/v1", server.base));
    config.timeout = Duration::from_millis(300);
    let response = OpenAiModel::new(&config).unwrap().complete(&simple_request()).await.unwrap();
    assert_eq!(response.content, "in time");
    assert_eq!(server.requests().len(), 2);
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

// ---- Anthropic ----

#[tokio::test]
async fn anthropic_request_wire_shape_and_headers() {
    let server = Server::start(vec![ok(anthropic_text("done"))]).await;
    anthropic(&server).complete(&full_request()).await.unwrap();

    assert_eq!(server.requests().len(), 1);
    let request = &server.requests()[0];
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
    let server = Server::start(vec![ok(anthropic_text("hello"))]).await;
    anthropic(&server).complete(&simple_request()).await.unwrap();
    let body = server.requests().remove(0).body;
    assert_eq!(
        body,
        json!({"model": "test-model", "max_tokens": 256, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})
    );
}

#[tokio::test]
async fn anthropic_parses_text_and_tool_use_replies() {
    let server = Server::start(vec![
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
            usage: Usage { input_tokens: 20, output_tokens: 7 },
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
            usage: Usage { input_tokens: 100, output_tokens: 30 },
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
    let server = Server::start(vec![ok(anthropic_text("ok"))]).await;
    let request = raw_arguments_request();
    anthropic(&server).complete(&request).await.unwrap();
    let body = server.requests().remove(0).body;
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
    let server = Server::start(vec![ok(anthropic_structured(
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
            usage: Usage { input_tokens: 50, output_tokens: 12 },
            stop_reason: StopReason::EndTurn,
        }
    );

    let body = server.requests().remove(0).body;
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
    let server = Server::start(vec![ok(anthropic_structured(
        "tool_use",
        json!([{"type": "tool_use", "id": "toolu_d", "name": "discovery", "input": {"topic": "leases"}}]),
    ))])
    .await;
    let request = ChatRequest { response_format: Some(open_format()), ..simple_request() };
    let response = anthropic(&server).complete(&request).await.unwrap();
    assert_eq!(response.content, r#"{"topic":"leases"}"#);
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let body = server.requests().remove(0).body;
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
    let server = Server::start(vec![
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
    let server = Server::start(vec![ok(anthropic_text("never"))]).await;
    let format = JsonSchemaFormat { name: "read_file".to_string(), schema: json!({"type": "object"}) };
    let request = ChatRequest { response_format: Some(format), ..full_request() };
    match anthropic(&server).complete(&request).await {
        Err(ModelError::Config(message)) => assert!(message.contains("read_file"), "{message}"),
        other => panic!("expected Config, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 0);
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
    let server = Server::start(vec![
        status(429, json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}))
            .header("retry-after", "0"),
        ok(anthropic_text("after the wait")),
    ])
    .await;
    let response = anthropic(&server).complete(&simple_request()).await.unwrap();
    assert_eq!(response.content, "after the wait");
    assert_eq!(server.requests().len(), 2);
    // Every attempt carries the credentials.
    for index in 0..2 {
        assert_eq!(server.requests()[index].header("x-api-key"), Some(KEY));
    }
}

#[tokio::test]
async fn anthropic_retry_after_http_date_in_the_past_means_now() {
    let server = Server::start(vec![
        status(529, json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
            .header("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),
        ok(anthropic_text("fine")),
    ])
    .await;
    let response = anthropic(&server).complete(&simple_request()).await.unwrap();
    assert_eq!(response.content, "fine");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn anthropic_5xx_exhaust_attempts() {
    let overloaded =
        || status(529, json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}));
    let server = Server::start(vec![overloaded(), overloaded(), overloaded()]).await;
    match anthropic(&server).complete(&simple_request()).await {
        Err(ModelError::Unavailable { attempts, message }) => {
            assert_eq!(attempts, 3);
            assert!(message.contains("529") && message.contains("Overloaded"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn anthropic_400_is_rejected_at_once() {
    let server = Server::start(vec![
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
    assert_eq!(server.requests().len(), 1);
}

// ---- Record and replay ----

#[tokio::test]
async fn recorded_replies_replay_identically() {
    let server = Server::start(vec![
        ok(json!({
            "choices": [{"finish_reason": "tool_calls", "message": {"content": "Looking.", "tool_calls": [
                {"id": "call_x", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"x.md\"}"}},
                {"id": "call_y", "type": "function", "function": {"name": "read_file", "arguments": "not json"}}
            ]}}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 8}
        })),
        ok(openai_text("All done.")),
    ])
    .await;
    let record_file = temp_path("record.jsonl");
    let mut live_config = config(ProviderKind::OpenAi, format!("{}/v1", server.base));
    live_config.record_file = Some(record_file.clone());

    let live = build(&live_config).await.unwrap();
    let live_replies =
        vec![live.complete(&full_request()).await.unwrap(), live.complete(&simple_request()).await.unwrap()];
    assert_eq!(live_replies[0].tool_calls[1].arguments, json!("not json"));
    assert_eq!(live_replies[1].content, "All done.");

    let recorded = std::fs::read_to_string(&record_file).unwrap();
    let lines: Vec<&str> = recorded.lines().collect();
    assert_eq!(lines.len(), 2, "{recorded}");
    assert_eq!(serde_json::from_str::<ChatResponse>(lines[0]).unwrap(), live_replies[0]);

    let replay = build(&LlmConfig::replay(&record_file)).await.unwrap();
    let replayed =
        vec![replay.complete(&simple_request()).await.unwrap(), replay.complete(&simple_request()).await.unwrap()];
    assert_eq!(replayed, live_replies);
    assert_eq!(server.requests().len(), 2, "replay must not touch the network");

    match replay.complete(&simple_request()).await {
        Err(ModelError::Config(message)) => {
            assert!(message.contains("exhausted after 2 replies"), "{message}");
            assert!(message.contains(&record_file.display().to_string()), "{message}");
        }
        other => panic!("expected exhaustion, got {other:?}"),
    }
}

#[tokio::test]
async fn malformed_replay_file_names_the_line() {
    let path = temp_path("malformed.jsonl");
    let good = serde_json::to_string(&ChatResponse {
        content: "fine".to_string(),
        tool_calls: vec![],
        usage: Usage::default(),
        stop_reason: StopReason::EndTurn,
    })
    .unwrap();
    std::fs::write(&path, format!("{good}\n\n{good}\n{{\"content\": \"no other fields\"}}\n")).unwrap();
    match build(&LlmConfig::replay(&path)).await {
        Err(ModelError::Config(message)) => assert!(message.contains("line 4"), "{message}"),
        Err(other) => panic!("expected a Config error, got {other:?}"),
        Ok(_) => panic!("a malformed replay file must not load"),
    }
}

#[tokio::test]
async fn missing_replay_file_is_a_config_error() {
    let path = temp_path("absent.jsonl");
    assert!(matches!(build(&LlmConfig::replay(&path)).await, Err(ModelError::Config(_))));
}

#[tokio::test]
async fn build_from_lookup_selects_the_provider() {
    let server = Server::start(vec![ok(anthropic_text("via build"))]).await;
    let base = server.base.clone();
    let config = LlmConfig::from_lookup(move |name| match name {
        "LLM_PROVIDER" => Some("anthropic".to_string()),
        "LLM_BASE_URL" => Some(base.clone()),
        "LLM_MODEL" => Some("claude-test".to_string()),
        "LLM_API_KEY" => Some(KEY.to_string()),
        "LLM_RETRY_BASE_MS" => Some("1".to_string()),
        _ => None,
    })
    .unwrap();
    let model = build(&config).await.unwrap();
    assert_eq!(model.complete(&simple_request()).await.unwrap().content, "via build");
    let Received { path, body, .. } = server.requests().remove(0);
    assert_eq!(path, "/v1/messages");
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], 4096);
}
