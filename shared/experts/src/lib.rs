//! Experts: remote MCP servers reached over Streamable HTTP (a Lambda cannot keep stdio servers).
//!
//! [`load_experts`] reads which experts a tenant may use, [`McpClient`] talks to one of them, and
//! [`ToolNamespace`] offers their tools to the model under names every provider accepts.
//! A bad or unreachable expert is logged and left out; it never fails a turn.

pub mod client;
pub mod config;
pub mod names;
pub mod secrets;

pub use client::{
    McpClient, McpError, McpPrompt, McpPromptArgument, McpTool, PromptMessage, PromptRole, ToolOutcome,
    SUPPORTED_PROTOCOL_VERSIONS,
};
pub use config::{
    experts_key, load_experts, ConfigError, Expert, ExpertsConfig, HeaderSource, Origin, ServerConfig,
    EXPERTS_CONFIG_ENV,
};
pub use names::{ExpertTool, ToolNamespace, MAX_TOOL_NAME, TOOL_SEPARATOR};
pub use secrets::{select_json_key, EnvSecretResolver, SecretError, SecretRef, SecretResolver, SecretScope};
