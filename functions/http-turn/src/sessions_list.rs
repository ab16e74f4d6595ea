//! `GET /sessions?limit=&cursor=`: the caller's own sessions, most recently updated first, in
//! pages; the cursor is opaque to the client and names no user.

use agent_core::store::{SessionCursor, SessionList, MAX_SESSIONS_PAGE};
use agent_core::SessionId;
use aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

use crate::ApiError;

/// Sessions per page by default.
pub const DEFAULT_SESSIONS_PAGE: usize = 20;
/// Longer cursors are refused before decoding: a real one is far shorter.
const MAX_CURSOR_CHARS: usize = 512;
/// The version tag of the cursor's content, so its format can change without misreading old ones.
const CURSOR_VERSION: &str = "v1";

/// The page asked for: `limit` sessions after `cursor` (or the newest).
pub struct SessionsPage {
    pub limit: usize,
    pub after: Option<SessionCursor>,
}

impl SessionsPage {
    pub fn from_query(event: &ApiGatewayV2httpRequest) -> Result<Self, ApiError> {
        let query = &event.query_string_parameters;
        let limit = match query.first("limit") {
            None => DEFAULT_SESSIONS_PAGE,
            Some(raw) => {
                raw.parse::<usize>().ok().filter(|limit| (1..=MAX_SESSIONS_PAGE).contains(limit)).ok_or_else(|| {
                    ApiError::bad_request(format!("`limit` must be a whole number from 1 to {MAX_SESSIONS_PAGE}"))
                })?
            }
        };
        let after = match query.first("cursor").filter(|cursor| !cursor.is_empty()) {
            None => None,
            Some(raw) => Some(decode_cursor(raw).ok_or_else(|| {
                ApiError::bad_request("`cursor` must be a `next_cursor` from an earlier page of GET /sessions")
            })?),
        };
        Ok(Self { limit, after })
    }
}

/// The cursor as the client holds it: base64url of `v1:{updated_at}:{session_id}`.
pub fn encode_cursor(cursor: &SessionCursor) -> String {
    URL_SAFE_NO_PAD.encode(format!("{CURSOR_VERSION}:{}:{}", cursor.updated_at, cursor.session_id))
}

/// A cursor from a client, validated: `None` for anything [`encode_cursor`] does not make. The user
/// is never in it: the listing is always the authenticated caller's.
pub fn decode_cursor(raw: &str) -> Option<SessionCursor> {
    if raw.len() > MAX_CURSOR_CHARS {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(raw).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let mut parts = text.splitn(3, ':');
    if parts.next()? != CURSOR_VERSION {
        return None;
    }
    let updated_at = parts.next()?.parse::<i64>().ok().filter(|seconds| *seconds >= 0)?;
    let session_id = SessionId::parse(parts.next()?).ok()?;
    Some(SessionCursor { updated_at, session_id })
}

/// One page as the client reads it.
pub fn sessions_view(list: &SessionList) -> Value {
    let sessions: Vec<Value> = list
        .sessions
        .iter()
        .map(|session| {
            json!({
                "session_id": session.session_id.as_str(),
                "created_at": session.created_at,
                "updated_at": session.updated_at,
                "turns": session.version,
            })
        })
        .collect();
    json!({"sessions": sessions, "next_cursor": list.next.as_ref().map(encode_cursor)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_anything_else_is_refused() {
        let cursor = SessionCursor { updated_at: 1_764_112_222, session_id: SessionId::parse("s-1_a").unwrap() };
        let raw = encode_cursor(&cursor);
        assert!(raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{raw}");
        assert_eq!(decode_cursor(&raw), Some(cursor));
        let forged = |text: &str| URL_SAFE_NO_PAD.encode(text);
        for bad in [
            "garbage!".to_owned(),
            "".to_owned(),
            forged("v2:1:s1"),
            forged("v1:-5:s1"),
            forged("v1:x:s1"),
            forged("v1:1:../s1"),
            forged("v1:1:ana#s1"),
            forged("v1:1"),
            "A".repeat(MAX_CURSOR_CHARS + 1),
        ] {
            assert_eq!(decode_cursor(&bad), None, "{bad}");
        }
    }
}
