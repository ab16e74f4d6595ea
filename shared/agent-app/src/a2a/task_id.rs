//! A task's id: the session and the hash of the turn's idempotency key, `{session}:{turn}`; parsed
//! from what a caller sends, and the ids of the turns that answer its approval pauses.

use std::fmt;

use agent_core::{IdempotencyKey, SessionId};

use super::rpc::RpcError;

/// Between the session and the turn in a task id: a character no session id holds.
const SEPARATOR: char = ':';
/// A task's id: `{session}:{turn}`, where the turn is the hash of its idempotency key. The session
/// is the task's context id; the caller's own id (from the token) completes the storage key, so
/// another caller's task id names nothing of theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskId {
    pub session: SessionId,
    /// 64 lowercase hex digits.
    pub turn: String,
}

impl TaskId {
    /// The task of the turn whose key hashes to `turn`.
    pub fn new(session: SessionId, turn: String) -> Self {
        Self { session, turn }
    }

    /// The task of the turn under the idempotency key `key`.
    pub fn of_key(session: SessionId, key: &IdempotencyKey) -> Self {
        Self::new(session, key.key_hash.clone())
    }

    /// A task id as a caller sends it; anything malformed is a task that does not exist.
    pub fn parse(text: &str) -> Result<Self, RpcError> {
        let not_found = || RpcError::TaskNotFound(format!("no task `{}`", super::rpc::cut(text, 200)));
        let (session, turn) = text.rsplit_once(SEPARATOR).ok_or_else(not_found)?;
        if turn.len() != 64 || !turn.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(not_found());
        }
        let session = SessionId::parse(session).map_err(|_| not_found())?;
        Ok(Self::new(session, turn.to_owned()))
    }

    /// The key of the turn that answers this link's approval pause: derived from it, so a task's
    /// chain of pauses and answers can be walked from its id alone.
    pub fn resume_key(&self) -> String {
        format!("a2a-resume.{}", self.turn)
    }

    /// The next link of the chain: the turn under [`TaskId::resume_key`].
    pub fn resumed(&self) -> Self {
        let key = IdempotencyKey::new(&self.resume_key(), &[]).expect("a derived key is valid");
        Self::new(self.session.clone(), key.key_hash)
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{SEPARATOR}{}", self.session, self.turn)
    }
}
