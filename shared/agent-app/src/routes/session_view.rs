//! `GET /sessions/{session_id}?limit=&cursor=`: the session's state and one page of its history,
//! newest turns first, bounded so an answer stays far below Lambda's 6 MB response limit.

use agent_core::store::PendingApproval;
use agent_core::{HistoryPage, Message, Session};
use serde_json::{json, Value};

use super::message::Query;
use crate::api::ApiError;

/// Turns per page, by default and at most.
pub const DEFAULT_TURNS_PAGE: usize = 20;
pub const MAX_TURNS_PAGE: usize = 100;
/// Bytes of stored messages a page reads (a page always holds at least one turn).
pub const MAX_PAGE_READ_BYTES: usize = 2 * 1024 * 1024;
/// A message text or tool-call argument longer than this is shown cut, with its full size.
pub const MAX_SHOWN_TEXT_BYTES: usize = 16 * 1024;
/// Shown bytes of messages per answer: later messages of the page are left out, marked.
pub const MAX_SHOWN_PAGE_BYTES: usize = 3 * 1024 * 1024;

/// The page asked for: `limit` turns before turn `cursor` (or the newest).
pub struct PageRequest {
    pub limit: usize,
    pub before: Option<u64>,
}

impl PageRequest {
    pub fn from_query(query: &Query) -> Result<Self, ApiError> {
        let limit = match query.first("limit") {
            None => DEFAULT_TURNS_PAGE,
            Some(raw) => {
                raw.parse::<usize>().ok().filter(|limit| (1..=MAX_TURNS_PAGE).contains(limit)).ok_or_else(|| {
                    ApiError::bad_request(format!("`limit` must be a whole number from 1 to {MAX_TURNS_PAGE}"))
                })?
            }
        };
        let before = match query.first("cursor").filter(|cursor| !cursor.is_empty()) {
            None => None,
            Some(raw) => Some(
                raw.parse::<u64>()
                    .ok()
                    .filter(|turn| *turn >= 1)
                    .ok_or_else(|| ApiError::bad_request("`cursor` must be a `next_cursor` from an earlier page"))?,
            ),
        };
        Ok(Self { limit, before })
    }
}

/// The session as its owner reads it. `history` is the page's messages in conversation order
/// (oldest of the page first); `turns` numbers them; `next_cursor` pages back to older turns.
pub fn session_view(session: &Session, page: &HistoryPage) -> Value {
    let workspace: Vec<Value> = session
        .state
        .workspace
        .iter()
        .map(|(path, file)| json!({"path": format!("/workspace/{path}"), "size": file.size}))
        .collect();
    let mut shown_bytes = 0usize;
    let mut history = Vec::new();
    let mut turns = Vec::new();
    let mut cut_short = false;
    for (number, messages) in page.turns.iter().rev() {
        let first_index = history.len();
        for message in messages {
            let shown = shown_message(message);
            let size = shown.to_string().len();
            if shown_bytes + size > MAX_SHOWN_PAGE_BYTES && !history.is_empty() {
                cut_short = true;
                break;
            }
            shown_bytes += size;
            history.push(shown);
        }
        let mut turn = json!({"turn": number, "first_message": first_index, "messages": history.len() - first_index});
        // The published version of each skill the turn loaded.
        if let Some(versions) = page.skill_versions.get(number) {
            turn["skill_versions"] = json!(versions);
        }
        turns.push(turn);
        if cut_short {
            break;
        }
    }
    json!({
        "session_id": session.session_id,
        "version": session.version,
        "updated_at": session.updated_at,
        "current_skill": session.state.current_skill,
        "loaded_skills": session.state.loaded_skills,
        "todos": session.state.todos,
        "summary": session.state.summary.as_ref().map(|summary| json!({"text": shown_text(&summary.text), "covers_messages": summary.covers})),
        "plan": session.state.plan,
        // The calls a paused turn waits on (their arguments are in the last assistant message).
        "pending_approval": session.state.pending_approval.as_ref().map(pending_view),
        "workspace": workspace,
        "history": history,
        "turns": turns,
        "next_cursor": page.next_before.map(|turn| turn.to_string()),
        "truncated": cut_short,
    })
}

/// The calls a paused turn waits on; a subagent's with its arguments, which are in its kept
/// conversation rather than in the history shown.
fn pending_view(pending: &PendingApproval) -> Value {
    let calls: Vec<Value> = pending
        .calls
        .iter()
        .map(|call| {
            let mut shown = json!({"id": call.id, "name": call.name});
            if let Some(subagent) = &call.subagent {
                shown["subagent"] = json!(subagent);
                let arguments = pending.subagent_call(call).map(|made| &made.arguments);
                let size = arguments.map_or(0, |arguments| arguments.to_string().len());
                shown["arguments"] = match arguments {
                    Some(_) if size > MAX_SHOWN_TEXT_BYTES => json!({"_omitted_bytes": size}),
                    Some(arguments) => arguments.clone(),
                    None => Value::Null,
                };
            }
            shown
        })
        .collect();
    json!({ "calls": calls })
}

/// One message as shown: long texts and arguments cut at [`MAX_SHOWN_TEXT_BYTES`], with their size.
fn shown_message(message: &Message) -> Value {
    let mut value = serde_json::to_value(message).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        if let Some(Value::String(content)) = object.get("content") {
            if content.len() > MAX_SHOWN_TEXT_BYTES {
                let size = content.len();
                object.insert("content".to_owned(), Value::String(shown_text(content)));
                object.insert("content_bytes".to_owned(), json!(size));
            }
        }
        if let Some(Value::Array(calls)) = object.get_mut("tool_calls") {
            for call in calls {
                let Some(arguments) = call.get("arguments") else { continue };
                let size = arguments.to_string().len();
                if size > MAX_SHOWN_TEXT_BYTES {
                    call["arguments"] = json!({"_omitted_bytes": size});
                }
            }
        }
    }
    value
}

fn shown_text(text: &str) -> String {
    if text.len() <= MAX_SHOWN_TEXT_BYTES {
        return text.to_owned();
    }
    let end = text.floor_char_boundary(MAX_SHOWN_TEXT_BYTES);
    format!("{}[... {} more bytes]", &text[..end], text.len() - end)
}
