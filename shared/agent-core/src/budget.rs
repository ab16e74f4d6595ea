//! The context budget: estimate a request's tokens before every model call and, when it is over the
//! model's input limit, trim in a fixed order that never touches skill instructions or the user's request.

use crate::message::{Message, ToolSpec};
use crate::prompt::{SectionKind, SystemPrompt};

/// Input limits of well-known models, by name prefix; the first match wins.
const KNOWN_LIMITS: [(&str, usize); 22] = [
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-5", 400_000),
    ("gpt-oss", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("gpt-3.5", 16_385),
    ("claude", 200_000),
    // Llama 3.1 and later (Ollama `llama3.1`, Bedrock `llama3-1-...`) have 128k; Llama 3 itself 8k.
    ("llama3.1", 128_000),
    ("llama3.2", 128_000),
    ("llama3.3", 128_000),
    ("llama3-1", 128_000),
    ("llama3-2", 128_000),
    ("llama3-3", 128_000),
    ("llama3", 8_192),
    ("mistral", 32_768),
    ("qwen", 32_768),
    ("nova-micro", 128_000),
    ("nova-lite", 300_000),
    ("nova-pro", 300_000),
];
/// The limit assumed for a model we do not know.
pub const DEFAULT_CONTEXT_TOKENS: usize = 32_768;

/// Leading parts of a Bedrock model id that do not name the model: the geography of a cross-region
/// inference profile (`us.`, `eu.`, ...), then the vendor (`anthropic.`, `meta.`, ...).
const BEDROCK_PREFIXES: [&str; 20] = [
    "us",
    "us-gov",
    "eu",
    "apac",
    "jp",
    "au",
    "ca",
    "global",
    "anthropic",
    "meta",
    "mistral",
    "amazon",
    "cohere",
    "ai21",
    "deepseek",
    "openai",
    "qwen",
    "writer",
    "moonshot",
    "twelvelabs",
];

/// The input limit for `model` when `LLM_CONTEXT_TOKENS` does not say. `model` may be a plain name
/// (`gpt-4o-mini`), a path-like one (`anthropic/claude-sonnet-4`), a Bedrock model or inference
/// profile id (`us.anthropic.claude-sonnet-4-20250514-v1:0`) or an ARN ending in one.
pub fn default_context_tokens(model: &str) -> usize {
    let model = model.to_ascii_lowercase();
    let mut name = model.rsplit('/').next().unwrap_or(&model);
    while let Some((head, rest)) = name.split_once('.') {
        if !BEDROCK_PREFIXES.contains(&head) || rest.is_empty() {
            break;
        }
        name = rest;
    }
    KNOWN_LIMITS.iter().find(|(prefix, _)| name.starts_with(prefix)).map_or(DEFAULT_CONTEXT_TOKENS, |(_, limit)| *limit)
}

/// A deliberately pessimistic estimate: about three bytes per token, which over-counts English
/// and holds for Spanish and code, so a request that fits here fits at the provider.
pub fn estimate_text(text: &str) -> usize {
    text.len().div_ceil(3)
}

/// Tokens of one message, with a small per-message overhead for roles and separators.
pub fn estimate_message(message: &Message) -> usize {
    4 + match message {
        Message::User { content } => estimate_text(content),
        Message::Assistant { content, tool_calls } => {
            estimate_text(content)
                + tool_calls
                    .iter()
                    .map(|c| 8 + estimate_text(&c.name) + estimate_text(&c.arguments.to_string()))
                    .sum::<usize>()
        }
        Message::Tool { content, name, .. } => 8 + estimate_text(name) + estimate_text(content),
    }
}

/// Tokens of a whole request.
pub fn estimate_request(system: &SystemPrompt, messages: &[Message], tools: &[ToolSpec]) -> usize {
    let tools: usize = tools
        .iter()
        .map(|t| 8 + estimate_text(&t.name) + estimate_text(&t.description) + estimate_text(&t.parameters.to_string()))
        .sum();
    estimate_text(&system.render()) + messages.iter().map(estimate_message).sum::<usize>() + tools
}

/// One trim, for the logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trim {
    /// Oldest messages of earlier turns dropped (a tool call goes with its results).
    DroppedMessages { count: usize, tokens: usize },
    /// A non-skill section of the system prompt removed.
    DroppedSection { tokens: usize },
    /// The skill listing replaced by its next smaller tier.
    ShrunkListing { tokens: usize },
    /// The largest remaining message cut down.
    TruncatedMessage { index: usize, tokens: usize },
    /// Nothing more may be trimmed and the request is still over the limit.
    StillOver { tokens: usize, limit: usize },
}

