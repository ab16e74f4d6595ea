//! The interpreter sessions: one per agent session, resumed while it is ready and has the time
//! left, else started anew (the one replaced stopped without waiting), and named without naming
//! the tenant.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_ports::sandbox::{ExecRequest, SandboxError};
use aws_sdk_bedrockagentcore::error::DisplayErrorContext;
use aws_sdk_bedrockagentcore::types::CodeInterpreterSessionStatus;
use aws_sdk_bedrockagentcore::Client;

use super::call::sha256;
use super::fault::{bounded, Fault, Kind};

/// The service's client for one code interpreter, and the lifetime of the sessions it starts.
pub(super) struct Interpreter {
    pub(super) client: Client,
    /// The code interpreter's id or ARN.
    pub(super) id: String,
    pub(super) session_timeout: Duration,
}

impl Interpreter {
    /// The session to run in: `resume` while it is ready and has the time left, else a new one.
    /// The flag says whether it was resumed.
    pub(super) async fn session_for(
        &self,
        request: &ExecRequest,
        need: Duration,
    ) -> Result<(String, bool), SandboxError> {
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
    pub(super) async fn start(&self, request: &ExecRequest) -> Result<String, SandboxError> {
        let timeout = i32::try_from(self.session_timeout.as_secs()).unwrap_or(i32::MAX);
        let started = self
            .client
            .start_code_interpreter_session()
            .code_interpreter_identifier(&self.id)
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
    pub(super) async fn describe(&self, id: &str) -> Result<SessionState, Fault> {
        let session = self
            .client
            .get_code_interpreter_session()
            .code_interpreter_identifier(&self.id)
            .session_id(id)
            .send()
            .await
            .map_err(|err| Fault::from_sdk("GetCodeInterpreterSession", err))?;
        let ready = matches!(session.status(), None | Some(CodeInterpreterSessionStatus::Ready));
        let lifetime =
            session.session_timeout_seconds().map(i64::from).unwrap_or(self.session_timeout.as_secs() as i64);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs() as i64);
        let left = session.created_at().secs().saturating_add(lifetime).saturating_sub(now);
        Ok(SessionState { ready, remaining: Duration::from_secs(u64::try_from(left).unwrap_or(0)) })
    }

    /// Stops a session that is being replaced, without waiting: it would end on its own anyway.
    pub(super) fn stop_later(&self, id: &str) {
        let stop = self.client.stop_code_interpreter_session().code_interpreter_identifier(&self.id).session_id(id);
        // In the turn's span, so that its line names the invocation and the turn.
        let stopping = async move {
            if let Err(err) = stop.send().await {
                tracing::debug!(sandbox = "agentcore", error = %DisplayErrorContext(&err), "could not stop a replaced session");
            }
        };
        tokio::spawn(tracing::Instrument::in_current_span(stopping));
    }
}

pub(super) struct SessionState {
    pub(super) ready: bool,
    pub(super) remaining: Duration,
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
}
