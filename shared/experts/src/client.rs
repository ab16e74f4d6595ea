//! A client for one expert: the official MCP SDK (`rmcp`) over Streamable HTTP, behind a small API.
//!
//! `rmcp` does the protocol work: `initialize` and `notifications/initialized`, the `Mcp-Session-Id`
//! and `MCP-Protocol-Version` headers, JSON and SSE replies (stray notifications and requests in a
//! stream are handled apart from the awaited response), one transparent re-initialisation when the
//! server answers 404 for an expired session, and `DELETE` on close. This module adds what a turn
//! needs on top: a deadline on every request, version checking, bounded pagination, errors in three
//! kinds, and results flattened to text for the model.
//!
//! Why the SDK rather than a hand-written client: it covers every requirement above, builds on rustls
//! without OpenSSL, and already tracks the spec's next revision (2026-07-28, stateless) that a
//! hand-written client would have to chase. The cost: it brings reqwest 0.13 beside the workspace's
//! 0.12 (a second HTTP client in the binary) and it runs a background task per session.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ContentBlock, GetPromptRequestParams, Implementation,
    PaginatedRequestParams, ProtocolVersion, Role,
};
use rmcp::service::{ClientInitializeError, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use thiserror::Error;

use crate::config::Expert;

/// Protocol versions with the `initialize` handshake over Streamable HTTP, newest first; the first is
/// what we ask for. 2026-07-28 (stateless, no handshake) is not offered yet.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// A guard against a server whose cursors never end.
const MAX_PAGES: usize = 100;

const CLIENT_NAME: &str = "agent-experts";

/// Why a call to an expert failed. The turn goes on without the expert either way; the kind says
/// whether retrying could help.
#[derive(Debug, Error)]
pub enum McpError {
    /// The server answered with a JSON-RPC error.
    #[error("the expert answered error {code}: {message}")]
    Rpc { code: i32, message: String },
    /// The server could not be reached, or the connection broke.
    #[error("the expert could not be reached: {0}")]
    Transport(String),
    /// No answer within the deadline.
    #[error("the expert did not answer within {0:?}")]
    Timeout(Duration),
    /// The server picked a protocol version we do not speak.
    #[error("the expert speaks MCP {0}, which is not supported")]
    UnsupportedVersion(String),
    /// The server broke the protocol (wrong result shape, endless pagination).
    #[error("the expert broke the protocol: {0}")]
    Protocol(String),
}

impl From<ServiceError> for McpError {
    fn from(error: ServiceError) -> Self {
        match error {
            ServiceError::McpError(data) => McpError::Rpc { code: data.code.0, message: data.message.into_owned() },
            ServiceError::Timeout { timeout } => McpError::Timeout(timeout),
            // The innermost errors say what happened (refused, 404); the wrappers name SDK types.
            ServiceError::TransportSend(transport) => McpError::Transport(error_chain(transport.error.as_ref())),
            ServiceError::TransportClosed | ServiceError::Cancelled { .. } => McpError::Transport(error.to_string()),
            other => McpError::Protocol(other.to_string()),
        }
    }
}

impl From<ClientInitializeError> for McpError {
    fn from(error: ClientInitializeError) -> Self {
        match error {
            ClientInitializeError::JsonRpcError(data) => {
                McpError::Rpc { code: data.code.0, message: data.message.into_owned() }
            }
            ClientInitializeError::TransportError { error, context } => {
                McpError::Transport(format!("{context}: {}", error_chain(error.error.as_ref())))
            }
            ClientInitializeError::ConnectionClosed(_) | ClientInitializeError::Cancelled => {
                McpError::Transport(error.to_string())
            }
            other => McpError::Protocol(other.to_string()),
        }
    }
}

/// An error and its sources on one line, as `Display` alone drops causes such as "connection refused".
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A prompt template offered by an expert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPrompt {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub arguments: Vec<McpPromptArgument>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPromptArgument {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptRole {
    User,
    Assistant,
}

/// One message of a rendered prompt, flattened to text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptMessage {
    pub role: PromptRole,
    pub text: String,
}

/// A tool offered by an expert, as the server describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Value,
}

/// A tool's result for the model. `is_error` is the tool failing (the model may fix its call),
/// as opposed to the call failing, which is an [`McpError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    pub is_error: bool,
    pub text: String,
}

