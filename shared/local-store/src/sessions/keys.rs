//! Idempotency records as the DynamoDB adapter keeps them: claimed under an owner until its lease
//! ends, completed with the turn's reply by the commit, released by a failed turn, or (a background
//! turn) queued and failed for good.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_ports::{Accepted, Claim, CommitKey, IdempotencyKey, SessionId, TurnStatus, UserId};

/// How long a finished key is remembered, as in the DynamoDB adapter.
const KEY_TTL_SECS: i64 = 24 * 60 * 60;

/// An idempotency record: running under an owner until its lease ends, committed with its reply,
/// or (a background turn) queued, or failed with its error.
#[derive(Debug, Clone)]
struct KeyRecord {
    request_hash: String,
    /// `None` while a background turn waits in the queue.
    owner: Option<String>,
    lease_until: i64,
    reply: Option<serde_json::Value>,
    error: Option<serde_json::Value>,
    background: bool,
    expires_at: i64,
}

impl KeyRecord {
    fn status(&self) -> TurnStatus {
        match (&self.reply, &self.error, &self.owner) {
            (Some(reply), _, _) => TurnStatus::Committed { reply: reply.clone() },
            (None, Some(error), _) => TurnStatus::Failed { error: error.clone() },
            (None, None, Some(_)) => TurnStatus::Running,
            (None, None, None) => TurnStatus::Queued,
        }
    }
}

/// A fresh owner token: only needs to differ between claims of one process.
fn rand_owner() -> u128 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let count = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    (nanos << 32) ^ u128::from(count)
}

/// Every idempotency record, by user, session and key hash. The store locks it; these only read
/// and change it.
#[derive(Debug, Default)]
pub(super) struct Keys(HashMap<(UserId, SessionId, String), KeyRecord>);

fn id(user: &UserId, session: &SessionId, key_hash: &str) -> (UserId, SessionId, String) {
    (user.clone(), session.clone(), key_hash.to_owned())
}

impl Keys {
    /// Completes the claim `commit` names with its reply, as the commit's transaction does; false,
    /// changing nothing, when its owner no longer holds an unfinished claim.
    pub(super) fn complete(&mut self, user: &UserId, session: &SessionId, commit: &CommitKey, now: i64) -> bool {
        match self.0.get_mut(&id(user, session, &commit.key.key_hash)) {
            Some(record)
                if record.owner.as_deref() == Some(commit.owner.as_str())
                    && record.reply.is_none()
                    && record.error.is_none() =>
            {
                record.reply = Some(commit.reply.clone());
                record.expires_at = now + KEY_TTL_SECS;
                true
            }
            _ => false,
        }
    }

    pub(super) fn claim(
        &mut self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        now: i64,
        lease_until: i64,
    ) -> Claim {
        let id = id(user, session, &key.key_hash);
        let mut background = false;
        if let Some(record) = self.0.get(&id).filter(|record| record.expires_at >= now) {
            if record.request_hash != key.request_hash {
                return Claim::Mismatch;
            }
            match record.status() {
                TurnStatus::Committed { reply } => return Claim::Committed { reply },
                TurnStatus::Failed { error } => return Claim::Failed { error },
                TurnStatus::Running if record.lease_until >= now => return Claim::Running,
                TurnStatus::Running | TurnStatus::Queued => background = record.background,
            }
        }
        let owner = format!("{:032x}", rand_owner());
        let record = KeyRecord {
            request_hash: key.request_hash.clone(),
            owner: Some(owner.clone()),
            lease_until,
            reply: None,
            error: None,
            background,
            expires_at: lease_until + KEY_TTL_SECS,
        };
        self.0.insert(id, record);
        Claim::Claimed { owner }
    }

    pub(super) fn release(&mut self, user: &UserId, session: &SessionId, key: &IdempotencyKey, owner: &str) {
        let id = id(user, session, &key.key_hash);
        let Some(record) = self.0.get_mut(&id) else { return };
        if record.owner.as_deref() != Some(owner) || record.reply.is_some() || record.error.is_some() {
            return;
        }
        if record.background {
            record.owner = None;
        } else {
            self.0.remove(&id);
        }
    }

    pub(super) fn accept(&mut self, user: &UserId, session: &SessionId, key: &IdempotencyKey, now: i64) -> Accepted {
        let id = id(user, session, &key.key_hash);
        if let Some(record) = self.0.get(&id).filter(|record| record.expires_at >= now) {
            if record.request_hash != key.request_hash {
                return Accepted::Mismatch;
            }
            return Accepted::Existing(record.status());
        }
        let record = KeyRecord {
            request_hash: key.request_hash.clone(),
            owner: None,
            lease_until: 0,
            reply: None,
            error: None,
            background: true,
            expires_at: now + KEY_TTL_SECS,
        };
        self.0.insert(id, record);
        Accepted::New
    }

    pub(super) fn status(&self, user: &UserId, session: &SessionId, key_hash: &str, now: i64) -> Option<TurnStatus> {
        self.0.get(&id(user, session, key_hash)).filter(|record| record.expires_at >= now).map(KeyRecord::status)
    }

    pub(super) fn fail_queued(
        &mut self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        error: &serde_json::Value,
        now: i64,
    ) -> bool {
        match self.0.get_mut(&id(user, session, &key.key_hash)) {
            Some(record) if record.background && record.status() == TurnStatus::Queued => {
                record.error = Some(error.clone());
                record.expires_at = now + KEY_TTL_SECS;
                true
            }
            _ => false,
        }
    }
}
