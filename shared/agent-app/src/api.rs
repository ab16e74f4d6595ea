//! The HTTP contract the three turn functions share: the body of `POST /sessions/{session_id}/turns`
//! and its parsing, the turn request built from it, and the mapping of every failure to a precise
//! status with a JSON error body safe to show a client.

use std::collections::BTreeMap;

use agent_core::agent::{CallDecision, Decisions};
use agent_core::skills::versions::MAX_PINS;
use agent_core::turn::evals::{is_eval_session, EVAL_SESSION_PREFIX};
use agent_core::turn::{Attachment, TurnError, TurnRequest, UserProfile, MAX_ATTACHMENTS, MAX_MESSAGE_BYTES};
use agent_core::{IdempotencyKey, ModelError, SessionId, SkillPath, StoreError, TicketId, UserId};
use base64::Engine;
use http::HeaderMap;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::time::Instant;

/// Bodies larger than this are refused before parsing: the message limit after the worst JSON
/// escaping (`\u0000` is six bytes for one), plus room for the other fields and the attachments
/// (an upload id and a name of up to 256 bytes each, escaped at worst) and a webhook's URL. The
/// message itself is measured after decoding.
const MAX_BODY_BYTES: usize =
    6 * MAX_MESSAGE_BYTES + 4096 + MAX_ATTACHMENTS * (6 * 256 + 128) + 6 * crate::webhooks::body::MAX_URL_BYTES;

/// The request header that carries a client's idempotency key.
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// The response header that marks a replayed reply.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// A failure with its HTTP status, machine-readable code and client-safe message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    /// Seconds after which the same request may succeed (`Retry-After`), when the failure says.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), retry_after: None }
    }

    /// The JSON body every error answers with.
    pub fn body(&self) -> Value {
        json!({"error": {"code": self.code, "message": self.message}})
    }

    /// What a failed background turn keeps for its poller: the status, code and message.
    pub fn stored(&self) -> Value {
        json!({"status": self.status, "code": self.code, "message": self.message})
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "bad_request", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(404, "not_found", message)
    }
}

impl From<TurnError> for ApiError {
    fn from(err: TurnError) -> Self {
        match err {
            TurnError::InvalidInput(message) => ApiError::bad_request(message),
            TurnError::TooLarge(message) => ApiError::new(413, "payload_too_large", message),
            unknown @ TurnError::UnknownSkill { .. } => ApiError::new(400, "unknown_skill", unknown.to_string()),
            TurnError::Conflict => ApiError::new(
                409,
                "conflict",
                "another turn of this session finished first; nothing was saved, send the message again",
            ),
            pending @ TurnError::ApprovalPending { .. } => ApiError::new(
                409,
                "approval_pending",
                format!("{pending}: answer them with `decisions` (approve, edit or reject) before a new message"),
            ),
            TurnError::NotPending(message) => ApiError::new(409, "not_pending", message),
            TurnError::InProgress => ApiError::new(
                409,
                "turn_in_progress",
                "a turn with this Idempotency-Key is still running; retry later to get its reply",
            ),
            TurnError::IdempotencyMismatch => ApiError::new(
                422,
                "idempotency_key_reused",
                "this Idempotency-Key was already used with a different request",
            ),
            TurnError::AlreadyFailed { error } => {
                let earlier = error.get("message").and_then(Value::as_str).unwrap_or("it failed").to_owned();
                ApiError::new(
                    422,
                    "turn_failed",
                    format!("the turn with this Idempotency-Key failed earlier ({earlier}); send it with a new key"),
                )
            }
            quota @ TurnError::QuotaExceeded { retry_after_secs, .. } => {
                let (budget, figures) = quota.quota().unwrap_or(("daily", String::new()));
                ApiError {
                    retry_after: Some(retry_after_secs),
                    ..ApiError::new(
                        429,
                        "quota_exceeded",
                        format!(
                            "today's {budget} budget is spent ({figures}); nothing was sent to the model. It \
                             renews at 00:00 UTC"
                        ),
                    )
                }
            }
            TurnError::OutOfTime => ApiError::new(
                503,
                "out_of_time",
                "the request's time ran out before the model could be called; nothing was saved, try again",
            ),
            TurnError::Internal(detail) => {
                tracing::error!(error = %detail, "internal error");
                internal_error()
            }
            TurnError::Model(ModelError::ContextTooLarge { tokens, limit }) => {
                tracing::warn!(tokens, limit, "the turn does not fit the model's context");
                ApiError::new(
                    413,
                    "context_too_large",
                    format!(
                        "the message and the skill's instructions need about {tokens} tokens, over the model's \
                         input limit of {limit}, even with the history and tool output cut; nothing was saved. \
                         Send a shorter message"
                    ),
                )
            }
            TurnError::Model(model) => {
                tracing::error!(error = %model, "model provider failed");
                let message = match model {
                    ModelError::Unavailable { .. } => "the model provider is unavailable; nothing was saved, try again",
                    ModelError::Rejected { .. }
                    | ModelError::InvalidResponse(_)
                    | ModelError::Config(_)
                    | ModelError::ContextTooLarge { .. } => "the model provider failed to answer; nothing was saved",
                };
                ApiError::new(502, "model_provider_failed", message)
            }
            TurnError::Store(store) => {
                tracing::error!(error = %store, "storage failed");
                let message = match store {
                    StoreError::Corrupt(_) => "the stored session could not be read",
                    _ => "storage is unavailable; nothing was saved, try again",
                };
                ApiError::new(503, "storage_unavailable", message)
            }
            TurnError::Config(config) => {
                tracing::error!(error = %config, "invalid tenant configuration");
                ApiError::new(500, "configuration_error", config.to_string())
            }
        }
    }
}

