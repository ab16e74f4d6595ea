//! Anthropic's prompt cache breakpoints: `cache_control` on the last tool, on the stable system
//! block (the varying tail follows it unmarked), and on the last block of the last message, which
//! moves with the conversation so that each step of a loop reads the previous step's prefix.

use serde_json::{json, Value};

use crate::config::{CacheTtl, PromptCache};

/// The most breakpoints one request may carry.
pub(super) const MAX_BREAKPOINTS: usize = 4;

/// The marker, with its TTL when it is not the default.
fn cache_control(cache: &PromptCache) -> Value {
    match cache.ttl {
        CacheTtl::FiveMinutes => json!({"type": "ephemeral"}),
        CacheTtl::OneHour => json!({"type": "ephemeral", "ttl": "1h"}),
    }
}

/// The `system` field: the stable part, marked, then the tail in a block of its own. Without
/// caching and without a tail it stays the plain string it always was; nothing at all is `None`.
pub(super) fn system(stable: &str, tail: &str, cache: &PromptCache) -> Option<Value> {
    if !cache.enabled() && tail.is_empty() {
        return (!stable.is_empty()).then(|| Value::String(stable.to_owned()));
    }
    let mut blocks = Vec::with_capacity(2);
    if !stable.is_empty() {
        let mut block = json!({"type": "text", "text": stable});
        if cache.enabled() {
            block["cache_control"] = cache_control(cache);
        }
        blocks.push(block);
    }
    // The API rejects an empty text block, and the tail is never cached.
    if !tail.is_empty() {
        blocks.push(json!({"type": "text", "text": tail}));
    }
    (!blocks.is_empty()).then_some(Value::Array(blocks))
}

/// Marks the last tool and the block at `breakpoint` (message, block): the last one the next call
/// will repeat, before any transient message. Within [`MAX_BREAKPOINTS`] with the system's; text
/// blocks are never empty here, since the request leaves empty ones out.
pub(super) fn mark(body: &mut Value, breakpoint: Option<(usize, usize)>, cache: &PromptCache) {
    if !cache.enabled() {
        return;
    }
    let marker = cache_control(cache);
    let system = body["system"]
        .as_array()
        .map_or(0, |blocks| blocks.iter().filter(|b| b.get("cache_control").is_some()).count());
    let mut left = MAX_BREAKPOINTS.saturating_sub(system);
    if let Some(tool) = body.get_mut("tools").and_then(Value::as_array_mut).and_then(|tools| tools.last_mut()) {
        if left > 0 {
            tool["cache_control"] = marker.clone();
            left -= 1;
        }
    }
    let block = breakpoint.and_then(|(message, block)| {
        let message = body.get_mut("messages")?.get_mut(message)?;
        message.get_mut("content")?.get_mut(block)
    });
    if let Some(block) = block {
        let empty_text = block["type"] == "text" && block["text"].as_str().is_some_and(str::is_empty);
        if left > 0 && !empty_text {
            block["cache_control"] = marker;
        }
    }
}
