//! High-level replies in Anthropic's Messages API format: a `message` with text or `tool_use`
//! blocks, or with `"stream": true` its Server-Sent Events (`message_start`, content blocks with
//! text or `input_json_delta` deltas, `message_delta` with the stop reason, `message_stop`); an
//! error status as Anthropic's error body.

use serde_json::{json, Value};

use super::{Piece, Reply};

const INPUT_TOKENS: u64 = 100;
const OUTPUT_TOKENS: u64 = 10;

/// The reply as Anthropic sends it; raw replies pass unchanged.
pub(super) fn render(reply: Reply, call: u64, streamed: bool) -> Reply {
    match reply {
        Reply::Status(status) => error(status, &format!("scripted status {status}")),
        Reply::Text(_) | Reply::Chunks(_) | Reply::BrokenAfter(_) | Reply::Tools(_) if streamed => stream(reply, call),
        Reply::Text(text) => message(call, json!([{"type": "text", "text": text}]), "end_turn"),
        Reply::Chunks(pieces) | Reply::BrokenAfter(pieces) => {
            message(call, json!([{"type": "text", "text": pieces.concat()}]), "end_turn")
        }
        Reply::Tools(calls) => {
            let blocks: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, input))| {
                    json!({"type": "tool_use", "id": format!("toolu_{call}_{i}"), "name": name, "input": input})
                })
                .collect();
            message(call, Value::Array(blocks), "tool_use")
        }
        other => other,
    }
}

/// An error status with Anthropic's error body, its type the one Anthropic gives that status.
pub(super) fn error(status: u16, message: &str) -> Reply {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    super::status(status, json!({"type": "error", "error": {"type": kind, "message": message}}))
}

fn message(call: u64, content: Value, stop_reason: &str) -> Reply {
    super::ok(json!({
        "id": format!("msg_{call}"),
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": content,
        "stop_reason": stop_reason,
        "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS},
    }))
}

/// One Server-Sent Event, named as its `type`.
fn event(data: Value) -> Vec<u8> {
    format!("event: {}\ndata: {data}\n\n", data["type"].as_str().unwrap_or_default()).into_bytes()
}

/// The reply as Server-Sent Events: text pieces as tokens of one text block, each tool call a block.
fn stream(reply: Reply, call: u64) -> Reply {
    let now = |data: Value| Piece::Bytes(event(data));
    let token = |text: &str| {
        let delta = json!({"type": "text_delta", "text": text});
        Piece::Token(event(json!({"type": "content_block_delta", "index": 0, "delta": delta})))
    };
    let start = json!({"id": format!("msg_{call}"), "type": "message", "role": "assistant", "model": "scripted",
                       "content": [], "stop_reason": null,
                       "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 0}});
    let mut pieces = vec![now(json!({"type": "message_start", "message": start}))];
    let text_start = json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}});
    let text_stop = json!({"type": "content_block_stop", "index": 0});
    let stop_reason = match reply {
        Reply::Text(text) => {
            pieces.push(now(text_start));
            pieces.extend(text.split_inclusive(' ').map(token));
            pieces.push(now(text_stop));
            "end_turn"
        }
        Reply::Chunks(texts) => {
            pieces.push(now(text_start));
            pieces.extend(texts.iter().map(|text| token(text)));
            pieces.push(now(text_stop));
            "end_turn"
        }
        Reply::BrokenAfter(texts) => {
            pieces.push(now(text_start));
            pieces.extend(texts.iter().map(|text| token(text)));
            pieces.push(Piece::Drop);
            return Reply::stream("text/event-stream", pieces);
        }
        Reply::Tools(calls) => {
            for (i, (name, input)) in calls.iter().enumerate() {
                let block = json!({"type": "tool_use", "id": format!("toolu_{call}_{i}"), "name": name, "input": {}});
                pieces.push(now(json!({"type": "content_block_start", "index": i, "content_block": block})));
                let delta = json!({"type": "input_json_delta", "partial_json": input.to_string()});
                pieces.push(now(json!({"type": "content_block_delta", "index": i, "delta": delta})));
                pieces.push(now(json!({"type": "content_block_stop", "index": i})));
            }
            "tool_use"
        }
        other => unreachable!("only messages stream: {other:?}"),
    };
    let delta = json!({"stop_reason": stop_reason, "stop_sequence": null});
    pieces.push(now(json!({"type": "message_delta", "delta": delta, "usage": {"output_tokens": OUTPUT_TOKENS}})));
    pieces.push(now(json!({"type": "message_stop"})));
    Reply::stream("text/event-stream", pieces)
}
