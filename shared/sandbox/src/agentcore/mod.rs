//! The `agentcore` backend: commands run in an Amazon Bedrock AgentCore Code Interpreter session.
//! One interpreter session serves one agent session: its id is kept with the agent session
//! (`ExecOutcome::session`, handed back as `ExecRequest::resume`), checked on every call with
//! `GetCodeInterpreterSession`, and replaced when it has ended or has less of its lifetime left
//! than the command may take (`StartCodeInterpreterSession`; the old one is stopped).
//!
//! Every call carries the whole state, so a session never shows a command what the turn does not
//! have: `writeFiles` puts the workspace, the skills and the ticket under a fresh stage folder in
//! the interpreter's working directory, with `call.json` and the runner (`runner.py`); one
//! `executeCommand` runs the runner, which puts that tree in place of the previous call's, links
//! [`LAYOUT_ROOT`] to it, runs `bash -c` in the workspace within the handler's bounds, kills what
//! the command left running and reports its output and the workspace's files with their sha256;
//! `readFiles` then brings back the new and changed ones, matched by sha256.
//!
//! A file per part: `session` (the interpreter sessions), `exchange` (one call's requests),
//! `call/` (what a call writes and what its report means, without I/O), `fault` (the service's
//! failures); this file holds the settings and the [`Sandbox`] the core calls.

mod call;
mod exchange;
mod fault;
mod session;

use std::time::{Duration, Instant};

use agent_ports::sandbox::{ExecOutcome, ExecRequest, Sandbox, SandboxError, SandboxLayout};
use async_trait::async_trait;
use aws_sdk_bedrockagentcore::config::StalledStreamProtectionConfig;
use aws_sdk_bedrockagentcore::Client;

use self::call::Call;
use self::fault::Failure;
use self::session::Interpreter;
use crate::handler::Limits;

/// The interpreter to use: an id or ARN (`SANDBOX_CODE_INTERPRETER_ID`).
pub const INTERPRETER_ENV: &str = "SANDBOX_CODE_INTERPRETER_ID";
/// The lifetime of a new interpreter session, in seconds (`SANDBOX_SESSION_TIMEOUT_SECONDS`).
pub const SESSION_TIMEOUT_ENV: &str = "SANDBOX_SESSION_TIMEOUT_SECONDS";
/// The AWS-managed interpreter (sandbox network mode, no execution role).
pub const DEFAULT_INTERPRETER: &str = "aws.codeinterpreter.v1";
/// AgentCore's own default lifetime of a session.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(900);
/// AgentCore's bounds on a session's lifetime.
pub const SESSION_TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 60..=28_800;
/// Where the command finds its files: a link to the call's tree (one session is one microVM, so
/// the path is the session's own).
pub const LAYOUT_ROOT: &str = "/tmp/agent";
/// A session is reused only with this much of its lifetime left beyond the command's timeout
/// (the files' transfer and collection).
const SESSION_MARGIN: Duration = Duration::from_secs(30);

/// How the backend uses the service.
#[derive(Debug, Clone)]
pub struct AgentCoreSettings {
    /// The code interpreter's id or ARN.
    pub interpreter: String,
    /// The lifetime of the sessions it starts.
    pub session_timeout: Duration,
    /// The bounds of one command (the handler's).
    pub limits: Limits,
}

impl Default for AgentCoreSettings {
    fn default() -> Self {
        Self {
            interpreter: DEFAULT_INTERPRETER.to_owned(),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            limits: Limits::default(),
        }
    }
}

/// Runs commands in AgentCore Code Interpreter sessions, one per agent session.
pub struct AgentCoreSandbox {
    interpreter: Interpreter,
    settings: AgentCoreSettings,
}

impl AgentCoreSandbox {
    /// A backend over `config` (its endpoint, region and credentials).
    pub fn new(config: aws_sdk_bedrockagentcore::Config, settings: AgentCoreSettings) -> Self {
        // A command's response says nothing until the command ends; the execute tool bounds
        // the whole call instead.
        let config = config.to_builder().stalled_stream_protection(StalledStreamProtectionConfig::disabled()).build();
        let interpreter = Interpreter {
            client: Client::from_conf(config),
            id: settings.interpreter.clone(),
            session_timeout: settings.session_timeout,
        };
        Self { interpreter, settings }
    }

    /// The backend as the environment configures it (see [`AgentCoreSandbox::from_lookup`]).
    pub fn from_env(sdk_config: &aws_config::SdkConfig) -> Result<Self, String> {
        Self::from_lookup(sdk_config, |name| std::env::var(name).ok())
    }

