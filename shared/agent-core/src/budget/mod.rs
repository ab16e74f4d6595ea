//! The context budget: estimate a request's tokens before every model call and, when it is over the
//! model's input limit, trim in a fixed order that never touches skill instructions or the user's request.

pub mod cut;
pub mod estimate;

pub use estimate::{estimate_text, json_len};

use crate::message::{FileRef, Message, ToolSpec};
use crate::model::{FileInput, ImageTokens};
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

/// The input limit for `model` when `LLM_CONTEXT_TOKENS` does not say. `model` may be a plain name
/// (`gpt-4o-mini`), a path-like one (`anthropic/claude-sonnet-4`), a Bedrock model or inference
/// profile id (`us.anthropic.claude-sonnet-4-20250514-v1:0`) or an ARN ending in one.
pub fn default_context_tokens(model: &str) -> usize {
    let name = crate::model::model_name(model).to_ascii_lowercase();
    KNOWN_LIMITS.iter().find(|(prefix, _)| name.starts_with(prefix)).map_or(DEFAULT_CONTEXT_TOKENS, |(_, limit)| *limit)
}

/// Tokens of one message, with a small per-message overhead for roles and separators.
pub fn estimate_message(message: &Message) -> usize {
    4 + match message {
        Message::User { content, files } => estimate_text(content) + files.iter().map(estimate_file).sum::<usize>(),
        Message::Assistant { content, tool_calls } => {
            estimate_text(content)
                + tool_calls
                    .iter()
                    .map(|c| 8 + estimate_text(&c.name) + estimate::estimate_json(&c.arguments))
                    .sum::<usize>()
        }
        Message::Tool { content, name, files, .. } => {
            8 + estimate_text(name) + estimate_text(content) + files.iter().map(estimate_file).sum::<usize>()
        }
    }
}

/// Tokens of a file shown to the model, by the most demanding of the providers' rules (Anthropic's
/// width × height / 750), so a request that fits here fits at every provider. `files::fit` decides
/// what a request shows by the model's own rule before this estimate is made.
pub fn estimate_file(file: &FileRef) -> usize {
    FileInput::all(ImageTokens::PixelsOver750).tokens(file)
}

/// Tokens the tools' specs add to a request. A turn's tools change only with a forced skill, so
/// the loop counts them once per model call rather than once per estimate.
pub fn estimate_tools(tools: &[ToolSpec]) -> usize {
    tools
        .iter()
        .map(|t| 8 + estimate_text(&t.name) + estimate_text(&t.description) + estimate::estimate_json(&t.parameters))
        .sum()
}

/// Tokens of a whole request whose tools come to `tools_tokens` ([`estimate_tools`]).
pub fn estimate_request(system: &SystemPrompt, messages: &[Message], tools_tokens: usize) -> usize {
    estimate_system(system) + messages.iter().map(estimate_message).sum::<usize>() + tools_tokens
}

/// Tokens of the system prompt as sent: its stable part and its tail, each estimated as the text it
/// renders to.
pub fn estimate_system(system: &SystemPrompt) -> usize {
    let (stable, tail) = system.rendered_lens();
    stable.div_ceil(estimate::BYTES_PER_TOKEN) + tail.div_ceil(estimate::BYTES_PER_TOKEN)
}

/// One trim, for the logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trim {
    /// Tool-call arguments replaced by a stub that says what was cut (see [`cut::cut_arguments`]).
    CutArguments { calls: usize, tokens: usize },
    /// Oldest messages of earlier turns dropped (a tool call goes with its results).
    DroppedMessages { count: usize, tokens: usize },
    /// A non-skill section of the system prompt removed.
    DroppedSection { tokens: usize },
    /// The skill listing replaced by its next smaller tier.
    ShrunkListing { tokens: usize },
    /// The arguments of one of the newest reply's calls cut (the last resort before a message is).
    CutNewestArguments { tokens: usize },
    /// The largest remaining message cut down.
    TruncatedMessage { index: usize, tokens: usize },
    /// Nothing more may be trimmed and the request is still over the limit.
    StillOver { tokens: usize, limit: usize },
}

