//! A task is one turn (and the turns that answer its approval pauses): its id names the session
//! and the hash of the turn's idempotency key, and its state, status message, artifact and
//! metadata are read from how the turn ended — the reply or the error a turn answers with, just
//! returned or as stored for a background turn's poller.

use agent_core::TurnStatus;
use serde_json::{json, Map, Value};

pub use super::task_id::TaskId;
use super::wire::{self, TaskState};
use super::Dialect;

/// The code a canceled background turn's stored error carries.
pub const CANCELED_CODE: &str = "canceled";
/// The artifact a completed task's reply is.
pub const REPLY_ARTIFACT: &str = "reply";

/// How a turn ended: the reply it answered (a `TurnReply`'s JSON), or the error it failed with
/// (an `ApiError`'s stored form: `{"status", "code", "message"}`).
#[derive(Debug, Clone, Copy)]
pub enum TurnEnd<'a> {
    Replied(&'a Value),
    Failed(&'a Value),
}

impl TurnEnd<'_> {
    /// Whether the turn paused for approval of its tool calls.
    pub fn awaits_approval(&self) -> bool {
        matches!(self, TurnEnd::Replied(reply) if reply["ending"] == "awaiting_approval")
    }

    /// The task state this end is.
    pub fn state(&self) -> TaskState {
        match self {
            TurnEnd::Replied(_) if self.awaits_approval() => TaskState::InputRequired,
            TurnEnd::Replied(_) => TaskState::Completed,
            TurnEnd::Failed(error) if error["code"] == CANCELED_CODE => TaskState::Canceled,
            // A request the agent would refuse again (bad input, a budget spent): rejected; a
            // failure of the model or of storage: failed.
            TurnEnd::Failed(error) if error["status"].as_u64().is_some_and(|status| status < 500) => {
                TaskState::Rejected
            }
            TurnEnd::Failed(_) => TaskState::Failed,
        }
    }

    /// The status this end is: a pause carries its reply and the calls that wait (a data part
    /// `{"pending_approval": [...]}`), a failure its message and its error (`{"error": {...}}`).
    pub fn status(&self, task: &TaskId, dialect: Dialect) -> Value {
        let state = self.state();
        let parts = match self {
            TurnEnd::Replied(reply) if self.awaits_approval() => {
                let mut parts = Vec::with_capacity(2);
                if let Some(text) = reply["reply"].as_str().filter(|text| !text.is_empty()) {
                    parts.push(wire::text_part(text, dialect));
                }
                let pending = json!({"pending_approval": reply["pending_approval"]});
                parts.push(wire::data_part(pending, dialect));
                parts
            }
            TurnEnd::Replied(_) => Vec::new(),
            TurnEnd::Failed(error) => {
                let text = error["message"].as_str().unwrap_or("the turn failed");
                vec![wire::text_part(text, dialect), wire::data_part(json!({"error": error}), dialect)]
            }
        };
        let message = (!parts.is_empty()).then(|| wire::agent_message(status_message_id(task), task, parts, dialect));
        wire::status(state, message, dialect)
    }

    /// The reply as the task's artifact, for a completed turn.
    pub fn artifact(&self, dialect: Dialect) -> Option<Value> {
        match self {
            TurnEnd::Replied(reply) if !self.awaits_approval() => {
                let text = reply["reply"].as_str().unwrap_or("");
                Some(wire::artifact(REPLY_ARTIFACT, REPLY_ARTIFACT, vec![wire::text_part(text, dialect)]))
            }
            _ => None,
        }
    }

    /// What the turn's reply says besides its text (ending, steps, usage, cost, files, version),
    /// as the task's metadata under `turn`.
    pub fn metadata(&self) -> Option<Map<String, Value>> {
        let TurnEnd::Replied(Value::Object(reply)) = self else { return None };
        let turn: Map<String, Value> = reply
            .iter()
            .filter(|(field, _)| !matches!(field.as_str(), "reply" | "pending_approval"))
            .map(|(field, value)| (field.clone(), value.clone()))
            .collect();
        Some(Map::from_iter([("turn".to_owned(), Value::Object(turn))]))
    }

    /// The whole task this end makes.
    pub fn task(&self, task: &TaskId, dialect: Dialect) -> Value {
        let artifacts = self.artifact(dialect).into_iter().collect();
        wire::task(task, self.status(task, dialect), artifacts, self.metadata(), dialect)
    }
}

/// The id of the status message of a task's end.
fn status_message_id(task: &TaskId) -> String {
    format!("{}-status", &task.turn[..16])
}

