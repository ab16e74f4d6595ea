//! The agent's settings read from the environment, and the error a configuration problem is
//! reported with at start-up.

use std::time::Duration;

use agent_core::prompt::SkillPromptMode;
use agent_core::turn::AgentConfig;
use thiserror::Error;

/// A configuration problem found at start-up; the message names the variable.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{name} is invalid: {reason}")]
    Invalid { name: &'static str, reason: String },
    #[error("storage configuration: {0}")]
    Storage(String),
    #[error(transparent)]
    Model(#[from] agent_core::ModelError),
}

/// Reads the agent settings (`MAX_STEPS`, `SKILL_PROMPT_MODE`, `DEADLINE_RESERVE_MS`,
/// `DEFAULT_LANGUAGE`, `IMAGE_LONG_EDGE`, `PDF_MAX_PAGES`...) through `lookup`, so tests need not touch the process environment.
pub fn agent_config(lookup: impl Fn(&str) -> Option<String>) -> Result<AgentConfig, ConfigError> {
    let mut config = AgentConfig::default();
    if let Some(value) = lookup("MAX_STEPS") {
        config.max_steps = match value.trim().parse::<u32>() {
            Ok(steps) if (1..=200).contains(&steps) => steps,
            _ => {
                return Err(ConfigError::Invalid {
                    name: "MAX_STEPS",
                    reason: format!("expected a whole number from 1 to 200, got `{value}`"),
                });
            }
        };
    }
    let count = |name: &'static str, range: std::ops::RangeInclusive<u32>, default: u32| -> Result<u32, ConfigError> {
        match lookup(name).filter(|v| !v.trim().is_empty()) {
            None => Ok(default),
            Some(value) => match value.trim().parse::<u32>() {
                Ok(number) if range.contains(&number) => Ok(number),
                _ => Err(ConfigError::Invalid {
                    name,
                    reason: format!("expected a whole number from {} to {}, got `{value}`", range.start(), range.end()),
                }),
            },
        }
    };
    let defaults = config.subagents;
    config.subagents.max_depth = count("SUBAGENT_MAX_DEPTH", 0..=4, defaults.max_depth)?;
    config.subagents.per_turn = count("SUBAGENTS_PER_TURN", 1..=64, defaults.per_turn)?;
    config.subagents.max_steps = count("SUBAGENT_MAX_STEPS", 1..=200, defaults.max_steps)?;
    // The bounds of what a model is shown of an image or a PDF; the other bounds are the providers'.
    config.media.long_edge = count("IMAGE_LONG_EDGE", 256..=8000, config.media.long_edge)?;
    config.media.pdf_pages = count("PDF_MAX_PAGES", 1..=1000, config.media.pdf_pages)?;
    let ask = lookup("APPROVAL_REQUIRED").unwrap_or_default();
    let allow = lookup("APPROVAL_ALLOW").unwrap_or_default();
    config.approvals = agent_core::tools::ApprovalPolicy::parse(&ask, &allow)
        .map_err(|reason| ConfigError::Invalid { name: "APPROVAL_REQUIRED/APPROVAL_ALLOW", reason })?;
    if let Some(value) = lookup("SKILL_PROMPT_MODE") {
        config.prompt_mode = value
            .parse::<SkillPromptMode>()
            .map_err(|reason| ConfigError::Invalid { name: "SKILL_PROMPT_MODE", reason })?;
    }
    if let Some(value) = lookup("DEADLINE_RESERVE_MS") {
        let millis = value.trim().parse::<u64>().map_err(|_| ConfigError::Invalid {
            name: "DEADLINE_RESERVE_MS",
            reason: format!("expected milliseconds, got `{value}`"),
        })?;
        config.deadline_reserve = Duration::from_millis(millis);
    }
    if let Some(value) = lookup("DEFAULT_LANGUAGE").filter(|v| !v.trim().is_empty()) {
        config.default_language = value;
    }
    let tokens = |name: &'static str, min: usize| -> Result<Option<usize>, ConfigError> {
        match lookup(name).filter(|v| !v.trim().is_empty()) {
            None => Ok(None),
            Some(value) => match value.trim().parse::<usize>() {
                Ok(count) if count >= min => Ok(Some(count)),
                _ => Err(ConfigError::Invalid {
                    name,
                    reason: format!("expected a token count of at least {min}, got `{value}`"),
                }),
            },
        }
    };
    let model = lookup("LLM_MODEL").unwrap_or_default();
    config.context_tokens =
        tokens("LLM_CONTEXT_TOKENS", 2048)?.unwrap_or_else(|| agent_core::budget::default_context_tokens(&model));
    if let Some(output) = tokens("LLM_MAX_TOKENS", 1)? {
        config.output_tokens = output;
    }
    config.summary_threshold = tokens("HISTORY_SUMMARY_TOKENS", 256)?;
    config.skill_listing_tokens = tokens("SKILL_LISTING_TOKENS", 200)?;
    // The label the configured model's calls are counted under in each tenant's usage.
    config.model_id = model.trim().to_owned();
    config.daily_token_budget = daily_token_budget(&lookup)?;
    config.daily_cost_budget = daily_cost_budget(&lookup)?;
    config.prices = model_prices(&lookup)?;
    if config.daily_cost_budget.is_some() && config.prices.price(&config.model_id).is_none() {
        tracing::warn!(
            model = %config.model_id,
            "LLM_MODEL has no price (MODEL_PRICES): DAILY_BUDGET_USD cannot see its calls, which count in tokens only"
        );
    }

    if let Some(value) = lookup("AGENT_STRATEGY") {
        config.strategy = value.parse().map_err(|reason| ConfigError::Invalid { name: "AGENT_STRATEGY", reason })?;
    }
    let model = |name: &str| lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    config.planner.planner_model = model("PLANNER_MODEL");
    config.planner.discovery_model = model("DISCOVERY_MODEL");
    config.planner.assessment_model = model("ASSESSMENT_MODEL");
    config.planner.response_model = model("RESPONSE_MODEL");
    let threshold = |name: &'static str, default: f64| -> Result<f64, ConfigError> {
        match lookup(name).filter(|v| !v.trim().is_empty()) {
            None => Ok(default),
            Some(value) => match value.trim().parse::<f64>() {
                Ok(number) if (0.0..=1.0).contains(&number) => Ok(number),
                _ => {
                    Err(ConfigError::Invalid { name, reason: format!("expected a number from 0 to 1, got `{value}`") })
                }
            },
        }
    };
    config.planner.prompt_confidence_threshold =
        threshold("PROMPT_CONFIDENCE_THRESHOLD", config.planner.prompt_confidence_threshold)?;
    config.planner.prompt_suggestion_threshold =
        threshold("PROMPT_SUGGESTION_THRESHOLD", config.planner.prompt_suggestion_threshold)?;
    config.planner.task_completion_threshold =
        threshold("TASK_COMPLETION_THRESHOLD", config.planner.task_completion_threshold)?;
    if config.planner.prompt_suggestion_threshold > config.planner.prompt_confidence_threshold {
        return Err(ConfigError::Invalid {
            name: "PROMPT_SUGGESTION_THRESHOLD",
            reason: "must not be above PROMPT_CONFIDENCE_THRESHOLD".to_owned(),
        });
    }
    Ok(config)
}

