//! The Chat Completions request as the server wants it: messages with their tool calls and results,
//! tools, a structured output's JSON schema (strict only when the schema is closed), and images and
//! PDFs as content parts of a user message.

use std::borrow::Cow;
use std::sync::Arc;

use agent_ports::{ChatRequest, FileInput, JsonSchemaFormat, Message};
use serde::ser::SerializeSeq;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use super::tools::{EncodedTools, ToolsCache};
use crate::config::PromptCache;
use crate::files::{split, Shown};

/// The text that opens the user message carrying the files of a run of tool results.
const TOOL_FILES_HEADING: &str = "Files shown by the tool results above:";

#[derive(Serialize)]
pub(super) struct CompletionRequest<'a> {
    model: &'a str,
    messages: WireMessages<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<EncodedTools>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<WireResponseFormat<'a>>,
    /// Routes requests that share a prefix to the same cache: the tenant and the prompt state.
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    /// `in_memory` or `24h`, only when configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_retention: Option<&'a str>,
    /// A streamed call's: the reply as server-sent events, the usage in the last one.
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

impl CompletionRequest<'_> {
    /// The same request for a streamed reply, with its usage in the last event.
    pub(super) fn streamed(self) -> Self {
        Self { stream: Some(true), stream_options: Some(StreamOptions { include_usage: true }), ..self }
    }
}

/// The request's messages: the system message, the turn's stable prefix as encoded at the turn's
/// first call (when the request has one), then the others.
struct WireMessages<'a> {
    system: Option<WireMessage<'a>>,
    prefix: Option<Arc<EncodedPrefix>>,
    rest: Vec<WireMessage<'a>>,
}

/// A stable prefix's messages, each encoded as the request's own would be; `None` when one could
/// not be, so that every call encodes them itself.
type EncodedPrefix = Option<Vec<Box<RawValue>>>;

impl Serialize for WireMessages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let prefix = self.prefix.as_deref().and_then(Option::as_deref).unwrap_or_default();
        let mut seq =
            serializer.serialize_seq(Some(usize::from(self.system.is_some()) + prefix.len() + self.rest.len()))?;
        if let Some(system) = &self.system {
            seq.serialize_element(system)?;
        }
        for message in prefix {
            seq.serialize_element(message)?;
        }
        for message in &self.rest {
            seq.serialize_element(message)?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireResponseFormat<'a> {
    JsonSchema { json_schema: WireJsonSchema<'a> },
}

#[derive(Serialize)]
struct WireJsonSchema<'a> {
    name: &'a str,
    schema: &'a Value,
    strict: bool,
}

/// The caller's schema travels untouched. Strict mode rejects schemas that do not close their
/// objects (`additionalProperties: false`, every property required), so it is only asked for when
/// the top-level object is closed; otherwise the server validates loosely rather than failing the call.
fn response_format(format: &JsonSchemaFormat) -> WireResponseFormat<'_> {
    let strict = format.schema.get("additionalProperties") == Some(&Value::Bool(false));
    WireResponseFormat::JsonSchema {
        json_schema: WireJsonSchema { name: &format.name, schema: &format.schema, strict },
    }
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum WireMessage<'a> {
    System {
        content: Cow<'a, str>,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        /// Null rather than empty when the turn is only tool calls, as OpenAI itself sends it.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Cow<'a, str>,
    },
}

/// A user message's content: its text as a string, as before files, or parts when it shows files.
#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: ImageUrl },
    File { file: FilePart<'a> },
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

#[derive(Serialize)]
struct FilePart<'a> {
    filename: &'a str,
    file_data: String,
}

/// A file's part: an `image_url`, or a `file` for a PDF, both carrying a `data:` URL.
fn file_part<'a>(shown: &Shown<'a>) -> Part<'a> {
    if shown.file.media_type.is_image() {
        Part::ImageUrl { image_url: ImageUrl { url: shown.data_url() } }
    } else {
        Part::File { file: FilePart { filename: shown.file_name(), file_data: shown.data_url() } }
    }
}

