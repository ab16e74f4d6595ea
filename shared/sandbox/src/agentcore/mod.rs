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

mod call;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_ports::sandbox::{ExecOutcome, ExecRequest, Sandbox, SandboxError, SandboxLayout};
use async_trait::async_trait;
use aws_sdk_bedrockagentcore::config::StalledStreamProtectionConfig;
use aws_sdk_bedrockagentcore::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockagentcore::primitives::Blob;
use aws_sdk_bedrockagentcore::types::{
    CodeInterpreterResult, CodeInterpreterSessionStatus, CodeInterpreterStreamOutput, ContentBlock, InputContentBlock,
    ToolArguments, ToolName,
};
use aws_sdk_bedrockagentcore::Client;

use self::call::{batches, sha256, Call, Plan, Report, Upload, Wanted, MAX_REPORT_BYTES, TREE_NAME};
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
/// One `readFiles` asks for at most this many bytes and files.
const READ_BATCH_BYTES: u64 = 2 << 20;
const READ_BATCH_FILES: usize = 200;
/// The most bytes and events accepted from one `writeFiles` (a short acknowledgement).
const MAX_ACK_BYTES: usize = 1 << 20;
const MAX_EVENTS: usize = 10_000;

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
    client: Client,
    settings: AgentCoreSettings,
}

impl AgentCoreSandbox {
    /// A backend over `config` (its endpoint, region and credentials).
    pub fn new(config: aws_sdk_bedrockagentcore::Config, settings: AgentCoreSettings) -> Self {
        // A command's response says nothing until the command ends; the execute tool bounds
        // the whole call instead.
        let config = config.to_builder().stalled_stream_protection(StalledStreamProtectionConfig::disabled()).build();
        Self { client: Client::from_conf(config), settings }
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

    /// The session to run in: `resume` while it is ready and has the time left, else a new one.
    /// The flag says whether it was resumed.
    async fn session_for(&self, request: &ExecRequest, need: Duration) -> Result<(String, bool), SandboxError> {
        match request.resume.as_deref() {
            Some(id) if valid_session_id(id) => match self.describe(id).await {
                Ok(state) if state.ready && state.remaining >= need => return Ok((id.to_owned(), true)),
                Ok(state) => {
                    tracing::info!(
                        sandbox = "agentcore",
                        session = id,
                        ready = state.ready,
                        remaining_s = state.remaining.as_secs(),
                        "the interpreter session has ended or is about to; starting another"
                    );
                    if state.ready {
                        self.stop_later(id);
                    }
                }
                Err(fault) if matches!(fault.kind, Kind::NotFound | Kind::Rejected) => {
                    tracing::info!(sandbox = "agentcore", session = id, detail = %fault.detail, "the interpreter session is gone; starting another");
                }
                Err(fault) => return Err(fault.into_error()),
            },
            Some(_) => tracing::warn!(
                sandbox = "agentcore",
                "the kept sandbox session is not an interpreter session id; starting another"
            ),
            None => {}
        }
        Ok((self.start(request).await?, false))
    }

    /// Starts a session for the request's agent session.
    async fn start(&self, request: &ExecRequest) -> Result<String, SandboxError> {
        let timeout = i32::try_from(self.settings.session_timeout.as_secs()).unwrap_or(i32::MAX);
        let started = self
            .client
            .start_code_interpreter_session()
            .code_interpreter_identifier(&self.settings.interpreter)
            .name(session_name(request))
            .session_timeout_seconds(timeout)
            .send()
            .await
            .map_err(|err| Fault::from_sdk("StartCodeInterpreterSession", err).into_error())?;
        let id = started.session_id;
        if !valid_session_id(&id) {
            let detail = format!("StartCodeInterpreterSession answered the session id {:?}", bounded(&id, 200));
            return Err(Fault::other(detail).into_error());
        }
        tracing::info!(sandbox = "agentcore", session = %id, "started an interpreter session");
        Ok(id)
    }

    /// Whether the session is ready and how much of its lifetime is left.
    async fn describe(&self, id: &str) -> Result<SessionState, Fault> {
        let session = self
            .client
            .get_code_interpreter_session()
            .code_interpreter_identifier(&self.settings.interpreter)
            .session_id(id)
            .send()
            .await
            .map_err(|err| Fault::from_sdk("GetCodeInterpreterSession", err))?;
        let ready = matches!(session.status(), None | Some(CodeInterpreterSessionStatus::Ready));
        let lifetime =
            session.session_timeout_seconds().map(i64::from).unwrap_or(self.settings.session_timeout.as_secs() as i64);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs() as i64);
        let left = session.created_at().secs().saturating_add(lifetime).saturating_sub(now);
        Ok(SessionState { ready, remaining: Duration::from_secs(u64::try_from(left).unwrap_or(0)) })
    }

