//! An emulation of each provider's prompt cache over the requests the server received, so that its
//! replies report cache reads and writes as the provider would, in the provider's own usage fields.
//!
//! A request's prompt is a list of parts in the provider's order (tools, system, messages), each
//! counted as its canonical JSON's bytes / 4 tokens. Anthropic and Bedrock cache a prefix only up to
//! a breakpoint (`cache_control`, a `cachePoint` block): a request reads the longest prefix an
//! earlier request wrote, and writes from there to its own last breakpoint. OpenAI caches every
//! prefix by itself, reads only one of at least 1,024 tokens, in steps of 128, and reports no writes.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hasher};

use serde_json::{json, Value};

use super::{Provider, Reply};

/// Tokens a reply reports: what the default mode keeps fixed, so that tests may count on them.
pub(super) const INPUT_TOKENS: u64 = 100;
pub(super) const OUTPUT_TOKENS: u64 = 10;
/// OpenAI's smallest cached prefix, and the steps it grows by.
const OPENAI_MIN_PREFIX: u64 = 1024;
const OPENAI_STEP: u64 = 128;

/// The usage a reply reported, as the core counts it: `input_tokens` is every input token, the
/// cache's reads and writes included (each provider's wire format splits it its own way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

impl CacheUsage {
    /// The input neither read from nor written to the cache.
    pub fn uncached_input_tokens(&self) -> u64 {
        self.input_tokens - self.cache_read_tokens - self.cache_write_tokens
    }
}

/// One part of a prompt, and whether a breakpoint follows it.
struct Part {
    text: String,
    marked: bool,
}

/// The prefixes written so far, as hashes of the model and the parts they hold.
#[derive(Default)]
pub(super) struct PromptCache {
    written: HashSet<u64>,
}

impl PromptCache {
    /// The usage of a request answered with `reply`, the cache updated. With `count`, the totals are
    /// the estimates; otherwise the input stays [`INPUT_TOKENS`], split by the cached shares.
    pub(super) fn usage(
        &mut self,
        provider: Provider,
        path: &str,
        body: &Value,
        reply: &Reply,
        count: bool,
    ) -> CacheUsage {
        let (seed, parts) = match provider {
            Provider::Anthropic => anthropic(body),
            Provider::Bedrock { .. } => bedrock(path, body),
            Provider::OpenAi | Provider::Unknown => openai(body),
        };
        let mut hasher = DefaultHasher::new();
        hasher.write(seed.as_bytes());
        let (mut bytes, mut boundaries) = (0u64, Vec::with_capacity(parts.len()));
        for part in &parts {
            hasher.write(part.text.as_bytes());
            hasher.write_u8(0);
            bytes += part.text.len() as u64;
            boundaries.push((hasher.finish(), bytes / 4, part.marked));
        }
        let total = bytes.div_ceil(4).max(1);
        let longest_read = boundaries.iter().rev().find(|(hash, ..)| self.written.contains(hash)).map_or(0, |b| b.1);
        let (read, write) = if matches!(provider, Provider::OpenAi | Provider::Unknown) {
            self.written.extend(boundaries.iter().map(|(hash, ..)| *hash));
            let read = if longest_read >= OPENAI_MIN_PREFIX { longest_read / OPENAI_STEP * OPENAI_STEP } else { 0 };
            (read, 0)
        } else {
            let last_mark = boundaries.iter().rev().find(|(.., marked)| *marked).map_or(0, |b| b.1);
            self.written.extend(boundaries.iter().filter(|(.., marked)| *marked).map(|(hash, ..)| *hash));
            (longest_read, last_mark.saturating_sub(longest_read))
        };
        if count {
            return CacheUsage {
                input_tokens: total,
                output_tokens: output_estimate(reply),
                cache_read_tokens: read,
                cache_write_tokens: write,
            };
        }
        let share = |tokens: u64| (tokens * INPUT_TOKENS + total / 2) / total;
        let cache_read_tokens = share(read).min(INPUT_TOKENS);
        CacheUsage {
            input_tokens: INPUT_TOKENS,
            output_tokens: OUTPUT_TOKENS,
            cache_read_tokens,
            cache_write_tokens: share(write).min(INPUT_TOKENS - cache_read_tokens),
        }
    }
}

/// The reply's own size in tokens, at least one.
fn output_estimate(reply: &Reply) -> u64 {
    let bytes = match reply {
        Reply::Text(text) => text.len(),
        Reply::Chunks(pieces) | Reply::BrokenAfter(pieces) => pieces.iter().map(String::len).sum(),
        Reply::Tools(calls) => calls.iter().map(|(name, input)| name.len() + input.to_string().len()).sum(),
        _ => 0,
    };
    (bytes as u64 / 4).max(1)
}

/// A block without its marker, and whether it had one.
fn unmarked(block: &Value) -> (String, bool) {
    let mut block = block.clone();
    let marked = block.as_object_mut().and_then(|fields| fields.remove("cache_control")).is_some();
    (block.to_string(), marked)
}

fn items(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// Anthropic's parts: each tool, each system block, each message block with its role.
fn anthropic(body: &Value) -> (String, Vec<Part>) {
    let mut parts = Vec::new();
    let mut push = |prefix: &str, block: &Value| {
        let (text, marked) = unmarked(block);
        parts.push(Part { text: format!("{prefix}{text}"), marked });
    };
    items(&body["tools"]).iter().for_each(|tool| push("", tool));
    match &body["system"] {
        Value::String(text) => push("", &json!({"type": "text", "text": text})),
        system => items(system).iter().for_each(|block| push("", block)),
    }
    for message in items(&body["messages"]) {
        let role = format!("{}:", message["role"]);
        match &message["content"] {
            Value::String(text) => push(&role, &json!({"type": "text", "text": text})),
            content => items(content).iter().for_each(|block| push(&role, block)),
        }
    }
    (format!("anthropic:{}", body["model"]), parts)
}

/// Bedrock's parts: each tool, system block and message block; a `cachePoint` marks the part before it.
fn bedrock(path: &str, body: &Value) -> (String, Vec<Part>) {
    let mut parts: Vec<Part> = Vec::new();
    let mut take = |block: &Value, prefix: &str| {
        if block.get("cachePoint").is_some() {
            if let Some(last) = parts.last_mut() {
                last.marked = true;
            }
        } else {
            parts.push(Part { text: format!("{prefix}{block}"), marked: false });
        }
    };
    items(&body["toolConfig"]["tools"]).iter().for_each(|tool| take(tool, ""));
    items(&body["system"]).iter().for_each(|block| take(block, ""));
    for message in items(&body["messages"]) {
        let role = format!("{}:", message["role"]);
        items(&message["content"]).iter().for_each(|block| take(block, &role));
    }
    // Both operations of one model share its cache.
    let model = path.trim_start_matches("/model/").split('/').next().unwrap_or_default();
    (format!("bedrock:{model}"), parts)
}

/// OpenAI's parts: each tool, then each message whole.
fn openai(body: &Value) -> (String, Vec<Part>) {
    let tools = items(&body["tools"]).iter();
    let parts = tools.chain(items(&body["messages"])).map(|item| Part { text: item.to_string(), marked: false });
    (format!("openai:{}", body["model"]), parts.collect())
}
