//! Files a person hands a session, and what the model was shown of them:
//! `PUT /sessions/{id}/uploads/{name}` (the body is the file, up to [`DIRECT_UPLOAD_MAX_BYTES`]),
//! `POST /sessions/{id}/uploads` (a presigned link for a larger file), and
//! `GET /sessions/{id}/shown/{sha256}` (the bytes a model was sent, content-named).

use agent_core::message::MediaType;
use agent_core::turn::{Attachment, PresignedUpload, Upload};
use agent_core::IdempotencyKey;
use base64::Engine;
use http::HeaderMap;
use serde::Deserialize;
use serde_json::{json, Value};

use super::files::decode_path;
use super::message::{Answer, Payload};
use crate::api::{client_key, internal_error, ApiError};

/// The largest file a direct upload carries. API Gateway hands a binary body over in base64, which
/// makes 4 MiB about 5.6 MB: under Lambda's 6 MB request payload with the event around it.
pub const DIRECT_UPLOAD_MAX_BYTES: usize = 4 * 1024 * 1024;

/// The largest body of a request for a presigned upload: three short fields.
const MAX_PRESIGN_BODY_BYTES: usize = 4096;

/// A direct upload, validated: its name (relative to `/workspace`) and its bytes.
pub(super) struct DirectUpload {
    pub(super) name: String,
    pub(super) bytes: Vec<u8>,
}

impl DirectUpload {
    /// The upload `segments` (the raw path after `uploads/`) name, its bytes the body. An
    /// `Idempotency-Key` is checked and not kept: the upload is named by its content, so a retry
    /// stores the same object and answers the same body.
    pub(super) fn from_request(
        segments: &[&str],
        body: Option<&str>,
        base64: bool,
        headers: &HeaderMap,
    ) -> Result<Self, ApiError> {
        if let Some(key) = client_key(headers)? {
            // Held to the same rules as a turn's key, though nothing is stored under it.
            IdempotencyKey::new(key, &[]).map_err(|err| ApiError::bad_request(format!("`Idempotency-Key`: {err}")))?;
        }
        let name = decode_path(segments)?;
        let bytes = direct_body(body, base64, too_large_for_direct)?;
        Ok(Self { name, bytes })
    }
}

/// The body of a direct upload (a file, a skill's zip), decoded from base64 when the integration
/// encoded it, at most [`DIRECT_UPLOAD_MAX_BYTES`]; `too_large` says where a larger one goes.
pub(super) fn direct_body(body: Option<&str>, base64: bool, too_large: fn() -> ApiError) -> Result<Vec<u8>, ApiError> {
    let raw = body.unwrap_or("");
    // Measured before decoding, so an oversized body costs no copy.
    let encoded_max = if base64 { DIRECT_UPLOAD_MAX_BYTES.div_ceil(3) * 4 } else { DIRECT_UPLOAD_MAX_BYTES };
    if raw.len() > encoded_max {
        return Err(too_large());
    }
    let bytes = crate::api::body_bytes(raw, base64)?;
    if bytes.len() > DIRECT_UPLOAD_MAX_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

fn too_large_for_direct() -> ApiError {
    ApiError::new(
        413,
        "payload_too_large",
        format!(
            "a direct upload carries at most {} MiB: for a larger file ask for a link with \
             POST /sessions/{{session_id}}/uploads and PUT the file there",
            DIRECT_UPLOAD_MAX_BYTES / (1024 * 1024)
        ),
    )
}

/// The body of `POST /sessions/{id}/uploads`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PresignBody {
    name: String,
    size: u64,
    sha256: String,
}

/// A presigned upload asked for, validated: the file's size and SHA-256 (the link admits exactly
/// those bytes) and the name it will be attached under.
pub(super) struct PresignRequest {
    pub(super) size: u64,
    pub(super) sha256: String,
}

impl PresignRequest {
    pub(super) fn from_body(body: Option<&str>, base64: bool) -> Result<Self, ApiError> {
        let raw = body.unwrap_or("");
        if raw.len() > 2 * MAX_PRESIGN_BODY_BYTES {
            return Err(ApiError::bad_request("the body is too large for `{\"name\", \"size\", \"sha256\"}`"));
        }
        let bytes = if base64 {
            base64::engine::general_purpose::STANDARD
                .decode(raw)
                .map_err(|_| ApiError::bad_request("the body is not valid base64"))?
        } else {
            raw.as_bytes().to_vec()
        };
        let body: PresignBody = serde_json::from_slice(&bytes).map_err(|err| {
            ApiError::bad_request(format!("send {{\"name\": string, \"size\": bytes, \"sha256\": hex}}: {err}"))
        })?;
        // The name is checked now, so a client learns of a bad one before it uploads anything.
        let attachment = Attachment::new(&body.sha256, &body.name).map_err(ApiError::bad_request)?;
        Ok(Self { size: body.size, sha256: attachment.upload })
    }
}

/// `201` with what was stored; a retry answers the same.
pub(super) fn uploaded_answer(upload: &Upload) -> Result<Answer, ApiError> {
    let body = serde_json::to_value(upload).map_err(|_| internal_error())?;
    Ok(Answer { status: 201, body: Payload::Json(body), headers: Vec::new() })
}

