//! A tenant's usage and budget as the session store counts them: what a model and a turn spent,
//! a day's totals, an operator's budget override, and a model call's token reservation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What one model did in one turn (or one day).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Model calls that came back with an answer (and so were paid for).
    pub model_calls: u64,
}

impl ModelUsage {
    pub fn add(&mut self, other: &ModelUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.model_calls += other.model_calls;
    }

    /// Input and output tokens together: what a daily budget counts.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// What one turn spent, to be added to its tenant's usage for one UTC day.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnUsage {
    /// The UTC day the turn started, `YYYY-MM-DD`.
    pub day: String,
    /// Per model id (the configured model, or a request's own model such as the planner's).
    pub models: BTreeMap<String, ModelUsage>,
    /// Commands run in the sandbox, and the time they ran.
    pub executions: u64,
    pub sandbox_ms: u64,
    /// True for a committed turn; false for the spend of a turn that failed after paid model calls.
    pub committed: bool,
    /// The tokens this turn reserved before its model calls (see
    /// [`SessionStore::reserve_tokens`](crate::store::SessionStore::reserve_tokens)): this write
    /// releases them as it adds what was spent.
    pub reserved: u64,
    /// Spent grading an eval run: tokens only, neither a turn nor a failed one.
    pub grading: bool,
}

impl TurnUsage {
    /// The day's totals this turn adds.
    pub fn totals(&self) -> UsageCounts {
        let mut model = ModelUsage::default();
        for usage in self.models.values() {
            model.add(usage);
        }
        UsageCounts {
            input_tokens: model.input_tokens,
            output_tokens: model.output_tokens,
            model_calls: model.model_calls,
            executions: self.executions,
            sandbox_ms: self.sandbox_ms,
            turns: u64::from(self.committed && !self.grading),
            // A write that only releases a reservation (the turn failed before any paid call) is
            // no failed turn of the tenant's.
            failed_turns: u64::from(!self.committed && !self.grading && !self.is_empty()),
        }
    }

    /// Whether anything was spent at all.
    pub fn is_empty(&self) -> bool {
        self.models.values().all(|usage| usage.model_calls == 0 && usage.tokens() == 0) && self.executions == 0
    }

    /// Tokens spent, input and output, over every model.
    pub fn tokens(&self) -> u64 {
        self.models.values().map(ModelUsage::tokens).sum()
    }
}

/// A tenant's usage over one UTC day, all models together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageCounts {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub model_calls: u64,
    pub executions: u64,
    pub sandbox_ms: u64,
    /// Committed turns.
    pub turns: u64,
    /// Turns that failed after paid model calls (their spend is counted above).
    pub failed_turns: u64,
}

impl UsageCounts {
    pub fn add(&mut self, other: &UsageCounts) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.model_calls += other.model_calls;
        self.executions += other.executions;
        self.sandbox_ms += other.sandbox_ms;
        self.turns += other.turns;
        self.failed_turns += other.failed_turns;
    }

    /// Input and output tokens together: what a daily budget counts.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// One UTC day of a tenant's usage: the totals and each model's share.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageDay {
    /// `YYYY-MM-DD`.
    pub day: String,
    pub totals: UsageCounts,
    pub models: BTreeMap<String, ModelUsage>,
}

/// A tenant's own daily token budget, set by an operator in the store; it replaces the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetOverride {
    /// No budget for this tenant.
    Unlimited,
    /// At most this many tokens (input and output) a UTC day.
    Tokens(u64),
}

/// What a turn needs to know before it may spend: the tokens the tenant used on the day, and its
/// override, if an operator set one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BudgetState {
    pub used_tokens: u64,
    /// The day's tokens spent and still reserved by running turns, together.
    pub claimed_tokens: u64,
    pub budget: Option<BudgetOverride>,
    /// The operator's budget item exists but is unusable: what is wrong with it. The tenant then
    /// gets the deployment's default budget (never an outage), and the turn reports it.
    pub misconfigured: Option<String>,
}

/// What [`SessionStore::reserve_tokens`](crate::store::SessionStore::reserve_tokens) came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// `tokens` (at least 1, at most what was asked) are held for the call; `claimed` is the day's
    /// spent and reserved tokens after this reservation.
    Granted { tokens: u64, claimed: u64 },
    /// Nothing is left of the budget: the day's spent and reserved tokens are `claimed`.
    Refused { claimed: u64 },
}
