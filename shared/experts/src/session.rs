//! The experts port of `agent-core` over MCP: [`McpExperts`] opens a turn's experts, and
//! [`McpExpertSession`] holds their connections, their tool lists (per session, and across turns in
//! the process-wide [`ExpertLists`] as far as the servers allow), and the tool names handed to the
//! model. A tool call may come back needing the user's input (the questions of an input-required
//! result), and may run as an expert-side task up to the call's deadline.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_ports::expert::{
    ExpertCallOutcome, ExpertError, ExpertInfo, ExpertSession, ExpertToolCall, ExpertToolResult, Experts,
    PromptArgument, PromptInfo, PromptText,
};
use agent_ports::{ObjectStore, ToolSpec, UserId};
use async_trait::async_trait;
use futures::future::join_all;
use tokio::sync::{OnceCell, RwLock, RwLockReadGuard};

use crate::aws::AwsSecretResolver;
use crate::cache::{Asker, ExpertLists};
use crate::client::{Called, McpClient, McpError, McpPrompt, McpTool, PromptRole, ToolCall};
use crate::config::{load_experts, Expert, EXPERTS_CONFIG_ENV};
use crate::input;
use crate::names::ToolNamespace;
use crate::secrets::SecretResolver;

/// The environment variable bounding every request to an expert, in seconds.
pub const EXPERT_TIMEOUT_ENV: &str = "EXPERT_TIMEOUT_SECS";

/// The request deadline when [`EXPERT_TIMEOUT_ENV`] is unset or invalid.
pub const DEFAULT_EXPERT_TIMEOUT: Duration = Duration::from_secs(20);

/// Connecting (and the handshake) never waits longer than this, whatever the request deadline:
/// an expert that slow to answer is left out rather than holding up the turn.
pub const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest accepted [`EXPERT_TIMEOUT_ENV`]: a Lambda invocation's own limit.
const MAX_EXPERT_TIMEOUT: Duration = Duration::from_secs(900);

/// Reads a request deadline in seconds (fractions allowed); unset, empty or invalid gives the
/// default (invalid is logged), and values are capped at 900 s.
pub fn parse_expert_timeout(raw: Option<&str>) -> Duration {
    let Some(raw) = raw.map(str::trim).filter(|raw| !raw.is_empty()) else {
        return DEFAULT_EXPERT_TIMEOUT;
    };
    match raw.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 => {
            Duration::from_secs_f64(seconds.min(MAX_EXPERT_TIMEOUT.as_secs_f64()))
        }
        _ => {
            tracing::warn!(value = %raw, "ignoring {EXPERT_TIMEOUT_ENV}: not a positive number of seconds");
            DEFAULT_EXPERT_TIMEOUT
        }
    }
}

/// Opens the experts of a turn: the deployment's `EXPERTS_CONFIG` merged with the tenant's
/// `{user}/experts.json`, secrets resolved, every expert connected concurrently.
pub struct McpExperts {
    deployment_config: Option<String>,
    objects: Arc<dyn ObjectStore>,
    resolver: Arc<dyn SecretResolver>,
    timeout: Duration,
    reserved_tools: Vec<String>,
    lists: Arc<ExpertLists>,
}

impl McpExperts {
    /// `deployment_config` is the `EXPERTS_CONFIG` JSON (none: tenants' experts only); `timeout`
    /// bounds every request, and connecting is bounded by the smaller of it and 10 s.
    pub fn new(
        deployment_config: Option<String>,
        objects: Arc<dyn ObjectStore>,
        resolver: Arc<dyn SecretResolver>,
        timeout: Duration,
    ) -> Self {
        Self { deployment_config, objects, resolver, timeout, reserved_tools: Vec::new(), lists: Arc::default() }
    }

    /// Reads `EXPERTS_CONFIG` and `EXPERT_TIMEOUT_SECS` (default 20 s) and resolves secrets with an
    /// [`AwsSecretResolver`] on the default AWS configuration (loaded on the first reference).
    pub fn from_env(objects: Arc<dyn ObjectStore>) -> Self {
        Self::from_env_with_resolver(objects, Arc::new(AwsSecretResolver::from_env()))
    }

    /// [`McpExperts::from_env`] with a resolver the caller shares (and so its cache).
    pub fn from_env_with_resolver(objects: Arc<dyn ObjectStore>, resolver: Arc<dyn SecretResolver>) -> Self {
        Self::new(
            std::env::var(EXPERTS_CONFIG_ENV).ok(),
            objects,
            resolver,
            parse_expert_timeout(std::env::var(EXPERT_TIMEOUT_ENV).ok().as_deref()),
        )
    }

