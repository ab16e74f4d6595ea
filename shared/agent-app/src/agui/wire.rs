//! The AG-UI 1.0 events this runtime sends, as their JSON is written (`@ag-ui/core`'s event
//! schemas), and how each is framed on the wire: one Server-Sent Events block, `data: <json>`.
//! Fields are borrowed so that writing an event copies nothing but its bytes.

use serde::Serialize;
use serde_json::Value;

/// The protocol version this producer speaks, sent on `RUN_STARTED`.
pub const PROTOCOL_VERSION: &str = "1.0";

/// One AG-UI event. Its `type` is the variant's name in upper snake case; optional fields are left
/// out rather than sent as `null`, which the schemas refuse.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE", rename_all_fields = "camelCase")]
pub enum Event<'a> {
    RunStarted {
        thread_id: &'a str,
        run_id: &'a str,
        protocol_version: &'static str,
    },
    RunFinished {
        thread_id: &'a str,
        run_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        outcome: Outcome<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<[TokenUsage; 1]>,
    },
    RunError {
        message: &'a str,
        code: &'a str,
    },
    TextMessageStart {
        message_id: &'a str,
        role: &'static str,
    },
    TextMessageContent {
        message_id: &'a str,
        delta: &'a str,
    },
    TextMessageEnd {
        message_id: &'a str,
    },
    ToolCallStart {
        tool_call_id: &'a str,
        tool_call_name: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<&'a str>,
    },
    ToolCallArgs {
        tool_call_id: &'a str,
        delta: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<&'a str>,
    },
    ToolCallEnd {
        tool_call_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<&'a str>,
    },
    ToolCallResult {
        message_id: &'a str,
        tool_call_id: &'a str,
        content: &'a str,
        role: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<&'a str>,
    },
    StateSnapshot {
        snapshot: &'a Value,
    },
    StateDelta {
        delta: &'a [PatchOperation<'a>],
    },
    Custom {
        name: &'static str,
        value: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<&'a str>,
    },
    SubagentStarted {
        subagent_run_id: &'a str,
        name: &'a str,
        description: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_subagent_run_id: Option<&'a str>,
        parent_tool_call_id: &'a str,
    },
    SubagentFinished {
        subagent_run_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        outcome: SubagentOutcome<'a>,
    },
    SubagentError {
        subagent_run_id: &'a str,
        message: &'a str,
        code: &'static str,
    },
}

/// Why a run ended: `RUN_FINISHED.outcome`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Outcome<'a> {
    Success,
    Interrupt { interrupts: &'a [Interrupt] },
}

/// Why a subagent's part of a run ended: `SUBAGENT_FINISHED.outcome`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SubagentOutcome<'a> {
    Success,
    Suspended {
        #[serde(rename = "interruptIds")]
        interrupt_ids: &'a [&'a str],
    },
}

/// What a paused run waits for: here always a tool call's approval.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Interrupt {
    pub id: String,
    pub reason: &'static str,
    pub message: String,
    pub tool_call_id: String,
    pub response_schema: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent_run_id: Option<String>,
    pub metadata: Value,
}

/// A turn's tokens in AG-UI's accounting: the input total includes the cache's parts.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_input_tokens: u64,
}

/// One RFC 6902 operation of a `STATE_DELTA`: this runtime only ever replaces a top-level member.
#[derive(Debug, Serialize)]
pub struct PatchOperation<'a> {
    pub op: &'static str,
    pub path: &'static str,
    pub value: &'a Value,
}

/// Appends `event` as one SSE block: `data: <json>` and a blank line.
pub fn write(out: &mut Vec<u8>, event: &Event<'_>) {
    out.extend_from_slice(b"data: ");
    // Serialising plain structs of strings and JSON values into memory cannot fail.
    if serde_json::to_writer(&mut *out, event).is_err() {
        tracing::error!("an AG-UI event could not be serialised");
    }
    out.extend_from_slice(b"\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn written(event: &Event<'_>) -> Value {
        let mut out = Vec::new();
        write(&mut out, event);
        let text = String::from_utf8(out).unwrap();
        let json = text.strip_prefix("data: ").and_then(|rest| rest.strip_suffix("\n\n")).unwrap();
        assert!(!json.contains('\n'), "one data line: {json}");
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn events_use_the_protocols_names_and_leave_out_absent_fields() {
        let start = Event::ToolCallStart {
            tool_call_id: "c1",
            tool_call_name: "write_file",
            parent_message_id: Some("m1"),
            subagent_run_id: None,
        };
        assert_eq!(
            written(&start),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "write_file", "parentMessageId": "m1"})
        );
        let suspended = Event::SubagentFinished {
            subagent_run_id: "sa-1",
            result: None,
            outcome: SubagentOutcome::Suspended { interrupt_ids: &["sa-1/c2"] },
        };
        assert_eq!(
            written(&suspended),
            json!({"type": "SUBAGENT_FINISHED", "subagentRunId": "sa-1",
                   "outcome": {"type": "suspended", "interruptIds": ["sa-1/c2"]}})
        );
        let finished =
            Event::RunFinished { thread_id: "t", run_id: "r", result: None, outcome: Outcome::Success, usage: None };
        assert_eq!(
            written(&finished),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "success"}})
        );
    }
}
