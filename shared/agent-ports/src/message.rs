//! Provider-neutral conversation types: what the loop sends to a model and gets back.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// One entry of a conversation's history. The system prompt is not part of it:
/// it is rebuilt before every model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User {
        content: String,
    },
    Assistant {
        #[serde(default)]
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        name: String,
        content: String,
    },
}

impl Message {
    pub fn user(content: impl Into<String>) -> Self {
        Message::User { content: content.into() }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Message::Assistant { content: content.into(), tool_calls: Vec::new() }
    }

    /// Size of the message's text, a cheap proxy for its weight in a prompt.
    pub fn text_len(&self) -> usize {
        match self {
            Message::User { content } => content.len(),
            Message::Assistant { content, tool_calls } => {
                content.len() + tool_calls.iter().map(|c| c.name.len() + c.arguments.to_string().len()).sum::<usize>()
            }
            Message::Tool { content, .. } => content.len(),
        }
    }
}

/// The most characters a session's title keeps of its first message.
pub const SESSION_TITLE_MAX_CHARS: usize = 80;

/// A session's title: its first user message on one line, whitespace collapsed, cut at
/// [`SESSION_TITLE_MAX_CHARS`] characters with an ellipsis. `None` when the turn has no user text.
pub fn session_title(first_turn: &[Message]) -> Option<String> {
    let text = first_turn.iter().find_map(|message| match message {
        Message::User { content } => Some(content.as_str()),
        _ => None,
    })?;
    // Words are joined only until the title is known to be too long, so a long message costs
    // no more than its first few words.
    let mut title = String::new();
    for word in text.split_whitespace() {
        if title.chars().count() > SESSION_TITLE_MAX_CHARS {
            break;
        }
        if !title.is_empty() {
            title.push(' ');
        }
        title.push_str(word);
    }
    if title.is_empty() {
        return None;
    }
    if title.chars().count() > SESSION_TITLE_MAX_CHARS {
        title = title.chars().take(SESSION_TITLE_MAX_CHARS - 1).chain(['…']).collect();
    }
    Some(title)
}

/// A tool invocation requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model sent them; a provider that receives a JSON string
    /// that does not parse keeps it here as a JSON string so the tool can report it.
    pub arguments: serde_json::Value,
}

impl ToolCall {
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: serde_json::Value) -> Self {
        ToolCall { id: id.into(), name: name.into(), arguments }
    }
}

/// A tool as offered to the model: its name, what it does, and a JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// Token counts reported by the provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// Everything one model call needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ChatRequest {
    pub system: String,
    pub messages: Vec<Message>,
    /// Shared with the agent that offers them: a turn's model calls send the same list.
    pub tools: Arc<[ToolSpec]>,
    /// Use this model instead of the provider's configured one (e.g. `PLANNER_MODEL`).
    pub model: Option<String>,
    /// Ask for a JSON reply that follows a schema (structured output).
    pub response_format: Option<JsonSchemaFormat>,
}

/// A structured-output request: the reply's content must be JSON valid against `schema`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonSchemaFormat {
    /// A short identifier (`[A-Za-z0-9_-]`, at most 64 characters), as providers require.
    pub name: String,
    pub schema: serde_json::Value,
}

/// Why the model stopped generating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    Other,
}

/// The model's answer to one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub stop_reason: StopReason,
}

impl ChatResponse {
    /// A reply of text only, which ends the turn; no usage reported.
    pub fn text(content: impl Into<String>) -> Self {
        ChatResponse {
            content: content.into(),
            tool_calls: Vec::new(),
            usage: Usage::default(),
            stop_reason: StopReason::EndTurn,
        }
    }

    /// A reply that calls these tools and says nothing; no usage reported.
    pub fn calling(tool_calls: Vec<ToolCall>) -> Self {
        ChatResponse { content: String::new(), tool_calls, usage: Usage::default(), stop_reason: StopReason::ToolUse }
    }

    /// The same reply, reporting `usage`.
    pub fn with_usage(self, usage: Usage) -> Self {
        ChatResponse { usage, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_is_the_first_user_message_on_one_line_and_cut() {
        let turn = [Message::assistant("ignored"), Message::user("  Pásame\n el   borrador\ten Word  ")];
        assert_eq!(session_title(&turn).as_deref(), Some("Pásame el borrador en Word"));
        let exact = "é".repeat(SESSION_TITLE_MAX_CHARS);
        assert_eq!(session_title(&[Message::user(exact.clone())]), Some(exact), "80 characters are kept whole");
        let long = format!("{} and more", "ü".repeat(SESSION_TITLE_MAX_CHARS));
        let title = session_title(&[Message::user(long)]).unwrap();
        assert_eq!(title.chars().count(), SESSION_TITLE_MAX_CHARS);
        assert!(title.ends_with("ü…"), "{title}");
        assert_eq!(session_title(&[Message::user(" \n ")]), None);
        assert_eq!(session_title(&[Message::assistant("no user text")]), None);
    }
}
