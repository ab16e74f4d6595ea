//! A subagent stopped at a call that needs a person's approval: what is kept of it (its own
//! conversation, its steps, its skills) so the `task` call that started it can go on with it once
//! the decisions come, and what a paused turn hands its delegation to take it back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::{Child, Delegation};
use crate::agent::{Decisions, LoopOutcome, Pause, ToolOutput, WaitingCall, SUBAGENT_CALL_SEPARATOR};
use crate::message::ToolCall;
use crate::store::PausedSubagent;

/// Most bytes (as JSON) the paused subagents of one turn may keep: they are stored with the
/// session, in one DynamoDB item of at most 400 KB beside the rest of its state.
pub const MAX_PAUSED_SUBAGENTS_BYTES: usize = 192 * 1024;

/// The paused subagents a resumed turn goes on with, and the decisions on every level's calls.
#[derive(Default)]
pub(super) struct Resume {
    waiting: Mutex<Vec<PausedSubagent>>,
    decisions: Decisions,
    /// Bytes the subagents that paused again in this request keep.
    kept_bytes: AtomicUsize,
}

impl Resume {
    pub fn new(subagents: Vec<PausedSubagent>, decisions: Decisions) -> Self {
        Self { waiting: Mutex::new(subagents), decisions, kept_bytes: AtomicUsize::new(0) }
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, Vec<PausedSubagent>> {
        self.waiting.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn holds(&self, parent: Option<&str>, call_id: &str) -> bool {
        self.waiting().iter().any(|paused| answers(paused, parent, call_id))
    }

    /// The paused subagent that agent `parent`'s `task` call `call_id` started, taken.
    pub fn take(&self, parent: Option<&str>, call_id: &str) -> Option<PausedSubagent> {
        let mut waiting = self.waiting();
        let at = waiting.iter().position(|paused| answers(paused, parent, call_id))?;
        Some(waiting.remove(at))
    }

    /// The paused subagents nobody took.
    pub fn rest(&self) -> Vec<PausedSubagent> {
        std::mem::take(&mut *self.waiting())
    }

    /// The decisions on subagent `id`'s own calls.
    pub fn decisions_of(&self, id: &str) -> Decisions {
        self.decisions.of_subagent(id)
    }
}

fn answers(paused: &PausedSubagent, parent: Option<&str>, call_id: &str) -> bool {
    paused.parent.as_deref() == parent && paused.task_call_id == call_id
}

/// The `task` call's output for a subagent whose loop stopped for approval: no result yet, and
/// the pause to hand up (its calls named `{subagent}/{call id}`, itself kept beside the subagents
/// it paused in turn). A subagent too large to keep gets an error result instead, and its work
/// so far (files included) stays as it is.
pub(super) fn paused_output(
    delegation: &Delegation<'_>,
    child: &Child<'_>,
    resumed: Option<PausedSubagent>,
    outcome: LoopOutcome,
) -> ToolOutput {
    let mut conversation = resumed.map(|paused| paused.conversation).unwrap_or_default();
    conversation.extend(outcome.messages);
    let kept = PausedSubagent {
        id: child.id.clone(),
        parent: child.parent.clone(),
        task_call_id: child.call_id.clone(),
        conversation,
        steps: outcome.steps,
        loaded_skills: child.env.own_skill().into_iter().collect(),
    };
    let size = serde_json::to_vec(&kept).map_or(usize::MAX, |bytes| bytes.len());
    let fits = delegation.resume.kept_bytes.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |kept| {
        kept.checked_add(size).filter(|total| *total <= MAX_PAUSED_SUBAGENTS_BYTES)
    });
    if fits.is_err() {
        tracing::warn!(subagent = %child.id, bytes = size, "a paused subagent is too large to keep; its task ends");
        let content = format!(
            "Error: the subagent stopped at a call that needs a person's approval, but its work is too large to \
             keep while it waits ({} KiB; the paused subagents of one turn keep at most {} KiB). Its task was not \
             finished; files it wrote are kept. Do the rest yourself, or give it a smaller task.",
            size / 1024,
            MAX_PAUSED_SUBAGENTS_BYTES / 1024
        );
        return ToolOutput { content, usage: outcome.usage, ..ToolOutput::default() };
    }
    let waiting = outcome
        .pause
        .waiting
        .into_iter()
        .map(|waiting| match waiting.subagent {
            Some(_) => waiting,
            None => WaitingCall {
                call: ToolCall {
                    id: format!("{}{SUBAGENT_CALL_SEPARATOR}{}", child.id, waiting.call.id),
                    ..waiting.call
                },
                subagent: Some(child.id.clone()),
            },
        })
        .collect();
    let mut subagents = vec![kept];
    subagents.extend(outcome.pause.subagents);
    ToolOutput { usage: outcome.usage, paused: Some(Box::new(Pause { waiting, subagents })), ..ToolOutput::default() }
}
