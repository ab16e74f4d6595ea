//! High-level replies in Anthropic's Messages API format: a `message` with text or `tool_use`
//! blocks, or with `"stream": true` its Server-Sent Events (`message_start`, content blocks with
//! text or `input_json_delta` deltas, `message_delta` with the stop reason, `message_stop`); an
//! error status as Anthropic's error body.

use serde_json::{json, Value};

use super::{CacheUsage, Piece, Reply};

/// Usage as Anthropic counts it: `input_tokens` is only the input neither read nor written.
fn usage(usage: CacheUsage, output_tokens: u64) -> Value {
    json!({
        "input_tokens": usage.uncached_input_tokens(),
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "output_tokens": output_tokens,
    })
}

/// The reply as Anthropic sends it; raw replies pass unchanged.
pub(super) fn render(reply: Reply, call: u64, streamed: bool, tokens: CacheUsage) -> Reply {
    match reply {
        Reply::Status(status) => error(status, &format!("scripted status {status}")),
        Reply::Text(_) | Reply::Chunks(_) | Reply::BrokenAfter(_) | Reply::Tools(_) if streamed => {
            stream(reply, call, tokens)
        }
        Reply::Text(text) => message(call, json!([{"type": "text", "text": text}]), "end_turn", tokens),
        Reply::Chunks(pieces) | Reply::BrokenAfter(pieces) => {
            message(call, json!([{"type": "text", "text": pieces.concat()}]), "end_turn", tokens)
        }
        Reply::Tools(calls) => {
            let blocks: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, input))| {
                    json!({"type": "tool_use", "id": format!("toolu_{call}_{i}"), "name": name, "input": input})
                })
                .collect();
            message(call, Value::Array(blocks), "tool_use", tokens)
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

fn message(call: u64, content: Value, stop_reason: &str, tokens: CacheUsage) -> Reply {
    super::ok(json!({
        "id": format!("msg_{call}"),
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": content,
        "stop_reason": stop_reason,
        "usage": usage(tokens, tokens.output_tokens),
    }))
}

/// One Server-Sent Event, named as its `type`.
fn event(data: Value) -> Vec<u8> {
    format!("event: {}\ndata: {data}\n\n", data["type"].as_str().unwrap_or_default()).into_bytes()
}

/// The reply as Server-Sent Events: text pieces as tokens of one text block, each tool call a block.
fn stream(reply: Reply, call: u64, tokens: CacheUsage) -> Reply {
    let now = |data: Value| Piece::Bytes(event(data));
    let token = |text: &str| {
        let delta = json!({"type": "text_delta", "text": text});
        Piece::Token(event(json!({"type": "content_block_delta", "index": 0, "delta": delta})))
    };
    let start = json!({"id": format!("msg_{call}"), "type": "message", "role": "assistant", "model": "scripted",
                       "content": [], "stop_reason": null,
                       "usage": usage(tokens, 0)});
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
    // The final counts, the input's repeated as the API does today.
    let usage = usage(tokens, tokens.output_tokens);
    pieces.push(now(json!({"type": "message_delta", "delta": delta, "usage": usage})));
    pieces.push(now(json!({"type": "message_stop"})));
    Reply::stream("text/event-stream", pieces)
}
