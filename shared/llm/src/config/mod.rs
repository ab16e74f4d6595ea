//! Provider configuration: which model to call, where, and how patiently, read from the environment.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use agent_ports::{FileInput, ImageTokens, ModelError};

mod cache;

pub use cache::{bedrock_cache_points, CachePoints, CacheTtl, PromptCache};

/// Default endpoint of the OpenAI Chat Completions API.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Default endpoint of the Anthropic Messages API.
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
const DEFAULT_MAX_ATTEMPTS: u32 = 4;
const DEFAULT_RETRY_BASE_DELAY: Duration = Duration::from_millis(500);
const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Which wire protocol the model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// OpenAI Chat Completions, also spoken by Ollama, vLLM and similar local servers.
    OpenAi,
    /// Anthropic Messages API.
    Anthropic,
    /// Amazon Bedrock's Converse API, with the AWS credentials of the environment (the Lambda role).
    Bedrock,
    /// Recorded replies from a JSON Lines file; no network.
    Replay,
}

impl ProviderKind {
    /// The name used in `LLM_PROVIDER` and in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Bedrock => "bedrock",
            ProviderKind::Replay => "replay",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the model may be shown besides text, as `LLM_FILE_INPUT` says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FileInputSetting {
    /// What the provider and model are known to take (`auto`, the default).
    #[default]
    Auto,
    /// Exactly these kinds: `none`, `images`, `pdf` or `images,pdf`.
    Only { images: bool, documents: bool },
}

impl FileInputSetting {
    /// Parses `auto`, `none`, or a comma-separated list of `images` and `pdf`.
    pub fn parse(raw: &str) -> Result<Self, ModelError> {
        let raw = raw.trim().to_ascii_lowercase();
        if raw.is_empty() || raw == "auto" {
            return Ok(FileInputSetting::Auto);
        }
        let kinds: Vec<&str> = raw.split(',').map(str::trim).collect();
        if kinds != ["none"] && !kinds.iter().all(|kind| ["images", "pdf"].contains(kind)) {
            return Err(config_error(format!(
                "LLM_FILE_INPUT must be auto, none, images, pdf or images,pdf; got {raw:?}"
            )));
        }
        Ok(FileInputSetting::Only { images: kinds.contains(&"images"), documents: kinds.contains(&"pdf") })
    }