/// The body of `POST /sessions/{session_id}/turns`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnBody {
    /// The user's message; empty (or absent) when `decisions` answer a paused turn.
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub ticket_id: Option<String>,
    /// Decisions on the tool calls a paused turn waits on (`approve`, `edit`, `reject`).
    #[serde(default)]
    pub decisions: Option<Vec<CallDecision>>,
    /// Uploads of the session attached to the message.
    #[serde(default)]
    pub attachments: Vec<AttachmentBody>,
    /// Published versions this turn uses instead of the defaults: `{"<skill path>": <version>}`.
    #[serde(default)]
    pub skill_versions: BTreeMap<String, u32>,
    /// Where to POST the turn's end (`{"url": ...}`); background turns (`Prefer: respond-async`) only.
    #[serde(default)]
    pub webhook: Option<crate::webhooks::body::WebhookBody>,
}

/// A turn's pinned versions (its body, or its queue record), validated: at most [`MAX_PINS`]
/// skill paths, each with a version from 1.
pub fn pins(pinned: &BTreeMap<String, u32>) -> Result<BTreeMap<SkillPath, u32>, String> {
    if pinned.len() > MAX_PINS {
        return Err(format!("a turn pins at most {MAX_PINS} skills, not {}", pinned.len()));
    }
    pinned
        .iter()
        .map(|(path, version)| {
            let skill = SkillPath::parse(path).map_err(|err| format!("{path:?}: {err}"))?;
            if *version == 0 {
                return Err(format!("{path:?}: versions are numbered from 1"));
            }
            Ok((skill, *version))
        })
        .collect()
}

/// One attachment as a client names it: `{"upload": "<sha256>", "name": "scan.jpg"}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttachmentBody {
    pub upload: String,
    pub name: String,
}

/// The attachments of a turn (its body, or its queue record), validated: at most
/// [`MAX_ATTACHMENTS`], each an upload id and a clean `/workspace` path, no path twice.
pub fn attachments(bodies: &[AttachmentBody]) -> Result<Vec<Attachment>, String> {
    if bodies.len() > MAX_ATTACHMENTS {
        return Err(format!("a turn attaches at most {MAX_ATTACHMENTS} files, not {}", bodies.len()));
    }
    let mut attachments: Vec<Attachment> = Vec::with_capacity(bodies.len());
    for body in bodies {
        let attachment = Attachment::new(&body.upload, &body.name)?;
        // Two files at one path would leave only the last: a mistake, said rather than hidden.
        if attachments.iter().any(|earlier| earlier.name == attachment.name) {
            return Err(format!("`{}` is attached twice: give each attachment its own name", attachment.name));
        }
        attachments.push(attachment);
    }
    Ok(attachments)
}

/// What a turn asks besides its message and ticket, for its idempotency fingerprint: the decisions
/// or the attachments (a body never has both). A turn with neither keeps the fingerprint it
/// always had.
pub fn extra_fingerprint(
    decisions: Option<&Decisions>,
    attachments: &[Attachment],
    pins: &BTreeMap<SkillPath, u32>,
) -> Option<String> {
    let extra = match decisions {
        Some(decisions) => Some(decisions.fingerprint()),
        // Tagged, so attachments never read as decisions (whose fingerprint is a JSON object).
        None if !attachments.is_empty() => Some(format!("attachments\n{}", Attachment::fingerprint(attachments))),
        None => None,
    };
    if pins.is_empty() {
        return extra;
    }
    // Tagged too, and after the rest: a turn without pins keeps the fingerprint it had.
    let pinned: Vec<String> = pins.iter().map(|(skill, version)| format!("{skill}={version}")).collect();
    Some(format!("{}skill_versions\n{}", extra.map(|extra| extra + "\n").unwrap_or_default(), pinned.join("\n")))
}