    /// Stops a session that is being replaced, without waiting: it would end on its own anyway.
    fn stop_later(&self, id: &str) {
        let stop = self
            .client
            .stop_code_interpreter_session()
            .code_interpreter_identifier(&self.settings.interpreter)
            .session_id(id);
        // In the turn's span, so that its line names the invocation and the turn.
        let stopping = async move {
            if let Err(err) = stop.send().await {
                tracing::debug!(sandbox = "agentcore", error = %DisplayErrorContext(&err), "could not stop a replaced session");
            }
        };
        tokio::spawn(tracing::Instrument::in_current_span(stopping));
    }

    /// One call in `session`: write, run, read back. A session found gone at the first request
    /// (before anything ran) is a [`Failure::Gone`].
    async fn run(&self, session: &str, call: &Call, started: Instant) -> Result<ExecOutcome, Failure> {
        let blocks = call.uploads.iter().map(content_block).collect::<Result<Vec<_>, _>>().map_err(Failure::Fault)?;
        let arguments = ToolArguments::builder().set_content(Some(blocks)).build();
        let failed = match self.invoke(session, ToolName::WriteFiles, arguments, MAX_ACK_BYTES).await {
            Ok(results) => {
                tool_error(&results).map(|text| Fault { kind: Kind::Rejected, detail: format!("writeFiles: {text}") })
            }
            Err(fault) => Some(fault),
        };
        if let Some(fault) = failed {
            return Err(self.first_failure(session, fault).await);
        }

        // The session's setup and the files' transfer count against the command's timeout.
        let left = call.timeout.saturating_sub(started.elapsed()).max(call.timeout.min(Duration::from_secs(1)));
        let arguments = ToolArguments::builder().command(call.command_line(left)).build();
        let results = self
            .invoke(session, ToolName::ExecuteCommand, arguments, 2 * MAX_REPORT_BYTES)
            .await
            .map_err(Failure::Fault)?;
        let (stdout, stderr, exit) = command_result(&results);
        let report = Report::parse(&stdout).map_err(|err| {
            Failure::Fault(Fault::other(format!(
                "{err} (exit code {exit:?}; stderr: {}; stdout: {})",
                bounded(&stderr, 2000),
                bounded(&stdout, 500)
            )))
        })?;
        if let Some(error) = &report.error {
            return Err(Failure::Fault(Fault::other(format!("the runner failed: {}", bounded(error, 2000)))));
        }
        let (output, omitted_bytes) = report.output();
        let (exit_code, stopped, timed_out) = report.ending(call.timeout, &call.limits);
        let plan = Plan::new(&report, call, call.limits.result_bytes);
        let read = self.read_back(session, &plan.wanted).await;
        Ok(ExecOutcome {
            output,
            omitted_bytes,
            exit_code,
            stopped,
            timed_out,
            changes: plan.finish(&read),
            duration: Duration::from_millis(report.duration_ms),
            session: None,
        })
    }

    /// A failed first request: the session is gone when the service says so, or when it refused
    /// the request and the session is no longer ready.
    async fn first_failure(&self, session: &str, fault: Fault) -> Failure {
        match fault.kind {
            Kind::NotFound => Failure::Gone(fault),
            Kind::Rejected => match self.describe(session).await {
                Ok(state) if state.ready => Failure::Fault(fault),
                Ok(_) => Failure::Gone(fault),
                Err(described) if matches!(described.kind, Kind::NotFound | Kind::Rejected) => Failure::Gone(fault),
                Err(_) => Failure::Fault(fault),
            },
            Kind::Throttled | Kind::Other => Failure::Fault(fault),
        }
    }

    /// The wanted files' bytes by sha256. A batch that fails is logged and its files are not
    /// kept: the command ran, and its output still matters.
    async fn read_back(&self, session: &str, wanted: &[Wanted]) -> HashMap<[u8; 32], Arc<Vec<u8>>> {
        let hashes: HashSet<[u8; 32]> = wanted.iter().map(|file| file.sha256).collect();
        let mut read = HashMap::new();
        for batch in batches(wanted, READ_BATCH_BYTES, READ_BATCH_FILES) {
            let bytes: u64 = batch.iter().map(|file| file.size).sum();
            let paths = batch.iter().map(|file| format!("{TREE_NAME}/workspace/{}", file.path)).collect();
            let arguments = ToolArguments::builder().set_paths(Some(paths)).build();
            // Text decoded lossily may be up to three times its bytes (U+FFFD for each); room for
            // that and for messages.
            let most = usize::try_from(bytes).unwrap_or(usize::MAX).saturating_mul(3).saturating_add(1 << 20);
            match self.invoke(session, ToolName::ReadFiles, arguments, most).await {
                // A result may be an error for one path and still carry the others: every
                // resource counts, and only bytes with a wanted sha256 are taken.
                Ok(results) => {
                    for block in results.into_iter().flat_map(|result| result.content) {
                        for bytes in block_bytes(block) {
                            let digest = sha256(&bytes);
                            if hashes.contains(&digest) {
                                read.entry(digest).or_insert_with(|| Arc::new(bytes));
                            }
                        }
                    }
                }
                Err(fault) => {
                    tracing::warn!(sandbox = "agentcore", error = %fault.detail, files = batch.len(), "could not read files back")
                }
            }
        }
        read
    }

