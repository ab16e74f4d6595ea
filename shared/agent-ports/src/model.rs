//! The model port: the loop talks to any provider through [`ChatModel`].

use async_trait::async_trait;
use thiserror::Error;

use crate::message::{ChatRequest, ChatResponse, FileRef, MediaType};

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

/// How a model counts an image's tokens, each provider by its own published rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageTokens {
    /// Anthropic's (and Claude on Bedrock): width × height / 750.
    PixelsOver750,
    /// OpenAI's high detail: 85 plus 170 per 512-pixel tile, after fitting the image in 2048 × 2048
    /// and its short side in 768.
    Tiles512,
}

/// What a model can be shown besides text. A model that cannot see a kind of file is sent a short
/// note in its place, never a request its API would refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInput {
    /// Images (PNG, JPEG, GIF, WebP).
    pub images: bool,
    /// PDF documents.
    pub documents: bool,
    pub image_tokens: ImageTokens,
    /// What a PDF page is counted as, text and picture together.
    pub tokens_per_page: u32,
}

impl FileInput {
    /// A model that reads text only.
    pub const TEXT_ONLY: FileInput =
        FileInput { images: false, documents: false, image_tokens: ImageTokens::PixelsOver750, tokens_per_page: 2_500 };

    /// A model that sees images and PDFs, counting images by `image_tokens`.
    pub const fn all(image_tokens: ImageTokens) -> FileInput {
        FileInput { images: true, documents: true, image_tokens, tokens_per_page: 2_500 }
    }

    /// Whether a file of this type can be shown.
    pub fn accepts(&self, media_type: MediaType) -> bool {
        if media_type.is_image() {
            self.images
        } else {
            self.documents
        }
    }

    /// The tokens a file is estimated to cost this model.
    pub fn tokens(&self, file: &FileRef) -> usize {
        if !file.media_type.is_image() {
            return file.pages.unwrap_or(1).max(1) as usize * self.tokens_per_page as usize;
        }
        let (width, height) = (file.width.unwrap_or(1_000) as u64, file.height.unwrap_or(1_000) as u64);
        let tokens = match self.image_tokens {
            ImageTokens::PixelsOver750 => (width * height).div_ceil(750),
            ImageTokens::Tiles512 => {
                // Fit in 2048 × 2048, then scale the short side down to 768.
                let fit = |w: u64, h: u64, max: u64| {
                    let long = w.max(h);
                    if long > max {
                        ((w * max).div_ceil(long).max(1), (h * max).div_ceil(long).max(1))
                    } else {
                        (w, h)
                    }
                };
                let (w, h) = fit(width, height, 2048);
                let short = w.min(h);
                let (w, h) = if short > 768 { ((w * 768).div_ceil(short), (h * 768).div_ceil(short)) } else { (w, h) };
                85 + 170 * w.div_ceil(512) * h.div_ceil(512)
            }
        };
        tokens as usize
    }
}

/// A chat model with tool calling.
#[async_trait]
pub trait ChatModel: Send + Sync {
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError>;

    /// What this model can be shown besides text; text only unless the provider says otherwise.
    fn file_input(&self) -> FileInput {
        FileInput::TEXT_ONLY
    }

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

/// Leading parts of a model id that do not name the model: a Bedrock inference profile's geography
/// (`us.`, `eu.`...), then the vendor (`anthropic.`, `amazon.`...).
const MODEL_ID_PREFIXES: [&str; 20] = [
    "us",
    "us-gov",
    "eu",
    "apac",
    "jp",
    "au",
    "ca",
    "global",
    "anthropic",
    "meta",
    "mistral",
    "amazon",
    "cohere",
    "ai21",
    "deepseek",
    "openai",
    "qwen",
    "writer",
    "moonshot",
    "twelvelabs",
];

/// The model's own name in a model id, for the tables keyed by it (context windows, prices, cache
/// support): without a path (`anthropic/claude-sonnet-4`, an inference profile's ARN) and without
/// Bedrock's geography and vendor (`us.anthropic.claude-…-v1:0`). Case is kept.
pub fn model_name(model: &str) -> &str {
    let model = model.trim();
    let mut name = model.rsplit('/').next().unwrap_or(model);
    while let Some((head, rest)) = name.split_once('.') {
        if rest.is_empty() || !MODEL_ID_PREFIXES.iter().any(|prefix| prefix.eq_ignore_ascii_case(head)) {
            break;
        }
        name = rest;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(width: u32, height: u32) -> FileRef {
        FileRef {
            path: "/workspace/a.png".into(),
            sha256: "0".repeat(64),
            media_type: MediaType::Png,
            size: 1,
            width: Some(width),
            height: Some(height),
            pages: None,
        }
    }

    #[test]
    fn images_are_counted_by_each_providers_rule() {
        let anthropic = FileInput::all(ImageTokens::PixelsOver750);
        // Anthropic's own example: 1092 × 1092 is about 1,590 tokens.
        assert_eq!(anthropic.tokens(&image(1092, 1092)), 1590);
        let openai = FileInput::all(ImageTokens::Tiles512);
        // OpenAI's own examples: 1024 × 1024 is 765 tokens, 2048 × 4096 is 1,105.
        assert_eq!(openai.tokens(&image(1024, 1024)), 765);
        assert_eq!(openai.tokens(&image(2048, 4096)), 1105);
        let pdf = FileRef { media_type: MediaType::Pdf, pages: Some(3), width: None, height: None, ..image(1, 1) };
        assert_eq!(anthropic.tokens(&pdf), 7_500);
        assert!(!FileInput::TEXT_ONLY.accepts(MediaType::Png));
    }
}
