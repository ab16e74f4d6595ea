//! Prompt caching settings (`PROMPT_CACHE`, `PROMPT_CACHE_TTL`, `PROMPT_CACHE_RETENTION`) and the
//! table of the Bedrock models that take cache points, and where.

use agent_ports::ModelError;

/// How long a provider keeps a cached prefix after its last use, where it lets the caller choose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CacheTtl {
    /// Five minutes, every provider's default.
    #[default]
    FiveMinutes,
    /// One hour: a cache write costs more (Anthropic: twice an input token instead of 1.25 times).
    OneHour,
}

impl CacheTtl {
    /// The value on the wire: Anthropic's `cache_control.ttl` and Bedrock's `cachePoint.ttl`.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheTtl::FiveMinutes => "5m",
            CacheTtl::OneHour => "1h",
        }
    }
}

/// Whether and how requests mark their stable prefix for the provider's prompt cache.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptCache {
    /// `PROMPT_CACHE=off` sends no marker, no cache key and no retention.
    pub disabled: bool,
    /// `PROMPT_CACHE_TTL`: Anthropic's breakpoints, and Bedrock's cache points on the models that offer it.
    pub ttl: CacheTtl,
    /// `PROMPT_CACHE_RETENTION`: OpenAI's `prompt_cache_retention` (`in_memory` or `24h`); unset, none is sent.
    pub openai_retention: Option<String>,
}

impl PromptCache {
    /// Whether markers are sent at all.
    pub fn enabled(&self) -> bool {
        !self.disabled
    }

    /// Reads the three variables through `get`, which already treats empty values as unset.
    pub(crate) fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ModelError> {
        let disabled = match get("PROMPT_CACHE").map(|v| v.to_ascii_lowercase()).as_deref() {
            None | Some("on") => false,
            Some("off") => true,
            Some(other) => return Err(error(format!("PROMPT_CACHE must be on or off; got {other:?}"))),
        };
        let ttl = match get("PROMPT_CACHE_TTL").map(|v| v.to_ascii_lowercase()).as_deref() {
            None | Some("5m") => CacheTtl::FiveMinutes,
            Some("1h") => CacheTtl::OneHour,
            Some(other) => return Err(error(format!("PROMPT_CACHE_TTL must be 5m or 1h; got {other:?}"))),
        };
        let openai_retention = match get("PROMPT_CACHE_RETENTION").map(|v| v.to_ascii_lowercase()) {
            None => None,
            Some(value) if value == "in_memory" || value == "24h" => Some(value),
            Some(other) => {
                return Err(error(format!("PROMPT_CACHE_RETENTION must be in_memory or 24h; got {other:?}")))
            }
        };
        Ok(PromptCache { disabled, ttl, openai_retention })
    }
}

fn error(message: String) -> ModelError {
    ModelError::Config(message)
}

/// Where a Bedrock model takes `cachePoint` blocks. A model that takes none is sent none, since
/// Converse rejects a cache point the model does not support.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CachePoints {
    pub system: bool,
    pub messages: bool,
    pub tools: bool,
    /// Whether the model takes `ttl: 1h`; the others are sent the default five minutes.
    pub one_hour: bool,
}

const CLAUDE: CachePoints = CachePoints { system: true, messages: true, tools: true, one_hour: false };
const CLAUDE_1H: CachePoints = CachePoints { one_hour: true, ..CLAUDE };
const NOVA: CachePoints = CachePoints { system: true, messages: true, tools: false, one_hour: false };

/// The Bedrock models that take cache points, by the start of their name once the geography and
/// vendor are stripped (`us.anthropic.claude-sonnet-4-…` is `claude-sonnet-4-…`), most specific
/// first. From Amazon Bedrock's user guide, "Prompt caching for faster model inference" (supported
/// models and the fields that accept cache checkpoints), and AWS's one-hour TTL announcement of
/// January 2026 (Claude Sonnet 4.5, Haiku 4.5, Opus 4.5).
const BEDROCK_CACHE_POINTS: [(&str, CachePoints); 11] = [
    ("claude-sonnet-4-5", CLAUDE_1H),
    ("claude-haiku-4-5", CLAUDE_1H),
    ("claude-opus-4-5", CLAUDE_1H),
    ("claude-sonnet-4", CLAUDE),
    ("claude-opus-4", CLAUDE),
    ("claude-3-7-sonnet", CLAUDE),
    ("claude-3-5-haiku", CLAUDE),
    ("nova-micro", NOVA),
    ("nova-lite", NOVA),
    ("nova-pro", NOVA),
    ("nova-premier", NOVA),
];

/// Where `model` (a model id, an inference profile id, or an ARN ending in one) takes cache points.
pub fn bedrock_cache_points(model: &str) -> CachePoints {
    let name = agent_ports::model_name(model).to_ascii_lowercase();
    BEDROCK_CACHE_POINTS.iter().find(|(prefix, _)| name.starts_with(prefix)).map_or_else(CachePoints::default, |e| e.1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(vars: &[(&str, &str)]) -> Result<PromptCache, ModelError> {
        let map: HashMap<&str, &str> = vars.iter().copied().collect();
        PromptCache::from_lookup(&|name: &str| map.get(name).map(|v| v.to_string()))
    }

    #[test]
    fn caching_is_on_for_five_minutes_by_default() {
        let cache = read(&[]).unwrap();
        assert!(cache.enabled());
        assert_eq!((cache.ttl, cache.openai_retention), (CacheTtl::FiveMinutes, None));
        let set = read(&[("PROMPT_CACHE", "OFF"), ("PROMPT_CACHE_TTL", "1h"), ("PROMPT_CACHE_RETENTION", "24h")]);
        let set = set.unwrap();
        assert!(!set.enabled());
        assert_eq!((set.ttl, set.openai_retention.as_deref()), (CacheTtl::OneHour, Some("24h")));
    }

    #[test]
    fn bad_values_are_config_errors() {
        for (name, value) in [("PROMPT_CACHE", "yes"), ("PROMPT_CACHE_TTL", "10m"), ("PROMPT_CACHE_RETENTION", "1h")] {
            match read(&[(name, value)]) {
                Err(ModelError::Config(message)) => assert!(message.contains(name), "{message}"),
                other => panic!("{name}={value}: {other:?}"),
            }
        }
    }

    #[test]
    fn bedrock_models_take_cache_points_where_aws_says() {
        let claude = "arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0";
        assert_eq!(bedrock_cache_points(claude), CLAUDE);
        assert_eq!(bedrock_cache_points("global.anthropic.claude-sonnet-4-5-20250929-v1:0"), CLAUDE_1H);
        assert_eq!(bedrock_cache_points("anthropic.claude-3-7-sonnet-20250219-v1:0"), CLAUDE);
        assert_eq!(bedrock_cache_points("eu.amazon.nova-pro-v1:0"), NOVA);
        for none in [
            "meta.llama3-1-70b-instruct-v1:0",
            "mistral.mistral-large-2402-v1:0",
            "anthropic.claude-3-5-sonnet-20240620-v1:0",
        ] {
            assert_eq!(bedrock_cache_points(none), CachePoints::default(), "{none}");
        }
    }
}
