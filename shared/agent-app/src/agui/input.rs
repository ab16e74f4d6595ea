//! An AG-UI `RunAgentInput` (`@ag-ui/core` 1.0), bounded and validated, made into the turn it
//! asks for: the thread is the session, the last message (the user's) is the turn's message, the
//! run id is the turn's idempotency key, and `resume` answers a paused turn's approvals. Nothing
//! in the input names the user: the caller's verified token does.

use std::collections::BTreeMap;

use agent_core::agent::{CallDecision, Decision, MAX_TOOL_CALLS_PER_REPLY};
use agent_core::turn::{TurnRequest, UserProfile, MAX_MESSAGE_BYTES};
use agent_core::{IdempotencyKey, SessionId, UserId};
use http::{HeaderMap, HeaderValue};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use crate::api::{body_bytes, turn_request, ApiError, TurnBody, IDEMPOTENCY_KEY_HEADER};

/// Largest input accepted, in bytes: a front-end sends the whole conversation on every run, so
/// this is far over one message's bound, and under a Function URL's 6 MB request limit.
pub const MAX_INPUT_BYTES: usize = 4 * 1024 * 1024;
/// Most messages an input may carry.
pub const MAX_MESSAGES: usize = 2000;
/// Most front-end tools and context entries an input may carry (both are accepted and not used).
pub const MAX_TOOLS: usize = 128;
pub const MAX_CONTEXT: usize = 128;

