//! The text a summariser is given: messages written out one per line, tool results and long texts
//! cut, large call arguments replaced by a note of their size, and skill instructions left out.
//! Used by the history summary (`turn::summary`) and by the compaction of a long turn (`agent::compact`).

use std::borrow::Cow;
use std::collections::HashSet;

use crate::budget;
use crate::message::{Message, ToolCall};

/// Characters of one tool result, one message's text or one call's arguments the transcript shows.
const MAX_RESULT_CHARS: usize = 2000;
const MAX_TEXT_CHARS: usize = 8000;
const MAX_ARGUMENT_BYTES: usize = 2000;

/// The previous summary and the messages as text for a summariser. A call for which `skill_text`
/// is true (it returns skill instructions) has its result left out, so skill instructions never
/// reach a summary. Long texts and results are cut, a call's large arguments are replaced by a note
/// of their size (as the context budget does), and a transcript still over `max_bytes` loses its
/// middle, with a note.
pub fn transcript(
    previous: Option<&str>,
    messages: &[Message],
    max_bytes: usize,
    skill_text: &dyn Fn(&ToolCall) -> bool,
) -> String {
    let mut skill_reads = HashSet::new();
    let mut out = String::new();
    if let Some(previous) = previous {
        out.push_str(&format!("Summary so far:\n{previous}\n\nConversation since then:\n"));
    }
    for message in messages {
        match message {
            Message::User { content, files } => {
                out.push_str(&format!("User: {}\n", head(content, MAX_TEXT_CHARS)));
                for file in files {
                    out.push_str(&format!("User attached {} ({})\n", file.path, file.media_type.mime()));
                }
            }
            Message::Assistant { content, tool_calls } => {
                if !content.is_empty() {
                    out.push_str(&format!("Assistant: {}\n", head(content, MAX_TEXT_CHARS)));
                }
                for call in tool_calls {
                    if skill_text(call) {
                        skill_reads.insert(call.id.clone());
                    }
                    out.push_str(&format!(
                        "Assistant called {}({})\n",
                        call.name,
                        short_arguments(call, MAX_ARGUMENT_BYTES)
                    ));
                }
            }
            Message::Tool { tool_call_id, name, content, .. } => {
                if skill_reads.contains(tool_call_id) {
                    out.push_str(&format!("Tool {name}: (skill content omitted)\n"));
                } else {
                    out.push_str(&format!("Tool {name}: {}\n", head(content, MAX_RESULT_CHARS)));
                }
            }
        }
    }
    cut_middle(out, max_bytes)
}

/// A call's arguments as JSON of at most about `max_bytes`: large fields become a note of their size.
pub fn short_arguments(call: &ToolCall, max_bytes: usize) -> String {
    let mut arguments = call.arguments.to_string();
    if arguments.len() > max_bytes {
        if let Some(cut) = budget::cut::cut_arguments(&call.name, &call.arguments) {
            arguments = cut.to_string();
        }
    }
    head(&arguments, max_bytes).into_owned()
}

/// The first `chars` characters of `text`, and a note of how many more there were.
pub fn head(text: &str, chars: usize) -> Cow<'_, str> {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{} [{} more bytes cut]", &text[..at], text.len() - at).into(),
        None => text.into(),
    }
}

/// `text` within `max_bytes`: its start (the previous summary and the oldest messages) and its end
/// (the newest), the middle replaced by a note of what was cut.
pub fn cut_middle(text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let note = format!("\n[{} bytes cut here to fit the model's context]\n", text.len());
    let keep = max_bytes.saturating_sub(note.len()) / 2;
    let start = text.floor_char_boundary(keep);
    let end = text.ceil_char_boundary(text.len() - keep);
    format!("{}{note}{}", &text[..start], &text[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill_reads(call: &ToolCall) -> bool {
        call.name == "load_skill"
    }

    #[test]
    fn large_arguments_and_texts_are_cut_and_the_whole_stays_within_its_room() {
        let content = "x".repeat(200 * 1024);
        let call = |i: usize| ToolCall {
            id: format!("c{i}"),
            name: "write_file".into(),
            arguments: serde_json::json!({"file_path": format!("/workspace/p{i}.md"), "content": content}),
        };
        let messages = vec![
            Message::user("y".repeat(100_000)),
            Message::Assistant { content: String::new(), tool_calls: (0..4).map(call).collect() },
        ];
        let text = transcript(None, &messages, 1_000_000, &skill_reads);
        assert!(text.len() < 20_000, "{}", text.len());
        assert!(text.contains("/workspace/p3.md") && text.contains("204800 bytes cut"), "{text}");
        let text = transcript(Some("earlier"), &messages, 3_000, &skill_reads);
        assert!(text.len() <= 3_000, "{}", text.len());
        assert!(text.starts_with("Summary so far:\nearlier") && text.contains("cut here to fit"), "{text}");
    }

    #[test]
    fn results_of_calls_that_return_skill_text_are_left_out() {
        let messages = vec![
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "k".into(),
                    name: "load_skill".into(),
                    arguments: serde_json::json!({"skill": "a"}),
                }],
            },
            Message::Tool {
                tool_call_id: "k".into(),
                name: "load_skill".into(),
                content: "SECRET RULES".into(),
                files: Vec::new(),
            },
        ];
        let text = transcript(None, &messages, 10_000, &skill_reads);
        assert!(!text.contains("SECRET RULES") && text.contains("skill content omitted"), "{text}");
    }
}
