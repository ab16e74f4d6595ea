//! `GET /sessions?limit=&cursor=`: the caller's own sessions, most recently updated first, in
//! pages; the cursor is opaque to the client, names no user, and is signed (HMAC-SHA256 over the
//! caller's id and its content with the function's key), so a forged, altered, truncated or another
//! user's cursor is refused.

use std::sync::OnceLock;

use agent_core::store::{SessionCursor, SessionList, MAX_SESSIONS_PAGE};
use agent_core::turn::evals::is_eval_session;
use agent_core::{SessionId, UserId};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{json, Value};

use super::message::Query;
use crate::api::ApiError;

type CursorMac = Hmac<sha2_hmac::Sha256>;

/// The local (tests, `cargo lambda watch`) way to give the key: its text, at least
/// [`MIN_KEY_BYTES`] bytes. Deployed, `main` reads it from Secrets Manager at cold start instead.
pub const CURSOR_KEY_ENV: &str = "CURSOR_SIGNING_KEY";
/// A shorter key is refused: it could be guessed.
pub const MIN_KEY_BYTES: usize = 32;

static CURSOR_KEY: OnceLock<Vec<u8>> = OnceLock::new();

/// Sets the process's cursor key (at cold start, before any request); false when one was already set.
pub fn set_cursor_key(key: Vec<u8>) -> bool {
    CURSOR_KEY.set(key).is_ok()
}

/// The key cursors are signed with: the one set at cold start, else `CURSOR_SIGNING_KEY`, else 32
/// random bytes drawn once per process, so cursors then hold only within this process (a cursor
/// from another instance is refused with a 400 and the client starts from the first page).
fn cursor_key() -> &'static [u8] {
    CURSOR_KEY.get_or_init(|| match std::env::var(CURSOR_KEY_ENV).ok().filter(|key| !key.trim().is_empty()) {
        Some(key) if key.trim().len() >= MIN_KEY_BYTES => key.trim().as_bytes().to_vec(),
        Some(_) => {
            tracing::error!("{CURSOR_KEY_ENV} is shorter than {MIN_KEY_BYTES} bytes; a random key is used instead");
            rand::random::<[u8; 32]>().to_vec()
        }
        None => {
            tracing::info!("no cursor signing key is configured: session cursors hold only within this process");
            rand::random::<[u8; 32]>().to_vec()
        }
    })
}

/// The cursor's MAC: over the user (so it pages only its own listing) and the cursor's content.
fn cursor_mac(key: &[u8], user: &UserId, content: &str) -> CursorMac {
    let mut mac = CursorMac::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(user.as_str().as_bytes());
    mac.update(b"\n");
    mac.update(content.as_bytes());
    mac
}

/// Sessions per page by default.
pub const DEFAULT_SESSIONS_PAGE: usize = 20;
/// Longer cursors are refused before decoding: a real one is far shorter.
const MAX_CURSOR_CHARS: usize = 512;
/// The version tag of the cursor's content, so its format can change without misreading old ones.
const CURSOR_VERSION: &str = "v2";

/// The page asked for: `limit` sessions after `cursor` (or the newest).
pub struct SessionsPage {
    pub limit: usize,
    pub after: Option<SessionCursor>,
}

impl SessionsPage {
    pub fn from_query(query: &Query, user: &UserId) -> Result<Self, ApiError> {
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
            Some(raw) => Some(decode_cursor(user, raw).ok_or_else(|| {
                ApiError::bad_request("`cursor` must be a `next_cursor` from an earlier page of GET /sessions")
            })?),
        };
        Ok(Self { limit, after })
    }
}

/// The cursor as `user` holds it: base64url of `v2:{updated_at}:{session_id}`, a `.`, and base64url
/// of its HMAC-SHA256 (see `cursor_mac`).
pub fn encode_cursor(user: &UserId, cursor: &SessionCursor) -> String {
    encode_cursor_with(cursor_key(), user, cursor)
}

fn encode_cursor_with(key: &[u8], user: &UserId, cursor: &SessionCursor) -> String {
    let content = format!("{CURSOR_VERSION}:{}:{}", cursor.updated_at, cursor.session_id);
    let tag = cursor_mac(key, user, &content).finalize().into_bytes();
    format!("{}.{}", URL_SAFE_NO_PAD.encode(&content), URL_SAFE_NO_PAD.encode(tag))
}