/// Brings the request under `limit` tokens. `request_index` is the position of the current turn's
/// user request in `messages`: messages before it belong to earlier turns. Returns what was trimmed.
pub fn fit(
    system: &mut SystemPrompt,
    messages: &mut Vec<Message>,
    request_index: usize,
    tools: &[ToolSpec],
    limit: usize,
) -> Vec<Trim> {
    let mut trims = Vec::new();
    let mut total = estimate_request(system, messages, tools);
    if total <= limit {
        return trims;
    }

    // 1. The oldest messages of earlier turns, a message and its tool results as one unit.
    let mut request_index = request_index.min(messages.len());
    let (mut dropped, mut dropped_tokens) = (0, 0);
    // Keep dropping until the conversation starts with a user message again, as providers require.
    while request_index > 0 && (total > limit || (dropped > 0 && !matches!(messages[0], Message::User { .. }))) {
        let mut unit = 1;
        while unit < request_index && matches!(messages[unit], Message::Tool { .. }) {
            unit += 1;
        }
        let tokens: usize = messages[..unit].iter().map(estimate_message).sum();
        messages.drain(..unit);
        request_index -= unit;
        total -= tokens;
        dropped += unit;
        dropped_tokens += tokens;
    }
    if dropped > 0 {
        trims.push(Trim::DroppedMessages { count: dropped, tokens: dropped_tokens });
    }

    // 2. Non-skill sections of the system prompt, largest first. The skill listing is never
    //    dropped: it shrinks to its next tier, down to its smallest, which stays.
    while total > limit {
        let Some(largest) = system
            .sections
            .iter()
            .enumerate()
            .filter(|(_, section)| {
                !section.is_protected()
                    && !section.text.is_empty()
                    && (section.kind != SectionKind::SkillListing || !section.fallbacks.is_empty())
            })
            .max_by_key(|(_, section)| section.text.len())
            .map(|(index, _)| index)
        else {
            break;
        };
        let section = &mut system.sections[largest];
        let before = estimate_text(&section.text);
        if section.kind == SectionKind::SkillListing {
            section.text = section.fallbacks.remove(0);
            let saved = before.saturating_sub(estimate_text(&section.text));
            total = total.saturating_sub(saved);
            trims.push(Trim::ShrunkListing { tokens: saved });
        } else {
            system.sections.remove(largest);
            total = total.saturating_sub(before);
            trims.push(Trim::DroppedSection { tokens: before });
        }
    }

    // 3. The largest remaining message other than the user's request, cut to what still fits.
    while total > limit {
        let Some(index) = (0..messages.len())
            .filter(|&i| i != request_index && message_text(&messages[i]).is_some_and(|text| text.len() > 200))
            .max_by_key(|&i| message_text(&messages[i]).map_or(0, str::len))
        else {
            trims.push(Trim::StillOver { tokens: total, limit });
            break;
        };
        let over_bytes = (total - limit) * 3 + 64;
        let before = estimate_message(&messages[index]);
        if let Some(text) = message_text_mut(&mut messages[index]) {
            let keep = text.len().saturating_sub(over_bytes).max(100);
            truncate_at_char(text, keep);
            text.push_str("\n[truncated to fit the model's context]");
        }
        let after = estimate_message(&messages[index]);
        total = total.saturating_sub(before.saturating_sub(after));
        trims.push(Trim::TruncatedMessage { index, tokens: before.saturating_sub(after) });
        if before <= after {
            trims.push(Trim::StillOver { tokens: total, limit });
            break;
        }
    }
    trims
}

fn message_text(message: &Message) -> Option<&str> {
    match message {
        Message::User { content } | Message::Assistant { content, .. } | Message::Tool { content, .. } => Some(content),
    }
}

fn message_text_mut(message: &mut Message) -> Option<&mut String> {
    match message {
        Message::User { content } | Message::Assistant { content, .. } | Message::Tool { content, .. } => Some(content),
    }
}

