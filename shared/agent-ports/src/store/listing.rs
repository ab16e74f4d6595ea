//! A user's sessions listed a page at a time, most recently updated first.

use crate::ids::SessionId;

/// Sessions a listing answers at most in one page.
pub const MAX_SESSIONS_PAGE: usize = 100;

/// Where a listing of a user's sessions goes on: the sort values of the last session it showed.
/// It names no user: the store always lists the caller's own sessions after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCursor {
    pub updated_at: i64,
    pub session_id: SessionId,
}

/// One session as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub session_id: SessionId,
    /// Unix seconds of the first commit and of the last.
    pub created_at: i64,
    pub updated_at: i64,
    /// Number of committed turns.
    pub version: u64,
    /// The first message, as [`crate::message::session_title`] shortens it; `None` for a session
    /// begun before titles were kept.
    pub title: Option<String>,
}

/// One page of a user's sessions, most recently updated first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionList {
    pub sessions: Vec<SessionSummary>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<SessionCursor>,
}
