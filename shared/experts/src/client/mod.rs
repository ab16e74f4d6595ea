//! A client for one expert: the official MCP SDK (`rmcp`) over Streamable HTTP, behind a small API.
//!
//! Two eras of the protocol, negotiated as the 2026-07-28 specification says (its backward
//! compatibility with initialization-based versions): the client first sends `server/discover` at
//! 2026-07-28. A server that answers it with that version is spoken to statelessly: every request is
//! one self-contained POST with its `_meta` envelope (protocol version, client info and
//! capabilities) and the routing headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`), with no
//! `initialize` and no `Mcp-Session-Id`. A server that refuses the probe as a pre-2026 server does
//! (an HTTP 4xx or a JSON-RPC error that is not a 2026 rejection) gets the `initialize` handshake at
//! 2025-11-25 and may pick 2025-06-18 or 2025-03-26, exactly as before: session id, one transparent
//! re-initialisation when the server answers 404 for an expired session, `DELETE` on close.
//!
//! `rmcp` 3.11 does this protocol work (the probe and the fallback, the envelope and the headers, JSON
//! and SSE replies, the result kinds of 2026: complete, input-required and task). This module adds
//! what a turn needs on top: a deadline on every request, version checking, bounded pagination with
//! the lists' cache hints (`ttlMs`, `cacheScope`) merged over the pages, tool calls that may run as
//! tasks (`call`), errors in three kinds, and results flattened to text for the model.
//!
//! Why the SDK rather than a hand-written client: it covers every requirement above, builds on rustls
//! without OpenSSL, and tracks the revisions as they come. The cost: it brings reqwest 0.13 beside
//! the workspace's 0.12 (a second HTTP client in the binary) and it runs a background task per
//! session.

mod call;
mod content;
mod legacy_servers;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::time::Duration;

use rmcp::model::{
    CacheScope, ClientCapabilities, ClientConfig, GetPromptRequestParams, Implementation, PaginatedRequestParams,
    ProtocolVersion, Role,
};
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceError};
use serde_json::Value;
use thiserror::Error;

use crate::config::Expert;
pub use call::{Called, InputRequired, ToolCall};
use content::content_text;

/// The stateless revision, which the client asks for first.
pub const STATELESS_PROTOCOL_VERSION: &str = "2026-07-28";

/// Protocol versions we speak, newest first: 2026-07-28 without a handshake, then the versions with
/// the `initialize` handshake (the first of them is what the fallback asks for).
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] =
    &[STATELESS_PROTOCOL_VERSION, "2025-11-25", "2025-06-18", "2025-03-26"];

/// A guard against a server whose cursors never end.
const MAX_PAGES: usize = 100;

const CLIENT_NAME: &str = "agent-experts";

/// The extension (SEP-2663) under which a 2026 server may answer a `tools/call` with a task.
const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

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
            // Neither era answered: what the handshake said is the telling part.
            ClientInitializeError::LegacyFallbackFailed { fallback, .. } => McpError::from(*fallback),
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

/// Who may reuse a listed result (2026-07-28's `cacheScope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Anyone with the same request: it does not depend on who asks.
    Public,
    /// Only the same authorization context.
    Private,
}

/// How long a list may be reused, as the server said; `ttl: None` is "not at all" (a 2025 server,
/// or a 2026 one that gave no hint). Merged over a list's pages: the shortest time, and private if
/// any page was (or any page left the scope out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheHint {
    pub ttl: Option<Duration>,
    pub scope: Scope,
}

impl CacheHint {
    const NONE: CacheHint = CacheHint { ttl: None, scope: Scope::Private };

    fn of_page(ttl_ms: Option<u64>, scope: Option<CacheScope>) -> CacheHint {
        CacheHint {
            ttl: ttl_ms.map(Duration::from_millis),
            scope: match scope {
                Some(CacheScope::Public) => Scope::Public,
                _ => Scope::Private,
            },
        }
    }

    fn merge(self, page: CacheHint) -> CacheHint {
        CacheHint {
            ttl: self.ttl.zip(page.ttl).map(|(a, b)| a.min(b)),
            scope: if self.scope == Scope::Public && page.scope == Scope::Public {
                Scope::Public
            } else {
                Scope::Private
            },
        }
    }
}

