//! A tenant's usage and budget as the session store counts them: what a model and a turn spent
//! (tokens as the provider split them, and their cost), a day's totals, an operator's budget
//! overrides, and a model call's reservation of tokens or money.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What one model did in one turn (or one day).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelUsage {
    /// Every input token, cached or not; the cache reads and writes below are parts of it.
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Model calls that came back with an answer (and so were paid for).
    pub model_calls: u64,
    /// What the calls cost, in billionths of a US dollar, at the price table's prices; calls of a
    /// model without a price add nothing here and count in `unpriced_calls`.
    #[serde(default)]
    pub cost_nanos: u64,
    /// Calls of a model the price table has no price for: counted in tokens only.
    #[serde(default)]
    pub unpriced_calls: u64,
}

impl ModelUsage {
    pub fn add(&mut self, other: &ModelUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.model_calls += other.model_calls;
        self.cost_nanos += other.cost_nanos;
        self.unpriced_calls += other.unpriced_calls;
    }

    /// The input tokens neither read from nor written to a prompt cache.
    pub fn uncached_input_tokens(&self) -> u64 {
        self.input_tokens.saturating_sub(self.cache_read_tokens).saturating_sub(self.cache_write_tokens)
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
    /// [`SessionStore::reserve`](crate::store::SessionStore::reserve)): this write releases them
    /// as it adds what was spent.
    pub reserved: u64,
    /// The money (billionths of a US dollar) this turn reserved under a money budget, released the
    /// same way.
    pub reserved_cost: u64,
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
            cache_read_tokens: model.cache_read_tokens,
            cache_write_tokens: model.cache_write_tokens,
            model_calls: model.model_calls,
            cost_nanos: model.cost_nanos,
            unpriced_calls: model.unpriced_calls,
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

    /// Money spent over every priced model, in billionths of a US dollar.
    pub fn cost_nanos(&self) -> u64 {
        self.models.values().map(|usage| usage.cost_nanos).sum()
    }
}

/// A tenant's usage over one UTC day, all models together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageCounts {
    /// Every input token, cached or not; the cache reads and writes below are parts of it.
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
    pub model_calls: u64,
    /// Billionths of a US dollar, over the calls of priced models.
    #[serde(default)]
    pub cost_nanos: u64,
    /// Calls of models without a price (in tokens only).
    #[serde(default)]
    pub unpriced_calls: u64,
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
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.model_calls += other.model_calls;
        self.cost_nanos += other.cost_nanos;
        self.unpriced_calls += other.unpriced_calls;
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

/// A tenant's own daily budget (of tokens, or of money), set by an operator in the store; it
/// replaces the deployment's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetOverride {
    /// No budget for this tenant.
    Unlimited,
    /// At most this much a UTC day: tokens (input and output), or billionths of a US dollar.
    Limit(u64),
}

/// What a daily budget counts, and so which of the day's counters a reservation moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetUnit {
    /// Input and output tokens.
    Tokens,
    /// Money, in billionths of a US dollar, at the price table's prices.
    Cost,
}

/// What a turn needs to know before it may spend: the tokens and money the tenant used on the day,
/// and its overrides, if an operator set them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BudgetState {
    pub used_tokens: u64,
    /// The day's tokens spent and still reserved by running turns, together.
    pub claimed_tokens: u64,
    /// The token budget's override.
    pub budget: Option<BudgetOverride>,
    /// The day's money spent, in billionths of a US dollar.
    pub used_cost: u64,
    /// The day's money spent and still reserved by running turns, together.
    pub claimed_cost: u64,
    /// The money budget's override (billionths of a US dollar).
    pub cost_budget: Option<BudgetOverride>,
    /// The operator's budget item exists but is unusable: what is wrong with it. The tenant then
    /// gets the deployment's default budget (never an outage), and the turn reports it.
    pub misconfigured: Option<String>,
}

/// What [`SessionStore::reserve`](crate::store::SessionStore::reserve) came to, in the budget's unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// `tokens` (at least 1, at most what was asked; tokens or money as the budget counts) are held
    /// for the call; `claimed` is the day's spent and reserved amount after this reservation.
    Granted { tokens: u64, claimed: u64 },
    /// Nothing is left of the budget: the day's spent and reserved amount is `claimed`.
    Refused { claimed: u64 },
}

/// Billionths of a US dollar in a dollar.
pub const NANOS_PER_USD: u64 = 1_000_000_000;

/// `"2.50"` as billionths of a dollar: a decimal from 0 with at most 9 decimals, else `None`.
pub fn parse_usd_nanos(text: &str) -> Option<u64> {
    let text = text.trim();
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && fraction.is_empty()
        || fraction.len() > 9
        || !whole.bytes().chain(fraction.bytes()).all(|byte| byte.is_ascii_digit())
    {
        return None;
    }
    let whole: u64 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    let fraction: u64 = if fraction.is_empty() { 0 } else { format!("{fraction:0<9}").parse().ok()? };
    whole.checked_mul(NANOS_PER_USD)?.checked_add(fraction)
}

/// Billionths of a dollar as dollars, for a JSON body or a log line.
pub fn nanos_to_usd(nanos: u64) -> f64 {
    nanos as f64 / NANOS_PER_USD as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_are_read_exactly() {
        assert_eq!(parse_usd_nanos("2.50"), Some(2_500_000_000));
        assert_eq!(parse_usd_nanos("0.000000001"), Some(1));
        assert_eq!(parse_usd_nanos("7"), Some(7 * NANOS_PER_USD));
        assert_eq!(parse_usd_nanos(".5"), Some(500_000_000));
        for bad in ["", ".", "-1", "1e3", "0.0000000001", "1,5", "99999999999999999999"] {
            assert_eq!(parse_usd_nanos(bad), None, "{bad}");
        }
        assert!((nanos_to_usd(2_500_000_000) - 2.5).abs() < 1e-12);
    }
}
