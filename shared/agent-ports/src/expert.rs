//! The experts port: remote MCP servers whose prompts and tools the planner strategy uses.
//! The core only sees this trait; `shared/experts` implements it over MCP Streamable HTTP.
//!
//! A tool call may need the user's input before it can finish (MCP 2026-07-28's input-required
//! result with an elicitation): the call then comes back as [`ExpertCallOutcome::NeedsInput`], the
//! planner asks the user, and a later call carries the answers and the expert's state
//! ([`ExpertResume`]). A call may also run as an expert-side task up to [`ExpertToolCall::deadline`].

use std::collections::BTreeMap;
use std::time::Instant;

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

/// One `tools/call`, by the namespaced name [`ExpertSession::tools`] gave the tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpertToolCall {
    pub tool: String,
    pub arguments: serde_json::Value,
    /// How long the call may take when the expert runs it as a task (polled until then, and
    /// cancelled at it); a call answered at once is bounded by the request timeout as ever.
    pub deadline: Option<Instant>,
    /// The user's answers to what the expert asked for on an earlier call with the same tool and
    /// arguments.
    pub resume: Option<ExpertResume>,
}

impl ExpertToolCall {
    pub fn new(tool: impl Into<String>, arguments: serde_json::Value) -> Self {
        Self { tool: tool.into(), arguments, deadline: None, resume: None }
    }
}

/// What a tool call came to.
#[derive(Debug, Clone, PartialEq)]
pub enum ExpertCallOutcome {
    Done(ExpertToolResult),
    /// The expert needs the user's input before it can answer: ask, then call again with
    /// [`ExpertResume`].
    NeedsInput(ExpertInputRequest),
}

/// The questions an expert asks the user (MCP elicitations in form mode), with its opaque state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpertInputRequest {
    pub questions: Vec<ExpertQuestion>,
    /// The expert's `requestState`, echoed back unread with the answers.
    #[serde(default)]
    pub request_state: Option<String>,
}

/// One question: the expert's message and the fields it asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpertQuestion {
    /// The expert's key for this question, which the answer carries back.
    pub key: String,
    pub message: String,
    pub fields: Vec<ExpertInputField>,
}

/// A field of a question (a property of the elicitation's flat schema).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpertInputField {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub required: bool,
    pub kind: InputKind,
    /// The allowed values of an enumerated text field.
    #[serde(default)]
    pub options: Vec<String>,
}

/// The type of a field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    Text,
    Number,
    Integer,
    Boolean,
}

/// The user's answers, by question key, and the expert's state from the request they answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpertResume {
    pub answers: BTreeMap<String, ExpertAnswer>,
    pub request_state: Option<String>,
}

/// The user's answer to one question.
#[derive(Debug, Clone, PartialEq)]
pub enum ExpertAnswer {
    /// The values given, by field name.
    Accept(BTreeMap<String, serde_json::Value>),
    /// The user said no.
    Decline,
    /// The user dismissed the question.
    Cancel,
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
    async fn call_tool(&self, call: ExpertToolCall) -> Result<ExpertCallOutcome, ExpertError>;
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

    async fn call_tool(&self, call: ExpertToolCall) -> Result<ExpertCallOutcome, ExpertError> {
        Err(ExpertError::UnknownTool(call.tool))
    }

    async fn close(&self) {}
}
