//! What a turn service is configured with: the agent's settings that do not change between turns,
//! and which strategy answers a turn.

use std::sync::Arc;
use std::time::Duration;

use crate::budget;
use crate::files::MediaLimits;
use crate::planner::PlannerConfig;
use crate::pricing::PriceTable;
use crate::prompt::SkillPromptMode;
use crate::tools::{ApprovalPolicy, SubagentConfig};

/// Longest user message accepted, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// Settings that do not change between turns.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub max_steps: u32,
    pub prompt_mode: SkillPromptMode,
    /// Time kept back before the invocation deadline to persist and answer.
    pub deadline_reserve: Duration,
    /// `{language}` when the user's identity does not say.
    pub default_language: String,
    /// The model's context window in tokens (`LLM_CONTEXT_TOKENS`).
    pub context_tokens: usize,
    /// Tokens kept free for the model's answer (`LLM_MAX_TOKENS`).
    pub output_tokens: usize,
    /// History size, in estimated tokens, above which older turns are summarised
    /// (`HISTORY_SUMMARY_TOKENS`; default half of the input budget).
    pub summary_threshold: Option<usize>,
    /// Tokens the state-1 skill listing may take (`SKILL_LISTING_TOKENS`; default derived from the
    /// input budget, see [`AgentConfig::listing_tokens`]).
    pub skill_listing_tokens: Option<usize>,
    /// `AGENT_STRATEGY`: skills (default) or planner.
    pub strategy: Strategy,
    pub planner: PlannerConfig,
    /// The configured model's id (`LLM_MODEL`), the label its calls are counted under in the
    /// tenant's usage; empty counts them under [`DEFAULT_MODEL_LABEL`].
    pub model_id: String,
    /// Tokens (input and output) a tenant may use a UTC day unless an operator set its own
    /// (`DAILY_TOKEN_BUDGET`); `None`: no budget, and no read of the usage before a turn.
    pub daily_token_budget: Option<u64>,
    /// Money (billionths of a US dollar, at [`AgentConfig::prices`]) a tenant may spend a UTC day
    /// unless an operator set its own (`DAILY_BUDGET_USD`); `None`: no money budget.
    pub daily_cost_budget: Option<u64>,
    /// What each model's tokens cost: the shipped table with the deployment's `MODEL_PRICES` over it.
    pub prices: Arc<PriceTable>,
    /// The provider's name (`LLM_PROVIDER`: `openai`, `anthropic`, `bedrock`...), recorded on each
    /// model call's span; empty when unknown.
    pub model_provider: String,
    /// The bounds of subagents started by `task` (`SUBAGENT_MAX_DEPTH`, `SUBAGENTS_PER_TURN`,
    /// `SUBAGENT_MAX_STEPS`); a depth of 0 offers no `task`.
    pub subagents: SubagentConfig,
    /// Which tool calls wait for a person's approval (`APPROVAL_REQUIRED`, `APPROVAL_ALLOW`).
    pub approvals: ApprovalPolicy,
    /// The bounds of images and PDFs shown to the model (`IMAGE_LONG_EDGE`, `PDF_MAX_PAGES`).
    pub media: MediaLimits,
}

/// How turns are answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Strategy {
    /// The two-state skills prompt with `load_skill` and the virtual filesystem.
    #[default]
    Skills,
    /// Plans across expert MCP servers.
    Planner,
}

impl std::str::FromStr for Strategy {
    type Err = String;
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "skills" => Ok(Self::Skills),
            "planner" => Ok(Self::Planner),
            other => Err(format!("AGENT_STRATEGY must be `skills` or `planner`, not `{other}`")),
        }
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            max_steps: 15,
            prompt_mode: SkillPromptMode::Replace,
            deadline_reserve: Duration::from_secs(3),
            default_language: "the language the user writes in".to_owned(),
            context_tokens: budget::DEFAULT_CONTEXT_TOKENS,
            output_tokens: 4096,
            summary_threshold: None,
            skill_listing_tokens: None,
            strategy: Strategy::Skills,
            planner: PlannerConfig::default(),
            model_id: String::new(),
            daily_token_budget: None,
            daily_cost_budget: None,
            prices: PriceTable::shipped(),
            model_provider: String::new(),
            subagents: SubagentConfig::default(),
            approvals: ApprovalPolicy::default(),
            media: MediaLimits::default(),
        }
    }
}

impl AgentConfig {
    /// Most tokens one request may carry.
    pub fn input_tokens(&self) -> usize {
        self.context_tokens.saturating_sub(self.output_tokens).max(1024)
    }

    /// The listing's budget: `SKILL_LISTING_TOKENS`, or an eighth of the input budget between 500 and
    /// 4,000 tokens, so the listing never crowds out the conversation.
    pub fn listing_tokens(&self) -> usize {
        self.skill_listing_tokens.unwrap_or_else(|| (self.input_tokens() / 8).clamp(500, 4000))
    }

    pub(super) fn summary_threshold(&self) -> usize {
        self.summary_threshold.unwrap_or(self.input_tokens() / 2)
    }
}
