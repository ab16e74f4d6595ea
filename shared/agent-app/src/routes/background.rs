//! Background turns: `POST /sessions/{id}/turns` with `Prefer: respond-async` is recorded as
//! queued, sent to the FIFO turn queue (message group = session) and answered `202` with a turn id;
//! `GET /sessions/{id}/turns/{turn_id}` tells its owner whether it is pending, completed or failed.

use agent_core::turn::TurnService;
use agent_core::{Accepted, IdempotencyKey, SessionId, TurnStatus, UserId};
use http::HeaderMap;
use serde_json::{json, Value};

use super::message::{Answer, Payload};
use crate::api::{client_key, extra_fingerprint, ApiError, TurnBody};
use crate::queue::TurnQueue;

/// What became of a background turn handed to [`Queued::accept`].
#[derive(Debug)]
pub enum Acceptance {
    /// Recorded queued (now or by an earlier delivery of the same key) and sent to the queue, which
    /// deduplicates a second send.
    Queued,
    /// An earlier delivery of the same key has already started it: it is not sent again.
    Started(TurnStatus),
}

/// Why a background turn was not accepted.
#[derive(Debug)]
pub enum Refusal {
    /// The idempotency key was already used with a different request.
    KeyReused,
    /// The turn store or the deployment's settings failed (a status and a client-safe message).
    Failed(ApiError),
    /// The queue did not take the record; the same key may be sent again.
    QueueUnavailable,
}

impl From<ApiError> for Refusal {
    fn from(error: ApiError) -> Self {
        Refusal::Failed(error)
    }
}

/// Whether the client asked for an asynchronous answer (RFC 7240 `Prefer: respond-async`).
pub(super) fn prefers_async(headers: &HeaderMap) -> bool {
    headers
        .get_all("prefer")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split([',', ';']))
        .any(|preference| preference.trim().eq_ignore_ascii_case("respond-async"))
}

/// A turn to run in the background, validated: whom and what it is for, its key, and the queue
/// record that carries it. A2A's non-blocking sends queue theirs too.
pub struct Queued {
    pub user: UserId,
    pub session: SessionId,
    pub idempotency: IdempotencyKey,
    /// The turn's id, which its poller asks for: the hash of its key.
    pub turn_id: String,
    pub record: Value,
}

impl Queued {
    /// The turn under the client's `Idempotency-Key`, or a random one: a retry with the same key
    /// finds the same turn (and enqueues it again only while it still waits, which the queue
    /// deduplicates).
    pub(super) fn new(user: UserId, session: SessionId, body: TurnBody, headers: &HeaderMap) -> Result<Self, ApiError> {
        let key = match client_key(headers)? {
            Some(key) => key.to_owned(),
            None => hex::encode(rand::random::<[u8; 16]>()),
        };
        Self::keyed(user, session, body, key)
    }

    /// The turn under the idempotency key `key`.
    pub fn keyed(user: UserId, session: SessionId, body: TurnBody, key: String) -> Result<Self, ApiError> {
        crate::api::writable_session(&session)?;
        let ticket = body
            .ticket_id
            .as_deref()
            .map(agent_core::TicketId::parse)
            .transpose()
            .map_err(|err| ApiError::bad_request(format!("`ticket_id`: {err}")))?;
        let ticket = ticket.as_ref().map(|ticket| ticket.as_str());
        let decisions = body.decisions()?;
        let attachments = body.attachments()?;
        let pins = body.pins()?;
        let fingerprint = extra_fingerprint(decisions.as_ref(), &attachments, &pins);
        let idempotency =
            IdempotencyKey::for_queued_turn(&key, &user, &session, &body.message, ticket, fingerprint.as_deref())
                .map_err(|err| ApiError::bad_request(format!("`Idempotency-Key`: {err}")))?;
        let turn_id = idempotency.key_hash.clone();
        let mut record = json!({
            "user_id": user,
            "session_id": session,
            "message": body.message,
            "ticket_id": ticket,
            "idempotency_key": key,
            "decisions": body.decisions,
        });
        // Only a turn with attachments names them: any other record stays as it always was.
        if !attachments.is_empty() {
            record["attachments"] = json!(attachments);
        }
        if !pins.is_empty() {
            record["skill_versions"] = json!(body.skill_versions);
        }
        // A webhook is checked against the deployment's allow-list and internal ranges here, and
        // again before every delivery.
        if let Some(webhook) = &body.webhook {
            let url = crate::webhooks::policy()?.check(&user, &webhook.url)?;
            record["webhook"] = json!(crate::webhooks::WebhookBody { url: url.into() });
        }
        Ok(Self { user, session, idempotency, turn_id, record })
    }
}

impl Queued {
    /// Records the turn queued (once per key) and sends its record to the queue while it still
    /// waits. Shared by `Prefer: respond-async` and A2A's non-blocking sends.
    pub async fn accept(&self, service: &TurnService, queue: &dyn TurnQueue) -> Result<Acceptance, Refusal> {
        if self.record.get("webhook").is_some() {
            crate::webhooks::require_signing_key().await?;
        }
        let now = time::OffsetDateTime::now_utc();
        let accepted = service
            .accept_background(&self.user, &self.session, &self.idempotency, now)
            .await
            .map_err(ApiError::from)?;
        match accepted {
            Accepted::Mismatch => Err(Refusal::KeyReused),
            Accepted::Existing(status) if status != TurnStatus::Queued => {
                tracing::info!(session = %self.session, turn_id = self.turn_id, "background turn already started");
                Ok(Acceptance::Started(status))
            }
            Accepted::New | Accepted::Existing(_) => {
                queue.enqueue(self.record.clone(), self.session.as_str(), &self.turn_id).await.map_err(|error| {
                    tracing::error!(session = %self.session, %error, "could not enqueue a background turn");
                    Refusal::QueueUnavailable
                })?;
                tracing::info!(session = %self.session, turn_id = self.turn_id, "background turn accepted");
                crate::metrics::put_count("BackgroundTurnsQueued", 1);
                Ok(Acceptance::Queued)
            }
        }
    }
}

/// `202` with the turn's id and where to poll it.
pub(super) fn queued_answer(session: &SessionId, turn_id: &str) -> Answer {
    let poll = format!("/sessions/{session}/turns/{turn_id}");
    Answer {
        status: 202,
        body: Payload::Json(json!({"turn_id": turn_id, "status": "pending", "poll": poll})),
        headers: vec![("location", poll.clone()), ("preference-applied", "respond-async".to_owned())],
    }
}

/// A turn id as the poll's path names it: 64 lowercase hex digits, else no turn of the caller's.
pub(super) fn parse_turn_id(turn_id: &str) -> Result<String, ApiError> {
    if turn_id.len() != 64 || !turn_id.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(ApiError::not_found(format!("no turn `{turn_id}`")));
    }
    Ok(turn_id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn prefer_header_parsing() {
        let mut headers = HeaderMap::new();
        assert!(!prefers_async(&headers));
        headers.insert("prefer", HeaderValue::from_static("wait=10, Respond-Async"));
        assert!(prefers_async(&headers));
        headers.insert("prefer", HeaderValue::from_static("return=minimal"));
        assert!(!prefers_async(&headers));
    }
}