/// `201` with the link and the headers the PUT must send, or `501` when the store makes no links.
pub(super) fn presigned_answer(link: Option<PresignedUpload>) -> Result<Answer, ApiError> {
    link_answer(link, "upload the file directly with PUT /sessions/{session_id}/uploads/{name}")
}

/// `201` with a presigned upload's link and the headers its PUT must send; `501` when the store
/// makes no links, naming the direct route (`direct`) to use instead.
pub(super) fn link_answer(link: Option<PresignedUpload>, direct: &str) -> Result<Answer, ApiError> {
    let link = link.ok_or_else(|| {
        ApiError::new(
            501,
            "not_implemented",
            format!(
                "this deployment's storage makes no upload links: {direct} (up to {} MiB)",
                DIRECT_UPLOAD_MAX_BYTES / (1024 * 1024)
            ),
        )
    })?;
    let headers: serde_json::Map<String, Value> =
        link.link.headers.into_iter().map(|(name, value)| (name, Value::String(value))).collect();
    let body = json!({
        "upload": link.upload,
        "url": link.link.url,
        "method": "PUT",
        "headers": headers,
        "expires_in": link.expires_in.as_secs(),
    });
    Ok(Answer { status: 201, body: Payload::Json(body), headers: vec![("cache-control", "no-store".to_owned())] })
}

/// The bytes a model was shown, for their owner; `404` for anything else. They are named by their
/// hash and never change, so a client may keep them.
pub(super) fn shown_answer(sha256: &str, found: Option<(MediaType, Vec<u8>)>) -> Result<Answer, ApiError> {
    let (media_type, bytes) = found.ok_or_else(|| ApiError::not_found(format!("no shown file `{sha256}`")))?;
    let headers = vec![
        ("content-type", media_type.mime().to_owned()),
        ("cache-control", "private, max-age=31536000, immutable".to_owned()),
        ("x-content-type-options", "nosniff".to_owned()),
    ];
    Ok(Answer { status: 200, body: Payload::Bytes(bytes), headers })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_direct_upload_is_bounded_before_and_after_decoding() {
        let headers = HeaderMap::new();
        let encoded = base64::engine::general_purpose::STANDARD.encode(vec![7u8; DIRECT_UPLOAD_MAX_BYTES]);
        let upload = DirectUpload::from_request(&["docs", "a.bin"], Some(&encoded), true, &headers).unwrap();
        assert_eq!((upload.name.as_str(), upload.bytes.len()), ("docs/a.bin", DIRECT_UPLOAD_MAX_BYTES));
        let encoded = base64::engine::general_purpose::STANDARD.encode(vec![7u8; DIRECT_UPLOAD_MAX_BYTES + 1]);
        let err = DirectUpload::from_request(&["a.bin"], Some(&encoded), true, &headers).err().unwrap();
        assert_eq!((err.status, err.code), (413, "payload_too_large"));
        assert!(err.message.contains("POST /sessions/{session_id}/uploads"), "{}", err.message);
        let err = DirectUpload::from_request(&["a.bin"], Some("not base64!"), true, &headers).err().unwrap();
        assert_eq!(err.status, 400);
        let err = DirectUpload::from_request(&["..", "a.bin"], Some("x"), false, &headers).err().unwrap();
        assert_eq!(err.status, 400);
        let mut keyed = HeaderMap::new();
        keyed.insert("idempotency-key", http::HeaderValue::from_static("up-1"));
        assert!(DirectUpload::from_request(&["a.bin"], Some("x"), false, &keyed).is_ok());
        keyed.insert("idempotency-key", http::HeaderValue::from_static("with space"));
        let err = DirectUpload::from_request(&["a.bin"], Some("x"), false, &keyed).err().unwrap();
        assert!(err.status == 400 && err.message.contains("Idempotency-Key"), "{}", err.message);
    }

    #[test]
    fn a_presign_request_names_a_clean_path_and_a_sha256() {
        let sha = "AB".repeat(32);
        let body = json!({"name": "docs/deed.pdf", "size": 5, "sha256": sha}).to_string();
        let request = PresignRequest::from_body(Some(&body), false).unwrap();
        assert_eq!((request.size, request.sha256), (5, "ab".repeat(32)));
        for bad in [
            json!({"name": "../deed.pdf", "size": 5, "sha256": sha}),
            json!({"name": "deed.pdf", "size": 5, "sha256": "abc"}),
            json!({"name": "deed.pdf", "size": -1, "sha256": sha}),
            json!({"name": "deed.pdf", "size": 5, "sha256": sha, "user_id": "x"}),
        ] {
            let err = PresignRequest::from_body(Some(&bad.to_string()), false).err().unwrap();
            assert_eq!(err.status, 400, "{bad}");
        }
    }

    #[test]
    fn shown_files_are_immutable_and_typed_and_a_missing_one_is_404() {
        let answer = shown_answer("a", Some((MediaType::Png, vec![1, 2]))).unwrap();
        assert_eq!(answer.status, 200);
        assert!(answer.headers.contains(&("content-type", "image/png".to_owned())));
        assert!(answer.headers.contains(&("cache-control", "private, max-age=31536000, immutable".to_owned())));
        assert_eq!(shown_answer("a", None).err().unwrap().status, 404);
        assert_eq!(presigned_answer(None).err().unwrap().status, 501);
    }
}
