//! Core requests as Converse requests: system, messages with `toolUse`/`toolResult` blocks, images
//! and PDF documents, tools, the forced tool of a structured output.

use std::collections::HashSet;

use agent_ports::FileInput;
use aws_sdk_bedrockruntime::types::{
    CachePointBlock, CachePointType, CacheTtl as WireTtl, DocumentBlock, DocumentFormat, DocumentSource, ImageBlock,
    ImageFormat, ImageSource,
};
use aws_smithy_types::Blob;

use super::*;
use crate::config::{bedrock_cache_points, CachePoints, CacheTtl, PromptCache};
use crate::files::{file_name, split, Shown};

/// The longest document name sent, before a suffix that makes it unique: the name is shown to the
/// model, so a long one is cut.
const MAX_DOCUMENT_NAME: usize = 60;

/// The parts of a Converse request, built once and cloned into each attempt.
pub(super) struct WireRequest {
    pub(super) system: Option<Vec<SystemContentBlock>>,
    pub(super) messages: Vec<wire::Message>,
    pub(super) tool_config: Option<ToolConfiguration>,
    pub(super) inference: InferenceConfiguration,
}

/// Puts a [`WireRequest`] on either operation's builder: `Converse` and `ConverseStream` take the same
/// fields but have distinct builder types in the SDK.
pub(super) trait WithRequest: Sized {
    fn with_request(self, request: &WireRequest) -> Self;
}

macro_rules! with_request_for {
    ($($builder:ty),+) => {$(
        impl WithRequest for $builder {
            fn with_request(self, request: &WireRequest) -> Self {
                self.set_system(request.system.clone())
                    .set_messages(Some(request.messages.clone()))
                    .set_tool_config(request.tool_config.clone())
                    .inference_config(request.inference.clone())
            }
        }
    )+};
}

with_request_for!(
    aws_sdk_bedrockruntime::operation::converse::builders::ConverseFluentBuilder,
    aws_sdk_bedrockruntime::operation::converse_stream::builders::ConverseStreamFluentBuilder
);

pub(super) fn build_error(error: impl std::fmt::Display) -> ModelError {
    ModelError::Config(format!("{PROVIDER}: could not build the request: {error}"))
}