/// A user message of its text (left out when empty) followed by these files.
fn user_message<'a>(text: Cow<'a, str>, shown: &[Shown<'a>]) -> WireMessage<'a> {
    if shown.is_empty() {
        return WireMessage::User { content: UserContent::Text(text) };
    }
    let mut parts = Vec::with_capacity(shown.len() + 1);
    if !text.is_empty() {
        parts.push(Part::Text { text });
    }
    parts.extend(shown.iter().map(file_part));
    WireMessage::User { content: UserContent::Parts(parts) }
}

/// The user message that shows the files of a run of tool results, since a tool message takes text
/// only: a line naming each file and the call it came from, then the files.
fn tool_files_message<'a>(shown: &[(&'a str, Shown<'a>)]) -> WireMessage<'a> {
    let mut text = TOOL_FILES_HEADING.to_owned();
    for (call, file) in shown {
        text.push_str(&format!("\n- {} ({}, from tool call {call})", file.file.path, file.file.media_type.mime()));
    }
    let mut parts = vec![Part::Text { text: Cow::Owned(text) }];
    parts.extend(shown.iter().map(|(_, file)| file_part(file)));
    WireMessage::User { content: UserContent::Parts(parts) }
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    /// A JSON document encoded as a string, as the API requires.
    arguments: String,
}

/// The token limit: `(max_tokens, max_completion_tokens)`, one of them set.
pub(super) type Limits = (Option<u32>, Option<u32>);

/// OpenAI caches every long enough prefix by itself; the request only says how to route it
/// (`prompt_cache_key`) and, when configured, how long to keep it.
pub(super) fn to_wire<'a>(
    model: &'a str,
    request: &'a ChatRequest,
    input: FileInput,
    (max_tokens, max_completion_tokens): Limits,
    cache: &'a PromptCache,
    tools: &ToolsCache,
) -> CompletionRequest<'a> {
    let system = system_text(&request.system, &request.system_tail).map(|content| WireMessage::System { content });
    // A request that shows no file encodes each message alone, so a turn's stable prefix is
    // encoded once, at its first call.
    let prefix = request
        .stable_prefix
        .0
        .as_ref()
        .filter(|prefix| request.files.is_empty() && prefix.len() <= request.messages.len())
        .map(|prefix| (prefix.len(), prefix.encoded(PROVIDER_KEY, || encode_prefix(request, prefix.len(), input))))
        .filter(|(_, encoded)| encoded.is_some());
    let (prefix, from) = match prefix {
        Some((len, encoded)) => (Some(encoded), len),
        None => (None, 0),
    };
    let mut rest = Vec::with_capacity(request.messages.len() - from);
    // The files of the current run of tool results, with the call each came from.
    let mut tool_files: Vec<(&'a str, Shown<'a>)> = Vec::new();
    for message in &request.messages[from..] {
        if !matches!(message, Message::Tool { .. }) && !tool_files.is_empty() {
            rest.push(tool_files_message(&tool_files));
            tool_files.clear();
        }
        rest.push(wire_message(message, request, input, &mut tool_files));
    }
    if !tool_files.is_empty() {
        rest.push(tool_files_message(&tool_files));
    }
    let messages = WireMessages { system, prefix, rest };
    let tools = tools.encoded(&request.tools);
    let response_format = request.response_format.as_ref().map(response_format);
    let prompt_cache_key = request.cache_key.as_deref().filter(|_| cache.enabled());
    let prompt_cache_retention = cache.openai_retention.as_deref().filter(|_| cache.enabled());
    CompletionRequest {
        model,
        messages,
        tools,
        max_tokens,
        max_completion_tokens,
        response_format,
        prompt_cache_key,
        prompt_cache_retention,
        stream: None,
        stream_options: None,
    }
}

/// The name a stable prefix keeps this provider's encoding under.
const PROVIDER_KEY: &str = "openai-chat-completions";

