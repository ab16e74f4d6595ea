//! A turn as an A2A stream (`SendStreamingMessage`): each response is one Server-Sent Event whose
//! data is a JSON-RPC response. The first is the task (working); the model's text as it arrives and
//! every other event of the turn are working status updates (the text as a text part, an event as a
//! data part `{"event": name, "data": {...}}`); the end is the reply as the task's artifact and
//! the completed status, or the input-required, rejected or failed status.
//!
//! [`StreamEncoder`] is pure: [`encode_turn`] gives the bytes of a whole turn from its events and
//! its end, which is what the benchmark measures against the runtime's own SSE.

use agent_core::TurnEvent;
use serde_json::Value;

use super::rpc;
use super::task::{TaskId, TurnEnd};
use super::wire::{self, TaskState};
use super::Dialect;

/// Encodes one turn's stream: the responses to the request with JSON-RPC id `id` about `task`.
pub struct StreamEncoder {
    id: Value,
    task: TaskId,
    /// The task's id as sent, written once rather than per event.
    task_text: String,
    dialect: Dialect,
    started: bool,
    /// Status messages sent so far, which number their ids.
    messages: u64,
}

impl StreamEncoder {
    pub fn new(id: Value, task: TaskId, dialect: Dialect) -> Self {
        let task_text = task.to_string();
        Self { id, task, task_text, dialect, started: false, messages: 0 }
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

    /// The responses one event of the turn makes (the start first, if not yet sent): a working
    /// status update whose message carries the event. Written straight from typed shapes, not
    /// through `serde_json::Value` trees: this runs for every delta of every streamed turn.
    pub fn event(&mut self, event: &TurnEvent) -> String {
        let mut out = self.start();
        let part = match event {
            TurnEvent::Started { .. } => return out,
            TurnEvent::MessageDelta { text } => fast::Part::Text { kind: self.dialect.kind("text"), text },
            other => fast::Part::Data {
                kind: self.dialect.kind("data"),
                data: fast::EventData { event: other.name(), data: other },
            },
        };
        self.messages += 1;
        let message_id = format!("{}-{}", &self.task.turn[..16], self.messages);
        let update = fast::Update {
            task_id: &self.task_text,
            context_id: self.task.session.as_str(),
            status: fast::Status {
                state: TaskState::Working.wire(self.dialect),
                message: fast::Message {
                    message_id: &message_id,
                    role: match self.dialect {
                        Dialect::V1 => "ROLE_AGENT",
                        Dialect::V03 => "agent",
                    },
                    parts: [part],
                    task_id: &self.task_text,
                    context_id: self.task.session.as_str(),
                    kind: self.dialect.kind("message"),
                },
            },
            kind: self.dialect.kind("status-update"),
            last: (self.dialect == Dialect::V03).then_some(false),
        };
        let written = match self.dialect {
            Dialect::V1 => {
                serde_json::to_string(&fast::Response::new(&self.id, fast::V1Update { status_update: update }))
            }
            Dialect::V03 => serde_json::to_string(&fast::Response::new(&self.id, update)),
        };
        // Serialising borrowed strings and an event cannot fail; a failure would drop this event only.
        if let Ok(written) = written {
            out.push_str("data: ");
            out.push_str(&written);
            out.push_str("\n\n");
        }
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

/// The typed shapes of a stream's per-event status update, in either version (0.3's `kind` tags
/// and `final` are absent in 1.0). They serialise to the same objects as [`wire`]'s values.
mod fast {
    use agent_core::TurnEvent;
    use serde::Serialize;
    use serde_json::Value;

    #[derive(Serialize)]
    pub(super) struct Response<'a, R: Serialize> {
        jsonrpc: &'static str,
        id: &'a Value,
        result: R,
    }

    impl<'a, R: Serialize> Response<'a, R> {
        pub(super) fn new(id: &'a Value, result: R) -> Self {
            Self { jsonrpc: "2.0", id, result }
        }
    }

    /// 1.0's `StreamResponse` naming its payload.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct V1Update<'a> {
        pub(super) status_update: Update<'a>,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct Update<'a> {
        pub(super) task_id: &'a str,
        pub(super) context_id: &'a str,
        pub(super) status: Status<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub(super) kind: Option<&'static str>,
        #[serde(rename = "final", skip_serializing_if = "Option::is_none")]
        pub(super) last: Option<bool>,
    }

    #[derive(Serialize)]
    pub(super) struct Status<'a> {
        pub(super) state: &'static str,
        pub(super) message: Message<'a>,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct Message<'a> {
        pub(super) message_id: &'a str,
        pub(super) role: &'static str,
        pub(super) parts: [Part<'a>; 1],
        pub(super) task_id: &'a str,
        pub(super) context_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub(super) kind: Option<&'static str>,
    }

    #[derive(Serialize)]
    #[serde(untagged)]
    pub(super) enum Part<'a> {
        Text {
            #[serde(skip_serializing_if = "Option::is_none")]
            kind: Option<&'static str>,
            text: &'a str,
        },
        Data {
            #[serde(skip_serializing_if = "Option::is_none")]
            kind: Option<&'static str>,
            data: EventData<'a>,
        },
    }

    /// One of our events as a data part: its name and its fields.
    #[derive(Serialize)]
    pub(super) struct EventData<'a> {
        pub(super) event: &'static str,
        pub(super) data: &'a TurnEvent,
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
    use serde_json::json;

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
    fn each_events_update_is_the_object_wire_builds_in_both_versions() {
        let task = TaskId::new(SessionId::parse("s").unwrap(), "f".repeat(64));
        let nested = TurnEvent::Nested { subagent: "sa-1".into(), event: Box::new(events()[1].clone()) };
        for dialect in [Dialect::V1, Dialect::V03] {
            let mut encoder = StreamEncoder::new(json!(7), task.clone(), dialect);
            encoder.start();
            for (n, event) in [events()[2].clone(), events()[1].clone(), nested.clone()].iter().enumerate() {
                let written = read(encoder.event(event).as_bytes()).remove(0);
                let part = match event {
                    TurnEvent::MessageDelta { text } => wire::text_part(text, dialect),
                    other => wire::data_part(
                        json!({"event": other.name(), "data": serde_json::to_value(other).unwrap()}),
                        dialect,
                    ),
                };
                let message_id = format!("{}-{}", &task.turn[..16], n + 1);
                let message = wire::agent_message(message_id, &task, vec![part], dialect);
                let status = wire::status(TaskState::Working, Some(message), dialect);
                let expected = rpc::result(&json!(7), wire::status_update(&task, status, false, dialect));
                assert_eq!(written, expected, "{dialect:?} {event:?}");
            }
        }
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