    /// Tool names never handed out to experts' tools, such as the agent's built-in tools.
    pub fn with_reserved_tools<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.reserved_tools = names.into_iter().map(Into::into).collect();
        self
    }

    /// The request deadline.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The lists kept across turns, which this value's sessions share.
    pub fn lists(&self) -> &Arc<ExpertLists> {
        &self.lists
    }

    /// [`Experts::open`] with the concrete session type.
    pub async fn open_session(&self, user: &UserId) -> McpExpertSession {
        let experts =
            load_experts(self.deployment_config.as_deref(), self.objects.as_ref(), user, self.resolver.as_ref()).await;
        let lists = Some((self.lists.clone(), user.to_string()));
        McpExpertSession::connect_with(experts, self.timeout, self.reserved_tools.iter().cloned(), lists).await
    }
}

impl std::fmt::Debug for McpExperts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpExperts")
            .field("deployment_config", &self.deployment_config.as_ref().map(|_| "…"))
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Experts for McpExperts {
    async fn open(&self, user: &UserId) -> Box<dyn ExpertSession> {
        Box::new(self.open_session(user).await)
    }
}

/// One connected expert. The client sits behind a lock only so that `close` can take it: calls
/// share it for reading.
struct Connection {
    info: ExpertInfo,
    expert: Expert,
    client: RwLock<Option<McpClient>>,
    tools: OnceCell<Arc<Vec<McpTool>>>,
    /// Who asks, for the lists kept across turns.
    asker: Option<Asker>,
}

/// The experts of one turn. Tool lists are fetched once per session and expert; tool names are
/// unique across the session's experts.
pub struct McpExpertSession {
    connections: Vec<Connection>,
    namespace: Mutex<ToolNamespace>,
    lists: Option<Arc<ExpertLists>>,
}

impl McpExpertSession {
    /// Connects to every expert concurrently, within the smaller of `timeout` and 10 s each; those
    /// that fail are logged and left out. `timeout` then bounds every request.
    pub async fn connect(experts: Vec<Expert>, timeout: Duration) -> McpExpertSession {
        Self::connect_with(experts, timeout, std::iter::empty::<String>(), None).await
    }

    async fn connect_with<S: Into<String>>(
        experts: Vec<Expert>,
        timeout: Duration,
        reserved: impl IntoIterator<Item = S>,
        lists: Option<(Arc<ExpertLists>, String)>,
    ) -> McpExpertSession {
        let tenant = lists.as_ref().map(|(_, tenant)| tenant.clone());
        let connect_timeout = timeout.min(MAX_CONNECT_TIMEOUT);
        let attempts = join_all(experts.into_iter().map(|expert| async move {
            let result = match tokio::time::timeout(connect_timeout, McpClient::connect(&expert, timeout)).await {
                Err(_) => Err(McpError::Timeout(connect_timeout)),
                Ok(result) => result,
            };
            (expert, result)
        }))
        .await;
        let connections = attempts
            .into_iter()
            .filter_map(|(expert, result)| match result {
                Ok(client) => Some(Connection {
                    info: ExpertInfo {
                        name: expert.name.clone(),
                        description: expert.description.clone().unwrap_or_default(),
                    },
                    asker: tenant.as_deref().map(|tenant| Asker::new(&expert, tenant)),
                    expert,
                    client: RwLock::new(Some(client)),
                    tools: OnceCell::new(),
                }),
                Err(error) => {
                    tracing::warn!(expert = %expert.name, origin = %expert.origin, %error, "leaving the expert out");
                    None
                }
            })
            .collect();
        McpExpertSession {
            connections,
            namespace: Mutex::new(ToolNamespace::with_reserved(reserved)),
            lists: lists.map(|(lists, _)| lists),
        }
    }

    fn connection(&self, expert: &str) -> Result<&Connection, ExpertError> {
        self.connections
            .iter()
            .find(|connection| connection.info.name == expert)
            .ok_or_else(|| ExpertError::UnknownExpert(expert.to_owned()))
    }
}

impl Connection {
    /// The client, shared with other calls; gone once the session is closed.
    async fn client(&self) -> Result<RwLockReadGuard<'_, McpClient>, ExpertError> {
        RwLockReadGuard::try_map(self.client.read().await, Option::as_ref)
            .map_err(|_| ExpertError::UnknownExpert(self.info.name.clone()))
    }
}