fn truncate_at_char(text: &mut String, mut at: usize) {
    if at >= text.len() {
        return;
    }
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    text.truncate(at);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;
    use crate::prompt::{Section, SectionKind};

    fn prompt() -> SystemPrompt {
        SystemPrompt {
            sections: vec![
                Section::new(SectionKind::Base, "base ".repeat(300)),
                Section::new(SectionKind::MandatorySkill, "<mandatory-skill>rules</mandatory-skill>"),
                Section::new(SectionKind::Reminder, "<skill-reminder/>"),
            ],
        }
    }

    fn history() -> Vec<Message> {
        vec![
            Message::user("old question ".repeat(50)),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall { id: "1".into(), name: "ls".into(), arguments: serde_json::json!({}) }],
            },
            Message::Tool { tool_call_id: "1".into(), name: "ls".into(), content: "listing ".repeat(50) },
            Message::assistant("old answer ".repeat(50)),
            Message::user("current request"),
            Message::Tool { tool_call_id: "2".into(), name: "read_file".into(), content: "big ".repeat(3000) },
        ]
    }

    #[test]
    fn under_the_limit_nothing_changes() {
        let (mut system, mut messages) = (prompt(), history());
        assert!(fit(&mut system, &mut messages, 4, &[], 1_000_000).is_empty());
        assert_eq!(messages, history());
    }

    #[test]
    fn trims_in_order_and_keeps_skill_and_request() {
        let (mut system, mut messages) = (prompt(), history());
        let limit = 1200;
        let trims = fit(&mut system, &mut messages, 4, &[], limit);
        assert!(matches!(trims[0], Trim::DroppedMessages { count: 4, .. }), "{trims:?}");
        assert!(matches!(trims[1], Trim::DroppedSection { .. }), "{trims:?}");
        assert!(matches!(trims[2], Trim::TruncatedMessage { index: 1, .. }), "{trims:?}");
        assert_eq!(messages[0], Message::user("current request"));
        assert!(system.render().contains("<mandatory-skill>rules</mandatory-skill>"));
        assert!(system.render().ends_with("<skill-reminder/>"));
        assert!(estimate_request(&system, &messages, &[]) <= limit);
    }

    #[test]
    fn a_tool_call_and_its_result_are_dropped_together() {
        let (mut system, mut messages) = (prompt(), history());
        system.sections.clear();
        let without_first = estimate_request(&system, &messages[1..], &[]);
        fit(&mut system, &mut messages, 4, &[], without_first - 1);
        assert!(!matches!(messages[0], Message::Tool { .. }), "never starts with an orphan tool result");
    }

    #[test]
    fn the_skill_listing_shrinks_by_tier_and_is_never_dropped() {
        let mut listing = Section::new(SectionKind::SkillListing, "full listing ".repeat(400));
        listing.fallbacks = vec!["names only ".repeat(100), "9 skills in 2 categories".to_owned()];
        let mut system = SystemPrompt { sections: vec![Section::new(SectionKind::Base, "base"), listing] };
        let mut messages = vec![Message::user("current request")];
        let trims = fit(&mut system, &mut messages, 0, &[], 500);
        assert!(matches!(trims[0], Trim::ShrunkListing { .. }), "{trims:?}");
        assert!(system.render().contains("names only"), "{}", system.render());
        let trims = fit(&mut system, &mut messages, 0, &[], 10);
        assert!(trims.iter().any(|t| matches!(t, Trim::ShrunkListing { .. })), "{trims:?}");
        assert!(system.render().contains("9 skills in 2 categories"), "the smallest tier stays: {}", system.render());
    }

    #[test]
    fn known_models_have_limits() {
        assert_eq!(default_context_tokens("gpt-4o-mini"), 128_000);
        assert_eq!(default_context_tokens("anthropic/claude-sonnet-4"), 200_000);
        assert_eq!(default_context_tokens("my-local-model"), DEFAULT_CONTEXT_TOKENS);
        assert_eq!(default_context_tokens("gpt-4.1-mini"), 1_047_576, "a dot in the name is not a prefix");
        assert_eq!(default_context_tokens("llama3.1:8b"), 128_000);
        assert_eq!(default_context_tokens("llama3"), 8_192);
    }

    #[test]
    fn bedrock_ids_have_their_models_limits() {
        for (model, limit) in [
            ("anthropic.claude-3-5-sonnet-20240620-v1:0", 200_000),
            ("us.anthropic.claude-sonnet-4-20250514-v1:0", 200_000),
            ("eu.anthropic.claude-3-7-sonnet-20250219-v1:0", 200_000),
            ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", 200_000),
            (
                "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0",
                200_000,
            ),
            ("arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0", 200_000),
            ("meta.llama3-1-70b-instruct-v1:0", 128_000),
            ("us.meta.llama3-2-11b-instruct-v1:0", 128_000),
            ("meta.llama3-8b-instruct-v1:0", 8_192),
            ("amazon.nova-pro-v1:0", 300_000),
            ("us.amazon.nova-micro-v1:0", 128_000),
            ("openai.gpt-oss-120b-1:0", 128_000),
            ("mistral.mistral-7b-instruct-v0:2", 32_768),
            ("arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3", DEFAULT_CONTEXT_TOKENS),
        ] {
            assert_eq!(default_context_tokens(model), limit, "{model}");
        }
    }
}
