//! The model port: the loop talks to any provider through [`ChatModel`].

use async_trait::async_trait;
use thiserror::Error;

use crate::message::{ChatRequest, ChatResponse};

/// A provider failure after the provider's own retries; messages are safe to log,
/// and never contain the API key.
#[derive(Debug, Error)]
pub enum ModelError {
    /// The provider kept failing with a retryable status or connection error.
    #[error("model provider unavailable after {attempts} attempts: {message}")]
    Unavailable { attempts: u32, message: String },
    /// The provider rejected the request (4xx other than 429).
    #[error("model provider rejected the request (HTTP {status}): {message}")]
    Rejected { status: u16, message: String },
    /// The provider answered with something we could not understand.
    #[error("model provider sent an invalid response: {0}")]
    InvalidResponse(String),
    /// Configuration problems such as a missing API key or replay file.
    #[error("model provider misconfigured: {0}")]
    Config(String),
    /// The request is over the model's input limit even after the context budget cut all it may
    /// (the user's request and the skill's instructions are never cut); it was not sent.
    #[error("the request needs about {tokens} tokens after every trim, over the model's input limit of {limit}")]
    ContextTooLarge { tokens: usize, limit: usize },
}

/// Receives a reply's text as the model produces it.
pub trait DeltaSink: Send + Sync {
    fn delta(&self, text: &str);
}

/// A chat model with tool calling.
#[async_trait]
pub trait ChatModel: Send + Sync {
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError>;

    /// Like [`ChatModel::complete`], but hands the reply's text to `sink` as it arrives; the
    /// returned response carries the whole text, equal to the deltas joined. A provider retries
    /// only until the first delta has been handed over: after that a failure is final, since the
    /// text already shown cannot be taken back. The default makes a buffered call and hands its
    /// whole text over as one delta.
    async fn complete_streaming(
        &self,
        request: &ChatRequest,
        sink: &dyn DeltaSink,
    ) -> Result<ChatResponse, ModelError> {
        complete_as_one_delta(self, request, sink).await
    }
}

/// A buffered call whose whole text is handed to `sink` as one delta: the default streamed call,
/// and what a provider does for a reply that cannot stream (a structured output, say).
pub async fn complete_as_one_delta<M: ChatModel + ?Sized>(
    model: &M,
    request: &ChatRequest,
    sink: &dyn DeltaSink,
) -> Result<ChatResponse, ModelError> {
    let response = model.complete(request).await?;
    if !response.content.is_empty() {
        sink.delta(&response.content);
    }
    Ok(response)
}
