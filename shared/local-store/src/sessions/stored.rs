//! One stored session and how it is read back: a turn's load within the same bounds as the
//! DynamoDB adapter's, a page of older turns, and a user's sessions listed newest first.

use std::collections::BTreeMap;

use agent_ports::message::session_title;
use agent_ports::store::{SessionCursor, SessionList, SessionSummary, MAX_SESSIONS_PAGE};
use agent_ports::store::{MAX_LOADED_HISTORY_BYTES, MAX_LOADED_TURNS};
use agent_ports::{HistoryPage, Message, Session, SessionId, SessionState, UserId};

#[derive(Debug, Clone)]
pub(super) struct StoredSession {
    pub(super) version: u64,
    pub(super) turns: Vec<Vec<Message>>,
    /// The skill versions each turn loaded, by turn number (turns that loaded none left out).
    pub(super) skill_versions: BTreeMap<u64, BTreeMap<String, u32>>,
    pub(super) state: SessionState,
    created_at: i64,
    pub(super) updated_at: i64,
    title: Option<String>,
}

impl StoredSession {
    /// A session not committed yet, whose first turn, committed at `now`, holds `first_turn`.
    pub(super) fn new(now: i64, first_turn: &[Message]) -> Self {
        StoredSession {
            version: 0,
            turns: Vec::new(),
            skill_versions: BTreeMap::new(),
            state: SessionState::default(),
            created_at: now,
            updated_at: 0,
            title: session_title(first_turn),
        }
    }

    /// The session as a turn loads it.
    pub(super) fn load(&self, user: &UserId, session: &SessionId) -> Session {
        // The same bounds as the DynamoDB adapter: back from the newest turn to the summary's boundary.
        let boundary = self.state.summary.as_ref().map_or(0, |summary| summary.covers);
        let mut end: usize = self.turns.iter().map(Vec::len).sum();
        let (mut first, mut bytes) = (self.turns.len(), 0usize);
        while first > 0 {
            first -= 1;
            end -= self.turns[first].len();
            bytes += serde_json::to_string(&self.turns[first]).map_or(0, |json| json.len());
            let count = self.turns.len() - first;
            if (self.state.summary.is_some() && end <= boundary)
                || count >= MAX_LOADED_TURNS
                || bytes >= MAX_LOADED_HISTORY_BYTES
            {
                break;
            }
        }
        let mut turn_starts = Vec::new();
        let mut start = end;
        for (index, turn) in self.turns.iter().enumerate().skip(first) {
            turn_starts.push((index as u64 + 1, start));
            start += turn.len();
        }
        Session {
            user_id: user.clone(),
            session_id: session.clone(),
            version: self.version,
            history: self.turns[first..].concat(),
            history_offset: end,
            turn_starts,
            state: self.state.clone(),
            updated_at: self.updated_at,
        }
    }

    /// The session without its history, and a page of its turns older than `before`.
    pub(super) fn page(
        &self,
        user: &UserId,
        session: &SessionId,
        before: Option<u64>,
        max_turns: usize,
        max_bytes: usize,
    ) -> (Session, HistoryPage) {
        let newest = before.map_or(self.version, |before| before.saturating_sub(1).min(self.version));
        let (mut turns, mut bytes) = (Vec::new(), 0usize);
        let mut number = newest;
        while number > 0 && turns.len() < max_turns.max(1) && (turns.is_empty() || bytes < max_bytes) {
            let messages = self.turns[(number - 1) as usize].clone();
            bytes += serde_json::to_string(&messages).map_or(0, |json| json.len());
            turns.push((number, messages));
            number -= 1;
        }
        let next_before = (number > 0).then(|| number + 1);
        let mut meta = Session::new(user.clone(), session.clone());
        meta.version = self.version;
        meta.state = self.state.clone();
        meta.updated_at = self.updated_at;
        let skill_versions =
            turns.iter().filter_map(|(number, _)| Some((*number, self.skill_versions.get(number)?.clone()))).collect();
        (meta, HistoryPage { turns, skill_versions, next_before })
    }
}

/// A page of `mine`, one user's sessions, in the DynamoDB index's order: newest update first, then
/// the session id, descending; starting after `after`.
pub(super) fn list<'a>(
    mine: impl Iterator<Item = (&'a SessionId, &'a StoredSession)>,
    after: Option<&SessionCursor>,
    limit: usize,
) -> SessionList {
    let limit = limit.clamp(1, MAX_SESSIONS_PAGE);
    let mut mine: Vec<SessionSummary> = mine
        .map(|(session, stored)| SessionSummary {
            session_id: session.clone(),
            created_at: stored.created_at,
            updated_at: stored.updated_at,
            version: stored.version,
            title: stored.title.clone(),
        })
        .filter(|summary| {
            after.is_none_or(|after| {
                (summary.updated_at, summary.session_id.as_str()) < (after.updated_at, after.session_id.as_str())
            })
        })
        .collect();
    mine.sort_by(|a, b| (b.updated_at, b.session_id.as_str()).cmp(&(a.updated_at, a.session_id.as_str())));
    let next = (mine.len() > limit).then(|| SessionCursor {
        updated_at: mine[limit - 1].updated_at,
        session_id: mine[limit - 1].session_id.clone(),
    });
    mine.truncate(limit);
    SessionList { sessions: mine, next }
}
