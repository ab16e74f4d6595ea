//! What went wrong with a request to the service, and what the core is told of it.

use agent_ports::sandbox::SandboxError;
use aws_sdk_bedrockagentcore::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

/// What went wrong with a request to the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Throttled or over a quota (too many sessions): the command did not run.
    Throttled,
    /// The session (or the interpreter) does not exist.
    NotFound,
    /// A validation or conflict error: possibly a session that has ended.
    Rejected,
    Other,
}

#[derive(Debug)]
pub(super) struct Fault {
    pub(super) kind: Kind,
    pub(super) detail: String,
}

impl Fault {
    pub(super) fn from_sdk<E, R>(what: &str, err: SdkError<E, R>) -> Fault
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

    pub(super) fn other(detail: String) -> Fault {
        Fault { kind: Kind::Other, detail }
    }

    /// What the core is told; the detail is logged, never shown to the model.
    pub(super) fn into_error(self) -> SandboxError {
        tracing::warn!(sandbox = "agentcore", error = %self.detail, "the sandbox call failed");
        match self.kind {
            Kind::Throttled => SandboxError::Busy(self.detail),
            Kind::NotFound | Kind::Rejected | Kind::Other => SandboxError::Unavailable(self.detail),
        }
    }
}

pub(super) enum Failure {
    /// The session is gone and nothing ran.
    Gone(Fault),
    Fault(Fault),
}

pub(super) fn bounded(text: &str, chars: usize) -> String {
    text.chars().take(chars).collect()
}