/// One message as the server wants it; the files a tool result shows are added to `tool_files`, to
/// be shown by the user message after the run of tool results.
fn wire_message<'a>(
    message: &'a Message,
    request: &'a ChatRequest,
    input: FileInput,
    tool_files: &mut Vec<(&'a str, Shown<'a>)>,
) -> WireMessage<'a> {
    match message {
        Message::User { content, files } => {
            let split = split(content, files, &request.files, input);
            user_message(split.text, &split.shown)
        }
        Message::Assistant { content, tool_calls } => WireMessage::Assistant {
            content: if content.is_empty() && !tool_calls.is_empty() { None } else { Some(content) },
            tool_calls: tool_calls
                .iter()
                .map(|call| WireToolCall {
                    id: &call.id,
                    kind: "function",
                    function: WireFunctionCall { name: &call.name, arguments: encode_arguments(&call.arguments) },
                })
                .collect(),
        },
        Message::Tool { tool_call_id, content, files, .. } => {
            let split = split(content, files, &request.files, input);
            tool_files.extend(split.shown.into_iter().map(|shown| (tool_call_id.as_str(), shown)));
            WireMessage::Tool { tool_call_id, content: split.text }
        }
    }
}

/// The first `len` messages of a request that shows no file, each encoded alone: without files a
/// message is one wire message, whatever comes around it.
fn encode_prefix(request: &ChatRequest, len: usize, input: FileInput) -> EncodedPrefix {
    let mut tool_files = Vec::new();
    let encoded = request.messages[..len]
        .iter()
        .map(|message| serde_json::value::to_raw_value(&wire_message(message, request, input, &mut tool_files)).ok())
        .collect::<Option<Vec<_>>>()?;
    tool_files.is_empty().then_some(encoded)
}

/// One system message: the stable part first, so the cached prefix reaches into it, then the tail,
/// which brings its own separator.
fn system_text<'a>(stable: &'a str, tail: &'a str) -> Option<Cow<'a, str>> {
    match (stable.is_empty(), tail.is_empty()) {
        (true, true) => None,
        (false, true) => Some(Cow::Borrowed(stable)),
        (true, false) => Some(Cow::Borrowed(tail)),
        (false, false) => Some(Cow::Owned(format!("{stable}{tail}"))),
    }
}

