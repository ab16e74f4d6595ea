//! The shapes A2A's objects take on the wire, in either protocol version: 1.0 (the ProtoJSON of
//! its `a2a.proto`: `TASK_STATE_COMPLETED`, a `StreamResponse` naming its payload) and 0.3 (`kind`
//! tags, `completed`, the payload as the result itself).

use serde_json::{json, Map, Value};

use super::task_id::TaskId;
use super::Dialect;

/// Where a task stands, as A2A names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Canceled,
    Failed,
    Rejected,
}

impl TaskState {
    /// The state's name in `dialect`.
    pub fn wire(self, dialect: Dialect) -> &'static str {
        match (self, dialect) {
            (TaskState::Submitted, Dialect::V1) => "TASK_STATE_SUBMITTED",
            (TaskState::Working, Dialect::V1) => "TASK_STATE_WORKING",
            (TaskState::InputRequired, Dialect::V1) => "TASK_STATE_INPUT_REQUIRED",
            (TaskState::Completed, Dialect::V1) => "TASK_STATE_COMPLETED",
            (TaskState::Canceled, Dialect::V1) => "TASK_STATE_CANCELED",
            (TaskState::Failed, Dialect::V1) => "TASK_STATE_FAILED",
            (TaskState::Rejected, Dialect::V1) => "TASK_STATE_REJECTED",
            (TaskState::Submitted, Dialect::V03) => "submitted",
            (TaskState::Working, Dialect::V03) => "working",
            (TaskState::InputRequired, Dialect::V03) => "input-required",
            (TaskState::Completed, Dialect::V03) => "completed",
            (TaskState::Canceled, Dialect::V03) => "canceled",
            (TaskState::Failed, Dialect::V03) => "failed",
            (TaskState::Rejected, Dialect::V03) => "rejected",
        }
    }

    /// Whether a stream ends with this state: a terminal one, or a pause for the caller's input.
    pub fn ends_stream(self) -> bool {
        !matches!(self, TaskState::Submitted | TaskState::Working)
    }
}

/// A text part.
pub fn text_part(text: &str, dialect: Dialect) -> Value {
    match dialect {
        Dialect::V1 => json!({"text": text}),
        Dialect::V03 => json!({"kind": "text", "text": text}),
    }
}

/// A structured data part.
pub fn data_part(data: Value, dialect: Dialect) -> Value {
    match dialect {
        Dialect::V1 => json!({"data": data}),
        Dialect::V03 => json!({"kind": "data", "data": data}),
    }
}

/// A message of the agent's about `task`.
pub fn agent_message(message_id: String, task: &TaskId, parts: Vec<Value>, dialect: Dialect) -> Value {
    let mut message = json!({
        "messageId": message_id,
        "role": match dialect { Dialect::V1 => "ROLE_AGENT", Dialect::V03 => "agent" },
        "parts": parts,
        "taskId": task.to_string(),
        "contextId": task.session.as_str(),
    });
    if dialect == Dialect::V03 {
        message["kind"] = json!("message");
    }
    message
}

/// A task's status, with the agent's message about it when there is one.
pub fn status(state: TaskState, message: Option<Value>, dialect: Dialect) -> Value {
    let mut status = json!({"state": state.wire(dialect)});
    if let Some(message) = message {
        status["message"] = message;
    }
    status
}

/// An artifact of one part list.
pub fn artifact(artifact_id: &str, name: &str, parts: Vec<Value>) -> Value {
    json!({"artifactId": artifact_id, "name": name, "parts": parts})
}

/// A task object.
pub fn task(
    task: &TaskId,
    status: Value,
    artifacts: Vec<Value>,
    metadata: Option<Map<String, Value>>,
    dialect: Dialect,
) -> Value {
    let mut object = json!({"id": task.to_string(), "contextId": task.session.as_str(), "status": status});
    if !artifacts.is_empty() {
        object["artifacts"] = Value::Array(artifacts);
    }
    if let Some(metadata) = metadata.filter(|metadata| !metadata.is_empty()) {
        object["metadata"] = Value::Object(metadata);
    }
    if dialect == Dialect::V03 {
        object["kind"] = json!("task");
    }
    object
}

/// A task as the result of a send or the first response of a stream: named in 1.0, itself in 0.3.
pub fn task_result(task: Value, dialect: Dialect) -> Value {
    match dialect {
        Dialect::V1 => json!({"task": task}),
        Dialect::V03 => task,
    }
}

/// A status update of a stream; `last` marks the one that ends it (0.3's `final`).
pub fn status_update(task: &TaskId, status: Value, last: bool, dialect: Dialect) -> Value {
    let update = json!({"taskId": task.to_string(), "contextId": task.session.as_str(), "status": status});
    match dialect {
        Dialect::V1 => json!({"statusUpdate": update}),
        Dialect::V03 => {
            let mut update = update;
            update["kind"] = json!("status-update");
            update["final"] = json!(last);
            update
        }
    }
}

/// An artifact update of a stream.
pub fn artifact_update(task: &TaskId, artifact: Value, append: bool, last_chunk: bool, dialect: Dialect) -> Value {
    let update = json!({
        "taskId": task.to_string(),
        "contextId": task.session.as_str(),
        "artifact": artifact,
        "append": append,
        "lastChunk": last_chunk,
    });
    match dialect {
        Dialect::V1 => json!({"artifactUpdate": update}),
        Dialect::V03 => {
            let mut update = update;
            update["kind"] = json!("artifact-update");
            update
        }
    }
}
