//! `GET /sessions/{session_id}/files/{path...}`: a workspace file of the caller's own session, as
//! bytes up to [`INLINE_MAX_BYTES`] or as a `303` to a short-lived presigned link beyond.

use agent_core::store::LinkHeaders;
use agent_core::turn::FileDownload;
use agent_core::SessionId;
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::json;

use super::message::{Answer, Payload};
use crate::api::ApiError;

/// The largest file answered inline: base64 makes it 4 MiB, under Lambda's 6 MB response limit.
pub const INLINE_MAX_BYTES: u64 = 3 * 1024 * 1024;

/// RFC 5987 `attr-char`s stay as they are in `filename*`; everything else is percent-encoded.
const ATTR_CHAR_ESCAPES: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'!')
    .remove(b'#')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b'-')
    .remove(b'.')
    .remove(b'^')
    .remove(b'_')
    .remove(b'`')
    .remove(b'|')
    .remove(b'~');

/// The file asked for: its path relative to `/workspace`, and the headers a link to it is signed with.
pub(super) struct FileRequest {
    pub(super) relative: String,
    pub(super) link_headers: LinkHeaders,
}

impl FileRequest {
    /// The file at `segments` (the raw path after `files/`, relative to `/workspace`).
    pub(super) fn from_segments(segments: &[&str]) -> Result<Self, ApiError> {
        let relative = decode_path(segments)?;
        let name = relative.rsplit('/').next().unwrap_or(relative.as_str());
        // A link is served by S3 with the headers signed into it: the file's type by its extension
        // (its bytes are not read here) and its name, rather than the blob's octet-stream and hash.
        let link_headers = LinkHeaders {
            content_type: Some(content_type_by_name(name)),
            content_disposition: Some(content_disposition(name)),
        };
        Ok(Self { relative, link_headers })
    }

    /// The file's path in the session's workspace.
    pub(super) fn path(&self) -> String {
        format!("/workspace/{}", self.relative)
    }
}

/// The file for its owner: 200 with the bytes, 303 with a link for a large one, 404 for anything
/// the caller cannot see.
pub(super) fn file_answer(
    session: &SessionId,
    file: &FileRequest,
    download: Option<FileDownload>,
) -> Result<Answer, ApiError> {
    let relative = &file.relative;
    let download =
        download.ok_or_else(|| ApiError::not_found(format!("no file `/workspace/{relative}` in this session")))?;
    let private = [("x-content-type-options", "nosniff".to_owned()), ("cache-control", "private, no-store".to_owned())];
    match download {
        FileDownload::Bytes { path, bytes } => {
            tracing::info!(session = %session, path, size = bytes.len(), "workspace file sent");
            let name = path.rsplit('/').next().unwrap_or(path.as_str());
            let mut headers =
                vec![("content-type", content_type(name, &bytes)), ("content-disposition", content_disposition(name))];
            headers.extend(private);
            Ok(Answer { status: 200, body: Payload::Bytes(bytes), headers })
        }
        FileDownload::Link { path, size, url, expires_in } => {
            tracing::info!(session = %session, path, size, "workspace file linked");
            let body = json!({"url": url, "expires_in": expires_in.as_secs(), "size": size, "path": path});
            let mut headers = vec![("location", url)];
            headers.extend(private);
            Ok(Answer { status: 303, body: Payload::Json(body), headers })
        }
    }
}

/// The path's segments percent-decoded and joined with `/`; a segment that decodes to something
/// that is not a plain name (`/`, `.`, `..`, a control character, invalid UTF-8) is a 400.
pub(super) fn decode_path(segments: &[&str]) -> Result<String, ApiError> {
    let mut names = Vec::with_capacity(segments.len());
    for segment in segments {
        let name = percent_decode_str(segment)
            .decode_utf8()
            .map_err(|_| ApiError::bad_request("the file path is not valid UTF-8"))?;
        if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.chars().any(char::is_control) {
            return Err(ApiError::bad_request(
                "each segment of the file path must be a plain name: no `/`, `.`, `..` or control characters",
            ));
        }
        names.push(name);
    }
    Ok(names.join("/"))
}

