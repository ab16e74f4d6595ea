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
        /// Images and documents the person attached, shown to the model after the text.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        files: Vec<FileRef>,
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
        /// Images and documents the tool shows the model (`read_file` of a picture), after the text.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        files: Vec<FileRef>,
    },
}

impl Message {
    pub fn user(content: impl Into<String>) -> Self {
        Message::User { content: content.into(), files: Vec::new() }
    }

    /// A tool's text result.
    pub fn tool(tool_call_id: impl Into<String>, name: impl Into<String>, content: impl Into<String>) -> Self {
        Message::Tool {
            tool_call_id: tool_call_id.into(),
            name: name.into(),
            content: content.into(),
            files: Vec::new(),
        }
    }

    /// The files the message shows the model.
    pub fn files(&self) -> &[FileRef] {
        match self {
            Message::User { files, .. } | Message::Tool { files, .. } => files,
            Message::Assistant { .. } => &[],
        }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Message::Assistant { content: content.into(), tool_calls: Vec::new() }
    }

    /// Size of the message's text, a cheap proxy for its weight in a prompt.
    pub fn text_len(&self) -> usize {
        match self {
            Message::User { content, .. } => content.len(),
            Message::Assistant { content, tool_calls } => {
                content.len() + tool_calls.iter().map(|c| c.name.len() + c.arguments.to_string().len()).sum::<usize>()
            }
            Message::Tool { content, .. } => content.len(),
        }
    }
}

/// The kinds of file a model may be shown: the images every provider takes, and PDF documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum MediaType {
    #[serde(rename = "image/png")]
    Png,
    #[serde(rename = "image/jpeg")]
    Jpeg,
    #[serde(rename = "image/gif")]
    Gif,
    #[serde(rename = "image/webp")]
    Webp,
    #[serde(rename = "application/pdf")]
    Pdf,
}

impl MediaType {
    /// The IANA media type, as the providers' APIs name it.
    pub fn mime(self) -> &'static str {
        match self {
            MediaType::Png => "image/png",
            MediaType::Jpeg => "image/jpeg",
            MediaType::Gif => "image/gif",
            MediaType::Webp => "image/webp",
            MediaType::Pdf => "application/pdf",
        }
    }

    /// The short format name Bedrock's Converse API uses (`png`, `jpeg`, `gif`, `webp`, `pdf`).
    pub fn format(self) -> &'static str {
        match self {
            MediaType::Png => "png",
            MediaType::Jpeg => "jpeg",
            MediaType::Gif => "gif",
            MediaType::Webp => "webp",
            MediaType::Pdf => "pdf",
        }
    }

    pub fn is_image(self) -> bool {
        !matches!(self, MediaType::Pdf)
    }
}

/// A file shown to the model, as the session keeps it: where it came from and the SHA-256 of the
/// bytes the model is sent (already checked and bounded), never the bytes. The bytes are stored
/// once, content-named, and read when a request is built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    /// The virtual path the file was shown from (`/workspace/scan.jpg`, `/skills/pptx/out/1.png`).
    pub path: String,
    /// Hex SHA-256 of the bytes sent to the model.
    pub sha256: String,
    pub media_type: MediaType,
    /// Size in bytes of what is sent.
    pub size: u64,
    /// An image's pixels as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    /// A PDF's page count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<u32>,
}

impl FileRef {
    /// The text a model is sent in place of this file: what the file is, and `why` it is not shown
    /// (`this model cannot see images`, say).
    pub fn note(&self, why: &str) -> String {
        let kind = if self.media_type.is_image() { "image" } else { "document" };
        let shape = match (self.width, self.height, self.pages) {
            (Some(width), Some(height), _) => format!(", {width}×{height}"),
            (_, _, Some(1)) => ", 1 page".to_owned(),
            (_, _, Some(pages)) => format!(", {pages} pages"),
            _ => String::new(),
        };
        format!("[{kind} {} ({}, {}{shape}): {why}]", self.path, self.media_type.mime(), human_size(self.size))
    }
}

