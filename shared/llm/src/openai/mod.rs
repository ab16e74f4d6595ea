//! OpenAI-compatible Chat Completions provider (OpenAI, Ollama, vLLM, ...), converting to and from core types.

//!
//! A file per step: `request` (the request as the server wants it), `response` (its reply back in
//! core types), `streamed` (a streamed reply assembled from its chunks); this file is the model.

mod request;
mod response;
mod streamed;
mod tools;

use agent_ports::{ChatModel, ChatRequest, ChatResponse, DeltaSink, FileInput, ModelError};
use async_trait::async_trait;

use crate::body::{with_json, JsonBodies};
use crate::config::{FileInputSetting, LlmConfig, PromptCache, ProviderKind};
use crate::retry::{http_client, send_with_retry, streaming_client, RetryPolicy};
use crate::stream::stream_with_retry;
use request::to_wire;
use response::{from_wire, CompletionResponse, PROVIDER};
use streamed::StreamedReply;
use tools::ToolsCache;

/// A chat model reached through `POST {base_url}/chat/completions`.
pub struct OpenAiModel {
    client: reqwest::Client,
    streaming: reqwest::Client,
    endpoint: String,
    model: String,
    api_key: Option<String>,
    max_tokens: u32,
    /// OpenAI's own API wants `max_completion_tokens` (newer models reject `max_tokens`),
    /// while compatible servers generally only know `max_tokens`.
    official_api: bool,
    files: FileInputSetting,
    cache: PromptCache,
    tools: ToolsCache,
    bodies: JsonBodies,
    retry: RetryPolicy,
}

impl OpenAiModel {
    pub fn new(config: &LlmConfig) -> Result<Self, ModelError> {
        let base_url = config.base_url.trim_end_matches('/');
        Ok(OpenAiModel {
            client: http_client(config.timeout)?,
            streaming: streaming_client(config.timeout)?,
            endpoint: format!("{base_url}/chat/completions"),
            model: config.model.clone(),
            api_key: config.api_key.clone(),
            max_tokens: config.max_tokens,
            official_api: base_url.starts_with("https://api.openai.com"),
            files: config.file_input,
            cache: config.prompt_cache.clone(),
            tools: ToolsCache::default(),
            bodies: JsonBodies::default(),
            retry: RetryPolicy::from_config(config),
        })
    }

    /// The model identifier sent with each request.
    pub fn model_name(&self) -> &str {
        &self.model
    }

    /// The token limit under the name the server knows.
    fn limits(&self) -> request::Limits {
        if self.official_api {
            (None, Some(self.max_tokens))
        } else {
            (Some(self.max_tokens), None)
        }
    }

    /// What `model` may be shown: the configured model's, or a request's own model's.
    fn file_input_of(&self, model: &str) -> FileInput {
        self.files.resolve(ProviderKind::OpenAi, model)
    }
}

#[async_trait]
impl ChatModel for OpenAiModel {
    fn file_input(&self) -> FileInput {
        self.file_input_of(&self.model)
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let model = crate::effective_model(request, &self.model);
        let body = to_wire(model, request, self.file_input_of(model), self.limits(), &self.cache, &self.tools);
        tracing::debug!(
            provider = PROVIDER,
            model,
            response_format = request.response_format.as_ref().map(|f| f.name.as_str()),
            "model call"
        );
        let encoded = self.bodies.encode(&body);
        let bytes = send_with_retry(&self.retry, PROVIDER, self.api_key.as_deref(), || {
            let builder = with_json(self.client.post(&self.endpoint), &encoded, &body);
            match &self.api_key {
                Some(key) => builder.bearer_auth(key),
                None => builder,
            }
        })
        .await?;
        let wire: CompletionResponse = serde_json::from_slice(&bytes)
            .map_err(|e| ModelError::InvalidResponse(format!("{PROVIDER}: could not parse the response: {e}")))?;
        let response = from_wire(wire)?;
        crate::log_call_done(PROVIDER, model, &response);
        Ok(response)
    }

    async fn complete_streaming(
        &self,
        request: &ChatRequest,
        sink: &dyn DeltaSink,
    ) -> Result<ChatResponse, ModelError> {
        let model = crate::effective_model(request, &self.model);
        let body =
            to_wire(model, request, self.file_input_of(model), self.limits(), &self.cache, &self.tools).streamed();
        tracing::debug!(provider = PROVIDER, model, "streamed model call");
        let encoded = self.bodies.encode(&body);
        let make_request = || {
            let builder = with_json(self.streaming.post(&self.endpoint), &encoded, &body);
            match &self.api_key {
                Some(key) => builder.bearer_auth(key),
                None => builder,
            }
        };
        let response = stream_with_retry(
            &self.retry,
            PROVIDER,
            self.api_key.as_deref(),
            make_request,
            StreamedReply::default,
            sink,
        )
        .await?;
        crate::log_call_done(PROVIDER, model, &response);
        Ok(response)
    }
}