/// `DAILY_TOKEN_BUDGET`: the tokens (input and output) a tenant may use a UTC day unless an
/// operator set its own; unset, empty or 0 for no budget.
fn daily_token_budget(lookup: &impl Fn(&str) -> Option<String>) -> Result<Option<u64>, ConfigError> {
    match lookup("DAILY_TOKEN_BUDGET").map(|value| value.trim().to_owned()).filter(|value| !value.is_empty()) {
        None => Ok(None),
        Some(value) => match value.parse::<u64>() {
            Ok(0) => Ok(None),
            Ok(tokens) => Ok(Some(tokens)),
            Err(_) => Err(ConfigError::Invalid {
                name: "DAILY_TOKEN_BUDGET",
                reason: format!("expected a whole number of tokens (0 for no budget), got `{value}`"),
            }),
        },
    }
}

/// `DAILY_BUDGET_USD`: the money (US dollars, at the price table's prices) a tenant may spend a UTC
/// day unless an operator set its own; unset, empty or 0 for no money budget.
fn daily_cost_budget(lookup: &impl Fn(&str) -> Option<String>) -> Result<Option<u64>, ConfigError> {
    match lookup("DAILY_BUDGET_USD").map(|value| value.trim().to_owned()).filter(|value| !value.is_empty()) {
        None => Ok(None),
        Some(value) => match agent_core::store::parse_usd_nanos(value.trim_start_matches('$')) {
            Some(0) => Ok(None),
            Some(nanos) => Ok(Some(nanos)),
            None => Err(ConfigError::Invalid {
                name: "DAILY_BUDGET_USD",
                reason: format!("expected dollars such as `25` or `2.50` (0 for no budget), got `{value}`"),
            }),
        },
    }
}

