//! What providers with a forced-tool structured output (Anthropic, Bedrock) share: the forced tool's
//! input becomes the reply, tool inputs are objects, and stop reasons have the same names.

use agent_ports::{ModelError, StopReason};
use serde_json::Value;

/// A missing or null tool input means no arguments.
pub(crate) fn object_or_empty(input: Value) -> Value {
    if input.is_null() {
        Value::Object(Default::default())
    } else {
        input
    }
}

/// The core's stop reason for the stop reason both Anthropic's API and Bedrock's Converse name.
pub(crate) fn stop_reason(raw: Option<&str>) -> StopReason {
    match raw {
        Some("end_turn" | "stop_sequence") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        _ => StopReason::Other,
    }
}

/// Settles a reply to a forced structured-output tool named `name`: its `input` becomes `content`
/// (the JSON document the caller asked for, so any text around it is dropped) and a call that stopped
/// for that tool alone counts as a finished turn. A reply cut off before the tool is a truncation
/// like any other (empty content, `MaxTokens`); any other reply without it is invalid. `raw_stop`
/// is the provider's own stop reason, for the message.
pub(crate) fn settle(
    provider: &str,
    name: &str,
    input: Option<Value>,
    other_tool_calls: usize,
    raw_stop: &str,
    content: &mut String,
    stop_reason: &mut StopReason,
) -> Result<(), ModelError> {
    match input {
        Some(input) => {
            *content = input.to_string();
            if *stop_reason == StopReason::ToolUse && other_tool_calls == 0 {
                *stop_reason = StopReason::EndTurn;
            }
            Ok(())
        }
        None if *stop_reason == StopReason::MaxTokens => {
            content.clear();
            Ok(())
        }
        None => Err(ModelError::InvalidResponse(format!(
            "{provider}: the reply has no {name:?} tool call although it was forced (stop reason {raw_stop:?})"
        ))),
    }
}
