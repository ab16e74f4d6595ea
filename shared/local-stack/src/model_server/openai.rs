//! High-level replies in OpenAI's Chat Completions format: a `chat.completion`, or with
//! `"stream": true` Server-Sent Events (one chunk per word, tool calls in fragments, the finish
//! reason, a usage chunk and `[DONE]`); an error status as OpenAI's error body.

use serde_json::{json, Value};

use super::{CacheUsage, Piece, Reply};

/// The reply as OpenAI sends it; raw replies pass unchanged.
pub(super) fn render(reply: Reply, call: u64, streamed: bool, tokens: CacheUsage) -> Reply {
    match reply {
        Reply::Status(status) => error(status, &format!("scripted status {status}")),
        Reply::Text(_) | Reply::Chunks(_) | Reply::BrokenAfter(_) | Reply::Tools(_) if streamed => {
            stream(reply, call, tokens)
        }
        Reply::Text(text) => completion(call, json!({"role": "assistant", "content": text}), "stop", tokens),
        Reply::Chunks(pieces) | Reply::BrokenAfter(pieces) => {
            completion(call, json!({"role": "assistant", "content": pieces.concat()}), "stop", tokens)
        }
        Reply::Tools(calls) => {
            let tool_calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| {
                    json!({"id": format!("call_{call}_{i}"), "type": "function",
                           "function": {"name": name, "arguments": args.to_string()}})
                })
                .collect();
            let message = json!({"role": "assistant", "content": null, "tool_calls": tool_calls});
            completion(call, message, "tool_calls", tokens)
        }
        other => other,
    }
}

/// An error status with OpenAI's error body.
pub(super) fn error(status: u16, message: &str) -> Reply {
    super::status(status, json!({"error": {"message": message, "type": "server_error"}}))
}

/// Usage as OpenAI counts it: `prompt_tokens` is every input token, the cached ones among them.
fn usage(tokens: CacheUsage) -> Value {
    let (prompt, completion) = (tokens.input_tokens, tokens.output_tokens);
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
           "prompt_tokens_details": {"cached_tokens": tokens.cache_read_tokens}})
}

fn completion(call: u64, message: Value, finish_reason: &str, tokens: CacheUsage) -> Reply {
    super::ok(json!({
        "id": format!("chatcmpl-{call}"),
        "object": "chat.completion",
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage(tokens),
    }))
}

/// One `chat.completion.chunk` event.
fn chunk_event(call: u64, delta: Value, finish_reason: Option<&str>) -> Vec<u8> {
    let chunk = json!({
        "id": format!("chatcmpl-{call}"),
        "object": "chat.completion.chunk",
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    });
    format!("data: {chunk}\n\n").into_bytes()
}

/// The reply as Server-Sent Events: text pieces as tokens, tool calls in fragments.
fn stream(reply: Reply, call: u64, tokens: CacheUsage) -> Reply {
    let now = |delta: Value| Piece::Bytes(chunk_event(call, delta, None));
    let token = |text: &str| Piece::Token(chunk_event(call, json!({"content": text}), None));
    let mut pieces = vec![now(json!({"role": "assistant", "content": ""}))];
    let finish = match reply {
        Reply::Text(text) => {
            pieces.extend(text.split_inclusive(' ').map(token));
            "stop"
        }
        Reply::Chunks(texts) => {
            pieces.extend(texts.iter().map(|text| token(text)));
            "stop"
        }
        Reply::BrokenAfter(texts) => {
            pieces.extend(texts.iter().map(|text| token(text)));
            pieces.push(Piece::Drop);
            return Reply::stream("text/event-stream", pieces);
        }
        Reply::Tools(calls) => {
            for (i, (name, args)) in calls.iter().enumerate() {
                pieces.push(now(
                    json!({"tool_calls": [{"index": i, "id": format!("call_{call}_{i}"), "type": "function",
                                                       "function": {"name": name, "arguments": ""}}]}),
                ));
                pieces.push(now(json!({"tool_calls": [{"index": i, "function": {"arguments": args.to_string()}}]})));
            }
            "tool_calls"
        }
        other => unreachable!("only completions stream: {other:?}"),
    };
    pieces.push(Piece::Bytes(chunk_event(call, json!({}), Some(finish))));
    let usage = json!({"id": format!("chatcmpl-{call}"), "object": "chat.completion.chunk", "choices": [],
                       "usage": usage(tokens)});
    pieces.push(Piece::text(format!("data: {usage}\n\n")));
    pieces.push(Piece::text("data: [DONE]\n\n"));
    Reply::stream("text/event-stream", pieces)
}
