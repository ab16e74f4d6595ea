//! Storing a turn: the conditional commit, with large tool results kept by reference.

use sha2::Digest;

use super::usage::Meter;
use super::{Claimed, TurnError, TurnReply, TurnRequest, TurnService};
use crate::message::Message;
use crate::store::{CommitKey, Session, SessionState, StoreError, TurnCommit};

/// Tool results longer than this are kept by reference in the stored history.
pub const INLINE_TOOL_RESULT_BYTES: usize = 16 * 1024;
/// What the stored history keeps of such a result.
const TOOL_RESULT_PREVIEW_BYTES: usize = 4 * 1024;

impl TurnService {
    /// Stores the turn, conditional on the version read at its start, and adds what it spent to the
    /// tenant's usage in the same atomic write: a turn counts exactly when it is stored.
    pub(super) async fn commit(
        &self,
        request: &TurnRequest,
        session: &Session,
        new_messages: Vec<Message>,
        state: SessionState,
        reply: &TurnReply,
        claim: Option<&Claimed>,
    ) -> Result<(), TurnError> {
        let idempotency = match claim {
            Some(claim) => Some(CommitKey {
                key: claim.key.clone(),
                owner: claim.owner.clone(),
                reply: serde_json::to_value(reply)
                    .map_err(|err| TurnError::Internal(format!("encoding the reply: {err}")))?,
            }),
            None => None,
        };
        let new_messages = self.keep_large_results_by_reference(request, new_messages).await?;
        let meter = Meter::current();
        let commit = TurnCommit {
            expected_version: session.version,
            new_messages,
            history_len: session.history_end(),
            state,
            now: request.now.unix_timestamp(),
            commit_token: meter
                .as_ref()
                .map_or_else(|| hex::encode(rand::random::<[u8; 16]>()), |meter| meter.token.clone()),
            idempotency,
            usage: meter.as_ref().map(|meter| meter.usage(request.now, true)),
            skill_versions: reply.skill_versions.clone(),
        };
        match self.sessions.commit(&request.user, &request.session, &commit).await {
            Err(err @ (StoreError::Backend(_) | StoreError::Corrupt(_))) => {
                if let Some(meter) = &meter {
                    meter.mark_commit_unknown();
                }
                Err(err.into())
            }
            result => Ok(result?),
        }
    }

    /// Tool results over [`INLINE_TOOL_RESULT_BYTES`] are stored as objects of their own (content-
    /// addressed, so a retried or failed turn leaves at most an unreferenced object), and the history
    /// keeps a preview with the key: later turns and `GET /sessions/{id}` read the preview only.
    async fn keep_large_results_by_reference(
        &self,
        request: &TurnRequest,
        mut messages: Vec<Message>,
    ) -> Result<Vec<Message>, TurnError> {
        for message in &mut messages {
            let Message::Tool { content, .. } = message else { continue };
            if content.len() <= INLINE_TOOL_RESULT_BYTES {
                continue;
            }
            let sha = hex::encode(sha2::Sha256::digest(content.as_bytes()));
            let key = crate::keys::tool_result_key(&request.user, &request.session, &sha);
            self.objects.put(&key, content.as_bytes().to_vec()).await?;
            let total = content.len();
            content.truncate(content.floor_char_boundary(TOOL_RESULT_PREVIEW_BYTES));
            let omitted = total - content.len();
            content.push_str(&format!(
                "\n[... {omitted} more bytes of this result are not kept in the conversation; run the tool again \
                 to see them. Stored as result {sha}]"
            ));
        }
        Ok(messages)
    }
}
