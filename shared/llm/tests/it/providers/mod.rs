//! Provider tests against a scripted HTTP server on 127.0.0.1: wire shapes, parsing, retries, errors and replay.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agent_ports::{
    ChatModel, ChatRequest, ChatResponse, JsonSchemaFormat, Message, ModelError, StopReason, ToolCall, ToolSpec, Usage,
};
use llm::{build, AnthropicModel, LlmConfig, OpenAiModel, ProviderKind};
use serde_json::{json, Value};

use crate::fixtures::plan_format;
use local_stack::model_server::{ok, status, ModelServer, Received, Reply};

const KEY: &str = "sk-test-key-0123456789";

// ---- Fixtures ----

fn config(provider: ProviderKind, base_url: String) -> LlmConfig {
    let mut config = crate::fixtures::config(provider, base_url, "test-model");
    config.api_key = Some(KEY.to_string());
    config.max_tokens = 256;
    // These wire shapes are without the cache's markers, which the cache tests (`cache::`) check.
    config.prompt_cache.disabled = true;
    config
}

fn openai(server: &ModelServer) -> OpenAiModel {
    OpenAiModel::new(&config(ProviderKind::OpenAi, format!("{}/v1", server.endpoint()))).unwrap()
}

fn anthropic(server: &ModelServer) -> AnthropicModel {
    AnthropicModel::new(&config(ProviderKind::Anthropic, server.endpoint())).unwrap()
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
            Message::tool("call_1", "read_file", "# Notes"),
            Message::tool("call_2", "read_file", "- [ ] ship"),
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

mod anthropic;
mod openai;
mod replay;
