//! The `execute` tool (deepagents' name, arguments and result): a shell command run in the sandbox
//! over a copy of the session's files, whose changes under `/workspace` come back into the turn's
//! workspace; and the command rules a forced skill's `Bash(prefix:*)` declarations make.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::SkillsEnv;
use crate::agent::ToolOutput;
use crate::message::ToolSpec;
use crate::sandbox::{self, Sandbox, SandboxLayout, DEFAULT_TIMEOUT, MAX_COMMAND_BYTES, MAX_TIMEOUT};
use crate::tool_names::EXECUTE;

/// Time kept between a command's timeout and the turn's reserve, for the sandbox to stop the
/// command and send its files back.
const EXECUTE_MARGIN: Duration = Duration::from_secs(5);
/// How long past a command's timeout the sandbox may take to answer before the call is given up.
const SANDBOX_GRACE: Duration = Duration::from_secs(4);
/// The shortest timeout worth starting a command with.
const MIN_TIMEOUT: Duration = Duration::from_secs(1);

/// A sandbox a turn may run commands in, and the turn's deadline that bounds every command.
#[derive(Clone, Copy)]
pub struct SandboxAccess<'a> {
    pub sandbox: &'a dyn Sandbox,
    pub deadline: Option<Instant>,
    pub reserve: Duration,
}

impl SandboxAccess<'_> {
    /// The longest a command may run now: the maximum, less what the turn needs to finish.
    fn max_timeout(&self) -> Duration {
        match self.deadline {
            Some(deadline) => deadline
                .saturating_duration_since(Instant::now())
                .saturating_sub(self.reserve)
                .saturating_sub(EXECUTE_MARGIN)
                .min(MAX_TIMEOUT),
            None => MAX_TIMEOUT,
        }
    }
}

pub fn execute_spec(layout: &SandboxLayout) -> ToolSpec {
    ToolSpec {
        name: EXECUTE.to_owned(),
        description: format!(
            "Executes a shell command in an isolated sandbox and returns its combined stdout and stderr with the \
             exit code.\n\nUsage:\n\
             - The command runs with `bash -c` in {workspace}, which holds the same files as /workspace: files \
             the command creates, changes or deletes there are kept in /workspace (visible to ls, read_file and \
             the next command). Nothing else it writes is kept.\n\
             - Loaded skills' folders are at {skills}/<name> (read-only){ticket}.\n\
             - Python 3 (with lxml, defusedxml, pypdf, openpyxl, python-docx, python-pptx, pillow, numpy, pandas, \
             matplotlib) and the usual shell tools are installed. There is no network access.\n\
             - Output longer than {max} characters is cut in the middle. A command that runs past its timeout \
             (default {default} s, at most {most} s) is stopped.\n\
             - Each call starts fresh: processes, environment variables and files outside {workspace} do not \
             carry over between calls.",
            workspace = layout.workspace,
            skills = layout.skills,
            ticket = format_args!("; the ticket's files, when there is one, at {} (read-only)", layout.ticket),
            max = sandbox::MAX_OUTPUT_CHARS,
            default = DEFAULT_TIMEOUT.as_secs(),
            most = MAX_TIMEOUT.as_secs(),
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The shell command to run."},
                "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT.as_secs(),
                            "description": format!("Seconds before the command is stopped (default {}).", DEFAULT_TIMEOUT.as_secs())}
            },
            "required": ["command"]
        }),
    }
}

/// The text a state-2 prompt adds so the SKILL.md's own instructions (`python scripts/fill.py …`)
/// can be followed: where the skill's folder is inside the sandbox.
pub fn skill_folder_note(layout: &SandboxLayout, skill_name: &str) -> String {
    format!(
        "\n\n<skill-files>This skill's folder is {skills}/{skill_name} in the sandbox of the execute tool \
         (read-only); commands run in {workspace}, which is /workspace. When the skill says to run one of its \
         scripts, run it from there, e.g. `python {skills}/{skill_name}/scripts/<script> ...`, and write what \
         you make into {workspace} so the user can download it.</skill-files>",
        skills = layout.skills,
        workspace = layout.workspace,
    )
}

