//! What a webhook says: a turn's end as `GET /sessions/{id}/turns/{turn_id}` shows it, under the
//! event's type and time (`{"type", "timestamp", "data"}`, the Standard Webhooks payload shape),
//! and the record that carries an undelivered one to its next attempt through the webhook queue.

use agent_core::agent::Ending;
use agent_core::turn::TurnReply;
use agent_core::{SessionId, TurnStatus};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The most bytes a payload may take; a larger turn is sent without its fields, to be polled.
/// Well under SQS's 256 KiB, so its retry record always fits.
pub const MAX_PAYLOAD_BYTES: usize = 128 * 1024;
/// The `kind` of a webhook queue record.
pub const DELIVERY_KIND: &str = "webhook_delivery";
/// The `webhook-id` prefix before the turn's id.
const ID_PREFIX: &str = "turn_";

/// A turn's end, ready to send: its `webhook-id` (the same for every attempt and every
/// redelivery of the turn) and its payload.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEvent {
    pub webhook_id: String,
    pub payload: Value,
}

/// The `webhook-id` of turn `turn_id`.
pub fn webhook_id(turn_id: &str) -> String {
    format!("{ID_PREFIX}{turn_id}")
}

impl TurnEvent {
    /// The event of a committed turn: `turn.completed`, or `turn.awaiting_approval` when it waits
    /// on a person's decisions.
    pub fn completed(session: &SessionId, turn_id: &str, reply: &TurnReply) -> TurnEvent {
        let kind = match reply.ending {
            Ending::AwaitingApproval => "turn.awaiting_approval",
            _ => "turn.completed",
        };
        let stored = serde_json::to_value(reply).unwrap_or(Value::Null);
        Self::new(kind, session, turn_id, TurnStatus::Committed { reply: stored })
    }

    /// The event of a turn that failed for good, with its stored error.
    pub fn failed(session: &SessionId, turn_id: &str, error: &Value) -> TurnEvent {
        Self::new("turn.failed", session, turn_id, TurnStatus::Failed { error: error.clone() })
    }

    fn new(kind: &str, session: &SessionId, turn_id: &str, status: TurnStatus) -> TurnEvent {
        let mut data = crate::poll::status_view(turn_id, Some(status)).unwrap_or_else(|_| json!({}));
        data["turn_id"] = json!(turn_id);
        data["session_id"] = json!(session);
        let timestamp =
            time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
        let mut payload = json!({"type": kind, "timestamp": timestamp, "data": data});
        if payload.to_string().len() > MAX_PAYLOAD_BYTES {
            let status = payload["data"]["status"].clone();
            payload["data"] = json!({
                "turn_id": turn_id,
                "session_id": session,
                "status": status,
                "truncated": true,
                "poll": format!("/sessions/{session}/turns/{turn_id}"),
            });
        }
        TurnEvent { webhook_id: webhook_id(turn_id), payload }
    }

    /// The body as sent: the payload's JSON, the same bytes on every attempt.
    pub fn body(&self) -> String {
        self.payload.to_string()
    }
}

/// A webhook queue record: an event still to deliver, and which attempt comes next. The producer
/// (queue-turn itself) is trusted, yet the URL is checked again before the attempt.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveryRecord {
    pub kind: String,
    pub user_id: String,
    pub url: String,
    pub webhook_id: String,
    pub payload: Value,
    /// The number of the attempt this record makes, from 1.
    pub attempt: u32,
}

impl DeliveryRecord {
    /// The event the record carries, when its id is one of ours.
    pub fn event(&self) -> Result<TurnEvent, String> {
        let turn_id = self.webhook_id.strip_prefix(ID_PREFIX).unwrap_or_default();
        if turn_id.len() != 64 || !turn_id.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(format!("`webhook_id` {:?} is not a turn's", self.webhook_id));
        }
        if self.kind != DELIVERY_KIND {
            return Err(format!("`kind` {:?} is not {DELIVERY_KIND:?}", self.kind));
        }
        Ok(TurnEvent { webhook_id: self.webhook_id.clone(), payload: self.payload.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(ending: Ending, text: &str) -> TurnReply {
        serde_json::from_value(json!({
            "session_id": "s1", "reply": text, "current_skill": null, "forced_skill": null,
            "refused_tool_calls": 0, "steps": 1, "usage": {"input_tokens": 3, "output_tokens": 2},
            "ending": ending, "version": 4,
        }))
        .unwrap()
    }

    #[test]
    fn events_carry_the_turn_as_its_poll_shows_it_under_a_stable_id() {
        let session = SessionId::parse("s1").unwrap();
        let turn_id = "a".repeat(64);
        let done = TurnEvent::completed(&session, &turn_id, &reply(Ending::Answered, "Hecho."));
        assert_eq!(done.webhook_id, format!("turn_{turn_id}"));
        assert_eq!(done.payload["type"], "turn.completed");
        let data = &done.payload["data"];
        assert_eq!((data["status"].as_str(), data["reply"].as_str()), (Some("completed"), Some("Hecho.")));
        assert_eq!(
            (data["turn_id"].as_str(), data["session_id"].as_str(), data["version"].as_u64()),
            (Some(turn_id.as_str()), Some("s1"), Some(4))
        );
        let paused = TurnEvent::completed(&session, &turn_id, &reply(Ending::AwaitingApproval, ""));
        assert_eq!(paused.payload["type"], "turn.awaiting_approval");
        let error = json!({"status": 400, "code": "unknown_skill", "message": "no skill"});
        let failed = TurnEvent::failed(&session, &turn_id, &error);
        assert_eq!(failed.payload["type"], "turn.failed");
        assert_eq!(failed.payload["data"]["error"], error);
        assert_eq!(failed.payload["data"]["session_id"], "s1");
        assert_eq!(failed.webhook_id, done.webhook_id, "one id per turn");
    }

    #[test]
    fn a_payload_too_large_is_sent_without_the_turns_fields() {
        let session = SessionId::parse("s1").unwrap();
        let turn_id = "b".repeat(64);
        let event = TurnEvent::completed(&session, &turn_id, &reply(Ending::Answered, &"x".repeat(MAX_PAYLOAD_BYTES)));
        assert!(event.body().len() < 1024);
        assert_eq!(event.payload["data"]["truncated"], true);
        assert_eq!(event.payload["data"]["poll"], format!("/sessions/s1/turns/{turn_id}"));
    }

    #[test]
    fn a_record_names_one_of_our_events_or_is_refused() {
        let record = |id: &str, kind: &str| DeliveryRecord {
            kind: kind.to_owned(),
            user_id: "ana".to_owned(),
            url: "https://h.example.com/".to_owned(),
            webhook_id: id.to_owned(),
            payload: json!({}),
            attempt: 4,
        };
        assert!(record(&webhook_id(&"c".repeat(64)), DELIVERY_KIND).event().is_ok());
        assert!(record("turn_xyz", DELIVERY_KIND).event().is_err());
        assert!(record(&webhook_id(&"c".repeat(64)), "skill_eval").event().is_err());
    }
}
