//! Background turns: `POST /sessions/{id}/turns` with `Prefer: respond-async` is recorded as
//! queued, sent to the FIFO turn queue (message group = session) and answered `202` with a turn id;
//! `GET /sessions/{id}/turns/{turn_id}` tells its owner whether it is pending, completed or failed.

use agent_app::api::{client_key, ApiError, TurnBody};
use agent_app::queue::TurnQueue;
use agent_core::turn::TurnService;
use agent_core::{Accepted, IdempotencyKey, SessionId, TurnStatus, UserId};
use aws_lambda_events::http::HeaderMap;
use serde_json::{json, Value};

use crate::Answer;

/// Whether the client asked for an asynchronous answer (RFC 7240 `Prefer: respond-async`).
pub(crate) fn prefers_async(headers: &HeaderMap) -> bool {
    headers
        .get_all("prefer")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split([',', ';']))
        .any(|preference| preference.trim().eq_ignore_ascii_case("respond-async"))
}

/// Records the turn as queued and enqueues it; a retry with the same `Idempotency-Key` finds the
/// same turn (and enqueues it again only while it still waits, which the queue deduplicates).
pub(crate) async fn accept(
    service: &TurnService,
    queue: &dyn TurnQueue,
    user: UserId,
    session: SessionId,
    body: TurnBody,
    headers: &HeaderMap,
) -> Result<Answer, ApiError> {
    let key = match client_key(headers)? {
        Some(key) => key.to_owned(),
        None => hex::encode(rand::random::<[u8; 16]>()),
    };
    let ticket = body
        .ticket_id
        .as_deref()
        .map(agent_core::TicketId::parse)
        .transpose()
        .map_err(|err| ApiError::bad_request(format!("`ticket_id`: {err}")))?;
    let ticket = ticket.as_ref().map(|ticket| ticket.as_str());
    let decisions = body.decisions()?;
    let fingerprint = decisions.as_ref().map(agent_core::agent::Decisions::fingerprint);
    let idempotency =
        IdempotencyKey::for_queued_turn(&key, &user, &session, &body.message, ticket, fingerprint.as_deref())
            .map_err(|err| ApiError::bad_request(format!("`Idempotency-Key`: {err}")))?;
    let turn_id = idempotency.key_hash.clone();
    let now = time::OffsetDateTime::now_utc();
    let waiting = match service.accept_background(&user, &session, &idempotency, now).await? {
        Accepted::Mismatch => {
            return Err(ApiError::new(
                422,
                "idempotency_key_reused",
                "this Idempotency-Key was already used with a different request",
            ))
        }
        Accepted::New | Accepted::Existing(TurnStatus::Queued) => true,
        Accepted::Existing(_) => false,
    };
    if waiting {
        let record = json!({
            "user_id": user,
            "session_id": session,
            "message": body.message,
            "ticket_id": ticket,
            "idempotency_key": key,
            "decisions": body.decisions,
        });
        queue.enqueue(record, session.as_str(), &turn_id).await.map_err(|error| {
            tracing::error!(session = %session, %error, "could not enqueue a background turn");
            ApiError::new(
                503,
                "queue_unavailable",
                "the turn could not be queued; send it again with the same Idempotency-Key",
            )
        })?;
    }
    tracing::info!(session = %session, turn_id, new = waiting, "background turn accepted");
    if waiting {
        agent_app::metrics::put_count("BackgroundTurnsQueued", 1);
    }
    let poll = format!("/sessions/{session}/turns/{turn_id}");
    Ok(Answer {
        status: 202,
        body: json!({"turn_id": turn_id, "status": "pending", "poll": poll}).into(),
        headers: vec![("location", poll.clone()), ("preference-applied", "respond-async".to_owned())],
        replayed: false,
    })
}

/// `GET /sessions/{id}/turns/{turn_id}`: pending, completed with the synchronous turn's fields, or
/// failed with its error; 404 for a turn the caller does not own or that never was.
pub(crate) async fn status(
    service: &TurnService,
    user: &UserId,
    session: &SessionId,
    turn_id: &str,
) -> Result<Answer, ApiError> {
    if turn_id.len() != 64 || !turn_id.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(ApiError::not_found(format!("no turn `{turn_id}`")));
    }
    let status = service
        .turn_status(user, session, turn_id, time::OffsetDateTime::now_utc())
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no turn `{turn_id}`")))?;
    let body = match status {
        TurnStatus::Queued | TurnStatus::Running => json!({"turn_id": turn_id, "status": "pending"}),
        TurnStatus::Committed { reply } => {
            let mut body = json!({"turn_id": turn_id, "status": "completed"});
            if let (Some(fields), Value::Object(reply)) = (body.as_object_mut(), reply) {
                fields.extend(reply);
            }
            body
        }
        TurnStatus::Failed { error } => json!({"turn_id": turn_id, "status": "failed", "error": error}),
    };
    Ok(body.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::http::HeaderValue;

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
