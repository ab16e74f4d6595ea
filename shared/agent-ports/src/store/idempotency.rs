//! Idempotency: a client's key for one turn, what claiming it found, where a background turn
//! stands, and the record a commit completes.

use sha2::Digest;

use crate::ids::{SessionId, UserId};

/// A client's idempotency key for one turn (the SQS message id, or the HTTP `Idempotency-Key`
/// header), with a fingerprint of the request it came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey {
    /// A hash of the client's key: fixed length, so any header value makes a valid sort key.
    pub key_hash: String,
    /// A hash of what the turn was asked (message, ticket): the same key with another request is refused.
    pub request_hash: String,
}

impl IdempotencyKey {
    /// Longest key accepted, in bytes (Stripe's and the IETF draft's keys are far shorter).
    pub const MAX_KEY_BYTES: usize = 255;

    /// Validates a client-supplied key: 1 to 255 visible ASCII characters.
    pub fn new(key: &str, request: &[&str]) -> Result<Self, String> {
        if key.is_empty() || key.len() > Self::MAX_KEY_BYTES {
            return Err(format!("the idempotency key must be 1 to {} characters", Self::MAX_KEY_BYTES));
        }
        if !key.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err("the idempotency key must be visible ASCII characters without spaces".to_owned());
        }
        let mut hasher = sha2::Sha256::new();
        for part in request {
            // Length-prefixed so that ("ab", "c") and ("a", "bc") differ.
            hasher.update((part.len() as u64).to_be_bytes());
            hasher.update(part.as_bytes());
        }
        Ok(Self {
            key_hash: hex::encode(sha2::Sha256::digest(key.as_bytes())),
            request_hash: hex::encode(hasher.finalize()),
        })
    }
}

impl IdempotencyKey {
    /// The key of a queued turn, fingerprinted with everything its record asks (user, session,
    /// message, ticket, and the decisions that answer a paused turn): the queue worker and the
    /// HTTP function that enqueues it compute the same.
    pub fn for_queued_turn(
        key: &str,
        user: &UserId,
        session: &SessionId,
        message: &str,
        ticket: Option<&str>,
        decisions: Option<&str>,
    ) -> Result<Self, String> {
        let mut request = vec![user.as_str(), session.as_str(), message, ticket.unwrap_or("")];
        // A turn without decisions keeps the fingerprint it always had.
        request.extend(decisions);
        Self::new(key, &request)
    }
}

impl IdempotencyKey {
    /// The key that lets one request at a time answer the calls a turn paused on, the turn stored
    /// as session version `version`: whatever idempotency key the requests carry (or none), a
    /// second request deciding the same pause is refused while the first runs. Its text has
    /// spaces, which a client's key never has, so no client key can take it; its fingerprint is
    /// fixed, so a claim left by a killed invocation lapses for any decisions.
    pub fn for_paused_turn(version: u64) -> Self {
        let key = format!("decisions on the turn paused at version {version}");
        let fixed = sha2::Sha256::digest(b"");
        Self { key_hash: hex::encode(sha2::Sha256::digest(key.as_bytes())), request_hash: hex::encode(fixed) }
    }
}

/// What a claim on an idempotency key found.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// The key is new (or its previous holder's lease ran out): this turn owns it under `owner`.
    Claimed { owner: String },
    /// A turn with this key was committed: its stored reply.
    Committed { reply: serde_json::Value },
    /// A turn with this key is running now.
    Running,
    /// The key was used with a different request.
    Mismatch,
    /// A background turn with this key failed for good: its error, as stored.
    Failed { error: serde_json::Value },
}

/// Where a turn known by its idempotency key stands (the poll of a background turn).
#[derive(Debug, Clone, PartialEq)]
pub enum TurnStatus {
    /// Accepted for the background and waiting in the queue (also between retries).
    Queued,
    /// A worker is running it now.
    Running,
    /// Committed: the reply a synchronous turn would have answered.
    Committed { reply: serde_json::Value },
    /// Failed for good: the error a synchronous turn would have answered.
    Failed { error: serde_json::Value },
}

/// What recording a background turn found.
#[derive(Debug, Clone, PartialEq)]
pub enum Accepted {
    /// The key is new: the turn is recorded as queued.
    New,
    /// The key was recorded before with the same request (a client's retry): where that turn stands.
    Existing(TurnStatus),
    /// The key was used with a different request.
    Mismatch,
}

/// The idempotency record a commit completes: written in the same transaction as the turn.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitKey {
    pub key: IdempotencyKey,
    /// The owner token of the claim; the commit fails if another turn took the claim over.
    pub owner: String,
    /// The reply to replay when the key comes again.
    pub reply: serde_json::Value,
}