/// A live session with one expert. Close it with [`McpClient::close`]; dropping it stops the
/// background task without telling the server.
pub struct McpClient {
    expert: String,
    service: RunningService<RoleClient, ClientConfig>,
    timeout: Duration,
    protocol_version: String,
    instructions: Option<String>,
}

impl McpClient {
    /// Connects and completes the handshake, all within `timeout`, which then bounds every request.
    pub async fn connect(expert: &Expert, timeout: Duration) -> Result<McpClient, McpError> {
        let headers: HashMap<_, _> = expert.headers().iter().cloned().collect();
        let config = StreamableHttpClientTransportConfig::with_uri(expert.url.as_str())
            .custom_headers(headers)
            .reinit_on_expired_session(true)
            .session_recovery_timeout(timeout);
        let transport = StreamableHttpClientTransport::from_config(config);
        // Ask for the newest version that still has a handshake; rmcp's default is the stateless one.
        let info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new(CLIENT_NAME, env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
        let service = match tokio::time::timeout(timeout, info.serve(transport)).await {
            Err(_) => return Err(McpError::Timeout(timeout)),
            Ok(result) => result?,
        };
        let Some(peer) = service.peer_info() else {
            return Err(McpError::Protocol("no initialize result".into()));
        };
        let protocol_version = peer.protocol_version.to_string();
        let instructions = peer.instructions.clone();
        let client = McpClient { expert: expert.name.clone(), service, timeout, protocol_version, instructions };
        if !SUPPORTED_PROTOCOL_VERSIONS.contains(&client.protocol_version.as_str()) {
            let version = client.protocol_version.clone();
            client.close().await;
            return Err(McpError::UnsupportedVersion(version));
        }
        tracing::debug!(expert = %client.expert, version = %client.protocol_version, "connected to expert");
        Ok(client)
    }

    pub fn expert(&self) -> &str {
        &self.expert
    }

    /// The negotiated protocol version.
    pub fn protocol_version(&self) -> &str {
        &self.protocol_version
    }

    /// The server's usage hints from `initialize`, if it gave any.
    pub fn instructions(&self) -> Option<&str> {
        self.instructions.as_deref()
    }

    /// Every prompt, following `nextCursor`.
    pub async fn list_prompts(&self) -> Result<Vec<McpPrompt>, McpError> {
        let (mut prompts, mut pager) = (Vec::new(), Pager::default());
        loop {
            let page = self.request(self.service.list_prompts(Some(pager.params()))).await?;
            prompts.extend(page.prompts.into_iter().map(|p| {
                McpPrompt {
                    name: p.name,
                    title: p.title,
                    description: p.description,
                    arguments: p
                        .arguments
                        .unwrap_or_default()
                        .into_iter()
                        .map(|a| McpPromptArgument {
                            name: a.name,
                            description: a.description,
                            required: a.required.unwrap_or(false),
                        })
                        .collect(),
                }
            }));
            if !pager.advance(page.next_cursor)? {
                return Ok(prompts);
            }
        }
    }

    /// Renders a prompt with its arguments.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: &BTreeMap<String, String>,
    ) -> Result<Vec<PromptMessage>, McpError> {
        let mut params = GetPromptRequestParams::new(name);
        if !arguments.is_empty() {
            params.arguments = Some(arguments.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect());
        }
        let result = self.request(self.service.get_prompt(params)).await?;
        Ok(result
            .messages
            .into_iter()
            .map(|message| PromptMessage {
                role: match message.role {
                    Role::User => PromptRole::User,
                    Role::Assistant => PromptRole::Assistant,
                },
                text: content_text(&message.content),
            })
            .collect())
    }

    /// Every tool, following `nextCursor`.
    pub async fn list_tools(&self) -> Result<Vec<McpTool>, McpError> {
        let (mut tools, mut pager) = (Vec::new(), Pager::default());
        loop {
            let page = self.request(self.service.list_tools(Some(pager.params()))).await?;
            tools.extend(page.tools.into_iter().map(|t| McpTool {
                name: t.name.into_owned(),
                description: t.description.map(|d| d.into_owned()),
                input_schema: Value::Object((*t.input_schema).clone()),
            }));
            if !pager.advance(page.next_cursor)? {
                return Ok(tools);
            }
        }
    }