/// Converts a request. Like the Anthropic provider: consecutive messages of one role are merged (roles
/// must alternate), tool results come first within a user message, and a [`JsonSchemaFormat`] becomes
/// a tool forced with `toolChoice`, whose input is the structured reply. Bedrock refuses `toolUse` and
/// `toolResult` blocks in a request without `toolConfig`, so when no tool is offered but the history
/// has tool calls, the tools it names are declared (with an open schema) to keep the history valid.
///
/// `cache` says where `cachePoint` blocks go (see [`Marks::of`]): after the last tool, after the
/// stable system text (the tail follows it), and at the end of the last message.
pub(super) fn to_wire(
    max_tokens: u32,
    request: &ChatRequest,
    input: FileInput,
    cache: Marks,
) -> Result<WireRequest, ModelError> {
    // Each block with whether the next call repeats it (it is not from a transient message).
    let mut turns: Vec<(ConversationRole, Vec<(ContentBlock, bool)>)> = Vec::with_capacity(request.messages.len());
    let lasting_count = request.messages.len().saturating_sub(request.transient_messages);
    let mut history_tools: Vec<&str> = Vec::new();
    let mut names = DocumentNames::default();
    for (index, message) in request.messages.iter().enumerate() {
        let (role, blocks) = match message {
            Message::User { content, files } => {
                let split = split(content, files, &request.files, input);
                let mut blocks: Vec<ContentBlock> = text_block(&split.text).into_iter().collect();
                // Converse refuses a document in a message without text, so its path stands in.
                let pdfs = split.shown.iter().filter(|shown| !shown.file.media_type.is_image());
                let paths: Vec<&str> = pdfs.map(|shown| shown.file.path.as_str()).collect();
                if blocks.is_empty() && !paths.is_empty() {
                    blocks.push(ContentBlock::Text(paths.join("\n")));
                }
                for shown in &split.shown {
                    blocks.push(match file_block(shown, &mut names)? {
                        FileBlock::Image(image) => ContentBlock::Image(image),
                        FileBlock::Document(document) => ContentBlock::Document(document),
                    });
                }
                (ConversationRole::User, blocks)
            }
            Message::Assistant { content, tool_calls } => {
                let mut blocks: Vec<ContentBlock> = text_block(content).into_iter().collect();
                for call in tool_calls {
                    if !history_tools.contains(&call.name.as_str()) {
                        history_tools.push(&call.name);
                    }
                    let block = ToolUseBlock::builder()
                        .tool_use_id(&call.id)
                        .name(&call.name)
                        .input(to_document(&tool_input(&call.arguments)))
                        .build()
                        .map_err(build_error)?;
                    blocks.push(ContentBlock::ToolUse(block));
                }
                (ConversationRole::Assistant, blocks)
            }
            Message::Tool { tool_call_id, name, content, files } => {
                if !history_tools.contains(&name.as_str()) {
                    history_tools.push(name);
                }
                let split = split(content, files, &request.files, input);
                let text = if split.text.trim().is_empty() { EMPTY_TOOL_RESULT } else { &split.text };
                let mut result = ToolResultBlock::builder()
                    .tool_use_id(tool_call_id)
                    .content(ToolResultContentBlock::Text(text.into()));
                for shown in &split.shown {
                    result = result.content(match file_block(shown, &mut names)? {
                        FileBlock::Image(image) => ToolResultContentBlock::Image(image),
                        FileBlock::Document(document) => ToolResultContentBlock::Document(document),
                    });
                }
                let block = result.build().map_err(build_error)?;
                (ConversationRole::User, vec![ContentBlock::ToolResult(block)])
            }
        };
        // Bedrock rejects empty content, so a message with nothing to say is left out.
        if blocks.is_empty() {
            continue;
        }
        let blocks = blocks.into_iter().map(|block| (block, index < lasting_count));
        match turns.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => turns.push((role, blocks.collect())),
        }
    }
    for (role, content) in &mut turns {
        if *role == ConversationRole::User {
            // The sort is stable, so the results keep their order, and so does the text.
            content.sort_by_key(|(block, _)| !matches!(block, ContentBlock::ToolResult(_)));
        }
    }
    // The moving cache point: after the last block the next call will repeat.
    let breakpoint = turns.iter().enumerate().rev().find_map(|(index, (_, content))| {
        content.iter().rposition(|(_, lasting)| *lasting).map(|block| (index, block))
    });
    let mut messages = Vec::with_capacity(turns.len());
    for (index, (role, content)) in turns.into_iter().enumerate() {
        let mut content: Vec<ContentBlock> = content.into_iter().map(|(block, _)| block).collect();
        if let Some((_, block)) = breakpoint.filter(|(at, _)| *at == index && cache.points.messages) {
            content.insert(block + 1, ContentBlock::CachePoint(cache.block()?));
        }
        messages.push(wire::Message::builder().role(role).set_content(Some(content)).build().map_err(build_error)?);
    }

    let mut tools = Vec::with_capacity(request.tools.len() + 1);
    for tool in request.tools.iter() {
        tools.push(tool_spec(&tool.name, &tool.description, &tool.parameters)?);
    }
    let mut tool_choice = None;
    if let Some(JsonSchemaFormat { name, schema }) = &request.response_format {
        // The reply could not tell the two apart.
        if request.tools.iter().any(|tool| &tool.name == name) {
            return Err(ModelError::Config(format!(
                "response format {name:?} has the same name as one of the request's tools"
            )));
        }
        tools.push(tool_spec(name, STRUCTURED_TOOL_DESCRIPTION, schema)?);
        tool_choice =
            Some(wire::ToolChoice::Tool(SpecificToolChoice::builder().name(name).build().map_err(build_error)?));
    }
    if tools.is_empty() {
        let open = serde_json::json!({"type": "object"});
        for name in history_tools {
            tools.push(tool_spec(name, HISTORY_TOOL_DESCRIPTION, &open)?);
        }
    }
    if !tools.is_empty() && cache.points.tools {
        tools.push(Tool::CachePoint(cache.block()?));
    }
    let tool_config = if tools.is_empty() {
        None
    } else {
        Some(
            ToolConfiguration::builder()
                .set_tools(Some(tools))
                .set_tool_choice(tool_choice)
                .build()
                .map_err(build_error)?,
        )
    };

    let mut system = Vec::with_capacity(3);
    if !request.system.trim().is_empty() {
        system.push(SystemContentBlock::Text(request.system.clone()));
        if cache.points.system {
            system.push(SystemContentBlock::CachePoint(cache.block()?));
        }
    }
    if !request.system_tail.trim().is_empty() {
        system.push(SystemContentBlock::Text(request.system_tail.clone()));
    }
    let system = (!system.is_empty()).then_some(system);
    let inference = InferenceConfiguration::builder().max_tokens(i32::try_from(max_tokens).unwrap_or(i32::MAX)).build();
    Ok(WireRequest { system, messages, tool_config, inference })
}

/// The cache points one request carries: where the model takes them, and for how long.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Marks {
    pub(super) points: CachePoints,
    pub(super) one_hour: bool,
}

impl Marks {
    /// For `model` under `cache`: none when caching is off or the model is not known to take them.
    pub(super) fn of(model: &str, cache: &PromptCache) -> Marks {
        if !cache.enabled() {
            return Marks::default();
        }
        let points = bedrock_cache_points(model);
        Marks { points, one_hour: points.one_hour && cache.ttl == CacheTtl::OneHour }
    }

    fn block(&self) -> Result<CachePointBlock, ModelError> {
        let ttl = self.one_hour.then_some(WireTtl::OneHour);
        CachePointBlock::builder().r#type(CachePointType::Default).set_ttl(ttl).build().map_err(build_error)
    }
}