/// A size as people read it: `312 bytes`, `540 KB`, `1.2 MB`.
pub fn human_size(bytes: u64) -> String {
    match bytes {
        0..=999 => format!("{bytes} bytes"),
        1_000..=999_999 => format!("{} KB", bytes.div_ceil(1_000)),
        _ => format!("{:.1} MB", bytes as f64 / 1_000_000.0),
    }
}

/// The bytes of the files a request shows, by SHA-256, read at most once per turn.
pub type FileBytes = std::collections::BTreeMap<String, Arc<[u8]>>;

/// The heading under which a turn's message names its attached files, after the person's own text.
pub const ATTACHED_FILES_HEADING: &str = "Attached files:";

/// The most characters a session's title keeps of its first message.
pub const SESSION_TITLE_MAX_CHARS: usize = 80;

/// A session's title: its first user message on one line, whitespace collapsed, cut at
/// [`SESSION_TITLE_MAX_CHARS`] characters with an ellipsis. `None` when the turn has no user text.
pub fn session_title(first_turn: &[Message]) -> Option<String> {
    let text = first_turn.iter().find_map(|message| match message {
        Message::User { content, .. } => Some(content.as_str()),
        _ => None,
    })?;
    // The runtime's lines naming the attachments are not the person's words.
    let text = match text.find(ATTACHED_FILES_HEADING) {
        Some(at) if text[..at].trim().is_empty() || text[..at].ends_with("\n\n") => &text[..at],
        _ => text,
    };
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

/// Token counts as the provider reported them. `input_tokens` is every input token, cached or not
/// (as the GenAI conventions' `gen_ai.usage.input_tokens`); the cache reads and writes are parts of
/// it, so the uncached input is what is left (see [`Usage::uncached_input_tokens`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "UsageView", into = "UsageView")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache (billed at a fraction of an input token).
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache (billed at a premium by some providers).
    pub cache_write_tokens: u64,
}

impl Usage {
    /// A call that used no prompt cache.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self { input_tokens, output_tokens, cache_read_tokens: 0, cache_write_tokens: 0 }
    }

    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }

    /// The input tokens neither read from nor written to the cache.
    pub fn uncached_input_tokens(&self) -> u64 {
        self.input_tokens.saturating_sub(self.cache_read_tokens).saturating_sub(self.cache_write_tokens)
    }
}

/// [`Usage`] as JSON: the split of the input spelled out, so a client need not subtract. Stored
/// replies from before the split read as uncached.
#[derive(Serialize, Deserialize)]
struct UsageView {
    input_tokens: u64,
    output_tokens: u64,
    #[serde(default)]
    uncached_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_tokens: u64,
    #[serde(default)]
    cache_write_tokens: u64,
}

impl From<Usage> for UsageView {
    fn from(usage: Usage) -> Self {
        Self {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            uncached_input_tokens: Some(usage.uncached_input_tokens()),
            cache_read_tokens: usage.cache_read_tokens,
            cache_write_tokens: usage.cache_write_tokens,
        }
    }
}

impl From<UsageView> for Usage {
    fn from(view: UsageView) -> Self {
        Self {
            input_tokens: view.input_tokens,
            output_tokens: view.output_tokens,
            cache_read_tokens: view.cache_read_tokens,
            cache_write_tokens: view.cache_write_tokens,
        }
    }
}