/// The model's view of a failed call: timeouts as such, server errors with the server's message,
/// and transport or protocol details (which may name the URL) only in the log.
fn model_error(expert: &str, what: &str, error: McpError) -> ExpertError {
    tracing::warn!(%expert, call = %what, %error, "expert call failed");
    match error {
        McpError::Timeout(_) => ExpertError::Timeout,
        McpError::Rpc { code, message } if refuses_arguments(code, &message) => {
            ExpertError::InvalidParams(format!("{what} was refused (error {code}): {message}"))
        }
        McpError::Rpc { code, message } => ExpertError::Failed(format!("{what} was refused (error {code}): {message}")),
        McpError::Transport(_) => ExpertError::Failed(format!("{what}: the expert could not be reached")),
        McpError::UnsupportedVersion(version) => {
            ExpertError::Failed(format!("{what}: the expert speaks an unsupported MCP version ({version})"))
        }
        McpError::Protocol(_) => ExpertError::Failed(format!("{what}: the expert sent an invalid response")),
    }
}

/// Whether a JSON-RPC error refuses the request's arguments: the spec's invalid params (-32602, also
/// what MCP names for a prompt's missing required arguments), or the Python SDK's answer to missing
/// prompt arguments, which it sends with code 0 and only its message says so.
fn refuses_arguments(code: i32, message: &str) -> bool {
    const INVALID_PARAMS: i32 = -32602;
    code == INVALID_PARAMS || (code == 0 && message.to_ascii_lowercase().contains("missing required argument"))
}

