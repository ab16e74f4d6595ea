//! A turn as an A2A stream (`SendStreamingMessage`): each response is one Server-Sent Event whose
//! data is a JSON-RPC response. The first is the task (working); the model's text as it arrives and
//! every other event of the turn are working status updates (the text as a text part, an event as a
//! data part `{"event": name, "data": {...}}`); the end is the reply as the task's artifact and
//! the completed status, or the input-required, rejected or failed status.
//!
//! [`StreamEncoder`] is pure: [`encode_turn`] gives the bytes of a whole turn from its events and
//! its end, which is what the benchmark measures against the runtime's own SSE.

use agent_core::TurnEvent;
use serde_json::{json, Value};

use super::rpc;
use super::task::{TaskId, TurnEnd};
use super::wire::{self, TaskState};
use super::Dialect;

/// Encodes one turn's stream: the responses to the request with JSON-RPC id `id` about `task`.
pub struct StreamEncoder {
    id: Value,
    task: TaskId,
    dialect: Dialect,
    started: bool,
    /// Status messages sent so far, which number their ids.
    messages: u64,
}

impl StreamEncoder {
    pub fn new(id: Value, task: TaskId, dialect: Dialect) -> Self {
        Self { id, task, dialect, started: false, messages: 0 }
    }

    /// The task being streamed.
    pub fn task(&self) -> &TaskId {
        &self.task
    }

    /// The stream's first response, the task as it starts, once; empty after.
    pub fn start(&mut self) -> String {
        if std::mem::replace(&mut self.started, true) {
            return String::new();
        }
        let task = super::task::pending_task(&self.task, TaskState::Working, self.dialect);
        self.sse(wire::task_result(task, self.dialect))
    }

    /// The responses one event of the turn makes (the start first, if not yet sent).
    pub fn event(&mut self, event: &TurnEvent) -> String {
        let mut out = self.start();
        let part = match event {
            TurnEvent::Started { .. } => return out,
            TurnEvent::MessageDelta { text } => wire::text_part(text, self.dialect),
            other => {
                let data = serde_json::to_value(other).unwrap_or(Value::Null);
                wire::data_part(json!({"event": other.name(), "data": data}), self.dialect)
            }
        };
        self.messages += 1;
        let message_id = format!("{}-{}", &self.task.turn[..16], self.messages);
        let message = wire::agent_message(message_id, &self.task, vec![part], self.dialect);
        let status = wire::status(TaskState::Working, Some(message), self.dialect);
        out.push_str(&self.sse(wire::status_update(&self.task, status, false, self.dialect)));
        out
    }

    /// The responses that end the stream: the reply as the artifact, then the last status.
    pub fn end(&mut self, end: TurnEnd<'_>) -> String {
        let mut out = self.start();
        if let Some(artifact) = end.artifact(self.dialect) {
            out.push_str(&self.sse(wire::artifact_update(&self.task, artifact, false, true, self.dialect)));
        }
        let mut update = wire::status_update(&self.task, end.status(&self.task, self.dialect), true, self.dialect);
        if let Some(metadata) = end.metadata() {
            // The turn's figures (steps, usage, cost, files) go on the update that ends the stream.
            let inner = match self.dialect {
                Dialect::V1 => &mut update["statusUpdate"],
                Dialect::V03 => &mut update,
            };
            inner["metadata"] = Value::Object(metadata);
        }
        out.push_str(&self.sse(update));
        out
    }

    /// One response as one SSE event.
    fn sse(&self, result: Value) -> String {
        format!("data: {}\n\n", rpc::result(&self.id, result))
    }
}