    /// Calls a tool. Arguments that are not a JSON object (a model's unparsable output) come back as
    /// a tool error for the model to fix, without a round trip.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<ToolOutcome, McpError> {
        let arguments = match arguments {
            Value::Null => None,
            Value::Object(map) => Some(map),
            other => {
                return Ok(ToolOutcome {
                    is_error: true,
                    text: format!("the arguments must be a JSON object, not {other}"),
                })
            }
        };
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments;
        let result = self.request(self.service.call_tool(params)).await?;
        let mut text = result.content.iter().map(content_text).collect::<Vec<_>>().join("\n");
        // A server may put the whole answer in structured content only.
        if text.is_empty() {
            if let Some(structured) = &result.structured_content {
                text = structured.to_string();
            }
        }
        Ok(ToolOutcome { is_error: result.is_error.unwrap_or(false), text })
    }

    /// Ends the session (HTTP `DELETE` with the session id), best effort and within the timeout.
    pub async fn close(self) {
        let expert = self.expert;
        if tokio::time::timeout(self.timeout, self.service.cancel()).await.is_err() {
            tracing::debug!(%expert, "closing the expert session timed out");
        }
    }

    /// One request under the deadline; on timeout the request is dropped, which makes rmcp send
    /// `notifications/cancelled`.
    async fn request<T>(&self, call: impl Future<Output = Result<T, ServiceError>>) -> Result<T, McpError> {
        match tokio::time::timeout(self.timeout, call).await {
            Err(_) => Err(McpError::Timeout(self.timeout)),
            Ok(result) => result.map_err(McpError::from),
        }
    }
}

/// Follows `nextCursor` across pages (each request has its own deadline), refusing endless lists.
#[derive(Default)]
struct Pager {
    cursor: Option<String>,
    pages: usize,
}

impl Pager {
    fn params(&self) -> PaginatedRequestParams {
        PaginatedRequestParams::default().with_cursor(self.cursor.clone())
    }

    /// Takes the page's `nextCursor`; `Ok(true)` when there is another page to fetch.
    fn advance(&mut self, next: Option<String>) -> Result<bool, McpError> {
        self.pages += 1;
        match next {
            // Some servers end with an empty cursor rather than none.
            None => Ok(false),
            Some(next) if next.is_empty() => Ok(false),
            Some(next) if self.cursor.as_ref() == Some(&next) => {
                Err(McpError::Protocol(format!("the server repeated the cursor {next:?}")))
            }
            Some(_) if self.pages >= MAX_PAGES => Err(McpError::Protocol(format!("more than {MAX_PAGES} pages"))),
            Some(next) => {
                self.cursor = Some(next);
                Ok(true)
            }
        }
    }
}

/// Text of one content block. Other kinds are named rather than dropped, so the model knows
/// something was there; embedded text resources are inlined.
fn content_text(block: &ContentBlock) -> String {
    // Read through JSON: the wire shape is the MCP spec's, steadier than the SDK's Rust types.
    let value = serde_json::to_value(block).unwrap_or(Value::Null);
    let field = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    match value.get("type").and_then(Value::as_str) {
        Some("text") => field(&value, "text").unwrap_or_default(),
        Some("resource") => {
            let resource = value.get("resource").cloned().unwrap_or(Value::Null);
            match field(&resource, "text") {
                Some(text) => text,
                None => format!("[binary resource omitted: {}]", field(&resource, "uri").unwrap_or_default()),
            }
        }
        Some("resource_link") => format!("[resource link: {}]", field(&value, "uri").unwrap_or_default()),
        Some(kind) => {
            format!("[{kind} content omitted: {}]", field(&value, "mimeType").unwrap_or_else(|| "unknown".into()))
        }
        None => "[unreadable content omitted]".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattens_content_blocks() {
        let block = |json: Value| serde_json::from_value::<ContentBlock>(json).unwrap();
        assert_eq!(content_text(&block(serde_json::json!({"type": "text", "text": "hi"}))), "hi");
        assert_eq!(
            content_text(&block(serde_json::json!({"type": "image", "data": "AA==", "mimeType": "image/png"}))),
            "[image content omitted: image/png]"
        );
        assert_eq!(
            content_text(&block(serde_json::json!({"type": "resource",
                "resource": {"uri": "file:///a", "text": "inline"}}))),
            "inline"
        );
        assert_eq!(
            content_text(&block(serde_json::json!({"type": "resource_link", "uri": "file:///b", "name": "b"}))),
            "[resource link: file:///b]"
        );
    }

    #[test]
    fn maps_rpc_errors() {
        let error = McpError::from(ServiceError::McpError(rmcp::ErrorData::invalid_params("bad", None)));
        assert!(matches!(error, McpError::Rpc { code: -32602, ref message } if message == "bad"));
    }
}