/// `execute`'s arguments, validated: the command and its timeout within what the turn allows.
pub fn parse_arguments(args: &Value, access: &SandboxAccess<'_>) -> Result<(String, Duration), String> {
    let command = match args.get("command") {
        Some(Value::String(command)) if !command.trim().is_empty() => command,
        Some(Value::String(_)) => return Err("Error: `command` of execute must not be empty".to_owned()),
        _ => return Err("Error: execute needs `command`, the shell command to run, as a string".to_owned()),
    };
    if command.len() > MAX_COMMAND_BYTES {
        return Err(format!("Error: `command` of execute is longer than {MAX_COMMAND_BYTES} bytes"));
    }
    if command.contains('\0') {
        return Err("Error: `command` of execute must not contain a NUL character".to_owned());
    }
    let requested = match args.get("timeout") {
        None | Some(Value::Null) => None,
        Some(value) => {
            let seconds = value.as_u64().or_else(|| value.as_str().and_then(|text| text.trim().parse().ok()));
            match seconds {
                Some(seconds) if seconds >= 1 => Some(Duration::from_secs(seconds)),
                _ => return Err("Error: `timeout` of execute must be a whole number of seconds, at least 1".to_owned()),
            }
        }
    };
    if requested.is_some_and(|timeout| timeout > MAX_TIMEOUT) {
        return Err(format!("Error: `timeout` of execute is at most {} seconds", MAX_TIMEOUT.as_secs()));
    }
    let most = access.max_timeout();
    if most < MIN_TIMEOUT {
        return Err("Error: there is not enough time left in this turn to run a command; answer with what you \
                    have, and the user can ask you to continue."
            .to_owned());
    }
    Ok((command.clone(), requested.unwrap_or(DEFAULT_TIMEOUT).min(most)))
}

impl SkillsEnv<'_> {
    /// Runs a command in the sandbox over a copy of the session's files, then brings what it changed
    /// under the workspace back into the turn's workspace, within the workspace's quotas. A command
    /// the forced skill does not allow is refused (and counted) without running.
    pub(super) async fn run_execute(&mut self, args: &Value) -> ToolOutput {
        let Some(access) = self.shared.sandbox else {
            return "Error: there is no sandbox to run commands in".to_owned().into();
        };
        let (command, timeout) = match parse_arguments(args, &access) {
            Ok(parsed) => parsed,
            Err(message) => return message.into(),
        };
        if let Some((commands, skill)) = self.command_rules() {
            if let Err(message) = commands.check(&command, skill) {
                tracing::warn!(skill, "refused a command the forced skill does not allow");
                self.refused_tool_calls += 1;
                return ToolOutput { content: message, refused: true, ..ToolOutput::default() };
            }
        }
        self.run_in_sandbox(access, command, timeout).await.into()
    }

    /// Runs an allowed `command` in the sandbox; the text of its outcome, or of why it did not run.
    async fn run_in_sandbox(&mut self, access: SandboxAccess<'_>, command: String, timeout: Duration) -> String {
        // The filesystem is locked to copy the files out and to take the changes back, not while
        // the command runs, so concurrent subagents' commands run at the same time.
        let (files, session) = {
            let vfs = self.shared.vfs.lock().await;
            match vfs.sandbox_files().await {
                Ok(files) => (files, vfs.session().clone()),
                Err(err) => return err.to_string(),
            }
        };
        let request = crate::sandbox::ExecRequest {
            tenant: self.shared.skills.user.clone(),
            session,
            command,
            timeout,
            workspace: files.workspace,
            skills: files.skills,
            ticket: files.ticket,
            resume: self.shared.sandbox_session(),
        };
        let bytes_in = files.bytes;
        self.shared.count_execution();
        let started = std::time::Instant::now();
        // The sandbox stops the command at its timeout; this bounds a backend that does not answer.
        let answer = tokio::time::timeout(timeout + SANDBOX_GRACE, access.sandbox.execute(request)).await;
        let outcome = match answer {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(err)) => {
                tracing::warn!(sandbox = access.sandbox.name(), error = ?err, "execute: the sandbox failed");
                return err.to_string();
            }
            Err(_) => {
                tracing::warn!(sandbox = access.sandbox.name(), "execute: the sandbox did not answer in time");
                return "Error: the sandbox did not answer in time; the command's changes were not kept".to_owned();
            }
        };
        if outcome.session.is_some() {
            self.shared.set_sandbox_session(outcome.session.clone());
        }
        let bytes_out: u64 = outcome.changes.written.iter().map(|file| file.bytes.len() as u64).sum();
        let kept = {
            let mut vfs = self.shared.vfs.lock().await;
            let kept = vfs.apply_sandbox_changes(&outcome.changes).await;
            self.written.extend(vfs.take_written());
            kept
        };
        tracing::info!(
            sandbox = access.sandbox.name(),
            exit_code = ?outcome.exit_code,
            timed_out = outcome.timed_out,
            sandbox_ms = outcome.duration.as_millis() as u64,
            call_ms = started.elapsed().as_millis() as u64,
            bytes_in,
            bytes_out,
            written = outcome.changes.written.len(),
            deleted = outcome.changes.deleted.len(),
            "execute"
        );
        let mut text = crate::sandbox::render_outcome(&outcome);
        match kept {
            Ok(summary) if !summary.is_empty() => text.push_str(&format!("\n[{summary}]")),
            Ok(_) => {}
            Err(err) => text.push_str(&format!(
                "\n[Changes to /workspace not kept: {}]",
                err.to_string().trim_start_matches("Error: ")
            )),
        }
        text
    }
}