    /// The backend over `sdk_config` (which honours `AWS_ENDPOINT_URL_BEDROCK_AGENTCORE`), with
    /// [`INTERPRETER_ENV`] (default [`DEFAULT_INTERPRETER`]) and [`SESSION_TIMEOUT_ENV`]
    /// (default 900, from 60 to 28,800).
    pub fn from_lookup(
        sdk_config: &aws_config::SdkConfig,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let mut settings = AgentCoreSettings::default();
        if let Some(id) = lookup(INTERPRETER_ENV).map(|id| id.trim().to_owned()).filter(|id| !id.is_empty()) {
            if id.len() > 2048 || id.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(format!("{INTERPRETER_ENV}={id:?} is not a code interpreter id or ARN"));
            }
            settings.interpreter = id;
        }
        if let Some(value) = lookup(SESSION_TIMEOUT_ENV).map(|value| value.trim().to_owned()).filter(|v| !v.is_empty())
        {
            let seconds =
                value.parse::<u64>().ok().filter(|seconds| SESSION_TIMEOUT_RANGE.contains(seconds)).ok_or_else(
                    || format!("{SESSION_TIMEOUT_ENV}={value:?}: expected whole seconds from 60 to 28800"),
                )?;
            settings.session_timeout = Duration::from_secs(seconds);
        }
        Ok(Self::new(aws_sdk_bedrockagentcore::Config::new(sdk_config), settings))
    }

    /// The code interpreter's id or ARN.
    pub fn interpreter(&self) -> &str {
        &self.settings.interpreter
    }
}

#[async_trait]
impl Sandbox for AgentCoreSandbox {
    fn layout(&self) -> SandboxLayout {
        SandboxLayout {
            workspace: format!("{LAYOUT_ROOT}/workspace"),
            skills: format!("{LAYOUT_ROOT}/skills"),
            ticket: format!("{LAYOUT_ROOT}/ticket"),
        }
    }

    fn name(&self) -> &'static str {
        "agentcore"
    }

    async fn execute(&self, request: ExecRequest) -> Result<ExecOutcome, SandboxError> {
        let started = Instant::now();
        let nonce = format!("{:016x}", rand::random::<u64>());
        let call = Call::prepare(&request, LAYOUT_ROOT, &self.settings.limits, &nonce)?;
        // A session shorter-lived than the command is still used when new ones are no longer.
        let need = (request.timeout + SESSION_MARGIN).min(self.settings.session_timeout);
        let (mut session, mut resumed) = self.interpreter.session_for(&request, need).await?;
        loop {
            match self.interpreter.run(&session, &call, started).await {
                Ok(mut outcome) => {
                    outcome.session = Some(session);
                    return Ok(outcome);
                }
                // Nothing ran: the session ended between the check and the files' transfer.
                Err(Failure::Gone(fault)) if resumed => {
                    tracing::info!(sandbox = "agentcore", session = %session, detail = %fault.detail, "the interpreter session has ended; starting another");
                    session = self.interpreter.start(&request).await?;
                    resumed = false;
                }
                Err(Failure::Gone(fault) | Failure::Fault(fault)) => {
                    // A failed call keeps no session with the agent session: one started for it
                    // would only wait for its lifetime's end.
                    if !resumed {
                        self.interpreter.stop_later(&session);
                    }
                    return Err(fault.into_error());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_picks_the_interpreter_and_the_session_lifetime() {
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .http_client(aws_http::http_client())
            .build();
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| (*value).to_owned())
        };
        let default = AgentCoreSandbox::from_lookup(&sdk, env(&[])).expect("defaults");
        assert_eq!(default.interpreter(), DEFAULT_INTERPRETER);
        assert_eq!(default.settings.session_timeout, DEFAULT_SESSION_TIMEOUT);
        let custom = AgentCoreSandbox::from_lookup(
            &sdk,
            env(&[(INTERPRETER_ENV, " my-interpreter-abc123 "), (SESSION_TIMEOUT_ENV, "3600")]),
        )
        .expect("custom");
        assert_eq!(custom.interpreter(), "my-interpreter-abc123");
        assert_eq!(custom.settings.session_timeout, Duration::from_secs(3600));
        assert!(AgentCoreSandbox::from_lookup(&sdk, env(&[(SESSION_TIMEOUT_ENV, "30")])).is_err());
        assert!(AgentCoreSandbox::from_lookup(&sdk, env(&[(INTERPRETER_ENV, "a b")])).is_err());
        assert_eq!(default.layout().workspace, "/tmp/agent/workspace");
    }
}