impl TurnBody {
    /// The body's decisions, validated; `None` when it has none.
    pub fn decisions(&self) -> Result<Option<Decisions>, ApiError> {
        self.decisions
            .clone()
            .map(Decisions::new)
            .transpose()
            .map_err(|err| ApiError::bad_request(format!("`decisions`: {err}")))
    }

    /// The body's attachments, validated.
    pub fn attachments(&self) -> Result<Vec<Attachment>, ApiError> {
        attachments(&self.attachments).map_err(|err| ApiError::bad_request(format!("`attachments`: {err}")))
    }

    /// The body's pinned versions, validated.
    pub fn pins(&self) -> Result<BTreeMap<SkillPath, u32>, ApiError> {
        pins(&self.skill_versions).map_err(|err| ApiError::bad_request(format!("`skill_versions`: {err}")))
    }
}

/// The answer to a defect: nothing about it reaches the client.
pub fn internal_error() -> ApiError {
    ApiError::new(500, "internal_error", "an internal error occurred; nothing was saved")
}

/// The session id of a path, validated.
pub fn parse_session_id(from_path: &str) -> Result<SessionId, ApiError> {
    SessionId::parse(from_path).map_err(|err| ApiError::bad_request(format!("`session_id`: {err}")))
}

/// Refuses a turn in a session the skill evals reserve (their ids start with `_eval.`): a client
/// may read one, never add to it.
pub fn writable_session(session: &SessionId) -> Result<(), ApiError> {
    match is_eval_session(session.as_str()) {
        true => Err(ApiError::bad_request(format!(
            "`session_id`: ids starting with {EVAL_SESSION_PREFIX:?} are reserved for skill evals"
        ))),
        false => Ok(()),
    }
}

/// The validated request for one turn: the body's message and ticket, the `Idempotency-Key`
/// header fingerprinted with them, and the caller's verified identity.
pub fn turn_request(
    user: UserId,
    session: SessionId,
    body: TurnBody,
    headers: &HeaderMap,
    profile: UserProfile,
    deadline: Option<Instant>,
) -> Result<TurnRequest, ApiError> {
    writable_session(&session)?;
    if body.webhook.is_some() {
        return Err(ApiError::bad_request("`webhook` is for background turns: send it with `Prefer: respond-async`"));
    }
    let decisions = body.decisions()?;
    let attachments = body.attachments()?;
    let pins = body.pins()?;
    let extra = extra_fingerprint(decisions.as_ref(), &attachments, &pins);
    let idempotency = idempotency_key(headers, &body, extra.as_deref())?;
    let ticket = body
        .ticket_id
        .map(TicketId::parse)
        .transpose()
        .map_err(|err| ApiError::bad_request(format!("`ticket_id`: {err}")))?;
    Ok(TurnRequest {
        user,
        session,
        message: body.message,
        ticket,
        profile,
        deadline,
        now: time::OffsetDateTime::now_utc(),
        idempotency,
        decisions,
        attachments,
        pins,
    })
}

/// The `Idempotency-Key` header as sent, validated as a header value; `None` without one.
pub fn client_key(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY_HEADER) else { return Ok(None) };
    value.to_str().map(Some).map_err(|_| ApiError::bad_request("`Idempotency-Key` must be visible ASCII"))
}

/// The `Idempotency-Key` header, fingerprinted with what the turn is asked; `None` without one.
fn idempotency_key(
    headers: &HeaderMap,
    body: &TurnBody,
    extra: Option<&str>,
) -> Result<Option<IdempotencyKey>, ApiError> {
    let Some(key) = client_key(headers)? else { return Ok(None) };
    let mut request = vec![body.message.as_str(), body.ticket_id.as_deref().unwrap_or("")];
    // Decisions and attachments are part of what is asked; a plain message's fingerprint stays
    // what it always was.
    request.extend(extra);
    IdempotencyKey::new(key, &request)
        .map(Some)
        .map_err(|err| ApiError::bad_request(format!("`Idempotency-Key`: {err}")))
}

