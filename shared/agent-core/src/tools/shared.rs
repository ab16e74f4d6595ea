//! What every agent of one turn shares: the turn's own agent and its subagents see the same skills,
//! the same filesystem (behind a lock, so concurrent subagents take turns at it one tool call at a
//! time), the same sandbox, and the same prompt parts.

use crate::files::ShownFiles;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::execute::SandboxAccess;
use super::source::SkillSource;
use super::task::Delegation;
use crate::permissions::ApprovalPolicy;
use crate::prompt::{PromptTemplate, PromptVars, SkillPromptMode};
use crate::skills::Listing;
use crate::vfs::Vfs;

/// The parts of a turn its agents share. Built once per turn, then held by every agent's
/// [`super::SkillsEnv`].
pub struct TurnShared<'a> {
    pub(super) vfs: tokio::sync::Mutex<Vfs<'a>>,
    pub(super) skills: SkillSource<'a>,
    pub(super) listing: Arc<Listing>,
    pub(super) template: &'a PromptTemplate,
    pub(super) vars: &'a PromptVars,
    pub(super) mode: SkillPromptMode,
    pub(super) sandbox: Option<SandboxAccess<'a>>,
    /// Commands run in the sandbox this turn, by any agent.
    pub(super) executions: AtomicU32,
    /// The sandbox backend's own session, carried across turns (see `SessionState::sandbox_session`).
    pub(super) sandbox_session: Mutex<Option<String>>,
    /// How subagents are run, when the turn offers `task`.
    pub(super) delegation: Option<Delegation<'a>>,
    /// The policies whose calls wait for a person's approval (the deployment's, the tenant's),
    /// borrowed, not merged: a call waits when any asks. Empty when none asks anything.
    pub(super) approvals: Vec<&'a ApprovalPolicy>,
    /// The files the turn shows the model; `read_file` shows images and PDFs only with them.
    pub(super) shown: Option<&'a ShownFiles<'a>>,
}

impl<'a> TurnShared<'a> {
    /// `listing` is the state-1 listing, rendered for `SKILL_LISTING_TOKENS` ([`crate::skills::Catalog::listing`]).
    pub fn new(
        vfs: Vfs<'a>,
        skills: SkillSource<'a>,
        listing: Arc<Listing>,
        template: &'a PromptTemplate,
        vars: &'a PromptVars,
        mode: SkillPromptMode,
    ) -> Self {
        Self {
            vfs: tokio::sync::Mutex::new(vfs),
            skills,
            listing,
            template,
            vars,
            mode,
            sandbox: None,
            executions: AtomicU32::new(0),
            sandbox_session: Mutex::new(None),
            delegation: None,
            approvals: Vec::new(),
            shown: None,
        }
    }

    /// Lets `read_file` show images and PDFs to the model, kept in `shown`.
    pub fn with_files(mut self, shown: &'a ShownFiles<'a>) -> Self {
        self.shown = Some(shown);
        self
    }

    /// Stops the turn for a person's approval before a call `policy` names runs, besides the calls
    /// of the policies given before (each keeps its exceptions to itself).
    pub fn with_approvals(mut self, policy: &'a ApprovalPolicy) -> Self {
        if !policy.is_empty() {
            self.approvals.push(policy);
        }
        self
    }

    /// Offers `execute`, running commands in `access`'s sandbox; `session` is the backend's own
    /// session kept from earlier turns, if any.
    pub fn with_sandbox(mut self, access: SandboxAccess<'a>, session: Option<String>) -> Self {
        self.sandbox = Some(access);
        self.sandbox_session = Mutex::new(session);
        self
    }

    /// Offers `task`, running subagents as `delegation` says.
    pub fn with_subagents(mut self, delegation: Delegation<'a>) -> Self {
        self.delegation = Some(delegation);
        self
    }

    pub(super) fn count_execution(&self) {
        self.executions.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn sandbox_session(&self) -> Option<String> {
        self.sandbox_session.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    pub(super) fn set_sandbox_session(&self, session: Option<String>) {
        *self.sandbox_session.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = session;
    }
}
