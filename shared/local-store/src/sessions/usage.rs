//! Every tenant's usage by day and the operators' budgets, as the DynamoDB adapter keeps them: a
//! turn's spend added with its commit, a failed turn's once per token, and model calls'
//! reservations of tokens or money against the budgets.

use std::collections::{BTreeMap, HashMap, HashSet};

use agent_ports::store::{BudgetOverride, BudgetState, BudgetUnit, Reservation, TurnUsage, UsageDay};
use agent_ports::UserId;

/// Every tenant's usage by day, the tokens of failed turns' writes already applied, and the
/// operators' budgets. The store locks it; these only read and change it.
#[derive(Debug, Default)]
pub(super) struct Usage {
    days: BTreeMap<(UserId, String), UsageDay>,
    applied: HashSet<String>,
    budgets: HashMap<UserId, BudgetOverride>,
    cost_budgets: HashMap<UserId, BudgetOverride>,
    /// Tokens held by running model calls, by tenant and day.
    reserved: HashMap<(UserId, String), u64>,
    /// Money (billionths of a dollar) held by running model calls, by tenant and day.
    reserved_cost: HashMap<(UserId, String), u64>,
}

impl Usage {
    /// Adds what a turn spent and gives back what it had reserved.
    pub(super) fn add(&mut self, user: &UserId, usage: &TurnUsage) {
        if usage.reserved > 0 {
            let held = self.reserved.entry((user.clone(), usage.day.clone())).or_default();
            *held = held.saturating_sub(usage.reserved);
        }
        if usage.reserved_cost > 0 {
            let held = self.reserved_cost.entry((user.clone(), usage.day.clone())).or_default();
            *held = held.saturating_sub(usage.reserved_cost);
        }
        if usage.is_empty() && !usage.committed {
            // Only a reservation given back: no spend, no failed turn.
            return;
        }
        let day = self
            .days
            .entry((user.clone(), usage.day.clone()))
            .or_insert_with(|| UsageDay { day: usage.day.clone(), ..UsageDay::default() });
        day.totals.add(&usage.totals());
        for (model, spent) in &usage.models {
            day.models.entry(model.clone()).or_default().add(spent);
        }
    }

    /// Adds a failed turn's spend once per `token`.
    pub(super) fn record(&mut self, user: &UserId, spent: &TurnUsage, token: &str) {
        // A write already applied under this token is acknowledged, not counted again.
        if self.applied.insert(token.to_owned()) {
            self.add(user, spent);
        }
    }

    /// The tenant's days from `from` to `to`, both included, oldest first.
    pub(super) fn days(&self, user: &UserId, from: &str, to: &str) -> Vec<UsageDay> {
        let range = (user.clone(), from.to_owned())..=(user.clone(), to.to_owned());
        self.days.range(range).map(|(_, day)| day.clone()).collect()
    }

    pub(super) fn budget_state(&self, user: &UserId, day: &str) -> BudgetState {
        let key = (user.clone(), day.to_owned());
        let used_tokens = self.days.get(&key).map_or(0, |day| day.totals.tokens());
        let used_cost = self.days.get(&key).map_or(0, |day| day.totals.cost_nanos);
        BudgetState {
            used_tokens,
            claimed_tokens: used_tokens + self.reserved.get(&key).copied().unwrap_or(0),
            budget: self.budgets.get(user).copied(),
            used_cost,
            claimed_cost: used_cost + self.reserved_cost.get(&key).copied().unwrap_or(0),
            cost_budget: self.cost_budgets.get(user).copied(),
            misconfigured: None,
        }
    }

    /// Holds up to `want` of the day (in `unit`) for one model call, capped by what `budget` leaves.
    pub(super) fn reserve(
        &mut self,
        user: &UserId,
        day: &str,
        unit: BudgetUnit,
        want: u64,
        budget: u64,
    ) -> Reservation {
        let key = (user.clone(), day.to_owned());
        let (spent, held) = match unit {
            BudgetUnit::Tokens => (self.days.get(&key).map_or(0, |day| day.totals.tokens()), &mut self.reserved),
            BudgetUnit::Cost => (self.days.get(&key).map_or(0, |day| day.totals.cost_nanos), &mut self.reserved_cost),
        };
        let held = held.entry(key).or_default();
        let claimed = spent + *held;
        let left = budget.saturating_sub(claimed);
        if left == 0 {
            return Reservation::Refused { claimed };
        }
        let tokens = want.min(left).max(1);
        *held += tokens;
        Reservation::Granted { tokens, claimed: claimed + tokens }
    }

    pub(super) fn set_budget(&mut self, user: &UserId, unit: BudgetUnit, budget: Option<BudgetOverride>) {
        let budgets = match unit {
            BudgetUnit::Tokens => &mut self.budgets,
            BudgetUnit::Cost => &mut self.cost_budgets,
        };
        match budget {
            Some(budget) => budgets.insert(user.clone(), budget),
            None => budgets.remove(user),
        };
    }
}
