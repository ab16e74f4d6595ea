//! Experts: remote MCP servers reached over Streamable HTTP (a Lambda cannot keep stdio servers).
//!
//! [`load_experts`] reads which experts a tenant may use, [`McpClient`] talks to one of them, and
//! [`ToolNamespace`] offers their tools to the model under names every provider accepts.
//! A bad or unreachable expert is logged and left out; it never fails a turn.
//!
//! [`McpExperts`] puts these together as `agent-core`'s experts port, and [`AwsSecretResolver`]
//! resolves secret references on Secrets Manager and SSM. An expert may serve MCP 2026-07-28
//! (stateless) or a 2025 revision (with the `initialize` handshake): the client negotiates which.
//! [`ExpertLists`] keeps experts' tool and prompt lists across turns as their servers allow, tenants
//! apart; [`input`] makes an expert's request for the user's input into questions, and back.

pub mod aws;
pub mod cache;
pub mod client;
pub mod config;
pub mod input;
pub mod names;
pub mod secrets;
pub mod session;

pub use aws::{
    check_scope, in_tenant_namespace, AwsSecretResolver, SECRET_CACHE_TTL, TENANT_PARAMETER_PREFIX,
    TENANT_SECRET_PREFIX,
};
pub use cache::{Asker, ExpertLists, ListCache, LIST_CACHE_CAPACITY, MAX_TTL};
pub use client::{
    CacheHint, Called, InputRequired, Listed, McpClient, McpError, McpPrompt, McpPromptArgument, McpTool,
    PromptMessage, PromptRole, Scope, ToolCall, ToolOutcome, STATELESS_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS,
};
pub use config::{
    experts_key, load_experts, ConfigError, Expert, ExpertsConfig, HeaderSource, Origin, ServerConfig,
    EXPERTS_CONFIG_ENV,
};
pub use names::{ExpertTool, ToolNamespace, MAX_TOOL_NAME, TOOL_SEPARATOR};
pub use secrets::{select_json_key, EnvSecretResolver, SecretError, SecretRef, SecretResolver, SecretScope};
pub use session::{
    parse_expert_timeout, McpExpertSession, McpExperts, DEFAULT_EXPERT_TIMEOUT, EXPERT_TIMEOUT_ENV, MAX_CONNECT_TIMEOUT,
};