/// The whole stream of a turn: its events, then its end. For the benchmark and the tests.
pub fn encode_turn<'a>(
    id: Value,
    task: TaskId,
    dialect: Dialect,
    events: impl IntoIterator<Item = &'a TurnEvent>,
    end: TurnEnd<'_>,
) -> Vec<u8> {
    let mut encoder = StreamEncoder::new(id, task, dialect);
    let mut out = encoder.start();
    for event in events {
        out.push_str(&encoder.event(event));
    }
    out.push_str(&encoder.end(end));
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::SessionId;

    fn read(bytes: &[u8]) -> Vec<Value> {
        let text = std::str::from_utf8(bytes).unwrap();
        text.split("\n\n")
            .filter(|block| !block.is_empty())
            .map(|block| serde_json::from_str(block.strip_prefix("data: ").expect("one data line")).unwrap())
            .collect()
    }

    fn events() -> Vec<TurnEvent> {
        vec![
            TurnEvent::Started { session_id: "s".into() },
            TurnEvent::ToolCall { id: "c1".into(), name: "ls".into(), arguments: json!({}), summary: String::new() },
            TurnEvent::MessageDelta { text: "Ho".into() },
            TurnEvent::MessageDelta { text: "la".into() },
        ]
    }

    #[test]
    fn a_completed_turn_streams_task_updates_artifact_and_completed() {
        let task = TaskId::new(SessionId::parse("s").unwrap(), "d".repeat(64));
        let reply = json!({"reply": "Hola", "ending": "answered", "steps": 1});
        let bytes = encode_turn(json!("r1"), task.clone(), Dialect::V1, &events(), TurnEnd::Replied(&reply));
        let responses = read(&bytes);
        assert_eq!(responses.len(), 6);
        assert!(responses.iter().all(|response| response["id"] == "r1" && response["jsonrpc"] == "2.0"));
        let results: Vec<&Value> = responses.iter().map(|response| &response["result"]).collect();
        assert_eq!(results[0]["task"]["status"]["state"], "TASK_STATE_WORKING");
        assert_eq!(results[0]["task"]["id"], task.to_string());
        let tool = &results[1]["statusUpdate"]["status"]["message"]["parts"][0]["data"];
        assert_eq!((tool["event"].as_str(), tool["data"]["name"].as_str()), (Some("tool.call"), Some("ls")));
        assert_eq!(results[2]["statusUpdate"]["status"]["message"]["parts"][0]["text"], "Ho");
        assert_ne!(
            results[2]["statusUpdate"]["status"]["message"]["messageId"],
            results[3]["statusUpdate"]["status"]["message"]["messageId"]
        );
        assert_eq!(results[4]["artifactUpdate"]["artifact"]["parts"][0]["text"], "Hola");
        assert_eq!(results[4]["artifactUpdate"]["lastChunk"], true);
        assert_eq!(results[5]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(results[5]["statusUpdate"]["metadata"]["turn"]["steps"], 1);
    }

    #[test]
    fn a_pause_and_a_failure_end_the_stream_with_their_state_in_0_3() {
        let task = TaskId::new(SessionId::parse("s").unwrap(), "e".repeat(64));
        let paused = json!({"reply": "", "ending": "awaiting_approval", "pending_approval": [{"id": "c1"}]});
        let bytes = encode_turn(json!(1), task.clone(), Dialect::V03, &[], TurnEnd::Replied(&paused));
        let responses = read(&bytes);
        assert_eq!(responses.len(), 2);
        assert_eq!(responses[0]["result"]["kind"], "task");
        let last = &responses[1]["result"];
        assert_eq!((last["kind"].as_str(), last["final"].as_bool()), (Some("status-update"), Some(true)));
        assert_eq!(last["status"]["state"], "input-required");
        assert_eq!(last["status"]["message"]["parts"][0]["data"]["pending_approval"][0]["id"], "c1");

        let error = json!({"status": 502, "code": "model_provider_failed", "message": "down"});
        let bytes = encode_turn(json!(2), task, Dialect::V1, &[], TurnEnd::Failed(&error));
        let responses = read(&bytes);
        assert_eq!(responses[1]["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_FAILED");
    }
}