/// The media type the file's extension names (`application/octet-stream` when it names none),
/// with `charset=utf-8` for a text type whose bytes are UTF-8.
fn content_type(name: &str, bytes: &[u8]) -> String {
    let Some(mime) = mime_guess::from_path(name).first() else { return "application/octet-stream".to_owned() };
    if mime.type_() == mime_guess::mime::TEXT && std::str::from_utf8(bytes).is_ok() {
        format!("{}; charset=utf-8", mime.essence_str())
    } else {
        mime.essence_str().to_owned()
    }
}

/// The media type the file's extension names, for a link whose bytes are not read: a text type is
/// said to be UTF-8, as what a turn writes is.
fn content_type_by_name(name: &str) -> String {
    match mime_guess::from_path(name).first() {
        Some(mime) if mime.type_() == mime_guess::mime::TEXT => format!("{}; charset=utf-8", mime.essence_str()),
        Some(mime) => mime.essence_str().to_owned(),
        None => "application/octet-stream".to_owned(),
    }
}

/// `attachment` with the file's name (RFC 6266): a quoted ASCII `filename`, and `filename*` in
/// UTF-8 when the name is not ASCII (the plain one then has `_` for each other character).
pub(super) fn content_disposition(name: &str) -> String {
    let fallback: String = name
        .chars()
        .map(|c| match c {
            '"' | '\\' => '_',
            c if c.is_ascii() && !c.is_ascii_control() => c,
            _ => '_',
        })
        .collect();
    if name.is_ascii() && fallback == name {
        format!("attachment; filename=\"{name}\"")
    } else {
        let encoded = utf8_percent_encode(name, ATTR_CHAR_ESCAPES);
        format!("attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_decode_and_traversals_are_refused() {
        assert_eq!(decode_path(&["notes", "plan.md"]).unwrap(), "notes/plan.md");
        assert_eq!(decode_path(&["informe%20final.pdf"]).unwrap(), "informe final.pdf");
        assert_eq!(decode_path(&["caf%C3%A9.txt"]).unwrap(), "café.txt");
        for bad in ["..%2Fplan.md", "%2e%2e", "%2E", "..", ".", "a%2fb", "a%00b", "a%0Ab", "a%7Fb", "%FF", "%C2%85"] {
            let err = decode_path(&["notes", bad]).expect_err(bad);
            assert_eq!((err.status, err.code), (400, "bad_request"), "{bad}");
        }
    }

    #[test]
    fn media_types_come_from_the_extension() {
        assert_eq!(content_type("plan.md", b"# plan"), "text/markdown; charset=utf-8");
        assert_eq!(content_type("a.txt", b"hola"), "text/plain; charset=utf-8");
        assert_eq!(content_type("a.txt", &[0xff, 0xfe]), "text/plain");
        assert_eq!(content_type("a.pdf", b"%PDF"), "application/pdf");
        assert_eq!(content_type("a.png", b""), "image/png");
        assert_eq!(content_type("datos", b"x"), "application/octet-stream");
        assert_eq!(content_type("x.nosuchext", b"x"), "application/octet-stream");
        assert_eq!(content_type_by_name("informe.pdf"), "application/pdf");
        assert_eq!(content_type_by_name("datos.csv"), "text/csv; charset=utf-8");
        assert_eq!(content_type_by_name("datos"), "application/octet-stream");
    }

    #[test]
    fn attachment_names_follow_rfc_6266() {
        assert_eq!(content_disposition("plan.md"), "attachment; filename=\"plan.md\"");
        assert_eq!(
            content_disposition("escritura compraventa.pdf"),
            "attachment; filename=\"escritura compraventa.pdf\""
        );
        assert_eq!(
            content_disposition("café \"final\".txt"),
            "attachment; filename=\"caf_ _final_.txt\"; filename*=UTF-8''caf%C3%A9%20%22final%22.txt"
        );
        assert_eq!(content_disposition("a\\b"), "attachment; filename=\"a_b\"; filename*=UTF-8''a%5Cb");
    }
}
