//! The experts port: remote MCP servers whose prompts and tools the planner strategy uses.
//! The core only sees this trait; `shared/experts` implements it over MCP Streamable HTTP.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ids::UserId;
use crate::message::ToolSpec;

/// An expert that answered when the turn opened its connections.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpertInfo {
    pub name: String,
    pub description: String,
}

/// A prompt an expert offers (`prompts/list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptInfo {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub arguments: Vec<PromptArgument>,
}

/// A declared argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptArgument {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub required: bool,
}

/// One message of a fetched prompt (`prompts/get`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptText {
    pub role: String,
    pub text: String,
}

/// The result of an expert's tool (`tools/call`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpertToolResult {
    /// The server's `isError`.
    pub is_error: bool,
    pub text: String,
}

/// An expert call that failed; the message is safe to show the model.
#[derive(Debug, Clone, Error)]
pub enum ExpertError {
    #[error("the expert `{0}` is not available")]
    UnknownExpert(String),
    #[error("the tool `{0}` is not offered by any expert")]
    UnknownTool(String),
    #[error("the expert did not answer in time")]
    Timeout,
    #[error("the expert failed: {0}")]
    Failed(String),
    /// The expert refused the call's arguments (JSON-RPC invalid params, or an SDK's equivalent):
    /// for a prompt, a required argument is missing or a value is not accepted, which the user
    /// may be able to fix. The text is the whole message, the server's words included.
    #[error("{0}")]
    InvalidParams(String),
}

/// Opens the tenant's experts for one turn.
#[async_trait]
pub trait Experts: Send + Sync {
    /// Loads the deployment's and the tenant's expert configuration and connects to every expert
    /// concurrently. An expert that is misconfigured or unreachable is logged and left out.
    async fn open(&self, user: &UserId) -> Box<dyn ExpertSession>;
}

/// The experts of one turn, with their connections and a per-invocation cache of tool lists.
#[async_trait]
pub trait ExpertSession: Send + Sync {
    /// The experts that answered, in a stable order.
    fn experts(&self) -> Vec<ExpertInfo>;
    async fn list_prompts(&self, expert: &str) -> Result<Vec<PromptInfo>, ExpertError>;
    async fn get_prompt(
        &self,
        expert: &str,
        prompt: &str,
        arguments: &BTreeMap<String, String>,
    ) -> Result<Vec<PromptText>, ExpertError>;
    /// The expert's tools as offered to the model: names are namespaced (`{expert}__{tool}`).
    async fn tools(&self, expert: &str) -> Result<Vec<ToolSpec>, ExpertError>;
    /// Calls a tool by the namespaced name `tools` gave it.
    async fn call_tool(&self, tool: &str, arguments: serde_json::Value) -> Result<ExpertToolResult, ExpertError>;
    /// Ends the MCP sessions (best effort).
    async fn close(&self);
}

/// The experts of a deployment that configured none.
pub struct NoExperts;

#[async_trait]
impl ExpertSession for NoExperts {
    fn experts(&self) -> Vec<ExpertInfo> {
        Vec::new()
    }

    async fn list_prompts(&self, expert: &str) -> Result<Vec<PromptInfo>, ExpertError> {
        Err(ExpertError::UnknownExpert(expert.to_owned()))
    }

    async fn get_prompt(
        &self,
        expert: &str,
        _prompt: &str,
        _arguments: &BTreeMap<String, String>,
    ) -> Result<Vec<PromptText>, ExpertError> {
        Err(ExpertError::UnknownExpert(expert.to_owned()))
    }

    async fn tools(&self, expert: &str) -> Result<Vec<ToolSpec>, ExpertError> {
        Err(ExpertError::UnknownExpert(expert.to_owned()))
    }

    async fn call_tool(&self, tool: &str, _arguments: serde_json::Value) -> Result<ExpertToolResult, ExpertError> {
        Err(ExpertError::UnknownTool(tool.to_owned()))
    }

    async fn close(&self) {}
}