/// Arguments that arrived as an unparseable string are sent back verbatim, so the model
/// sees exactly what it produced; everything else is encoded as JSON.
fn encode_arguments(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use agent_ports::Message;
    use serde_json::json;

    use super::*;

    #[test]
    fn preserved_raw_arguments_round_trip() {
        assert_eq!(encode_arguments(&json!("{oops")), "{oops");
        assert_eq!(encode_arguments(&json!({"a": [1, 2]})), r#"{"a":[1,2]}"#);
    }

    /// A turn's requests: the history and the user's message, then `steps` more messages.
    fn turn_request(steps: usize, prefix: Option<&std::sync::Arc<agent_ports::StablePrefix>>) -> ChatRequest {
        let mut messages = vec![
            Message::user("earlier \"question\""),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![agent_ports::ToolCall {
                    id: "c1".into(),
                    name: "ls".into(),
                    arguments: json!({"path": "/workspace"}),
                }],
            },
            Message::tool("c1", "ls", "notes.md\n"),
            Message::assistant("earlier answer"),
            Message::user("the new request"),
        ];
        for step in 0..steps {
            messages.push(Message::assistant(format!("step {step}")));
        }
        ChatRequest {
            system: "system".into(),
            messages,
            stable_prefix: agent_ports::StablePrefixHint(prefix.cloned()),
            ..Default::default()
        }
    }

    fn body(request: &ChatRequest) -> String {
        let cache = PromptCache::default();
        let tools = ToolsCache::default();
        serde_json::to_string(&to_wire("m", request, FileInput::TEXT_ONLY, (Some(10), None), &cache, &tools)).unwrap()
    }

    #[test]
    fn a_stable_prefix_is_encoded_once_and_sent_as_if_encoded_each_time() {
        let prefix = std::sync::Arc::new(agent_ports::StablePrefix::new(5));
        for steps in [0, 1, 3] {
            assert_eq!(body(&turn_request(steps, Some(&prefix))), body(&turn_request(steps, None)), "{steps}");
        }
        // The later calls took the first call's encoding: one made, and the same one since.
        let first = prefix.encoded::<EncodedPrefix>(PROVIDER_KEY, || panic!("encoded at the first call"));
        assert_eq!(first.as_ref().as_ref().map(Vec::len), Some(5));
        let parsed: Value = serde_json::from_str(&body(&turn_request(1, Some(&prefix)))).unwrap();
        assert_eq!(parsed["messages"].as_array().unwrap().len(), 1 + 5 + 1);
        assert_eq!(parsed["messages"][1]["content"], "earlier \"question\"");
    }

    #[test]
    fn a_request_showing_files_encodes_every_message_itself() {
        let prefix = std::sync::Arc::new(agent_ports::StablePrefix::new(5));
        let mut request = turn_request(1, Some(&prefix));
        let mut files = agent_ports::FileBytes::new();
        files.insert("0".repeat(64), std::sync::Arc::from(vec![1u8, 2, 3]));
        request.files = std::sync::Arc::new(files);
        let _ = body(&request);
        let untouched = prefix.encoded::<EncodedPrefix>(PROVIDER_KEY, || None);
        assert!(untouched.is_none(), "a request with files made no encoding");
    }

    #[test]
    fn a_streamed_request_asks_for_events_and_the_usage() {
        let request = turn_request(0, None);
        let cache = PromptCache::default();
        let tools = ToolsCache::default();
        let wire = to_wire("m", &request, FileInput::TEXT_ONLY, (Some(10), None), &cache, &tools).streamed();
        let streamed = serde_json::to_value(&wire).unwrap();
        assert_eq!(streamed["stream"], json!(true));
        assert_eq!(streamed["stream_options"], json!({"include_usage": true}));
        let buffered: Value = serde_json::from_str(&body(&request)).unwrap();
        assert_eq!(streamed["messages"], buffered["messages"]);
        assert!(buffered.get("stream").is_none(), "a buffered call asks for no stream");
    }

    #[test]
    fn official_api_uses_max_completion_tokens() {
        let request = ChatRequest {
            system: String::new(),
            messages: vec![Message::user("hi")],
            tools: Default::default(),
            ..Default::default()
        };
        let body = serde_json::to_value(to_wire(
            "m",
            &request,
            FileInput::TEXT_ONLY,
            (None, Some(10)),
            &PromptCache::default(),
            &ToolsCache::default(),
        ))
        .unwrap();
        assert_eq!(
            body,
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 10})
        );
    }

    #[test]
    fn a_turns_tools_are_sent_as_if_encoded_at_each_call() {
        let cache = PromptCache::default();
        let shared = ToolsCache::default();
        let tool = |name: &str| agent_ports::ToolSpec {
            name: name.into(),
            description: "a tool".into(),
            parameters: json!({"type": "object"}),
        };
        let request = ChatRequest {
            messages: vec![Message::user("hi")],
            tools: Arc::from(vec![tool("ls"), tool("read_file")]),
            ..Default::default()
        };
        let encode = |tools: &ToolsCache| {
            serde_json::to_value(to_wire("m", &request, FileInput::TEXT_ONLY, (Some(10), None), &cache, tools)).unwrap()
        };
        let first = encode(&shared);
        assert_eq!(first["tools"][1]["function"]["name"], "read_file");
        assert_eq!(encode(&shared), first, "the second call of the turn sends the same body");
        assert_eq!(encode(&ToolsCache::default()), first, "as a fresh encoding would");
    }
}