    /// What `model` of `provider` is shown. `auto` knows Anthropic's and OpenAI's models take images
    /// and PDFs, and on Bedrock only Claude and Nova do: other Converse models refuse them.
    pub fn resolve(self, provider: ProviderKind, model: &str) -> FileInput {
        // Bedrock counts Claude's images by Anthropic's rule; for Nova, whose rule differs, it is an estimate.
        let image_tokens =
            if provider == ProviderKind::OpenAi { ImageTokens::Tiles512 } else { ImageTokens::PixelsOver750 };
        match self {
            FileInputSetting::Only { images, documents } => {
                FileInput { images, documents, ..FileInput::all(image_tokens) }
            }
            FileInputSetting::Auto => match provider {
                ProviderKind::OpenAi | ProviderKind::Anthropic => FileInput::all(image_tokens),
                ProviderKind::Bedrock => {
                    let model = model.to_ascii_lowercase();
                    if model.contains("anthropic.claude") || model.contains("amazon.nova") {
                        FileInput::all(image_tokens)
                    } else {
                        FileInput::TEXT_ONLY
                    }
                }
                // Recorded replies see nothing, so the core sends them notes unless told otherwise.
                ProviderKind::Replay => FileInput::TEXT_ONLY,
            },
        }
    }
}

/// Everything needed to build a [`agent_ports::ChatModel`].
#[derive(Clone, PartialEq)]
pub struct LlmConfig {
    pub provider: ProviderKind,
    /// Endpoint root without a trailing slash, e.g. `https://api.openai.com/v1`. Empty for Bedrock
    /// unless set, when the SDK picks the endpoint (see [`crate::BedrockModel::new`]).
    pub base_url: String,
    /// The model name; for Bedrock a model id, an inference profile id or an inference profile ARN.
    pub model: String,
    /// Secret; never logged, and redacted by the `Debug` impl.
    pub api_key: Option<String>,
    /// Limit for one buffered HTTP attempt, connection and body included; for a streamed call,
    /// the longest silence allowed between two chunks, since a streamed reply may take minutes.
    pub timeout: Duration,
    /// Total number of HTTP attempts per call, the first one included.
    pub max_attempts: u32,
    /// Base of the exponential backoff between attempts.
    pub retry_base_delay: Duration,
    /// Output token limit sent with each request.
    pub max_tokens: u32,
    /// JSON Lines file of recorded replies, for [`ProviderKind::Replay`].
    pub replay_file: Option<PathBuf>,
    /// For [`ProviderKind::Replay`]: once every reply was served, answer each further call with a
    /// reply saying so (`LLM_REPLAY_EXHAUSTED=answer`, for the local loop) instead of failing it.
    pub replay_exhausted_answers: bool,
    /// When set, every reply is appended to this JSON Lines file.
    pub record_file: Option<PathBuf>,
    /// What the model may be shown besides text (`LLM_FILE_INPUT`).
    pub file_input: FileInputSetting,
    /// Prompt caching: markers, TTL, OpenAI's retention (`PROMPT_CACHE*`).
    pub prompt_cache: PromptCache,
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key must never reach logs, so only its presence is shown.
        f.debug_struct("LlmConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("timeout", &self.timeout)
            .field("max_attempts", &self.max_attempts)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("max_tokens", &self.max_tokens)
            .field("replay_file", &self.replay_file)
            .field("replay_exhausted_answers", &self.replay_exhausted_answers)
            .field("record_file", &self.record_file)
            .field("file_input", &self.file_input)
            .field("prompt_cache", &self.prompt_cache)
            .finish()
    }
}

impl LlmConfig {
    /// A configuration with the default timeout, retry and token settings.
    pub fn new(provider: ProviderKind, base_url: impl Into<String>, model: impl Into<String>) -> Self {
        LlmConfig {
            provider,
            base_url: base_url.into().trim_end_matches('/').to_string(),
            model: model.into(),
            api_key: None,
            timeout: DEFAULT_TIMEOUT,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            retry_base_delay: DEFAULT_RETRY_BASE_DELAY,
            max_tokens: DEFAULT_MAX_TOKENS,
            replay_file: None,
            replay_exhausted_answers: false,
            record_file: None,
            file_input: FileInputSetting::Auto,
            prompt_cache: PromptCache::default(),
        }
    }

    /// A configuration that replays the given JSON Lines file.
    pub fn replay(path: impl Into<PathBuf>) -> Self {
        let mut config = LlmConfig::new(ProviderKind::Replay, "", "replay");
        config.replay_file = Some(path.into());
        config
    }

    /// Reads the configuration from the process environment (see [`LlmConfig::from_lookup`]).
    pub fn from_env() -> Result<Self, ModelError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `lookup`, so tests need not touch the process
    /// environment. Empty values count as unset, because deployment tools often
    /// define variables with empty values.
    ///
    /// Variables: `LLM_PROVIDER` (openai|anthropic|bedrock|replay, default openai), `LLM_BASE_URL`,
    /// `LLM_MODEL`, `LLM_API_KEY`, `LLM_TIMEOUT_SECS`, `LLM_MAX_ATTEMPTS`, `LLM_RETRY_BASE_MS`,
    /// `LLM_MAX_TOKENS`, `LLM_REPLAY_FILE`, `LLM_RECORD_FILE`, `LLM_FILE_INPUT`, and `PROMPT_CACHE`,
    /// `PROMPT_CACHE_TTL`, `PROMPT_CACHE_RETENTION` (see [`PromptCache`]). Bedrock needs only
    /// `LLM_MODEL`: no key (the AWS credential chain signs its requests, so `LLM_API_KEY` is not used)
    /// and no base URL.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let get = |name: &str| lookup(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());

        let provider = match get("LLM_PROVIDER").map(|v| v.to_ascii_lowercase()).as_deref() {
            None | Some("openai") => ProviderKind::OpenAi,
            Some("anthropic") => ProviderKind::Anthropic,
            Some("bedrock") => ProviderKind::Bedrock,
            Some("replay") => ProviderKind::Replay,
            Some(other) => {
                return Err(config_error(format!(
                    "LLM_PROVIDER must be one of openai, anthropic, bedrock, replay; got {other:?}"
                )))
            }
        };