/// A task with no end yet: submitted (queued) or working.
pub fn pending_task(task: &TaskId, state: TaskState, dialect: Dialect) -> Value {
    wire::task(task, wire::status(state, None, dialect), Vec::new(), None, dialect)
}

/// The task a stored turn status makes.
pub fn task_of_status(task: &TaskId, status: &TurnStatus, dialect: Dialect) -> Value {
    match status {
        TurnStatus::Queued => pending_task(task, TaskState::Submitted, dialect),
        TurnStatus::Running => pending_task(task, TaskState::Working, dialect),
        TurnStatus::Committed { reply } => TurnEnd::Replied(reply).task(task, dialect),
        TurnStatus::Failed { error } => TurnEnd::Failed(error).task(task, dialect),
    }
}

/// Whether a stored status is a pause for approval, which a resumed link may follow.
pub fn awaits_approval(status: &TurnStatus) -> bool {
    matches!(status, TurnStatus::Committed { reply } if TurnEnd::Replied(reply).awaits_approval())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::SessionId;

    fn task_id() -> TaskId {
        TaskId::new(SessionId::parse("ctx-1").unwrap(), "a".repeat(64))
    }

    #[test]
    fn task_ids_round_trip_and_anything_else_is_not_found() {
        let id = task_id();
        assert_eq!(id.to_string(), format!("ctx-1:{}", "a".repeat(64)));
        assert_eq!(TaskId::parse(&id.to_string()).unwrap(), id);
        for bad in ["", "ctx-1", &format!("ctx-1:{}", "A".repeat(64)), &format!("../x:{}", "a".repeat(64)), "x:abc"] {
            assert_eq!(TaskId::parse(bad).unwrap_err().code(), -32001, "{bad}");
        }
        let resumed = id.resumed();
        assert_eq!(resumed.session, id.session);
        assert_ne!(resumed.turn, id.turn);
        assert_eq!(resumed.turn.len(), 64);
    }

    #[test]
    fn ends_map_to_states() {
        let done = json!({"reply": "Hecho.", "ending": "answered", "steps": 1, "version": 3});
        let paused = json!({"reply": "", "ending": "awaiting_approval", "pending_approval": [{"id": "c1", "name": "write_file"}]});
        let canceled = json!({"status": 409, "code": "canceled", "message": "canceled"});
        let refused = json!({"status": 400, "code": "unknown_skill", "message": "no skill"});
        let broken = json!({"status": 502, "code": "model_provider_failed", "message": "down"});
        assert_eq!(TurnEnd::Replied(&done).state(), TaskState::Completed);
        assert_eq!(TurnEnd::Replied(&paused).state(), TaskState::InputRequired);
        assert_eq!(TurnEnd::Failed(&canceled).state(), TaskState::Canceled);
        assert_eq!(TurnEnd::Failed(&refused).state(), TaskState::Rejected);
        assert_eq!(TurnEnd::Failed(&broken).state(), TaskState::Failed);

        let task = TurnEnd::Replied(&done).task(&task_id(), Dialect::V1);
        assert_eq!(task["status"], json!({"state": "TASK_STATE_COMPLETED"}));
        assert_eq!(task["artifacts"][0]["parts"], json!([{"text": "Hecho."}]));
        assert_eq!(task["metadata"]["turn"], json!({"ending": "answered", "steps": 1, "version": 3}));
        let task = TurnEnd::Replied(&paused).task(&task_id(), Dialect::V03);
        assert_eq!(task["kind"], "task");
        assert_eq!(task["status"]["state"], "input-required");
        assert_eq!(
            task["status"]["message"]["parts"],
            json!([{"kind": "data", "data": {"pending_approval": paused["pending_approval"]}}])
        );
        assert!(task.get("artifacts").is_none());
        let task = TurnEnd::Failed(&broken).task(&task_id(), Dialect::V1);
        assert_eq!(task["status"]["message"]["parts"][1]["data"]["error"]["code"], "model_provider_failed");
        assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    }

    #[test]
    fn stored_statuses_map_to_tasks() {
        let id = task_id();
        assert_eq!(task_of_status(&id, &TurnStatus::Queued, Dialect::V1)["status"]["state"], "TASK_STATE_SUBMITTED");
        assert_eq!(task_of_status(&id, &TurnStatus::Running, Dialect::V03)["status"]["state"], "working");
        assert!(awaits_approval(&TurnStatus::Committed { reply: json!({"ending": "awaiting_approval"}) }));
        assert!(!awaits_approval(&TurnStatus::Running));
    }
}