    /// One tool call; its results, at most `max_bytes` of them.
    async fn invoke(
        &self,
        session: &str,
        tool: ToolName,
        arguments: ToolArguments,
        max_bytes: usize,
    ) -> Result<Vec<CodeInterpreterResult>, Fault> {
        let what = format!("InvokeCodeInterpreter {tool}");
        let output = self
            .client
            .invoke_code_interpreter()
            .code_interpreter_identifier(&self.settings.interpreter)
            .session_id(session)
            .name(tool)
            .arguments(arguments)
            .send()
            .await
            .map_err(|err| Fault::from_sdk(&what, err))?;
        let mut stream = output.stream;
        let (mut results, mut bytes) = (Vec::new(), 0usize);
        while let Some(event) = stream.recv().await.map_err(|err| Fault::from_sdk(&what, err))? {
            if let CodeInterpreterStreamOutput::Result(result) = event {
                bytes = bytes.saturating_add(result_bytes(&result));
                if bytes > max_bytes || results.len() >= MAX_EVENTS {
                    return Err(Fault::other(format!(
                        "{what}: the answer is over {max_bytes} bytes or {MAX_EVENTS} events"
                    )));
                }
                results.push(result);
            }
        }
        Ok(results)
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
        let (mut session, mut resumed) = self.session_for(&request, need).await?;
        loop {
            match self.run(&session, &call, started).await {
                Ok(mut outcome) => {
                    outcome.session = Some(session);
                    return Ok(outcome);
                }
                // Nothing ran: the session ended between the check and the files' transfer.
                Err(Failure::Gone(fault)) if resumed => {
                    tracing::info!(sandbox = "agentcore", session = %session, detail = %fault.detail, "the interpreter session has ended; starting another");
                    session = self.start(&request).await?;
                    resumed = false;
                }
                Err(Failure::Gone(fault) | Failure::Fault(fault)) => {
                    // A failed call keeps no session with the agent session: one started for it
                    // would only wait for its lifetime's end.
                    if !resumed {
                        self.stop_later(&session);
                    }
                    return Err(fault.into_error());
                }
            }
        }
    }
}

struct SessionState {
    ready: bool,
    remaining: Duration,
}

/// What went wrong with a request to the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Throttled or over a quota (too many sessions): the command did not run.
    Throttled,
    /// The session (or the interpreter) does not exist.
    NotFound,
    /// A validation or conflict error: possibly a session that has ended.
    Rejected,
    Other,
}

#[derive(Debug)]
struct Fault {
    kind: Kind,
    detail: String,
}

impl Fault {
    fn from_sdk<E, R>(what: &str, err: SdkError<E, R>) -> Fault
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        let kind = match err.code() {
            Some("ThrottlingException" | "ServiceQuotaExceededException") => Kind::Throttled,
            Some("ResourceNotFoundException") => Kind::NotFound,
            Some("ValidationException" | "ConflictException") => Kind::Rejected,
            _ => Kind::Other,
        };
        Fault { kind, detail: format!("{what}: {}", DisplayErrorContext(&err)) }
    }

    fn other(detail: String) -> Fault {
        Fault { kind: Kind::Other, detail }
    }

    /// What the core is told; the detail is logged, never shown to the model.
    fn into_error(self) -> SandboxError {
        tracing::warn!(sandbox = "agentcore", error = %self.detail, "the sandbox call failed");
        match self.kind {
            Kind::Throttled => SandboxError::Busy(self.detail),
            Kind::NotFound | Kind::Rejected | Kind::Other => SandboxError::Unavailable(self.detail),
        }
    }
}

enum Failure {
    /// The session is gone and nothing ran.
    Gone(Fault),
    Fault(Fault),
}