/// A validated run: what the stream says (thread and run ids) and the turn it asks for.
#[derive(Debug)]
pub struct RunInput {
    pub thread_id: String,
    pub run_id: String,
    pub session: SessionId,
    /// The turn's body: the new message, or the decisions that answer the interrupts.
    pub body: TurnBody,
    /// Tool calls the client holds already: the interrupts this run answers, and every call of
    /// the input's assistant messages. A turn that goes on after a pause runs calls an earlier run
    /// showed; the client is sent their results, not their starts again.
    pub known_calls: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawInput {
    thread_id: String,
    run_id: String,
    #[serde(default)]
    protocol_version: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    parent_run_id: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    state: Option<IgnoredAny>,
    messages: Vec<RawMessage>,
    #[serde(default)]
    tools: Option<Vec<IgnoredAny>>,
    #[serde(default)]
    context: Option<Vec<IgnoredAny>>,
    #[serde(default)]
    #[allow(dead_code)]
    forwarded_props: Option<IgnoredAny>,
    #[serde(default)]
    resume: Option<Vec<RawResume>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMessage {
    role: String,
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<RawToolCall>>,
}

#[derive(Deserialize)]
struct RawToolCall {
    id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawResume {
    interrupt_id: String,
    status: ResumeStatus,
    #[serde(default)]
    payload: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ResumeStatus {
    Resolved,
    Cancelled,
}

/// Parses and validates the body of `POST /ag-ui`; `base64` when the integration encoded it.
pub fn parse_run_input(raw: Option<&str>, base64: bool) -> Result<RunInput, ApiError> {
    let raw = raw.unwrap_or("");
    if raw.len() > 2 * MAX_INPUT_BYTES {
        return Err(input_too_large());
    }
    let bytes = body_bytes(raw, base64)?;
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(input_too_large());
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("the body is empty; send an AG-UI RunAgentInput"));
    }
    let input: RawInput = serde_json::from_slice(&bytes).map_err(|err| {
        let message = match err.is_data() {
            true => format!("not an AG-UI RunAgentInput: {err}"),
            false => format!("the body is not valid JSON: {err}"),
        };
        ApiError::bad_request(message)
    })?;
    validate(input)
}

fn validate(input: RawInput) -> Result<RunInput, ApiError> {
    if let Some(version) = &input.protocol_version {
        if version.split('.').next() != Some("1") {
            return Err(ApiError::bad_request(format!(
                "`protocolVersion` {version:?} is not served: this agent speaks AG-UI 1.x"
            )));
        }
    }
    let session = SessionId::parse(input.thread_id.as_str())
        .map_err(|err| ApiError::bad_request(format!("`threadId`: {err}")))?;
    crate::api::writable_session(&session)?;
    // The run id is the turn's idempotency key: checked here so its error names it.
    IdempotencyKey::new(&input.run_id, &[]).map_err(|err| ApiError::bad_request(format!("`runId`: {err}")))?;
    if input.messages.len() > MAX_MESSAGES {
        return Err(ApiError::bad_request(format!("`messages` may hold at most {MAX_MESSAGES} messages")));
    }
    if input.tools.as_ref().is_some_and(|tools| tools.len() > MAX_TOOLS) {
        return Err(ApiError::bad_request(format!("`tools` may hold at most {MAX_TOOLS} tools")));
    }
    if input.context.as_ref().is_some_and(|context| context.len() > MAX_CONTEXT) {
        return Err(ApiError::bad_request(format!("`context` may hold at most {MAX_CONTEXT} entries")));
    }
    let resume = input.resume.unwrap_or_default();
    let mut known_calls: Vec<String> = resume.iter().map(|entry| entry.interrupt_id.clone()).collect();
    let body = match resume.is_empty() {
        true => body_with(new_message(&input.messages)?, None),
        false => body_with(String::new(), Some(decisions(resume)?)),
    };
    for message in input.messages.into_iter().filter(|message| message.role == "assistant") {
        known_calls.extend(message.tool_calls.into_iter().flatten().map(|call| call.id));
    }
    Ok(RunInput { thread_id: input.thread_id, run_id: input.run_id, session, body, known_calls })
}

fn body_with(message: String, decisions: Option<Vec<CallDecision>>) -> TurnBody {
    TurnBody {
        message,
        ticket_id: None,
        decisions,
        attachments: Vec::new(),
        skill_versions: BTreeMap::new(),
        webhook: None,
    }
}

/// The run's new message: the last message, which must be the user's, as text.
fn new_message(messages: &[RawMessage]) -> Result<String, ApiError> {
    let last = messages.last().ok_or_else(|| {
        ApiError::bad_request("`messages` is empty: the last message must be the user's new one (or send `resume`)")
    })?;
    if last.role != "user" {
        return Err(ApiError::bad_request(format!(
            "the last message is the {}'s: a run starts from the user's new message (or answers interrupts \
             with `resume`)",
            last.role
        )));
    }
    let text = match &last.content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => text_of_parts(parts)?,
        _ => return Err(ApiError::bad_request("the user message's `content` must be a string or a list of parts")),
    };
    if text.len() > MAX_MESSAGE_BYTES {
        return Err(ApiError::new(
            413,
            "payload_too_large",
            format!("the user's message must be at most {} KiB", MAX_MESSAGE_BYTES / 1024),
        ));
    }
    if text.trim().is_empty() {
        return Err(ApiError::bad_request("the user's message is empty"));
    }
    Ok(text)
}

/// A multimodal message's text: its text parts in order. Media parts are refused rather than
/// dropped: a file reaches a turn as an upload attached to it (`docs/http-api.md`).
fn text_of_parts(parts: &[Value]) -> Result<String, ApiError> {
    let mut text = String::new();
    for part in parts {
        match (part.get("type").and_then(Value::as_str), part.get("text").and_then(Value::as_str)) {
            (Some("text"), Some(piece)) => text.push_str(piece),
            (kind, _) => {
                return Err(ApiError::bad_request(format!(
                    "a `{}` part is not served over AG-UI: send text parts, and files as uploads",
                    kind.unwrap_or("?")
                )));
            }
        }
    }
    Ok(text)
}

/// The decisions `resume` gives: `cancelled` rejects the call; `resolved` carries the decision as
/// its payload (`{"decision": "approve"}`, `{"decision": "edit", "arguments": {...}}` or
/// `{"decision": "reject", "message": "..."}`), as each interrupt's `responseSchema` says.
fn decisions(resume: Vec<RawResume>) -> Result<Vec<CallDecision>, ApiError> {
    if resume.len() > MAX_TOOL_CALLS_PER_REPLY {
        return Err(ApiError::bad_request(format!(
            "`resume` may answer at most {MAX_TOOL_CALLS_PER_REPLY} interrupts"
        )));
    }
    resume
        .into_iter()
        .enumerate()
        .map(|(index, entry)| {
            let decision = match (entry.status, entry.payload) {
                (ResumeStatus::Cancelled, _) => Decision::Reject { message: None },
                (ResumeStatus::Resolved, Some(payload)) => serde_json::from_value(payload).map_err(|err| {
                    ApiError::bad_request(format!(
                        "`resume[{index}].payload` must be a decision ({{\"decision\": \"approve\" | \"edit\" | \
                         \"reject\"}}): {err}"
                    ))
                })?,
                (ResumeStatus::Resolved, None) => {
                    return Err(ApiError::bad_request(format!(
                        "`resume[{index}]` is resolved without a `payload`: send the decision"
                    )));
                }
            };
            Ok(CallDecision { call_id: entry.interrupt_id, decision })
        })
        .collect()
}

impl RunInput {
    /// The turn this run asks for, by `user` (from the verified token only), through the same
    /// validation as the HTTP API's turn body, with the run id as its idempotency key.
    pub fn turn_request(
        &self,
        user: UserId,
        profile: UserProfile,
        deadline: Option<Instant>,
    ) -> Result<TurnRequest, ApiError> {
        let mut headers = HeaderMap::new();
        let key =
            HeaderValue::from_str(&self.run_id).map_err(|_| ApiError::bad_request("`runId` must be visible ASCII"))?;
        headers.insert(IDEMPOTENCY_KEY_HEADER, key);
        let body = body_with(self.body.message.clone(), self.body.decisions.clone());
        turn_request(user, self.session.clone(), body, &headers, profile, deadline).map_err(|err| match err.code {
            "bad_request" if err.message.starts_with("`decisions`") => {
                ApiError::bad_request(format!("`resume`: {}", err.message.trim_start_matches("`decisions`: ")))
            }
            _ => err,
        })
    }
}

fn input_too_large() -> ApiError {
    ApiError::new(
        413,
        "payload_too_large",
        format!("the input must be at most {} MiB", MAX_INPUT_BYTES / (1024 * 1024)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(input: Value) -> Result<RunInput, ApiError> {
        parse_run_input(Some(&input.to_string()), false)
    }

    fn input(messages: Value) -> Value {
        json!({"threadId": "t-1", "runId": "r-1", "messages": messages, "tools": [], "context": [],
               "state": {}, "forwardedProps": {}})
    }

    #[test]
    fn the_last_user_message_is_the_turn_and_the_run_id_its_key() {
        let run = parse(input(json!([
            {"id": "1", "role": "user", "content": "Hola"},
            {"id": "2", "role": "assistant", "content": "¿Sí?",
             "toolCalls": [{"id": "call_7", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
            {"id": "3", "role": "user", "content": [{"type": "text", "text": "Escribe "}, {"type": "text", "text": "a.md"}]}
        ])))
        .unwrap();
        assert_eq!(run.session.as_str(), "t-1");
        assert_eq!(run.body.message, "Escribe a.md");
        assert_eq!(run.known_calls, ["call_7"]);
        let request = run.turn_request(UserId::parse("u").unwrap(), UserProfile::default(), None).unwrap();
        let again = run.turn_request(UserId::parse("u").unwrap(), UserProfile::default(), None).unwrap();
        assert_eq!(request.idempotency, again.idempotency);
        assert!(request.idempotency.is_some());
        assert_eq!(request.message, "Escribe a.md");
    }

    #[test]
    fn resume_answers_the_interrupts_as_decisions() {
        let mut value = input(json!([{"id": "1", "role": "user", "content": "Hola"}]));
        value["resume"] = json!([
            {"interruptId": "call_1", "status": "resolved", "payload": {"decision": "approve"}},
            {"interruptId": "sa-1/call_2", "status": "cancelled"},
            {"interruptId": "call_3", "status": "resolved", "payload": {"decision": "edit", "arguments": {"a": 1}}}
        ]);
        let run = parse(value).unwrap();
        assert_eq!(run.body.message, "");
        assert_eq!(run.known_calls, ["call_1", "sa-1/call_2", "call_3"]);
        let request = run.turn_request(UserId::parse("u").unwrap(), UserProfile::default(), None).unwrap();
        let decisions = request.decisions.unwrap();
        assert_eq!(decisions.get("call_1"), Some(&Decision::Approve));
        assert_eq!(decisions.get("sa-1/call_2"), Some(&Decision::Reject { message: None }));
        assert_eq!(decisions.get("call_3"), Some(&Decision::Edit { arguments: json!({"a": 1}) }));
    }

    #[test]
    fn bad_inputs_are_refused_with_what_is_wrong() {
        let error = |value: Value| parse(value).unwrap_err();
        let user = json!([{"id": "1", "role": "user", "content": "Hola"}]);
        let mut bad_thread = input(user.clone());
        bad_thread["threadId"] = json!("../other-user/s1");
        assert!(error(bad_thread).message.starts_with("`threadId`"));
        let mut eval = input(user.clone());
        eval["threadId"] = json!("_eval.x");
        assert_eq!(error(eval).status, 400);
        let mut bad_run = input(user.clone());
        bad_run["runId"] = json!("with space");
        assert!(error(bad_run).message.starts_with("`runId`"));
        assert!(error(input(json!([]))).message.contains("empty"));
        assert!(error(input(json!([{"id": "1", "role": "assistant", "content": "x"}]))).message.contains("assistant"));
        let image = json!([{"id": "1", "role": "user", "content": [{"type": "image", "source": {}}]}]);
        assert!(error(input(image)).message.contains("image"));
        assert_eq!(error(json!({"threadId": "t", "runId": "r"})).status, 400);
        assert_eq!(parse_run_input(Some("{not json"), false).unwrap_err().status, 400);
        assert_eq!(parse_run_input(None, false).unwrap_err().status, 400);
        let mut version = input(user.clone());
        version["protocolVersion"] = json!("2.0");
        assert!(error(version).message.contains("protocolVersion"));
        let mut resolved = input(user.clone());
        resolved["resume"] = json!([{"interruptId": "c", "status": "resolved"}]);
        assert!(error(resolved).message.contains("payload"));
        let mut wrong = input(user.clone());
        wrong["resume"] = json!([{"interruptId": "c", "status": "resolved", "payload": {"ok": true}}]);
        assert!(error(wrong).message.contains("resume[0]"));
        let long = json!([{"id": "1", "role": "user", "content": "x".repeat(MAX_MESSAGE_BYTES + 1)}]);
        assert_eq!(error(input(long)).status, 413);
        let huge = "x".repeat(MAX_INPUT_BYTES + 1);
        assert_eq!(parse_run_input(Some(&huge), false).unwrap_err().status, 413);
        let tools: Vec<Value> = (0..=MAX_TOOLS).map(|n| json!({"name": format!("t{n}"), "description": ""})).collect();
        let mut many = input(user);
        many["tools"] = json!(tools);
        assert!(error(many).message.contains("tools"));
    }

    #[test]
    fn twice_the_same_interrupt_is_refused_as_resume() {
        let mut value = input(json!([{"id": "1", "role": "user", "content": "Hola"}]));
        value["resume"] = json!([
            {"interruptId": "c", "status": "cancelled"},
            {"interruptId": "c", "status": "cancelled"}
        ]);
        let run = parse(value).unwrap();
        let err = run.turn_request(UserId::parse("u").unwrap(), UserProfile::default(), None).unwrap_err();
        assert!(err.message.starts_with("`resume`"), "{}", err.message);
    }
}