/// Brings the request under `limit` tokens. `request_index` is the position of the current turn's
/// user request in `messages`: messages before it belong to earlier turns. Returns what was trimmed;
/// the request is within `limit` unless the last trim is [`Trim::StillOver`].
///
/// The order: (1) the arguments of tool calls before the newest reply, largest first, since those
/// calls were run and their results say what they did; (2) the oldest messages of earlier turns;
/// (3) with `trim_system`, the optional sections of the system prompt (the memory note, a forced
/// skill's tool list; the skill listing shrinks by tier instead); (4) the largest thing left,
/// whether a message's text (a `find_skills` result keeps its top matches' `load_skill` arguments)
/// or the arguments of one of the newest reply's calls. The base prompt, the skill instructions,
/// the skill listing's smallest tier and the user's request are never cut.
///
/// The loop first fits without `trim_system`, so a long turn condenses its own older steps before
/// the system prompt changes: the prompt is the prefix a provider caches.
pub fn fit(
    system: &mut SystemPrompt,
    messages: &mut Vec<Message>,
    request_index: usize,
    tools_tokens: usize,
    limit: usize,
    trim_system: bool,
) -> Vec<Trim> {
    let mut trims = Vec::new();
    let mut total = estimate_request(system, messages, tools_tokens);
    if total <= limit {
        return trims;
    }

    // 1. Arguments of the calls before the newest reply, largest first.
    let newest = newest_reply(messages);
    let mut calls: Vec<(usize, usize, usize)> = messages[..newest.unwrap_or(0)]
        .iter()
        .enumerate()
        .flat_map(|(m, message)| match message {
            Message::Assistant { tool_calls, .. } => {
                tool_calls.iter().enumerate().map(|(c, call)| (m, c, json_len(&call.arguments))).collect()
            }
            _ => Vec::new(),
        })
        .filter(|(_, _, size)| *size > cut::MIN_CUT_ARGUMENT_BYTES)
        .collect();
    calls.sort_by_key(|(_, _, size)| std::cmp::Reverse(*size));
    let (mut cut_calls, mut cut_tokens) = (0, 0);
    for (m, c, _) in calls {
        if total <= limit {
            break;
        }
        let saved = cut_call(&mut messages[m], c);
        total = total.saturating_sub(saved);
        cut_calls += usize::from(saved > 0);
        cut_tokens += saved;
    }
    if cut_calls > 0 {
        trims.push(Trim::CutArguments { calls: cut_calls, tokens: cut_tokens });
    }

    // 2. The oldest messages of earlier turns, a message and its tool results as one unit.
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

    // 3. Optional sections of the system prompt, largest first. The skill listing is never
    //    dropped: it shrinks to its next tier, down to its smallest, which stays.
    while trim_system && total > limit {
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

    // 4. The largest thing left: a message's text other than the user's request, cut to what still
    //    fits, or the arguments of one of the newest reply's calls. What cannot shrink further is
    //    passed over.
    let mut exhausted = std::collections::HashSet::new();
    let newest = newest_reply(messages);
    while total > limit {
        let texts = (0..messages.len())
            .filter(|&i| i != request_index)
            .filter_map(|i| message_text(&messages[i]).map(|text| ((i, None), text.len())))
            .filter(|(_, len)| *len > 200);
        let arguments = newest
            .and_then(|m| match &messages[m] {
                Message::Assistant { tool_calls, .. } => Some((m, tool_calls)),
                _ => None,
            })
            .into_iter()
            .flat_map(|(m, calls)| {
                calls.iter().enumerate().map(move |(c, call)| ((m, Some(c)), json_len(&call.arguments)))
            })
            .filter(|(_, size)| *size > cut::MIN_CUT_ARGUMENT_BYTES);
        let Some((piece, _)) =
            texts.chain(arguments).filter(|(piece, _)| !exhausted.contains(piece)).max_by_key(|(_, size)| *size)
        else {
            trims.push(Trim::StillOver { tokens: total, limit });
            break;
        };
        let saved = match piece {
            (index, Some(call)) => cut_call(&mut messages[index], call),
            (index, None) => shrink_text(&mut messages[index], (total - limit) * estimate::BYTES_PER_TOKEN + 64),
        };
        if saved == 0 {
            exhausted.insert(piece);
            continue;
        }
        total = total.saturating_sub(saved);
        trims.push(match piece {
            (_, Some(_)) => Trim::CutNewestArguments { tokens: saved },
            (index, None) => Trim::TruncatedMessage { index, tokens: saved },
        });
    }
    trims
}

/// Whether `trims` reached the last step of [`fit`]: the earlier turns and the prompt's optional
/// parts were not enough, so the current turn itself was cut (or is still over). The loop then
/// makes room by condensing the turn's older steps instead.
pub fn cuts_the_turn(trims: &[Trim]) -> bool {
    trims.iter().any(|trim| {
        matches!(trim, Trim::CutNewestArguments { .. } | Trim::TruncatedMessage { .. } | Trim::StillOver { .. })
    })
}

/// The position of the newest assistant message: its calls' arguments are cut last.
fn newest_reply(messages: &[Message]) -> Option<usize> {
    messages.iter().rposition(|message| matches!(message, Message::Assistant { .. }))
}

/// Cuts the arguments of call `call` of `message`; returns the tokens saved.
fn cut_call(message: &mut Message, call: usize) -> usize {
    let Message::Assistant { tool_calls, .. } = message else {
        return 0;
    };
    let Some(call) = tool_calls.get_mut(call) else {
        return 0;
    };
    let Some(cut) = cut::cut_arguments(&call.name, &call.arguments) else {
        return 0;
    };
    let before = estimate_text(&call.arguments.to_string());
    call.arguments = cut;
    before.saturating_sub(estimate_text(&call.arguments.to_string()))
}

/// Shrinks a message's text by about `over_bytes`; returns the tokens saved. A `find_skills`
/// result loses its descriptions first and keeps its top matches' `load_skill` arguments; any other
/// text keeps its head, at least 100 bytes.
fn shrink_text(message: &mut Message, over_bytes: usize) -> usize {
    let before = estimate_message(message);
    match message {
        Message::Tool { name, content, .. } if name == crate::tool_names::FIND_SKILLS => {
            let Some(shrunk) = crate::skills::found::shrink(content, content.len().saturating_sub(over_bytes)) else {
                return 0;
            };
            *content = shrunk;
        }
        Message::User { content, .. } | Message::Assistant { content, .. } | Message::Tool { content, .. } => {
            let keep = content.len().saturating_sub(over_bytes).max(100);
            if keep + cut::TRUNCATED_MARKER.len() >= content.len() {
                return 0;
            }
            cut::truncate_text(content, keep);
        }
    }
    before.saturating_sub(estimate_message(message))
}

fn message_text(message: &Message) -> Option<&str> {
    match message {
        Message::User { content, .. } | Message::Assistant { content, .. } | Message::Tool { content, .. } => {
            Some(content)
        }
    }
}

#[cfg(test)]
mod tests;
