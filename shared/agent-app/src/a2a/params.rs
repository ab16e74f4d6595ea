//! The params of each method, read leniently across the two protocol versions (a part is a text
//! part whether or not it says `"kind": "text"`) and strictly within bounds: what a message asks
//! becomes a turn's message or its decisions, its context the session and its id the turn's key.

use agent_core::agent::CallDecision;
use agent_core::turn::MAX_MESSAGE_BYTES;
use agent_core::{IdempotencyKey, SessionId};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::rpc::RpcError;
use super::task::TaskId;

/// Most parts a message may have.
pub const MAX_PARTS: usize = 64;

/// A send's params, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct SendParams {
    /// The message's id: the turn's idempotency key, so a message sent again replays its turn.
    pub message_id: String,
    /// The session the message goes to; `None` starts a new one.
    pub context: Option<SessionId>,
    /// The task the message continues: the one whose approval pause its decisions answer.
    pub task: Option<TaskId>,
    /// The text parts, joined by blank lines; empty when the message carries decisions.
    pub text: String,
    /// The decisions of the message's data part `{"decisions": [...]}`.
    pub decisions: Option<Vec<CallDecision>>,
    /// Whether the caller asked not to wait (1.0 `returnImmediately`, 0.3 `blocking: false`): the
    /// turn then runs in the background.
    pub return_immediately: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendWire {
    message: MessageWire,
    #[serde(default)]
    configuration: Option<ConfigurationWire>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageWire {
    #[serde(default)]
    message_id: String,
    #[serde(default)]
    context_id: Option<String>,
    #[serde(default)]
    task_id: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    parts: Vec<Map<String, Value>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigurationWire {
    #[serde(default)]
    return_immediately: Option<bool>,
    #[serde(default)]
    blocking: Option<bool>,
}

/// The decisions a data part carries, and nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionsPart {
    decisions: Vec<CallDecision>,
}

fn invalid(message: impl Into<String>) -> RpcError {
    RpcError::InvalidParams(message.into())
}

/// Reads the params of `SendMessage` / `SendStreamingMessage` (`message/send`, `message/stream`).
pub fn send_params(params: Map<String, Value>) -> Result<SendParams, RpcError> {
    let wire: SendWire = serde_json::from_value(Value::Object(params)).map_err(|err| invalid(format!("{err}")))?;
    let message = wire.message;
    IdempotencyKey::new(&message.message_id, &[]).map_err(|_| {
        invalid(format!("`messageId` must be 1 to {} visible ASCII characters", IdempotencyKey::MAX_KEY_BYTES))
    })?;
    if let Some(role) = message.role.as_deref().filter(|role| !role.is_empty()) {
        if !matches!(role, "ROLE_USER" | "user") {
            return Err(invalid("a message sent to the agent has the user's role"));
        }
    }
    let context = match message.context_id.as_deref().filter(|id| !id.is_empty()) {
        Some(id) => Some(SessionId::parse(id).map_err(|err| invalid(format!("`contextId`: {err}")))?),
        None => None,
    };
    let task = message.task_id.as_deref().filter(|id| !id.is_empty()).map(TaskId::parse).transpose()?;
    if let (Some(task), Some(context)) = (&task, &context) {
        if &task.session != context {
            return Err(invalid("`taskId` names a task of another context than `contextId`"));
        }
    }
    if message.parts.len() > MAX_PARTS {
        return Err(invalid(format!("a message has at most {MAX_PARTS} parts")));
    }
    let (text, decisions) = read_parts(message.parts)?;
    match (&decisions, &task) {
        (Some(_), None) => return Err(invalid("decisions answer a task: send them with its `taskId`")),
        (None, Some(_)) => {
            return Err(invalid(
                "a message continues a task only to answer its approval pause with a data part \
                 {\"decisions\": [...]}; send a new message in the same `contextId` instead",
            ))
        }
        _ => {}
    }
    let configuration = wire.configuration;
    let return_immediately = configuration
        .map(|configuration| configuration.return_immediately.unwrap_or(false) || configuration.blocking == Some(false))
        .unwrap_or(false);
    Ok(SendParams { message_id: message.message_id, context, task, text, decisions, return_immediately })
}

/// The message's text and decisions: text parts are joined; one data part may carry decisions.
fn read_parts(parts: Vec<Map<String, Value>>) -> Result<(String, Option<Vec<CallDecision>>), RpcError> {
    let mut texts: Vec<String> = Vec::new();
    let mut decisions = None;
    let mut length = 0;
    for part in parts {
        let kind = part.get("kind").and_then(Value::as_str);
        if let Some(text) = part.get("text") {
            let text = text.as_str().ok_or_else(|| invalid("a text part's `text` must be a string"))?;
            length += text.len() + 2;
            if length > MAX_MESSAGE_BYTES + 2 * MAX_PARTS {
                return Err(invalid(format!("a message's text is at most {} KiB", MAX_MESSAGE_BYTES / 1024)));
            }
            texts.push(text.to_owned());
        } else if let Some(data) = part.get("data") {
            if decisions.is_some() {
                return Err(invalid("a message carries one data part of decisions"));
            }
            let part: DecisionsPart = serde_json::from_value(data.clone())
                .map_err(|err| invalid(format!("a data part carries {{\"decisions\": [...]}}: {err}")))?;
            decisions = Some(part.decisions);
        } else if kind == Some("file")
            || part.contains_key("raw")
            || part.contains_key("url")
            || part.contains_key("file")
        {
            return Err(RpcError::ContentTypeNotSupported(
                "file parts are not accepted: upload the file to the session and name it in the text".to_owned(),
            ));
        } else {
            return Err(invalid("a part is text (`text`) or data (`data`)"));
        }
    }
    let text = texts.join("\n\n");
    match (decisions.is_some(), text.trim().is_empty()) {
        (true, false) => Err(invalid("send either text or decisions: the decisions go on with the paused turn")),
        (false, true) => Err(invalid("the message has no text")),
        _ => Ok((text, decisions)),
    }
}

/// Reads the params of `GetTask` / `CancelTask` (`tasks/get`, `tasks/cancel`): the task's id.
pub fn task_params(params: &Map<String, Value>) -> Result<TaskId, RpcError> {
    let id = params.get("id").and_then(Value::as_str).ok_or_else(|| invalid("`id` must be the task's id"))?;
    TaskId::parse(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => unreachable!(),
        }
    }

    fn refused(value: Value) -> i64 {
        send_params(params(value)).unwrap_err().code()
    }

    #[test]
    fn a_text_message_in_either_version() {
        let v1 = json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "Hola"}, {"text": "y más"}]},
                        "configuration": {"returnImmediately": true}});
        let sent = send_params(params(v1)).unwrap();
        assert_eq!((sent.message_id.as_str(), sent.text.as_str()), ("m-1", "Hola\n\ny más"));
        assert!(sent.return_immediately && sent.context.is_none() && sent.decisions.is_none());
        let v03 = json!({"message": {"kind": "message", "messageId": "m-2", "role": "user", "contextId": "c-1",
                                     "parts": [{"kind": "text", "text": "Hola"}]}, "configuration": {"blocking": true}});
        let sent = send_params(params(v03)).unwrap();
        assert_eq!(sent.context.unwrap().as_str(), "c-1");
        assert!(!sent.return_immediately);
    }

    #[test]
    fn decisions_go_with_their_task() {
        let task = format!("c-1:{}", "b".repeat(64));
        let decide = json!({"message": {"messageId": "m-3", "taskId": task, "contextId": "c-1",
                                        "parts": [{"data": {"decisions": [{"call_id": "c1", "decision": "approve"}]}}]}});
        let sent = send_params(params(decide)).unwrap();
        assert_eq!(sent.decisions.unwrap()[0].call_id, "c1");
        assert_eq!(sent.task.unwrap().session.as_str(), "c-1");
        let no_task = json!({"message": {"messageId": "m", "parts": [{"data": {"decisions": []}}]}});
        assert_eq!(refused(no_task), -32602);
        let other_context = json!({"message": {"messageId": "m", "taskId": task, "contextId": "c-2",
                                               "parts": [{"data": {"decisions": []}}]}});
        assert_eq!(refused(other_context), -32602);
        let text_on_task = json!({"message": {"messageId": "m", "taskId": task, "parts": [{"text": "hola"}]}});
        assert_eq!(refused(text_on_task), -32602);
    }

    #[test]
    fn bad_messages_are_invalid_params() {
        assert_eq!(refused(json!({})), -32602);
        assert_eq!(refused(json!({"message": {"parts": [{"text": "x"}]}})), -32602, "no messageId");
        assert_eq!(refused(json!({"message": {"messageId": "a b", "parts": [{"text": "x"}]}})), -32602);
        assert_eq!(
            refused(json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}})),
            -32602
        );
        assert_eq!(
            refused(json!({"message": {"messageId": "m", "contextId": "a/b", "parts": [{"text": "x"}]}})),
            -32602
        );
        assert_eq!(refused(json!({"message": {"messageId": "m", "parts": []}})), -32602);
        assert_eq!(refused(json!({"message": {"messageId": "m", "parts": [{"url": "https://x"}]}})), -32005);
        assert_eq!(refused(json!({"message": {"messageId": "m", "parts": [{"data": {"other": 1}}]}})), -32602);
        let many: Vec<Value> = (0..=MAX_PARTS).map(|_| json!({"text": "x"})).collect();
        assert_eq!(refused(json!({"message": {"messageId": "m", "parts": many}})), -32602);
        let long = "x".repeat(MAX_MESSAGE_BYTES + 1000);
        assert_eq!(refused(json!({"message": {"messageId": "m", "parts": [{"text": long}]}})), -32602);
        let foreign_task =
            json!({"message": {"messageId": "m", "taskId": "nope", "parts": [{"data": {"decisions": []}}]}});
        assert_eq!(refused(foreign_task), -32001);
    }

    #[test]
    fn task_params_name_a_task() {
        let id = format!("c-1:{}", "c".repeat(64));
        assert_eq!(task_params(&params(json!({"id": id}))).unwrap().to_string(), id);
        assert_eq!(task_params(&params(json!({}))).unwrap_err().code(), -32602);
        assert_eq!(task_params(&params(json!({"id": "x"}))).unwrap_err().code(), -32001);
    }
}