/// Everything one model call needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ChatRequest {
    /// The system prompt's stable part: the same for every call of a turn and for every turn in
    /// the same prompt state, so a provider may cache it (with the tools before it).
    pub system: String,
    /// What varies in the system prompt (today's date): sent after the cached part, never marked.
    pub system_tail: String,
    /// Groups requests that share a prefix for a provider that routes by key (OpenAI's
    /// `prompt_cache_key`): the tenant and the prompt state, hashed. `None`: no key is sent.
    pub cache_key: Option<String>,
    /// How many of the last messages belong to this request only (a forced skill's reminder): a
    /// provider's moving cache breakpoint goes on the message before them, which the next call
    /// will start with too.
    pub transient_messages: usize,
    pub messages: Vec<Message>,
    /// Shared with the agent that offers them: a turn's model calls send the same list.
    pub tools: Arc<[ToolSpec]>,
    /// Use this model instead of the provider's configured one (e.g. `PLANNER_MODEL`).
    pub model: Option<String>,
    /// Ask for a JSON reply that follows a schema (structured output).
    pub response_format: Option<JsonSchemaFormat>,
    /// The bytes of every file the messages show, by SHA-256. A file whose bytes are missing is
    /// sent as a short text note instead.
    #[serde(skip)]
    pub files: Arc<FileBytes>,
    /// The start of the messages that every call of this turn's loop sends unchanged, which a
    /// provider may encode once for all of them.
    #[serde(skip)]
    pub stable_prefix: StablePrefixHint,
}

/// The first `len` messages of a turn's requests (the history and the user's message), which the
/// turn's loop sends unchanged in every call it makes: a provider may encode them at the first call
/// and put that encoding in the later calls' bodies instead of encoding them again. The loop only
/// attaches it to a request whose first `len` messages are exactly these, and a provider only uses
/// it for a request that shows no file.
pub struct StablePrefix {
    len: usize,
    /// Each provider's encoding, made at its first request: a turn may call more than one.
    encoded: std::sync::Mutex<Vec<(&'static str, Arc<dyn std::any::Any + Send + Sync>)>>,
}

impl StablePrefix {
    pub fn new(len: usize) -> Self {
        Self { len, encoded: Default::default() }
    }

    /// How many messages at the start of a request it covers.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `provider`'s encoding of the prefix: made by `encode` at the first call, shared after it.
    pub fn encoded<T: Send + Sync + 'static>(&self, provider: &'static str, encode: impl FnOnce() -> T) -> Arc<T> {
        let mut encoded = self.encoded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(found) = encoded.iter().find(|(name, _)| *name == provider).and_then(|(_, any)| {
            let any: Arc<dyn std::any::Any + Send + Sync> = any.clone();
            any.downcast::<T>().ok()
        }) {
            return found;
        }
        let made = Arc::new(encode());
        encoded.retain(|(name, _)| *name != provider);
        encoded.push((provider, made.clone()));
        made
    }
}

/// A request's [`StablePrefix`], if any: a hint, not content, so two requests of the same content
/// are equal whatever their hints.
#[derive(Clone, Default)]
pub struct StablePrefixHint(pub Option<Arc<StablePrefix>>);

impl PartialEq for StablePrefixHint {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for StablePrefixHint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(prefix) => write!(f, "StablePrefix({})", prefix.len),
            None => f.write_str("None"),
        }
    }
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
        let attached = "Mira estas dos\n\nAttached files:\n- Showing the image /workspace/a.png";
        assert_eq!(session_title(&[Message::user(attached)]).as_deref(), Some("Mira estas dos"));
        assert_eq!(session_title(&[Message::user("Attached files:\n- /workspace/a.csv")]), None);
    }

    #[test]
    fn a_files_note_says_what_it_is_and_why_it_is_not_shown() {
        let photo = FileRef {
            path: "/workspace/id.jpg".into(),
            sha256: "a".repeat(64),
            media_type: MediaType::Jpeg,
            size: 1_234_567,
            width: Some(1568),
            height: Some(1176),
            pages: None,
        };
        assert_eq!(
            photo.note("this model cannot see images"),
            "[image /workspace/id.jpg (image/jpeg, 1.2 MB, 1568×1176): this model cannot see images]"
        );
        let deed =
            FileRef { media_type: MediaType::Pdf, size: 54_321, width: None, height: None, pages: Some(3), ..photo };
        assert_eq!(deed.note("x"), "[document /workspace/id.jpg (application/pdf, 55 KB, 3 pages): x]");
        let json = serde_json::to_value(Message::user("hi")).unwrap();
        assert_eq!(json, serde_json::json!({"role": "user", "content": "hi"}), "no files, no field");
    }
}
