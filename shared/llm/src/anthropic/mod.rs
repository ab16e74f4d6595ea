//! Anthropic Messages API provider, converting to and from core types.

//!
//! A file per step: `request` (the request as the API wants it, a structured output as a forced
//! tool), `response` (its reply back in core types), `streamed` (a streamed reply assembled from its
//! events); this file is the model.

mod cache;
mod request;
mod response;
mod streamed;

use agent_ports::{ChatModel, ChatRequest, ChatResponse, DeltaSink, FileInput, ModelError};
use async_trait::async_trait;
use serde_json::Value;

use crate::body::{with_json, JsonBodies};
use crate::config::{FileInputSetting, LlmConfig, PromptCache, ProviderKind};
use crate::retry::{http_client, send_with_retry, streaming_client, RetryPolicy};
use crate::stream::stream_with_retry;
use request::encode;
use response::{from_wire, MessagesResponse, PROVIDER};
use streamed::StreamedMessage;

const API_VERSION: &str = "2023-06-01";

/// A chat model reached through `POST {base_url}/v1/messages`.
pub struct AnthropicModel {
    client: reqwest::Client,
    streaming: reqwest::Client,
    endpoint: String,
    model: String,
    api_key: String,
    max_tokens: u32,
    files: FileInputSetting,
    cache: PromptCache,
    bodies: JsonBodies,
    retry: RetryPolicy,
}

impl AnthropicModel {
    /// Fails with [`ModelError::Config`] when no API key is configured, since the API requires one.
    pub fn new(config: &LlmConfig) -> Result<Self, ModelError> {
        let api_key = config
            .api_key
            .clone()
            .filter(|key| !key.is_empty())
            .ok_or_else(|| ModelError::Config("an API key is required for provider anthropic".to_string()))?;
        Ok(AnthropicModel {
            client: http_client(config.timeout)?,
            streaming: streaming_client(config.timeout)?,
            endpoint: format!("{}/v1/messages", config.base_url.trim_end_matches('/')),
            model: config.model.clone(),
            api_key,
            max_tokens: config.max_tokens,
            files: config.file_input,
            cache: config.prompt_cache.clone(),
            bodies: JsonBodies::default(),
            retry: RetryPolicy::from_config(config),
        })
    }

    /// The model identifier sent with each request.
    pub fn model_name(&self) -> &str {
        &self.model
    }

    /// What `model` may be shown: the configured model's, or a request's own model's.
    fn file_input_of(&self, model: &str) -> FileInput {
        self.files.resolve(ProviderKind::Anthropic, model)
    }
}

#[async_trait]
impl ChatModel for AnthropicModel {
    fn file_input(&self) -> FileInput {
        self.file_input_of(&self.model)
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let model = crate::effective_model(request, &self.model);
        let body = encode(model, self.max_tokens, request, self.file_input_of(model), &self.cache)?;
        let structured = request.response_format.as_ref().map(|format| format.name.as_str());
        tracing::debug!(provider = PROVIDER, model, response_format = structured, "model call");
        let encoded = self.bodies.encode(&body);
        let bytes = send_with_retry(&self.retry, PROVIDER, Some(&self.api_key), || {
            let builder = self
                .client
                .post(&self.endpoint)
                .header("x-api-key", &self.api_key)
                .header("anthropic-version", API_VERSION);
            with_json(builder, &encoded, &body)
        })
        .await?;
        let wire: MessagesResponse = serde_json::from_slice(&bytes)
            .map_err(|e| ModelError::InvalidResponse(format!("{PROVIDER}: could not parse the response: {e}")))?;
        let response = from_wire(wire, structured)?;
        crate::log_call_done(PROVIDER, model, &response);
        Ok(response)
    }

    async fn complete_streaming(
        &self,
        request: &ChatRequest,
        sink: &dyn DeltaSink,
    ) -> Result<ChatResponse, ModelError> {
        // A structured reply arrives as a forced tool's input, not as text: nothing to stream.
        if request.response_format.is_some() {
            return agent_ports::complete_as_one_delta(self, request, sink).await;
        }
        let model = crate::effective_model(request, &self.model);
        let mut body = encode(model, self.max_tokens, request, self.file_input_of(model), &self.cache)?;
        body["stream"] = Value::Bool(true);
        tracing::debug!(provider = PROVIDER, model, "streamed model call");
        let encoded = self.bodies.encode(&body);
        let make_request = || {
            let builder = self
                .streaming
                .post(&self.endpoint)
                .header("x-api-key", &self.api_key)
                .header("anthropic-version", API_VERSION);
            with_json(builder, &encoded, &body)
        };
        let response =
            stream_with_retry(&self.retry, PROVIDER, Some(&self.api_key), make_request, StreamedMessage::default, sink)
                .await?;
        crate::log_call_done(PROVIDER, model, &response);
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_key_is_a_config_error() {
        let config = LlmConfig::new(crate::ProviderKind::Anthropic, "http://127.0.0.1:1", "m");
        assert!(matches!(AnthropicModel::new(&config), Err(ModelError::Config(_))));
    }
}
