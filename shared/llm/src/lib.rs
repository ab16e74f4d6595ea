//! Model providers behind the core's [`ChatModel`] trait: OpenAI-compatible Chat Completions,
//! the Anthropic Messages API, Amazon Bedrock's Converse API, and recorded replies. Provider wire types stay private to
//! each provider module; only core types cross this crate's boundary.

pub mod anthropic;
pub mod bedrock;
mod body;
pub mod config;
mod files;
pub mod openai;
pub mod replay;
pub mod retry;
mod stream;
mod structured;

use std::sync::Arc;

use agent_ports::{ChatModel, ChatRequest, ModelError};

pub use anthropic::AnthropicModel;
pub use bedrock::BedrockModel;
pub use config::{
    CacheTtl, FileInputSetting, LlmConfig, PromptCache, ProviderKind, ANTHROPIC_DEFAULT_BASE_URL,
    OPENAI_DEFAULT_BASE_URL,
};
pub use openai::OpenAiModel;
pub use replay::{RecordingModel, ReplayModel};
pub use retry::RetryPolicy;

/// Builds the model the configuration describes, wrapped in a [`RecordingModel`] when
/// `record_file` is set. Async because Bedrock's client loads the AWS configuration (region,
/// credentials) first.
pub async fn build(config: &LlmConfig) -> Result<Arc<dyn ChatModel>, ModelError> {
    let model: Arc<dyn ChatModel> = match config.provider {
        ProviderKind::OpenAi => Arc::new(OpenAiModel::new(config)?),
        ProviderKind::Anthropic => Arc::new(AnthropicModel::new(config)?),
        ProviderKind::Bedrock => Arc::new(BedrockModel::new(config).await?),
        ProviderKind::Replay => {
            let path = config
                .replay_file
                .as_ref()
                .ok_or_else(|| ModelError::Config("provider replay needs a replay file".to_string()))?;
            let replay = ReplayModel::from_file(path)?.answering_when_exhausted(config.replay_exhausted_answers);
            Arc::new(replay.with_file_input(config.file_input()))
        }
    };
    tracing::info!(model = %config.model_name(), recording = config.record_file.is_some(), "model provider ready");
    Ok(match &config.record_file {
        Some(path) => Arc::new(RecordingModel::new(model, path.clone())),
        None => model,
    })
}

/// The model a call uses: the request's own `model` when it names one, else the configured one.
/// An empty override (an unset `PLANNER_MODEL` read as `""`, say) counts as none.
pub(crate) fn effective_model<'a>(request: &'a ChatRequest, configured: &'a str) -> &'a str {
    request.model.as_deref().filter(|model| !model.trim().is_empty()).unwrap_or(configured)
}

/// The one debug line every provider writes after a call: model, token usage and how it stopped.
pub(crate) fn log_call_done(provider: &str, model: &str, response: &agent_ports::ChatResponse) {
    tracing::debug!(
        provider,
        model,
        input_tokens = response.usage.input_tokens,
        cache_read_tokens = response.usage.cache_read_tokens,
        cache_write_tokens = response.usage.cache_write_tokens,
        output_tokens = response.usage.output_tokens,
        stop_reason = ?response.stop_reason,
        tool_calls = response.tool_calls.len(),
        "model call done"
    );
}