impl std::fmt::Debug for McpExpertSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpExpertSession")
            .field("experts", &self.connections.iter().map(|c| c.info.name.as_str()).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl ExpertSession for McpExpertSession {
    fn experts(&self) -> Vec<ExpertInfo> {
        self.connections.iter().map(|connection| connection.info.clone()).collect()
    }

    async fn list_prompts(&self, expert: &str) -> Result<Vec<PromptInfo>, ExpertError> {
        let connection = self.connection(expert)?;
        let cache = self.lists.as_ref().zip(connection.asker.as_ref());
        let prompts = match cache.and_then(|(lists, asker)| lists.prompts.get(asker)) {
            Some(prompts) => prompts,
            None => {
                let client = connection.client().await?;
                let listed = client
                    .list_prompts_cacheable()
                    .await
                    .map_err(|error| model_error(expert, "prompts/list", error))?;
                match cache {
                    Some((lists, asker)) => lists.prompts.put(asker, listed),
                    None => Arc::new(listed.items),
                }
            }
        };
        Ok(prompts
            .iter()
            .map(|prompt: &McpPrompt| PromptInfo {
                name: prompt.name.clone(),
                description: prompt.description.clone().unwrap_or_default(),
                arguments: prompt
                    .arguments
                    .iter()
                    .cloned()
                    .map(|argument| PromptArgument {
                        name: argument.name,
                        description: argument.description.unwrap_or_default(),
                        required: argument.required,
                    })
                    .collect(),
            })
            .collect())
    }

    async fn get_prompt(
        &self,
        expert: &str,
        prompt: &str,
        arguments: &BTreeMap<String, String>,
    ) -> Result<Vec<PromptText>, ExpertError> {
        let connection = self.connection(expert)?;
        let client = connection.client().await?;
        let messages =
            client.get_prompt(prompt, arguments).await.map_err(|error| model_error(expert, "prompts/get", error))?;
        Ok(messages
            .into_iter()
            .map(|message| PromptText {
                role: match message.role {
                    PromptRole::User => "user".to_owned(),
                    PromptRole::Assistant => "assistant".to_owned(),
                },
                text: message.text,
            })
            .collect())
    }

    async fn tools(&self, expert: &str) -> Result<Vec<ToolSpec>, ExpertError> {
        let connection = self.connection(expert)?;
        // Not cached on failure, so a later call may try again.
        let cache = self.lists.as_ref().zip(connection.asker.as_ref());
        let tools = connection
            .tools
            .get_or_try_init(|| async {
                if let Some(tools) = cache.and_then(|(lists, asker)| lists.tools.get(asker)) {
                    return Ok(tools);
                }
                let client = connection.client().await?;
                let listed =
                    client.list_tools_cacheable().await.map_err(|error| model_error(expert, "tools/list", error))?;
                Ok::<_, ExpertError>(match cache {
                    Some((lists, asker)) => lists.tools.put(asker, listed),
                    None => Arc::new(listed.items),
                })
            })
            .await?;
        let mut namespace = self.namespace.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        Ok(tools.iter().map(|tool| namespace.offer(&connection.expert, tool)).collect())
    }

    async fn call_tool(&self, call: ExpertToolCall) -> Result<ExpertCallOutcome, ExpertError> {
        let tool = call.tool.as_str();
        let target = {
            let namespace = self.namespace.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            namespace.resolve(tool).cloned()
        };
        let target = target.ok_or_else(|| ExpertError::UnknownTool(tool.to_owned()))?;
        let connection = self.connection(&target.expert)?;
        let client = connection.client().await?;
        let mut request = ToolCall::new(target.tool.clone(), call.arguments);
        request.deadline = call.deadline;
        if let Some(resume) = &call.resume {
            request.input_responses = Some(input::responses(&resume.answers));
            request.request_state = resume.request_state.clone();
        }
        let what = format!("tools/call {tool}");
        match client.call(request).await.map_err(|error| model_error(&target.expert, &what, error))? {
            Called::Done(outcome) => {
                Ok(ExpertCallOutcome::Done(ExpertToolResult { is_error: outcome.is_error, text: outcome.text }))
            }
            Called::InputRequired(asked) => match input::questions(asked) {
                Ok(request) => {
                    tracing::info!(expert = %target.expert, %tool, questions = request.questions.len(), "the expert needs the user's input");
                    Ok(ExpertCallOutcome::NeedsInput(request))
                }
                Err(reason) => {
                    tracing::warn!(expert = %target.expert, %tool, %reason, "the expert asked for input that cannot be given");
                    Err(ExpertError::Failed(format!("{what}: {reason}")))
                }
            },
        }
    }

    async fn close(&self) {
        join_all(self.connections.iter().map(|connection| async move {
            // Waits for calls in flight, each bounded by the request deadline.
            let client = connection.client.write().await.take();
            if let Some(client) = client {
                client.close().await;
            }
        }))
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_timeout() {
        assert_eq!(parse_expert_timeout(None), DEFAULT_EXPERT_TIMEOUT);
        assert_eq!(parse_expert_timeout(Some(" ")), DEFAULT_EXPERT_TIMEOUT);
        assert_eq!(parse_expert_timeout(Some("5")), Duration::from_secs(5));
        assert_eq!(parse_expert_timeout(Some("0.5")), Duration::from_millis(500));
        assert_eq!(parse_expert_timeout(Some("1e9")), MAX_EXPERT_TIMEOUT);
        for bad in ["0", "-3", "soon", "NaN", "inf"] {
            assert_eq!(parse_expert_timeout(Some(bad)), DEFAULT_EXPERT_TIMEOUT, "{bad}");
        }
    }

    #[test]
    fn model_errors_keep_transport_details_out() {
        let error = model_error(
            "e",
            "tools/list",
            McpError::Transport("error sending request for url (http://h/mcp?key=s3cr3t)".into()),
        );
        assert!(matches!(&error, ExpertError::Failed(m) if !m.contains("s3cr3t")), "{error}");
        assert!(matches!(model_error("e", "x", McpError::Timeout(Duration::from_secs(1))), ExpertError::Timeout));
        let rpc = model_error("e", "prompts/get", McpError::Rpc { code: -32602, message: "no such prompt".into() });
        assert!(rpc.to_string().contains("no such prompt"), "{rpc}");
    }

    #[test]
    fn refused_arguments_are_told_apart_from_other_refusals() {
        let refused =
            |code: i32, message: &str| model_error("e", "prompts/get", McpError::Rpc { code, message: message.into() });
        let invalid = refused(-32602, "deed must name a deed on record");
        assert!(matches!(&invalid, ExpertError::InvalidParams(m) if m.contains("deed on record")), "{invalid:?}");
        // The Python SDK's code 0 for a prompt called without its required arguments.
        let missing = refused(0, "Missing required arguments: {'deed_type'}");
        assert!(matches!(missing, ExpertError::InvalidParams(_)), "{missing:?}");
        for (code, message) in [(0, "Unknown prompt: x"), (0, "Error rendering prompt x"), (-32603, "Internal error")] {
            assert!(matches!(refused(code, message), ExpertError::Failed(_)), "{code} {message}");
        }
    }
}
