//! High-level replies in Amazon Bedrock's format: `Converse` answers with content blocks,
//! `stopReason` and `usage`; `ConverseStream` with `application/vnd.amazon.eventstream` frames
//! (`messageStart`, content block deltas, `messageStop`, `metadata`); an error status as a restJson
//! error with its `x-amzn-ErrorType`.

use serde_json::{json, Value};

use super::{CacheUsage, Piece, Reply};
use crate::eventstream::event_frame;

/// The reply as Bedrock sends it on the path's operation; raw replies pass unchanged.
pub(super) fn render(reply: Reply, call: u64, streamed: bool, tokens: CacheUsage) -> Reply {
    match reply {
        Reply::Status(status) => error(status, &format!("scripted status {status}")),
        Reply::Text(_) | Reply::Chunks(_) | Reply::BrokenAfter(_) | Reply::Tools(_) if streamed => {
            stream(reply, call, tokens)
        }
        Reply::Text(text) => converse(json!([{ "text": text }]), "end_turn", tokens),
        Reply::Chunks(pieces) | Reply::BrokenAfter(pieces) => {
            converse(json!([{ "text": pieces.concat() }]), "end_turn", tokens)
        }
        Reply::Tools(calls) => {
            let blocks: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, input))| {
                    json!({"toolUse": {"toolUseId": format!("tooluse_{call}_{i}"), "name": name, "input": input}})
                })
                .collect();
            converse(Value::Array(blocks), "tool_use", tokens)
        }
        other => other,
    }
}

/// An error as Bedrock sends one: a restJson body and the `x-amzn-ErrorType` the SDK reads.
pub(super) fn error(status: u16, message: &str) -> Reply {
    let kind = match status {
        429 => "ThrottlingException",
        503 => "ServiceUnavailableException",
        500..=599 => "InternalServerException",
        403 => "AccessDeniedException",
        404 => "ResourceNotFoundException",
        _ => "ValidationException",
    };
    let kind = format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/");
    super::status(status, json!({ "message": message })).header("x-amzn-errortype", &kind)
}

/// Usage as Bedrock counts it: `inputTokens` leaves out the cache's reads and writes.
fn usage(tokens: CacheUsage) -> Value {
    json!({
        "inputTokens": tokens.uncached_input_tokens(),
        "outputTokens": tokens.output_tokens,
        "totalTokens": tokens.input_tokens + tokens.output_tokens,
        "cacheReadInputTokens": tokens.cache_read_tokens,
        "cacheWriteInputTokens": tokens.cache_write_tokens,
    })
}

fn converse(content: Value, stop_reason: &str, tokens: CacheUsage) -> Reply {
    super::ok(json!({
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason,
        "usage": usage(tokens),
        "metrics": {"latencyMs": 1},
    }))
}

/// The reply as event-stream frames: text pieces as tokens, each tool call a content block.
fn stream(reply: Reply, call: u64, tokens: CacheUsage) -> Reply {
    let now = |kind: &str, payload: Value| Piece::Bytes(event_frame(kind, &payload));
    let token = |text: &str| {
        Piece::Token(event_frame("contentBlockDelta", &json!({"contentBlockIndex": 0, "delta": {"text": text}})))
    };
    let mut pieces = vec![now("messageStart", json!({"role": "assistant"}))];
    let stop_reason = match reply {
        Reply::Text(text) => {
            pieces.extend(text.split_inclusive(' ').map(token));
            "end_turn"
        }
        Reply::Chunks(texts) => {
            pieces.extend(texts.iter().map(|text| token(text)));
            "end_turn"
        }
        Reply::BrokenAfter(texts) => {
            pieces.extend(texts.iter().map(|text| token(text)));
            pieces.push(Piece::Drop);
            return Reply::stream("application/vnd.amazon.eventstream", pieces);
        }
        Reply::Tools(calls) => {
            for (i, (name, input)) in calls.iter().enumerate() {
                let start = json!({"toolUse": {"toolUseId": format!("tooluse_{call}_{i}"), "name": name}});
                pieces.push(now("contentBlockStart", json!({"contentBlockIndex": i, "start": start})));
                let delta = json!({"toolUse": {"input": input.to_string()}});
                pieces.push(now("contentBlockDelta", json!({"contentBlockIndex": i, "delta": delta})));
                pieces.push(now("contentBlockStop", json!({"contentBlockIndex": i})));
            }
            "tool_use"
        }
        other => unreachable!("only completions stream: {other:?}"),
    };
    pieces.push(now("messageStop", json!({ "stopReason": stop_reason })));
    pieces.push(now("metadata", json!({"usage": usage(tokens), "metrics": {"latencyMs": 1}})));
    Reply::stream("application/vnd.amazon.eventstream", pieces)
}