/// A file as Converse takes it, in a message or in a tool result.
enum FileBlock {
    Image(ImageBlock),
    Document(DocumentBlock),
}

fn file_block(shown: &Shown<'_>, names: &mut DocumentNames) -> Result<FileBlock, ModelError> {
    let bytes = Blob::new(shown.bytes.to_vec());
    let media_type = shown.file.media_type;
    Ok(if media_type.is_image() {
        let image =
            ImageBlock::builder().format(ImageFormat::from(media_type.format())).source(ImageSource::Bytes(bytes));
        FileBlock::Image(image.build().map_err(build_error)?)
    } else {
        let document = DocumentBlock::builder()
            .format(DocumentFormat::from(media_type.format()))
            .name(names.name(&shown.file.path))
            .source(DocumentSource::Bytes(bytes));
        FileBlock::Document(document.build().map_err(build_error)?)
    })
}

/// The names of a request's documents, which Converse wants unique.
#[derive(Default)]
struct DocumentNames(HashSet<String>);

impl DocumentNames {
    /// A name made of the file's name, with ` (2)`, ` (3)`… after one already used.
    fn name(&mut self, path: &str) -> String {
        let base = document_name(file_name(path));
        let mut name = base.clone();
        for n in 2.. {
            if self.0.insert(name.clone()) {
                break;
            }
            name = format!("{base} ({n})");
        }
        name
    }
}

/// A file's name as Converse allows a document's: ASCII letters and digits, single spaces, hyphens,
/// parentheses and square brackets; its extension dropped, anything else a hyphen, never empty.
fn document_name(file: &str) -> String {
    let stem = match file.rsplit_once('.') {
        Some((stem, extension)) if !stem.is_empty() && extension.eq_ignore_ascii_case("pdf") => stem,
        _ => file,
    };
    let mut name = String::new();
    for c in stem.chars() {
        let c = match c {
            c if c.is_ascii_alphanumeric() || matches!(c, '-' | '(' | ')' | '[' | ']') => c,
            c if c.is_whitespace() => ' ',
            _ => '-',
        };
        if c == ' ' && (name.is_empty() || name.ends_with(' ')) {
            continue;
        }
        if name.len() == MAX_DOCUMENT_NAME {
            break;
        }
        name.push(c);
    }
    match name.trim_end() {
        "" => "document".to_owned(),
        trimmed => trimmed.to_owned(),
    }
}

pub(super) fn tool_spec(name: &str, description: &str, schema: &Value) -> Result<Tool, ModelError> {
    let mut spec = ToolSpecification::builder().name(name).input_schema(ToolInputSchema::Json(to_document(schema)));
    // Bedrock rejects an empty description; none at all is allowed.
    if !description.trim().is_empty() {
        spec = spec.description(description);
    }
    Ok(Tool::ToolSpec(spec.build().map_err(build_error)?))
}

/// Bedrock rejects blank text blocks.
pub(super) fn text_block(text: &str) -> Option<ContentBlock> {
    (!text.trim().is_empty()).then(|| ContentBlock::Text(text.to_owned()))
}

/// `toolUse.input` must be an object; arguments from elsewhere (such as an unparseable string
/// another provider produced) are wrapped so the history stays valid and nothing is lost.
pub(super) fn tool_input(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::Null => Value::Object(Map::new()),
        other => serde_json::json!({ "raw_arguments": other }),
    }
}

/// JSON to the SDK's document type. Depth is bounded by where the value came from (serde_json
/// parses at most 128 levels).
pub(super) fn to_document(value: &Value) -> Document {
    match value {
        Value::Null => Document::Null,
        Value::Bool(flag) => Document::Bool(*flag),
        Value::Number(number) => Document::Number(if let Some(n) = number.as_u64() {
            Number::PosInt(n)
        } else if let Some(n) = number.as_i64() {
            Number::NegInt(n)
        } else {
            Number::Float(number.as_f64().unwrap_or(0.0))
        }),
        Value::String(text) => Document::String(text.clone()),
        Value::Array(items) => Document::Array(items.iter().map(to_document).collect()),
        Value::Object(fields) => {
            Document::Object(fields.iter().map(|(key, value)| (key.clone(), to_document(value))).collect())
        }
    }
}

/// The SDK's document type to JSON. The SDK parses documents at most 256 levels deep; a number JSON
/// cannot hold (NaN, infinity) becomes null.
pub(super) fn from_document(document: Document) -> Value {
    match document {
        Document::Null => Value::Null,
        Document::Bool(flag) => Value::Bool(flag),
        Document::Number(Number::PosInt(n)) => Value::from(n),
        Document::Number(Number::NegInt(n)) => Value::from(n),
        Document::Number(Number::Float(f)) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        Document::String(text) => Value::String(text),
        Document::Array(items) => Value::Array(items.into_iter().map(from_document).collect()),
        Document::Object(fields) => {
            Value::Object(fields.into_iter().map(|(key, value)| (key, from_document(value))).collect())
        }
    }
}
