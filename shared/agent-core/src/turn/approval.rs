//! A turn paused for approval, as the next request takes it back: its decisions checked against
//! the calls that wait, and where its messages start in the history the model sees.

use std::collections::BTreeSet;

use super::{lease_until, Claimed, Claims, TurnError, TurnRequest, TurnService};
use crate::agent::{Decisions, WaitingCall};
use crate::events::ApprovalCall;
use crate::message::Message;
use crate::store::{Claim, IdempotencyKey, PendingApproval, Session, StoreError};

/// A call's arguments larger than this are shown by their size in a reply's pending calls (the
/// whole call is in the session's history): a stored reply stays small.
pub const MAX_SHOWN_ARGUMENT_BYTES: usize = 16 * 1024;

/// The paused turn a request goes on with, and the decisions that answer it.
pub(super) struct Resumed<'a> {
    pub pending: &'a PendingApproval,
    pub decisions: &'a Decisions,
}

/// The paused turn that `decisions` answer, or `None` for a turn that starts from a message. A
/// message while calls wait, decisions when none wait, and decisions that do not answer exactly
/// the calls that wait are refused, and nothing runs.
pub(super) fn paused_turn<'a>(
    session: &'a Session,
    decisions: Option<&'a Decisions>,
) -> Result<Option<Resumed<'a>>, TurnError> {
    let ids = |pending: &PendingApproval| pending.calls.iter().map(|call| call.id.clone()).collect::<Vec<_>>();
    match (&session.state.pending_approval, decisions) {
        (None, None) => Ok(None),
        (Some(pending), None) => Err(TurnError::ApprovalPending { calls: ids(pending) }),
        (None, Some(_)) => {
            Err(TurnError::NotPending("no tool calls of this session wait for approval; send a message".to_owned()))
        }
        (Some(pending), Some(decisions)) => {
            let waiting: BTreeSet<&str> = pending.calls.iter().map(|call| call.id.as_str()).collect();
            let answered: BTreeSet<&str> = decisions.call_ids().collect();
            if waiting != answered {
                let unknown: Vec<&str> = answered.difference(&waiting).copied().collect();
                let missing: Vec<&str> = waiting.difference(&answered).copied().collect();
                let mut problems = Vec::new();
                if !unknown.is_empty() {
                    problems.push(format!("{} do not wait for approval", unknown.join(", ")));
                }
                if !missing.is_empty() {
                    problems.push(format!("{} still need a decision", missing.join(", ")));
                }
                return Err(TurnError::NotPending(format!(
                    "the decisions must answer exactly the calls that wait ({}): {}",
                    ids(pending).join(", "),
                    problems.join("; ")
                )));
            }
            Ok(Some(Resumed { pending, decisions }))
        }
    }
}

impl Resumed<'_> {
    /// Where the paused turn starts in `history`, the session's history as the model sees it
    /// (which a summary may have shortened at its old end).
    pub fn turn_start_in(&self, session: &Session, history: &[Message]) -> Result<usize, TurnError> {
        let turn_messages = session.history_end().checked_sub(self.pending.turn_start);
        turn_messages.and_then(|count| history.len().checked_sub(count)).ok_or_else(|| {
            TurnError::Store(StoreError::Corrupt("the paused turn's start is past its history".to_owned()))
        })
    }
}

impl TurnService {
    /// Claims the pause stored as session version `version` for this request, so that the calls it
    /// approves run once: a second request answering the same pause is refused while this one
    /// runs, and finds nothing pending once it is committed.
    pub(super) async fn claim_pause(
        &self,
        request: &TurnRequest,
        version: u64,
        claims: &Claims,
    ) -> Result<(), TurnError> {
        let key = IdempotencyKey::for_paused_turn(version);
        let now = request.now.unix_timestamp();
        match self.sessions.claim(&request.user, &request.session, &key, now, lease_until(request, now)).await? {
            Claim::Claimed { owner } => {
                // A turn claims its pause once, so the cell is empty.
                let _ = claims.pause.set(Claimed { key, owner });
                Ok(())
            }
            _ => {
                tracing::info!(session = %request.session, version, "another request answers this pause");
                Err(TurnError::NotPending(
                    "another request is answering these calls now; nothing of this one ran. Read the session to \
                     see whether they still wait"
                        .to_owned(),
                ))
            }
        }
    }
}

/// A waiting call as a reply shows it.
pub(super) fn shown(waiting: &WaitingCall) -> ApprovalCall {
    let mut shown = waiting.shown();
    let size = waiting.call.arguments.to_string().len();
    if size > MAX_SHOWN_ARGUMENT_BYTES {
        shown.arguments = serde_json::json!({ "_omitted_bytes": size });
    }
    shown
}