/// A cursor from `user`, verified and validated: `None` for anything [`encode_cursor`] did not make
/// for this user with this key. The user is never in it: the listing is always the caller's.
pub fn decode_cursor(user: &UserId, raw: &str) -> Option<SessionCursor> {
    decode_cursor_with(cursor_key(), user, raw)
}

fn decode_cursor_with(key: &[u8], user: &UserId, raw: &str) -> Option<SessionCursor> {
    if raw.len() > MAX_CURSOR_CHARS {
        return None;
    }
    let (content, tag) = raw.split_once('.')?;
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(content).ok()?).ok()?;
    // Compared in constant time; nothing of the content is trusted before this.
    cursor_mac(key, user, &text).verify_slice(&URL_SAFE_NO_PAD.decode(tag).ok()?).ok()?;
    let mut parts = text.splitn(3, ':');
    if parts.next()? != CURSOR_VERSION {
        return None;
    }
    let updated_at = parts.next()?.parse::<i64>().ok().filter(|seconds| *seconds >= 0)?;
    let session_id = SessionId::parse(parts.next()?).ok()?;
    Some(SessionCursor { updated_at, session_id })
}

/// One page as the client reads it.
pub fn sessions_view(user: &UserId, list: &SessionList) -> Value {
    // Eval turns run in sessions of their own, which are no user's conversation.
    let sessions: Vec<Value> = list
        .sessions
        .iter()
        .filter(|session| !is_eval_session(session.session_id.as_str()))
        .map(|session| {
            json!({
                "session_id": session.session_id.as_str(),
                "title": session.title,
                "created_at": session.created_at,
                "updated_at": session.updated_at,
                "turns": session.version,
            })
        })
        .collect();
    json!({"sessions": sessions, "next_cursor": list.next.as_ref().map(|next| encode_cursor(user, next))})
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"a test key of thirty-two bytes!!";

    #[test]
    fn cursors_round_trip_and_anything_else_is_refused() {
        let ana = UserId::parse("ana").unwrap();
        let cursor = SessionCursor { updated_at: 1_764_112_222, session_id: SessionId::parse("s-1_a").unwrap() };
        let raw = encode_cursor_with(KEY, &ana, &cursor);
        assert!(raw.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)), "{raw}");
        assert_eq!(decode_cursor_with(KEY, &ana, &raw), Some(cursor.clone()));
        // Signed with the right key, for the right user, but not a cursor's content.
        let signed = |text: &str| {
            let tag = cursor_mac(KEY, &ana, text).finalize().into_bytes();
            format!("{}.{}", URL_SAFE_NO_PAD.encode(text), URL_SAFE_NO_PAD.encode(tag))
        };
        let unsigned = |text: &str| URL_SAFE_NO_PAD.encode(text);
        let (content, _) = raw.split_once('.').unwrap();
        for bad in [
            "garbage!".to_owned(),
            "".to_owned(),
            unsigned("v2:1:s1"),
            format!("{}.{}", unsigned("v2:1:s2"), raw.split_once('.').unwrap().1),
            format!("{content}."),
            raw[..raw.len() - 2].to_owned(),
            signed("v1:1:s1"),
            signed("v2:-5:s1"),
            signed("v2:x:s1"),
            signed("v2:1:../s1"),
            signed("v2:1:ana#s1"),
            signed("v2:1"),
            "A".repeat(MAX_CURSOR_CHARS + 1),
        ] {
            assert_eq!(decode_cursor_with(KEY, &ana, &bad), None, "{bad}");
        }
        assert_eq!(decode_cursor_with(KEY, &UserId::parse("bob").unwrap(), &raw), None, "another user's");
        assert_eq!(decode_cursor_with(b"another key of thirty-two bytes!", &ana, &raw), None, "another key's");
    }

    #[test]
    fn the_mac_is_hmac_sha256() {
        // RFC 4231, test case 2, with the user and the separator as the start of the data.
        let user = UserId::parse("what").unwrap();
        let tag = cursor_mac(b"Jefe", &user, "do ya want for nothing?").finalize().into_bytes();
        // "what\ndo ya..." is not the RFC's data ("what do ya..."): check against a direct HMAC.
        let mut direct = CursorMac::new_from_slice(b"Jefe").unwrap();
        direct.update(b"what\ndo ya want for nothing?");
        assert_eq!(tag, direct.finalize().into_bytes());
        let mut rfc = CursorMac::new_from_slice(b"Jefe").unwrap();
        rfc.update(b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(rfc.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