/// `MODEL_PRICES`: the deployment's prices (JSON, dollars per million tokens by model-id prefix)
/// over the shipped table; unset or empty for the shipped table alone.
fn model_prices(
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<std::sync::Arc<agent_core::pricing::PriceTable>, ConfigError> {
    let shipped = agent_core::pricing::PriceTable::shipped();
    match lookup("MODEL_PRICES").filter(|value| !value.trim().is_empty()) {
        None => Ok(shipped),
        Some(json) => shipped
            .with_overrides(&json)
            .map(std::sync::Arc::new)
            .map_err(|reason| ConfigError::Invalid { name: "MODEL_PRICES", reason }),
    }
}

/// The process environment as a lookup, for the readers that take one.
pub(crate) fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_validates_agent_settings() {
        let config = agent_config(|name| match name {
            "MAX_STEPS" => Some("3".into()),
            "SKILL_PROMPT_MODE" => Some("inject".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!((config.max_steps, config.prompt_mode), (3, SkillPromptMode::Inject));
        let config = agent_config(|name| (name == "LLM_MODEL").then(|| "gpt-4o".into())).unwrap();
        assert_eq!(config.context_tokens, 128_000);
        let config = agent_config(|name| match name {
            "AGENT_STRATEGY" => Some("planner".into()),
            "PLANNER_MODEL" => Some("big-model".into()),
            "TASK_COMPLETION_THRESHOLD" => Some("0.9".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(config.strategy, agent_core::turn::Strategy::Planner);
        assert_eq!(config.planner.planner_model.as_deref(), Some("big-model"));
        assert_eq!(config.planner.task_completion_threshold, 0.9);
        assert_eq!(config.planner.prompt_confidence_threshold, 0.7);
        let err = agent_config(|name| (name == "PROMPT_CONFIDENCE_THRESHOLD").then(|| "1.5".into())).unwrap_err();
        assert!(err.to_string().contains("PROMPT_CONFIDENCE_THRESHOLD"));
        let config = agent_config(|name| (name == "SKILL_LISTING_TOKENS").then(|| "1500".into())).unwrap();
        assert_eq!(config.listing_tokens(), 1500);
        assert_eq!(agent_config(|_| None).unwrap().listing_tokens(), 3584, "an eighth of 32,768 − 4,096");
        let err = agent_config(|name| (name == "SKILL_LISTING_TOKENS").then(|| "10".into())).unwrap_err();
        assert!(err.to_string().contains("SKILL_LISTING_TOKENS"));
        let err = agent_config(|name| (name == "LLM_CONTEXT_TOKENS").then(|| "12".into())).unwrap_err();
        assert!(err.to_string().contains("LLM_CONTEXT_TOKENS"));
        let err = agent_config(|name| (name == "MAX_STEPS").then(|| "zero".into())).unwrap_err();
        assert!(err.to_string().contains("MAX_STEPS"));
        let err = agent_config(|name| (name == "SKILL_PROMPT_MODE").then(|| "merge".into())).unwrap_err();
        assert!(err.to_string().contains("SKILL_PROMPT_MODE"));
    }

    #[test]
    fn a_daily_token_budget_is_a_positive_count_and_zero_or_unset_is_none() {
        let budget =
            |value: &'static str| agent_config(move |name| (name == "DAILY_TOKEN_BUDGET").then(|| value.into()));
        assert_eq!(budget("250000").unwrap().daily_token_budget, Some(250_000));
        for none in ["0", "", " "] {
            assert_eq!(budget(none).unwrap().daily_token_budget, None, "{none:?}");
        }
        assert_eq!(agent_config(|_| None).unwrap().daily_token_budget, None);
        let err = budget("1e6").unwrap_err();
        assert!(err.to_string().contains("DAILY_TOKEN_BUDGET"), "{err}");
        let config = agent_config(|name| (name == "LLM_MODEL").then(|| " gpt-4o ".into())).unwrap();
        assert_eq!(config.model_id, "gpt-4o");
    }

    #[test]
    fn a_money_budget_is_dollars_and_prices_may_be_overridden() {
        let config =
            |name: &'static str, value: &'static str| agent_config(move |asked| (asked == name).then(|| value.into()));
        assert_eq!(config("DAILY_BUDGET_USD", "2.50").unwrap().daily_cost_budget, Some(2_500_000_000));
        assert_eq!(config("DAILY_BUDGET_USD", "$10").unwrap().daily_cost_budget, Some(10_000_000_000));
        for none in ["0", "0.00", ""] {
            assert_eq!(config("DAILY_BUDGET_USD", none).unwrap().daily_cost_budget, None, "{none:?}");
        }
        for bad in ["-1", "ten", "1e3"] {
            let err = config("DAILY_BUDGET_USD", bad).unwrap_err().to_string();
            assert!(err.contains("DAILY_BUDGET_USD") && err.contains(bad), "{err}");
        }
        let shipped = agent_config(|_| None).unwrap().prices;
        assert_eq!(shipped.price("gpt-4o").unwrap().input, 2_500_000);
        let prices = config("MODEL_PRICES", r#"{"models": {"my-llm": {"input": 1, "output": 2}}}"#).unwrap().prices;
        assert_eq!(prices.price("my-llm-v2").unwrap().output, 2_000_000);
        assert_eq!(prices.price("gpt-4o").unwrap().input, 2_500_000, "the shipped prices stay");
        let err =
            config("MODEL_PRICES", r#"{"models": {"my-llm": {"input": -1, "output": 2}}}"#).unwrap_err().to_string();
        assert!(err.contains("MODEL_PRICES") && err.contains("my-llm"), "{err}");
        let err = config("MODEL_PRICES", "{models").unwrap_err().to_string();
        assert!(err.contains("MODEL_PRICES"), "{err}");
    }

    #[test]
    fn media_bounds_have_defaults_and_refuse_a_bad_value_by_name() {
        let config = agent_config(|_| None).unwrap();
        assert_eq!((config.media.long_edge, config.media.pdf_pages), (1568, 100));
        let config = agent_config(|name| match name {
            "IMAGE_LONG_EDGE" => Some("1024".into()),
            "PDF_MAX_PAGES" => Some(" 20 ".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!((config.media.long_edge, config.media.pdf_pages), (1024, 20));
        for (name, bad) in [("IMAGE_LONG_EDGE", "10"), ("IMAGE_LONG_EDGE", "big"), ("PDF_MAX_PAGES", "0")] {
            let err = agent_config(|asked| (asked == name).then(|| bad.into())).unwrap_err();
            assert!(err.to_string().contains(name) && err.to_string().contains(bad), "{err}");
        }
    }
}