        let base_url = match (get("LLM_BASE_URL"), provider) {
            (Some(url), _) => url,
            (None, ProviderKind::OpenAi) => OPENAI_DEFAULT_BASE_URL.to_string(),
            (None, ProviderKind::Anthropic) => ANTHROPIC_DEFAULT_BASE_URL.to_string(),
            (None, ProviderKind::Bedrock | ProviderKind::Replay) => String::new(),
        };
        // Bedrock's endpoint is optional: the SDK finds it from the region unless one is given.
        let url_optional =
            provider == ProviderKind::Replay || (provider == ProviderKind::Bedrock && base_url.is_empty());
        let http = base_url.starts_with("http://") || base_url.starts_with("https://");
        if !(url_optional || http) {
            return Err(config_error(format!("LLM_BASE_URL must start with http:// or https://; got {base_url:?}")));
        }

        let model = match (get("LLM_MODEL"), provider) {
            (Some(model), _) => model,
            (None, ProviderKind::Replay) => "replay".to_string(),
            (None, _) => return Err(config_error(format!("LLM_MODEL is required for provider {provider}"))),
        };

        // Bedrock authenticates with AWS credentials, so a key set for another provider is not kept.
        let api_key = get("LLM_API_KEY").filter(|_| provider != ProviderKind::Bedrock);
        if provider == ProviderKind::Anthropic && api_key.is_none() {
            return Err(config_error("LLM_API_KEY is required for provider anthropic".to_string()));
        }

        let mut config = LlmConfig::new(provider, base_url, model);
        config.api_key = api_key;
        if let Some(secs) = parse_number(&get, "LLM_TIMEOUT_SECS", 1)? {
            config.timeout = Duration::from_secs(secs);
        }
        if let Some(attempts) = parse_number(&get, "LLM_MAX_ATTEMPTS", 1)? {
            config.max_attempts = u32::try_from(attempts)
                .map_err(|_| config_error(format!("LLM_MAX_ATTEMPTS is too large: {attempts}")))?;
        }
        if let Some(ms) = parse_number(&get, "LLM_RETRY_BASE_MS", 0)? {
            config.retry_base_delay = Duration::from_millis(ms);
        }
        if let Some(tokens) = parse_number(&get, "LLM_MAX_TOKENS", 1)? {
            config.max_tokens =
                u32::try_from(tokens).map_err(|_| config_error(format!("LLM_MAX_TOKENS is too large: {tokens}")))?;
        }
        config.replay_file = get("LLM_REPLAY_FILE").map(PathBuf::from);
        config.record_file = get("LLM_RECORD_FILE").map(PathBuf::from);
        config.replay_exhausted_answers = match get("LLM_REPLAY_EXHAUSTED").as_deref().map(str::trim) {
            None | Some("") | Some("error") => false,
            Some("answer") => true,
            Some(other) => {
                return Err(config_error(format!("LLM_REPLAY_EXHAUSTED must be answer or error; got {other:?}")))
            }
        };
        if let Some(raw) = get("LLM_FILE_INPUT") {
            config.file_input = FileInputSetting::parse(&raw)?;
        }
        config.prompt_cache = PromptCache::from_lookup(&get)?;
        if provider == ProviderKind::Replay && config.replay_file.is_none() {
            return Err(config_error("LLM_REPLAY_FILE is required for provider replay".to_string()));
        }
        Ok(config)
    }

    /// What the configured model may be shown besides text.
    pub fn file_input(&self) -> FileInput {
        self.file_input.resolve(self.provider, &self.model)
    }

    /// A short label such as `openai:gpt-4o-mini`, for logs.
    pub fn model_name(&self) -> String {
        match (self.provider, &self.replay_file) {
            (ProviderKind::Replay, Some(path)) => format!("replay:{}", path.display()),
            _ => format!("{}:{}", self.provider, self.model),
        }
    }
}

fn config_error(message: String) -> ModelError {
    ModelError::Config(message)
}

/// Parses an optional unsigned variable that must be at least `min`.
fn parse_number(get: &impl Fn(&str) -> Option<String>, name: &str, min: u64) -> Result<Option<u64>, ModelError> {
    let Some(raw) = get(name) else {
        return Ok(None);
    };
    let value: u64 =
        raw.parse().map_err(|_| config_error(format!("{name} must be a non-negative integer; got {raw:?}")))?;
    if value < min {
        return Err(config_error(format!("{name} must be at least {min}; got {value}")));
    }
    Ok(Some(value))
}

#[cfg(test)]
mod tests;
