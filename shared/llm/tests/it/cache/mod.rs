//! Prompt caching against the scripted servers, which emulate each provider's cache: the markers
//! each provider's request carries (Anthropic's `cache_control`, Bedrock's `cachePoint`, OpenAI's
//! `prompt_cache_key`), and the usage split each reports, buffered and streamed, as a conversation grows.

use agent_ports::{ChatModel, ChatRequest, ChatResponse, Message, ToolCall, ToolSpec, Usage};
use llm::{AnthropicModel, BedrockModel, CacheTtl, LlmConfig, OpenAiModel, ProviderKind};
use serde_json::{json, Value};

use crate::fixtures::Collect;
use local_stack::model_server::{CacheUsage, ModelServer, Reply};

mod anthropic;
mod bedrock;
mod openai;

/// The stable system prompt: long enough (over 1,024 tokens at four bytes a token) for OpenAI to cache.
fn stable_system() -> String {
    "You are a careful assistant; follow the tenant's policy to the letter. ".repeat(80)
}

fn tools() -> Vec<ToolSpec> {
    ["read_file", "write_file"]
        .into_iter()
        .map(|name| ToolSpec {
            name: name.to_string(),
            description: format!("The {name} tool."),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        })
        .collect()
}

/// Step `n` of one turn's loop: the task, then `n` tool calls and their results.
fn step(n: usize, tail: &str) -> ChatRequest {
    let mut messages = vec![Message::user("Summarise the notes.")];
    for i in 0..n {
        let id = format!("call_{i}");
        let arguments = json!({"path": format!("notes-{i}.md")});
        messages.push(Message::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCall { id: id.clone(), name: "read_file".into(), arguments }],
        });
        messages.push(Message::tool(&id, "read_file", format!("# Notes {i}\n").repeat(20)));
    }
    ChatRequest {
        system: stable_system(),
        system_tail: tail.to_string(),
        messages,
        tools: tools().into(),
        cache_key: Some("tenant-a:state-1".into()),
        ..Default::default()
    }
}

/// Step `n` with a reminder for this call only after it, as a forced skill adds.
fn step_with_reminder(n: usize) -> ChatRequest {
    let mut request = step(n, "tail");
    request.messages.push(Message::user(format!("Reminder {n}: stay within the skill.")));
    request.transient_messages = 1;
    request
}

fn config(provider: ProviderKind, server: &ModelServer, model: &str) -> LlmConfig {
    let base = if provider == ProviderKind::OpenAi { server.base_url.clone() } else { server.endpoint() };
    let mut config = crate::fixtures::config(provider, base, model);
    config.api_key = Some("sk-cache-test".into());
    config
}

fn build(provider: ProviderKind, config: &LlmConfig) -> Box<dyn ChatModel> {
    match provider {
        ProviderKind::OpenAi => Box::new(OpenAiModel::new(config).unwrap()),
        ProviderKind::Anthropic => Box::new(AnthropicModel::new(config).unwrap()),
        ProviderKind::Bedrock => {
            Box::new(BedrockModel::from_sdk_config(&crate::bedrock::sdk_config(), config).unwrap())
        }
        ProviderKind::Replay => unreachable!("replay sends nothing"),
    }
}

/// The body `request` is sent as, under `config`.
async fn sent(provider: ProviderKind, edit: impl FnOnce(&mut LlmConfig), model: &str, request: &ChatRequest) -> Value {
    let server = ModelServer::start_with(vec![Reply::text("Done.")]).await;
    let mut config = config(provider, &server, model);
    edit(&mut config);
    build(provider, &config).complete(request).await.unwrap();
    server.received().remove(0).body
}

/// Sends `requests` one after the other, streamed or not, with the server counting real tokens;
/// each response with the usage the server says it reported.
async fn converse(
    provider: ProviderKind,
    model: &str,
    requests: &[ChatRequest],
    streamed: bool,
) -> Vec<(ChatResponse, CacheUsage)> {
    let server = ModelServer::start().await;
    server.count_tokens(true);
    server.push(requests.iter().map(|_| Reply::text("Noted.")));
    let model = build(provider, &config(provider, &server, model));
    let mut responses = Vec::new();
    for request in requests {
        let response = if streamed {
            model.complete_streaming(request, &Collect::new(server.first_delta())).await
        } else {
            model.complete(request).await
        };
        responses.push(response.unwrap());
    }
    responses.into_iter().zip(server.usages().into_iter().map(Option::unwrap)).collect()
}

/// The usage as the server computed it, in the core's terms.
fn core_usage(usage: CacheUsage) -> Usage {
    Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cache_read_tokens: usage.cache_read_tokens,
        cache_write_tokens: usage.cache_write_tokens,
    }
}

/// Every object in `value` that has `key`, wherever it is.
fn count_key(value: &Value, key: &str) -> usize {
    match value {
        Value::Object(fields) => {
            usize::from(fields.contains_key(key)) + fields.values().map(|v| count_key(v, key)).sum::<usize>()
        }
        Value::Array(items) => items.iter().map(|v| count_key(v, key)).sum(),
        _ => 0,
    }
}

fn one_hour(config: &mut LlmConfig) {
    config.prompt_cache.ttl = CacheTtl::OneHour;
}

fn off(config: &mut LlmConfig) {
    config.prompt_cache.disabled = true;
}
