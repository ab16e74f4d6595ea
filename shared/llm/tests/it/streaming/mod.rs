//! Streamed provider calls against scripted ModelServer-Sent Events servers on 127.0.0.1: deltas arrive
//! while the reply is still being sent, tool calls and usage are assembled, failures before the
//! first delta are retried and failures after it are not, malformed streams are errors, not panics.

use std::sync::Arc;
use std::time::Duration;

use agent_ports::{ChatModel, ChatRequest, ChatResponse, JsonSchemaFormat, ModelError, StopReason};
use llm::{AnthropicModel, LlmConfig, OpenAiModel, ProviderKind, RecordingModel, ReplayModel};
use serde_json::{json, Value};

use crate::fixtures::{request_with_system, Collect};
use local_stack::model_server::{ok, status, ModelServer, Piece, Reply};

const KEY: &str = "sk-stream-key-0123456789";

/// A streamed reply: its events sent piece by piece.
fn events(pieces: Vec<Piece>) -> Reply {
    Reply::stream("text/event-stream", pieces)
}

/// An error status with a JSON error body that names the key (which must not leak) and, when
/// given, `Retry-After`.
fn failure(code: u16, retry_after: Option<&str>) -> Reply {
    let answer = status(code, json!({"error": {"message": format!("scripted {code} for {KEY}"), "type": "api_error"}}));
    match retry_after {
        Some(wait) => answer.header("retry-after", wait),
        None => answer,
    }
}

fn config(server: &ModelServer, provider: ProviderKind) -> LlmConfig {
    let base = match provider {
        ProviderKind::OpenAi => format!("{}/v1", server.endpoint()),
        _ => server.endpoint(),
    };
    let mut config = crate::fixtures::config(provider, base, "test-model");
    config.api_key = Some(KEY.to_owned());
    config
}

fn openai(server: &ModelServer) -> OpenAiModel {
    OpenAiModel::new(&config(server, ProviderKind::OpenAi)).unwrap()
}

fn anthropic(server: &ModelServer) -> AnthropicModel {
    AnthropicModel::new(&config(server, ProviderKind::Anthropic)).unwrap()
}

/// Streams one call on a fresh sink, returning the deltas it got along with the result.
async fn stream(model: &dyn ChatModel, server: &ModelServer) -> (Vec<String>, Result<ChatResponse, ModelError>) {
    let sink = Collect::new(server.first_delta());
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

mod anthropic;
mod openai;
mod replay;