fn content_block(upload: &Upload) -> Result<InputContentBlock, Fault> {
    let block = match upload {
        Upload::Text { path, text } => InputContentBlock::builder().path(path).text(text),
        Upload::Bytes { path, bytes } => InputContentBlock::builder().path(path).blob(Blob::new(bytes.as_slice())),
    };
    block.build().map_err(|err| Fault::other(format!("a file to write: {err}")))
}

/// The runner's stdout and stderr and the command's exit code, from the structured content (or
/// the text blocks when there is none).
fn command_result(results: &[CodeInterpreterResult]) -> (String, String, Option<i32>) {
    let text = || results.iter().flat_map(|result| result.content()).filter_map(ContentBlock::text).collect::<String>();
    match results.iter().rev().find_map(CodeInterpreterResult::structured_content) {
        Some(structured) => {
            let stdout = structured.stdout().filter(|stdout| !stdout.is_empty()).map_or_else(text, str::to_owned);
            (stdout, structured.stderr().unwrap_or_default().to_owned(), structured.exit_code())
        }
        None => (text(), String::new(), None),
    }
}

/// The text of the results that are errors, if any.
fn tool_error(results: &[CodeInterpreterResult]) -> Option<String> {
    let errors: Vec<&CodeInterpreterResult> = results.iter().filter(|result| result.is_error == Some(true)).collect();
    if errors.is_empty() {
        return None;
    }
    let text: String = errors.iter().flat_map(|result| result.content()).filter_map(ContentBlock::text).collect();
    Some(bounded(&text, 2000))
}

/// The files' bytes a content block carries (a resource's blob or text, or a block's data).
fn block_bytes(block: ContentBlock) -> Vec<Vec<u8>> {
    let mut found = Vec::new();
    if let Some(resource) = block.resource {
        if let Some(blob) = resource.blob {
            found.push(blob.into_inner());
        } else if let Some(text) = resource.text {
            found.push(text.into_bytes());
        }
    }
    if let Some(data) = block.data {
        found.push(data.into_inner());
    }
    found
}

/// The bytes a result holds, to bound what the service may send.
fn result_bytes(result: &CodeInterpreterResult) -> usize {
    let block = |block: &ContentBlock| {
        let resource = block.resource().map_or(0, |resource| {
            resource.text().map_or(0, str::len) + resource.blob().map_or(0, |blob| blob.as_ref().len())
        });
        block.text().map_or(0, str::len) + block.data().map_or(0, |data| data.as_ref().len()) + resource
    };
    let structured = result
        .structured_content()
        .map_or(0, |structured| structured.stdout().map_or(0, str::len) + structured.stderr().map_or(0, str::len));
    result.content().iter().map(block).sum::<usize>() + structured
}

/// The interpreter session's name: derived from the agent session, without naming the tenant.
fn session_name(request: &ExecRequest) -> String {
    let digest = sha256(format!("{}\n{}", request.tenant.as_str(), request.session.as_str()).as_bytes());
    let hex: String = digest.iter().take(10).map(|byte| format!("{byte:02x}")).collect();
    format!("agent-{hex}")
}

/// A session id this backend accepts from the service or from the agent session.
fn valid_session_id(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

fn bounded(text: &str, chars: usize) -> String {
    text.chars().take(chars).collect()
}

#[cfg(test)]
mod tests {
    use agent_ports::{SessionId, UserId};

    use super::*;

    fn request(tenant: &str, session: &str) -> ExecRequest {
        ExecRequest {
            tenant: UserId::parse(tenant).expect("valid"),
            session: SessionId::parse(session).expect("valid"),
            command: "true".into(),
            timeout: Duration::from_secs(1),
            workspace: vec![],
            skills: vec![],
            ticket: None,
            resume: None,
        }
    }

    #[test]
    fn session_names_are_per_agent_session_and_do_not_name_the_tenant() {
        let name = session_name(&request("auth0|alice", "s1"));
        assert!(name.starts_with("agent-") && name.len() == 26 && !name.contains("alice"), "{name}");
        assert_eq!(name, session_name(&request("auth0|alice", "s1")));
        assert_ne!(name, session_name(&request("auth0|alice", "s2")));
        assert_ne!(name, session_name(&request("auth0|bob", "s1")));
    }

    #[test]
    fn session_ids_are_checked_before_they_reach_a_header() {
        assert!(valid_session_id("01JZ8Q6N3Z0ABCDEF-ghi_j.k"));
        for bad in ["", "a b", "a\nb", "a/b", &"x".repeat(129)] {
            assert!(!valid_session_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_environment_picks_the_interpreter_and_the_session_lifetime() {
        let sdk = aws_config::SdkConfig::builder().behavior_version(aws_config::BehaviorVersion::latest()).build();
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