/// A whole list (every page) with its cache hint.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed<T> {
    pub items: Vec<T>,
    pub cache: CacheHint,
}

/// A live connection to one expert. Close it with [`McpClient::close`]; dropping it stops the
/// background task without telling the server.
pub struct McpClient {
    expert: String,
    service: RunningService<RoleClient, ClientConfig>,
    timeout: Duration,
    protocol_version: String,
    instructions: Option<String>,
}

impl McpClient {
    /// Connects (the `server/discover` probe, and the handshake for a pre-2026 server), all within
    /// `timeout`, which then bounds every request.
    pub async fn connect(expert: &Expert, timeout: Duration) -> Result<McpClient, McpError> {
        let headers: HashMap<_, _> = expert.headers().iter().cloned().collect();
        let config = StreamableHttpClientTransportConfig::with_uri(expert.url.as_str())
            .custom_headers(headers)
            .reinit_on_expired_session(true)
            .session_recovery_timeout(timeout);
        let transport = StreamableHttpClientTransport::from_config(config);
        // Elicitation in form mode (answered across turns, 2026's input-required way) and tasks.
        let capabilities: ClientCapabilities = serde_json::from_value(serde_json::json!({
            "elicitation": {"form": {}},
            "extensions": {TASKS_EXTENSION: {}},
        }))
        .map_err(|error| McpError::Protocol(format!("client capabilities: {error}")))?;
        let info = ClientConfig::new(capabilities, Implementation::new(CLIENT_NAME, env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
        // A server this process found pre-2026 gets the handshake without the probe first: one
        // round trip less per turn. Any failure forgets it, so the next connect probes again.
        let known_legacy = legacy_servers::contains(expert.url.as_str());
        let lifecycle = match known_legacy {
            true => ClientLifecycleMode::Initialize,
            false => ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
            },
        };
        let served = tokio::time::timeout(timeout, info.serve_with_lifecycle(transport, lifecycle)).await;
        let service = match served {
            Ok(Ok(service)) => service,
            Ok(Err(error)) => {
                legacy_servers::forget(expert.url.as_str());
                return Err(error.into());
            }
            Err(_) => {
                legacy_servers::forget(expert.url.as_str());
                return Err(McpError::Timeout(timeout));
            }
        };
        let Some(peer) = service.peer_info() else {
            return Err(McpError::Protocol("no initialize or discover result".into()));
        };
        let protocol_version = peer.protocol_version.to_string();
        let instructions = peer.instructions.clone();
        let client = McpClient { expert: expert.name.clone(), service, timeout, protocol_version, instructions };
        if !SUPPORTED_PROTOCOL_VERSIONS.contains(&client.protocol_version.as_str()) {
            let version = client.protocol_version.clone();
            client.close().await;
            return Err(McpError::UnsupportedVersion(version));
        }
        if !client.is_stateless() && !known_legacy {
            legacy_servers::remember(expert.url.as_str());
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

    /// Whether the expert is spoken to statelessly (2026-07-28: no handshake, no session).
    pub fn is_stateless(&self) -> bool {
        self.protocol_version == STATELESS_PROTOCOL_VERSION
    }

    /// The server's usage hints from `initialize` or `server/discover`, if it gave any.
    pub fn instructions(&self) -> Option<&str> {
        self.instructions.as_deref()
    }

    /// Every prompt, following `nextCursor`.
    pub async fn list_prompts(&self) -> Result<Vec<McpPrompt>, McpError> {
        Ok(self.list_prompts_cacheable().await?.items)
    }

    /// Every prompt, with how long the list may be reused.
    pub async fn list_prompts_cacheable(&self) -> Result<Listed<McpPrompt>, McpError> {
        let (mut prompts, mut pager) = (Vec::new(), Pager::default());
        loop {
            let page = self.request(self.service.list_prompts(Some(pager.params()))).await?;
            pager.hint(CacheHint::of_page(page.ttl_ms, page.cache_scope));
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
                return Ok(Listed { items: prompts, cache: pager.cache() });
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
        Ok(self.list_tools_cacheable().await?.items)
    }

    /// Every tool, with how long the list may be reused.
    pub async fn list_tools_cacheable(&self) -> Result<Listed<McpTool>, McpError> {
        let (mut tools, mut pager) = (Vec::new(), Pager::default());
        loop {
            let page = self.request(self.service.list_tools(Some(pager.params()))).await?;
            pager.hint(CacheHint::of_page(page.ttl_ms, page.cache_scope));
            tools.extend(page.tools.into_iter().map(|t| McpTool {
                name: t.name.into_owned(),
                description: t.description.map(|d| d.into_owned()),
                input_schema: Value::Object((*t.input_schema).clone()),
            }));
            if !pager.advance(page.next_cursor)? {
                return Ok(Listed { items: tools, cache: pager.cache() });
            }
        }
    }

    /// Calls a tool and waits for its result (no task, no input): [`McpClient::call`] with a call
    /// whose every other outcome is an error.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<ToolOutcome, McpError> {
        match self.call(ToolCall::new(name, arguments)).await? {
            Called::Done(outcome) => Ok(outcome),
            Called::InputRequired(_) => {
                Err(McpError::Protocol("the tool asked for input the caller cannot give".into()))
            }
        }
    }

    /// Ends the session (HTTP `DELETE` with the session id, none for a stateless expert), best effort
    /// and within the timeout.
    pub async fn close(self) {
        let expert = self.expert;
        if tokio::time::timeout(self.timeout, self.service.cancel()).await.is_err() {
            tracing::debug!(%expert, "closing the expert session timed out");
        }
    }

    /// One request under the deadline; on timeout the request is dropped, which makes rmcp send
    /// `notifications/cancelled` (or, stateless, close the request's stream).
    async fn request<T>(&self, call: impl Future<Output = Result<T, ServiceError>>) -> Result<T, McpError> {
        match tokio::time::timeout(self.timeout, call).await {
            Err(_) => Err(McpError::Timeout(self.timeout)),
            Ok(result) => result.map_err(McpError::from),
        }
    }
}

/// Follows `nextCursor` across pages (each request has its own deadline), refusing endless lists,
/// and merges the pages' cache hints.
#[derive(Default)]
struct Pager {
    cursor: Option<String>,
    pages: usize,
    cache: Option<CacheHint>,
}

impl Pager {
    fn params(&self) -> PaginatedRequestParams {
        PaginatedRequestParams::default().with_cursor(self.cursor.clone())
    }

    fn hint(&mut self, page: CacheHint) {
        self.cache = Some(self.cache.map_or(page, |merged| merged.merge(page)));
    }

    fn cache(&self) -> CacheHint {
        self.cache.unwrap_or(CacheHint::NONE)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_rpc_errors() {
        let error = McpError::from(ServiceError::McpError(rmcp::ErrorData::invalid_params("bad", None)));
        assert!(matches!(error, McpError::Rpc { code: -32602, ref message } if message == "bad"));
    }

    #[test]
    fn cache_hints_merge_to_the_shortest_and_the_narrowest() {
        let page = |ttl: Option<u64>, scope| CacheHint::of_page(ttl, scope);
        let mut pager = Pager::default();
        assert_eq!(pager.cache(), CacheHint::NONE, "no page, no reuse");
        pager.hint(page(Some(60_000), Some(CacheScope::Public)));
        pager.hint(page(Some(5_000), Some(CacheScope::Public)));
        assert_eq!(pager.cache(), CacheHint { ttl: Some(Duration::from_secs(5)), scope: Scope::Public });
        pager.hint(page(Some(9_000), Some(CacheScope::Private)));
        assert_eq!(pager.cache().scope, Scope::Private, "one private page makes the list private");
        pager.hint(page(None, Some(CacheScope::Public)));
        assert_eq!(pager.cache().ttl, None, "a page without a ttl makes the list not reusable");
        // A scope left out is private: reuse is never wider than the server said.
        assert_eq!(page(Some(1), None).scope, Scope::Private);
    }
}