/// A request's body as bytes, decoded from base64 when the integration encoded it.
pub fn body_bytes(raw: &str, base64: bool) -> Result<Vec<u8>, ApiError> {
    if !base64 {
        return Ok(raw.as_bytes().to_vec());
    }
    base64::engine::general_purpose::STANDARD
        .decode(raw)
        .map_err(|_| ApiError::bad_request("the body is not valid base64"))
}

/// The body of `POST /sessions/{session_id}/turns`, bounded and validated; `base64` when the
/// integration encoded it.
pub fn parse_turn_body(raw: Option<&str>, base64: bool) -> Result<TurnBody, ApiError> {
    let raw = raw.unwrap_or("");
    if raw.len() > 2 * MAX_BODY_BYTES {
        return Err(too_large());
    }
    let bytes = body_bytes(raw, base64)?;
    if bytes.len() > MAX_BODY_BYTES {
        return Err(too_large());
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("the body is empty; send {\"message\": \"...\"}"));
    }
    let body: TurnBody = serde_json::from_slice(&bytes).map_err(|err| {
        let message =
            if err.is_data() { format!("invalid body: {err}") } else { format!("the body is not valid JSON: {err}") };
        ApiError::bad_request(message)
    })?;
    if body.message.len() > MAX_MESSAGE_BYTES {
        return Err(too_large());
    }
    if body.decisions.is_some() && !body.attachments.is_empty() {
        return Err(ApiError::bad_request("`attachments` go with a `message`, not with `decisions`"));
    }
    match (body.decisions.is_some(), body.message.trim().is_empty() && body.attachments.is_empty()) {
        (false, true) => return Err(ApiError::bad_request("`message` must not be empty without `attachments`")),
        (true, false) => {
            return Err(ApiError::bad_request(
                "send either `message` or `decisions`: the decisions go on with the paused turn",
            ))
        }
        _ => {}
    }
    // The decisions and attachments themselves are validated once, where the turn request is
    // built from them.
    Ok(body)
}

fn too_large() -> ApiError {
    ApiError::new(413, "payload_too_large", format!("`message` must be at most {} KiB", MAX_MESSAGE_BYTES / 1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyed(body: &str) -> Option<IdempotencyKey> {
        let mut headers = HeaderMap::new();
        headers.insert(IDEMPOTENCY_KEY_HEADER, http::HeaderValue::from_static("k-1"));
        let body = parse_turn_body(Some(body), false).unwrap();
        let (user, session) = (UserId::parse("u").unwrap(), SessionId::parse("s").unwrap());
        turn_request(user, session, body, &headers, UserProfile::default(), None).unwrap().idempotency
    }

    #[test]
    fn attachments_join_the_fingerprint_and_a_plain_message_keeps_its_own() {
        let plain = keyed(r#"{"message": "hola"}"#).unwrap();
        assert_eq!(plain, IdempotencyKey::new("k-1", &["hola", ""]).unwrap(), "as before attachments existed");
        let upload = "a".repeat(64);
        let attached =
            keyed(&format!(r#"{{"message": "hola", "attachments": [{{"upload": "{upload}", "name": "x.txt"}}]}}"#));
        let renamed =
            keyed(&format!(r#"{{"message": "hola", "attachments": [{{"upload": "{upload}", "name": "y.txt"}}]}}"#));
        let attached = attached.unwrap();
        assert_eq!(attached.key_hash, plain.key_hash);
        assert_ne!(attached.request_hash, plain.request_hash);
        assert_ne!(attached.request_hash, renamed.unwrap().request_hash);
    }

    #[test]
    fn attachments_are_validated_and_go_with_a_message_only() {
        let upload = "A".repeat(64);
        let body = |files: &[(&str, &str)]| {
            files
                .iter()
                .map(|(upload, name)| AttachmentBody { upload: (*upload).into(), name: (*name).into() })
                .collect::<Vec<_>>()
        };
        let checked = attachments(&body(&[(&upload, "/workspace/docs/a.pdf")])).unwrap();
        assert_eq!((checked[0].upload.as_str(), checked[0].name.as_str()), ("a".repeat(64).as_str(), "docs/a.pdf"));
        assert!(attachments(&body(&[(&upload, "a.pdf"), (&upload, "/workspace/a.pdf")]))
            .unwrap_err()
            .contains("twice"));
        let eleven: Vec<(&str, &str)> =
            ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"].map(|n| (upload.as_str(), n)).to_vec();
        assert!(attachments(&body(&eleven)).unwrap_err().contains("at most 10"));
        let both = format!(r#"{{"decisions": [], "attachments": [{{"upload": "{upload}", "name": "a"}}]}}"#);
        assert_eq!(parse_turn_body(Some(&both), false).unwrap_err().status, 400);
    }
}
