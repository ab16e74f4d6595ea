//! The session store: sessions in memory, whose `commit` is atomic and versioned exactly like the
//! DynamoDB adapter's, idempotency keys and usage included. A file per part: `stored` (a session
//! and its reads), `keys` (idempotency records), `usage` (usage and budgets).

mod keys;
mod stored;
mod usage;

use std::collections::HashMap;
use std::sync::Mutex;

use agent_ports::store::{
    BudgetOverride, BudgetState, BudgetUnit, Reservation, SessionCursor, SessionList, TurnUsage, UsageDay,
};
use agent_ports::{
    Accepted, Claim, HistoryPage, IdempotencyKey, Session, SessionId, SessionStore, StoreError, TurnCommit, TurnStatus,
    UserId,
};
use async_trait::async_trait;

use crate::support::{bump, lock, CallCounts};
use keys::Keys;
use stored::StoredSession;
use usage::Usage;

/// Sessions in memory; `commit` is atomic and versioned exactly like the DynamoDB adapter's,
/// idempotency keys included.
#[derive(Debug, Default)]
pub struct MemorySessionStore {
    sessions: Mutex<HashMap<(UserId, SessionId), StoredSession>>,
    keys: Mutex<Keys>,
    usage: Mutex<Usage>,
    pub calls: CallCounts,
}

impl MemorySessionStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets (or with `None` removes) `user`'s own daily token budget, as an operator's item does in DynamoDB.
    pub fn set_budget(&self, user: &UserId, budget: Option<BudgetOverride>) {
        lock(&self.usage).set_budget(user, BudgetUnit::Tokens, budget);
    }

    /// Sets (or with `None` removes) a tenant's daily money budget, in billionths of a dollar, as
    /// an operator's `daily_usd` does in DynamoDB.
    pub fn set_cost_budget(&self, user: &UserId, budget: Option<BudgetOverride>) {
        lock(&self.usage).set_budget(user, BudgetUnit::Cost, budget);
    }
}

#[async_trait]
impl SessionStore for MemorySessionStore {
    async fn load(&self, user: &UserId, session: &SessionId) -> Result<Option<Session>, StoreError> {
        bump(&self.calls.session_loads);
        let sessions = lock(&self.sessions);
        Ok(sessions.get(&(user.clone(), session.clone())).map(|stored| stored.load(user, session)))
    }

    async fn history_page(
        &self,
        user: &UserId,
        session: &SessionId,
        before: Option<u64>,
        max_turns: usize,
        max_bytes: usize,
    ) -> Result<Option<(Session, HistoryPage)>, StoreError> {
        let sessions = lock(&self.sessions);
        let stored = sessions.get(&(user.clone(), session.clone()));
        Ok(stored.map(|stored| stored.page(user, session, before, max_turns, max_bytes)))
    }

    async fn commit(&self, user: &UserId, session: &SessionId, commit: &TurnCommit) -> Result<(), StoreError> {
        bump(&self.calls.session_commits);
        // Lock order: keys, then sessions, then usage, as everywhere in this store.
        let mut keys = lock(&self.keys);
        let mut sessions = lock(&self.sessions);
        let mut usage = lock(&self.usage);
        let key = (user.clone(), session.clone());
        let current = sessions.get(&key).map_or(0, |stored| stored.version);
        if current != commit.expected_version {
            return Err(StoreError::Conflict);
        }
        if let Some(idempotency) = &commit.idempotency {
            if !keys.complete(user, session, idempotency, commit.now) {
                return Err(StoreError::Conflict);
            }
        }
        let stored = sessions.entry(key).or_insert_with(|| StoredSession::new(commit.now, &commit.new_messages));
        stored.version += 1;
        stored.turns.push(commit.new_messages.clone());
        if !commit.skill_versions.is_empty() {
            stored.skill_versions.insert(stored.version, commit.skill_versions.clone());
        }
        stored.state = commit.state.clone();
        stored.updated_at = commit.now;
        // Under the same locks: the usage counts exactly when the turn is stored.
        if let Some(spent) = &commit.usage {
            usage.add(user, spent);
        }
        Ok(())
    }

    async fn record_usage(&self, user: &UserId, spent: &TurnUsage, token: &str) -> Result<(), StoreError> {
        lock(&self.usage).record(user, spent, token);
        Ok(())
    }

    async fn usage(&self, user: &UserId, from: &str, to: &str) -> Result<Vec<UsageDay>, StoreError> {
        Ok(lock(&self.usage).days(user, from, to))
    }

    async fn budget_state(&self, user: &UserId, day: &str) -> Result<BudgetState, StoreError> {
        Ok(lock(&self.usage).budget_state(user, day))
    }

    async fn reserve(
        &self,
        user: &UserId,
        day: &str,
        unit: BudgetUnit,
        want: u64,
        budget: u64,
        _seen: u64,
    ) -> Result<Reservation, StoreError> {
        // Under the lock, as DynamoDB's conditional update: read, compare and add at once.
        Ok(lock(&self.usage).reserve(user, day, unit, want, budget))
    }

    async fn list_sessions(
        &self,
        user: &UserId,
        after: Option<&SessionCursor>,
        limit: usize,
    ) -> Result<SessionList, StoreError> {
        let sessions = lock(&self.sessions);
        let mine =
            sessions.iter().filter(|((owner, _), _)| owner == user).map(|((_, session), stored)| (session, stored));
        Ok(stored::list(mine, after, limit))
    }

    async fn claim(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        now: i64,
        lease_until: i64,
    ) -> Result<Claim, StoreError> {
        Ok(lock(&self.keys).claim(user, session, key, now, lease_until))
    }

    async fn release(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        owner: &str,
    ) -> Result<(), StoreError> {
        lock(&self.keys).release(user, session, key, owner);
        Ok(())
    }

    async fn accept(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        now: i64,
    ) -> Result<Accepted, StoreError> {
        Ok(lock(&self.keys).accept(user, session, key, now))
    }

    async fn turn_status(
        &self,
        user: &UserId,
        session: &SessionId,
        key_hash: &str,
        now: i64,
    ) -> Result<Option<TurnStatus>, StoreError> {
        Ok(lock(&self.keys).status(user, session, key_hash, now))
    }

    async fn fail_queued(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        error: &serde_json::Value,
        now: i64,
    ) -> Result<bool, StoreError> {
        Ok(lock(&self.keys).fail_queued(user, session, key, error, now))
    }
}

#[cfg(test)]
mod tests;
