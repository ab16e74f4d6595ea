//! Images and PDFs shown to the model (issue 37), through the compiled functions against moto and
//! the scripted model server: what each provider is sent (`providers`), a picture a skill's script
//! made in the sandbox (`slides`), the bounds of one request (`many`), what is stored and read
//! (`storage`), and hostile files (`hostile`). This file holds what they share: the providers'
//! settings, uploads and turns, and the files a request carried, decoded.

mod fixtures;
mod hostile;
mod many;
mod providers;
mod slides;
mod storage;

use base64::Engine;
use local_stack::lambda::Function;
use local_stack::stack::{sample_event, status_and_body, turn_event, Stack};
use serde_json::{json, Value};

/// The model providers of `LLM_PROVIDER`, each reached at the scripted server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    OpenAi,
    Anthropic,
    Bedrock,
}

/// A Claude model on Bedrock: Converse takes its images and PDFs.
pub const BEDROCK_MODEL: &str = "us.anthropic.claude-sonnet-4-20250514-v1:0";

impl Provider {
    /// The function's settings that make it call this provider at `stack`'s model server.
    pub fn env(self, stack: &Stack) -> Vec<(&'static str, String)> {
        match self {
            // The stack's default.
            Provider::OpenAi => vec![("LLM_PROVIDER", "openai".into())],
            Provider::Anthropic => vec![
                ("LLM_PROVIDER", "anthropic".into()),
                ("LLM_MODEL", "claude-sonnet-4-20250514".into()),
                ("LLM_BASE_URL", stack.model.endpoint()),
            ],
            Provider::Bedrock => vec![
                ("LLM_PROVIDER", "bedrock".into()),
                ("LLM_MODEL", BEDROCK_MODEL.into()),
                ("LLM_BASE_URL", String::new()),
                ("LLM_API_KEY", String::new()),
                ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", stack.model.endpoint()),
            ],
        }
    }

    /// Whether the scripted server received a request at `path` for this provider.
    pub fn serves(self, path: &str) -> bool {
        match self {
            Provider::OpenAi => path.ends_with("/chat/completions"),
            Provider::Anthropic => path.ends_with("/v1/messages"),
            Provider::Bedrock => path.starts_with("/model/") && path.ends_with("/converse"),
        }
    }
}

/// Starts http-turn with `provider` and `extra` settings.
pub async fn http(stack: &Stack, provider: Provider, extra: &[(&str, &str)]) -> Function {
    let env = provider.env(stack);
    let mut env: Vec<(&str, &str)> = env.iter().map(|(key, value)| (*key, value.as_str())).collect();
    env.extend_from_slice(extra);
    stack.http(&env).await
}

/// `PUT /sessions/{session}/uploads/{name}` by `user` with `bytes` as its body, as API Gateway
/// hands a binary body over (base64).
pub fn upload_event(user: &str, session: &str, name: &str, bytes: &[u8]) -> Value {
    let mut event = sample_event("http-turn.json");
    let raw = format!("/sessions/{session}/uploads/{name}");
    event["routeKey"] = json!("PUT /sessions/{session_id}/uploads/{proxy+}");
    event["requestContext"]["routeKey"] = event["routeKey"].clone();
    event["rawPath"] = json!(raw);
    event["requestContext"]["http"]["path"] = json!(raw);
    event["requestContext"]["http"]["method"] = json!("PUT");
    event["pathParameters"] = json!({ "session_id": session, "proxy": name });
    event["headers"]["content-type"] = json!("application/octet-stream");
    if let Some(headers) = event["headers"].as_object_mut() {
        headers.remove("content-length");
    }
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = json!(user);
    event["isBase64Encoded"] = json!(true);
    event["body"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
    event
}

/// Uploads `bytes` as `name` to `user`'s `session`: the upload's id (its SHA-256).
pub async fn upload(function: &Function, user: &str, session: &str, name: &str, bytes: &[u8]) -> String {
    let (status, body) = status_and_body(&function.call(upload_event(user, session, name, bytes)).await);
    assert_eq!(status, 201, "{body}");
    body["upload"].as_str().expect("the upload's id").to_owned()
}

/// Runs one turn of `user` in `session` with `body`: its status and answer.
pub async fn turn(function: &Function, user: &str, session: &str, body: Value) -> (u16, Value) {
    status_and_body(&function.call(turn_event(Some(user), session, body)).await)
}

/// A file a request carried with its bytes, in any provider's format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// `image/jpeg`, `application/pdf`, ...
    pub media_type: String,
    /// An Anthropic or Bedrock `document` block, or an OpenAI `file` part.
    pub document: bool,
    pub bytes: Vec<u8>,
}

/// Every file a request's messages carried, in order: OpenAI's `image_url` and `file` parts (data
/// URLs), Anthropic's `image` and `document` blocks (base64 sources, in tool results too) and
/// Bedrock's `image` and `document` blocks (base64 bytes, in tool results too).
pub fn sent_files(request: &Value) -> Vec<Sent> {
    let mut sent = Vec::new();
    collect_files(&request["messages"], &mut sent);
    sent
}

fn collect_files(value: &Value, sent: &mut Vec<Sent>) {
    match value {
        Value::Array(items) => items.iter().for_each(|item| collect_files(item, sent)),
        Value::Object(fields) => match file_of(value) {
            Some(file) => sent.push(file),
            None => fields.values().for_each(|field| collect_files(field, sent)),
        },
        _ => {}
    }
}

fn file_of(block: &Value) -> Option<Sent> {
    let decode = |text: &Value| {
        base64::engine::general_purpose::STANDARD.decode(text.as_str().expect("base64 text")).expect("valid base64")
    };
    let data_url = |url: &Value, document: bool| {
        let (head, data) = url.as_str().expect("a data URL").split_once(',').expect("a data URL");
        let media_type = head.strip_prefix("data:").and_then(|rest| rest.strip_suffix(";base64")).expect("base64");
        Some(Sent { media_type: media_type.to_owned(), document, bytes: decode(&json!(data)) })
    };
    match block["type"].as_str() {
        Some("image_url") => return data_url(&block["image_url"]["url"], false),
        Some("file") => return data_url(&block["file"]["file_data"], true),
        Some(kind @ ("image" | "document")) => {
            let source = &block["source"];
            assert_eq!(source["type"], "base64", "{block}");
            let media_type = source["media_type"].as_str().expect("a media type").to_owned();
            return Some(Sent { media_type, document: kind == "document", bytes: decode(&source["data"]) });
        }
        _ => {}
    }
    for (key, document) in [("image", false), ("document", true)] {
        if let Some(inner) = block.get(key).filter(|inner| inner["source"]["bytes"].is_string()) {
            let format = inner["format"].as_str().expect("a format");
            let media_type = if document { format!("application/{format}") } else { format!("image/{format}") };
            return Some(Sent { media_type, document, bytes: decode(&inner["source"]["bytes"]) });
        }
    }
    None
}

/// Every text a request's messages carried (message contents, text parts and blocks, tool
/// results), joined by newlines.
pub fn texts(request: &Value) -> String {
    fn collect(value: &Value, key: Option<&str>, out: &mut Vec<String>) {
        match value {
            Value::String(text) if matches!(key, Some("text" | "content")) => out.push(text.clone()),
            Value::Array(items) => items.iter().for_each(|item| collect(item, key, out)),
            Value::Object(fields) => fields.iter().for_each(|(name, field)| collect(field, Some(name), out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    collect(&request["messages"], None, &mut out);
    out.join("\n")
}

/// The hex SHA-256 of `bytes`: the name a shown file is stored under.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}
