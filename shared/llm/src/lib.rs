//! Model providers behind the core's [`ChatModel`] trait: OpenAI-compatible Chat Completions,
//! the Anthropic Messages API, and recorded replies. Provider wire types stay private to
//! each provider module; only core types cross this crate's boundary.

pub mod anthropic;
pub mod config;
pub mod openai;
pub mod replay;
pub mod retry;

use std::sync::Arc;

use agent_core::{ChatModel, ModelError};

pub use anthropic::AnthropicModel;
pub use config::{LlmConfig, ProviderKind, ANTHROPIC_DEFAULT_BASE_URL, OPENAI_DEFAULT_BASE_URL};
pub use openai::OpenAiModel;
pub use replay::{RecordingModel, ReplayModel};
pub use retry::RetryPolicy;

/// Builds the model the configuration describes, wrapped in a [`RecordingModel`] when
/// `record_file` is set.
pub fn build(config: &LlmConfig) -> Result<Arc<dyn ChatModel>, ModelError> {
    let model: Arc<dyn ChatModel> = match config.provider {
        ProviderKind::OpenAi => Arc::new(OpenAiModel::new(config)?),
        ProviderKind::Anthropic => Arc::new(AnthropicModel::new(config)?),
        ProviderKind::Replay => {
            let path = config
                .replay_file
                .as_ref()
                .ok_or_else(|| ModelError::Config("provider replay needs a replay file".to_string()))?;
            Arc::new(ReplayModel::from_file(path)?)
        }
    };
    tracing::info!(model = %config.model_name(), recording = config.record_file.is_some(), "model provider ready");
    Ok(match &config.record_file {
        Some(path) => Arc::new(RecordingModel::new(model, path.clone())),
        None => model,
    })
}
