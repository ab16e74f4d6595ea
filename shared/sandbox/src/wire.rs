//! The JSON of one sandbox call: the Lambda function's event, its response and its error. The local
//! backend speaks it too, so that it runs exactly the function's code path.

use std::sync::Arc;
use std::time::Duration;

use agent_ports::sandbox::{
    cut_middle, ExecOutcome, ExecRequest, SandboxError, SandboxFile, WorkspaceChanges, MAX_CALL_FILES,
    MAX_CALL_FILE_BYTES, MAX_OUTPUT_CHARS, MAX_RESULT_FILE_BYTES,
};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};

/// The most bytes of files one response carries together: a Lambda response is at most 6 MB, and
/// base64 makes 4.4 MB of files 5.9 MB.
pub const MAX_RESPONSE_FILE_BYTES: u64 = MAX_CALL_FILE_BYTES;
/// The most files one response brings back.
pub const MAX_RESPONSE_FILES: usize = MAX_CALL_FILES;
/// The longest path accepted in either direction, in bytes (the virtual filesystem's bound).
pub const MAX_PATH_BYTES: usize = 1024;
/// The most `not_kept` lines a response carries; the handler sums up the rest in one line.
pub const MAX_NOT_KEPT_LINES: usize = 50;

/// The `not_kept` line of a command whose changed files are over what one response brings back:
/// none of its changes are kept (neither its files nor its deletions), so the workspace is never
/// left half-changed; the line names the bound and the command's totals.
pub fn over_result_bounds(files: usize, bytes: u64, result_bytes: u64) -> Option<String> {
    let bound = if files > MAX_RESPONSE_FILES {
        format!("the {MAX_RESPONSE_FILES} files")
    } else if bytes > result_bytes {
        format!("the {result_bytes} bytes")
    } else {
        return None;
    };
    Some(format!(
        "none of the command's changes were brought back: it wrote or changed {files} files of {bytes} bytes \
         together, past {bound} one command may bring back (at most {MAX_RESPONSE_FILES} files and {result_bytes} \
         bytes together); write fewer or smaller files per command"
    ))
}

/// The error codes of [`WireError`].
pub const INVALID_REQUEST: &str = "invalid_request";
pub const TOO_LARGE: &str = "too_large";
pub const INTERNAL: &str = "internal";
/// The environment lacks some of the call's bundles (listed in `missing`); the caller sends them.
pub const MISSING_BUNDLES: &str = "missing_bundles";
/// A skill's bundle could not be installed; the message says why and is shown to the model.
pub const BAD_BUNDLE: &str = "bad_bundle";

/// One command to run: the function's event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireRequest {
    pub tenant: String,
    pub session: String,
    pub command: String,
    pub timeout_ms: u64,
    #[serde(default)]
    pub workspace: Vec<WireFile>,
    #[serde(default)]
    pub skills: Vec<WireSkill>,
    #[serde(default)]
    pub ticket: Option<Vec<WireFile>>,
}

/// One file: its path relative to its root and its bytes in standard base64 (with padding).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireFile {
    pub path: String,
    pub data: String,
}

/// A skill's folder, mounted read-only under the skills root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireSkill {
    pub name: String,
    pub files: Vec<WireFile>,
    /// The skill's bundle, installed before the command runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<WireBundle>,
}

/// A skill's bundle as a call names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireBundle {
    pub sha256: String,
    pub size: u64,
}

/// One part of a bundle's bytes sent to the Lambda function: `{"bundle_part": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireBundlePart {
    pub tenant: String,
    pub sha256: String,
    /// The whole bundle's size.
    pub size: u64,
    /// Where this part starts; parts are sent in order.
    pub offset: u64,
    /// Standard base64.
    pub data: String,
}

/// The function's answer to a part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WirePartAnswer {
    /// Bytes of the bundle held so far.
    pub received: u64,
    /// The bundle is installed (after its last part).
    pub installed: bool,
}

/// How the command ended: the function's response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireResponse {
    pub output: String,
    pub omitted_bytes: u64,
    pub exit_code: Option<i32>,
    pub stopped: Option<String>,
    pub timed_out: bool,
    pub written: Vec<WireFile>,
    pub deleted: Vec<String>,
    pub not_kept: Vec<String>,
    pub duration_ms: u64,
}

/// Why the function did not run the command: `{"error": "invalid_request", "message": "..."}`;
/// `too_large` also says how large the files were.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    pub error: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<usize>,
    /// `missing_bundles`: the SHA-256 of each bundle to send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<Vec<String>>,
}

impl WireFile {
    pub fn encode(path: impl Into<String>, bytes: &[u8]) -> Self {
        Self { path: path.into(), data: STANDARD.encode(bytes) }
    }

    /// The number of bytes `data` decodes to, known without decoding (exact for valid base64), so
    /// that a bound can be checked before anything is allocated.
    pub fn decoded_len(&self) -> u64 {
        let data = self.data.as_bytes();
        let padding = data.iter().rev().take(2).take_while(|&&byte| byte == b'=').count();
        ((data.len() / 4 * 3).saturating_sub(padding)) as u64
    }

    /// The bytes, refused past `max_bytes`.
    pub fn decode(&self, max_bytes: u64) -> Result<Vec<u8>, String> {
        if self.decoded_len() > max_bytes {
            return Err(format!("{}: more than {max_bytes} bytes", self.path));
        }
        STANDARD.decode(&self.data).map_err(|err| format!("{}: invalid base64 ({err})", self.path))
    }

    fn from_sandbox(file: &SandboxFile) -> Self {
        Self::encode(file.path.clone(), &file.bytes)
    }
}

impl WireRequest {
    /// The event for `request`: every file encoded, nothing checked (the handler checks).
    pub fn from_exec(request: &ExecRequest) -> Self {
        let files = |files: &[SandboxFile]| files.iter().map(WireFile::from_sandbox).collect::<Vec<_>>();
        Self {
            tenant: request.tenant.as_str().to_owned(),
            session: request.session.as_str().to_owned(),
            command: request.command.clone(),
            timeout_ms: u64::try_from(request.timeout.as_millis()).unwrap_or(u64::MAX),
            workspace: files(&request.workspace),
            skills: request
                .skills
                .iter()
                .map(|skill| WireSkill {
                    name: skill.name.clone(),
                    files: files(&skill.files),
                    bundle: skill
                        .bundle
                        .as_ref()
                        .map(|bundle| WireBundle { sha256: bundle.sha256.clone(), size: bundle.size }),
                })
                .collect(),
            ticket: request.ticket.as_deref().map(files),
        }
    }

    /// The files of the call (workspace, skills and ticket) and their decoded bytes together.
    pub fn file_totals(&self) -> (u64, usize) {
        let ticket = self.ticket.iter().flatten();
        let skills = self.skills.iter().flat_map(|skill| skill.files.iter());
        self.workspace
            .iter()
            .chain(skills)
            .chain(ticket)
            .fold((0, 0), |(bytes, files), file| (bytes + file.decoded_len(), files + 1))
    }
}

impl WireResponse {
    /// The outcome the core understands. A response that breaks the contract (bad base64, a file
    /// or a total over the bounds, an invalid path) is an error: the backend is broken.
    pub fn into_outcome(self) -> Result<ExecOutcome, String> {
        if self.written.len() > MAX_RESPONSE_FILES || self.deleted.len() > MAX_CALL_FILES {
            return Err(format!(
                "the response lists {} written and {} deleted files",
                self.written.len(),
                self.deleted.len()
            ));
        }
        if self.not_kept.len() > MAX_NOT_KEPT_LINES + 1 {
            return Err(format!("the response has {} not-kept lines", self.not_kept.len()));
        }
        let mut total = 0;
        let mut written = Vec::with_capacity(self.written.len());
        for file in self.written {
            check_relative_path(&file.path).map_err(|err| format!("written file {:?}: {err}", file.path))?;
            total += file.decoded_len();
            if total > MAX_RESPONSE_FILE_BYTES {
                return Err(format!("the written files are over {MAX_RESPONSE_FILE_BYTES} bytes together"));
            }
            let bytes = file.decode(MAX_RESULT_FILE_BYTES)?;
            written.push(SandboxFile { path: file.path, bytes: Arc::new(bytes) });
        }
        for path in &self.deleted {
            check_relative_path(path).map_err(|err| format!("deleted file {path:?}: {err}"))?;
        }
        // The handler cuts the output already; a longer one is cut again rather than trusted.
        let (output, omitted_bytes) = if self.output.len() > 4 * (MAX_OUTPUT_CHARS + 200) {
            cut_middle(&self.output, MAX_OUTPUT_CHARS, self.omitted_bytes)
        } else {
            (self.output, self.omitted_bytes)
        };
        let not_kept =
            self.not_kept.into_iter().map(|line| line.chars().take(MAX_PATH_BYTES + 200).collect()).collect();
        Ok(ExecOutcome {
            output,
            omitted_bytes,
            exit_code: self.exit_code,
            stopped: self.stopped.map(|reason| reason.chars().take(200).collect()),
            timed_out: self.timed_out,
            changes: WorkspaceChanges { written, deleted: self.deleted, not_kept },
            duration: Duration::from_millis(self.duration_ms),
            // Every call of the function starts afresh: there is no backend session to resume.
            session: None,
        })
    }
}

impl WireError {
    pub fn new(error: &str, message: impl Into<String>) -> Self {
        Self { error: error.to_owned(), message: message.into(), bytes: None, files: None, missing: None }
    }

    /// What the core is told: `too_large` as such (the model can act on it), anything else as the
    /// sandbox being unavailable (the detail is for the logs).
    pub fn into_sandbox_error(self) -> SandboxError {
        if self.error == TOO_LARGE {
            if let (Some(bytes), Some(files)) = (self.bytes, self.files) {
                return SandboxError::TooLarge {
                    bytes,
                    files,
                    max_bytes: MAX_CALL_FILE_BYTES,
                    max_files: MAX_CALL_FILES,
                };
            }
        }
        if self.error == BAD_BUNDLE {
            return SandboxError::Bundle(self.message.chars().take(1_000).collect());
        }
        SandboxError::Unavailable(format!("{}: {}", self.error, self.message))
    }
}

/// Checks a path relative to its root, in a request or in a workspace: `/`-separated segments,
/// none empty, `.` or `..`, no backslash, control character or percent escape (names the virtual
/// filesystem would refuse or hide), at most [`MAX_PATH_BYTES`].
pub fn check_relative_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("the path is empty".into());
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(format!("the path is longer than {MAX_PATH_BYTES} bytes"));
    }
    if path.chars().any(char::is_control) {
        return Err("the path contains control characters".into());
    }
    if path.contains('\\') {
        return Err("the path contains a backslash".into());
    }
    if path.trim() != path {
        return Err("the path starts or ends with whitespace".into());
    }
    let bytes = path.as_bytes();
    if bytes.windows(3).any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit()) {
        return Err("the path contains a percent escape".into());
    }
    if path.split('/').any(|segment| matches!(segment, "" | "." | "..")) {
        return Err("the path must be relative, without empty, `.` or `..` segments".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use agent_ports::sandbox::SkillMount;
    use agent_ports::{SessionId, UserId};

    use super::*;

    fn file(path: &str, bytes: &[u8]) -> SandboxFile {
        SandboxFile { path: path.into(), bytes: Arc::new(bytes.to_vec()) }
    }

    #[test]
    fn a_request_goes_through_json_and_keeps_its_bytes() {
        let request = ExecRequest {
            tenant: UserId::parse("u1").expect("valid"),
            session: SessionId::parse("s1").expect("valid"),
            command: "ls".into(),
            timeout: Duration::from_millis(1500),
            workspace: vec![file("a/b.bin", &[0, 255, 10, 13])],
            skills: vec![SkillMount { name: "pdf".into(), files: vec![file("SKILL.md", b"# pdf")], bundle: None }],
            ticket: Some(vec![file("t.txt", b"t")]),
            resume: None,
        };
        let wire = WireRequest::from_exec(&request);
        let json = serde_json::to_string(&wire).expect("serializes");
        let back: WireRequest = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, wire);
        assert_eq!(back.timeout_ms, 1500);
        assert_eq!(back.workspace[0].decode(10).expect("decodes"), vec![0, 255, 10, 13]);
        assert_eq!(back.file_totals(), (4 + 5 + 1, 3));
    }

    #[test]
    fn unknown_fields_in_a_request_are_refused() {
        let json = r#"{"tenant":"u","session":"s","command":"true","timeout_ms":1,"extra":1}"#;
        assert!(serde_json::from_str::<WireRequest>(json).is_err());
        let json = r#"{"tenant":"u","session":"s","command":"true","timeout_ms":1}"#;
        let request: WireRequest = serde_json::from_str(json).expect("the file lists default to empty");
        assert!(request.workspace.is_empty() && request.skills.is_empty() && request.ticket.is_none());
    }

    #[test]
    fn decoded_lengths_are_known_before_decoding() {
        for bytes in [&b""[..], b"a", b"ab", b"abc", b"abcd", &[0u8; 1000]] {
            let file = WireFile::encode("x", bytes);
            assert_eq!(file.decoded_len(), bytes.len() as u64);
        }
        assert!(WireFile::encode("x", b"abcd").decode(3).is_err());
    }

    #[test]
    fn a_response_with_bad_base64_or_paths_is_an_error() {
        let response = |written: Vec<WireFile>, deleted: Vec<String>| WireResponse {
            output: "ok".into(),
            omitted_bytes: 0,
            exit_code: Some(0),
            stopped: None,
            timed_out: false,
            written,
            deleted,
            not_kept: vec![],
            duration_ms: 12,
        };
        let good = response(vec![WireFile::encode("out/a.txt", b"hi")], vec!["old.txt".into()]);
        let outcome = good.into_outcome().expect("valid");
        assert_eq!(outcome.changes.written, vec![file("out/a.txt", b"hi")]);
        assert_eq!(outcome.changes.deleted, vec!["old.txt".to_owned()]);
        assert_eq!(outcome.duration, Duration::from_millis(12));
        let bad = WireFile { path: "a".into(), data: "!!!!".into() };
        assert!(response(vec![bad], vec![]).into_outcome().is_err());
        assert!(response(vec![WireFile::encode("../a", b"")], vec![]).into_outcome().is_err());
        assert!(response(vec![], vec!["/etc/passwd".into()]).into_outcome().is_err());
    }

    #[test]
    fn paths_are_relative_and_clean() {
        for good in ["a", "a/b.txt", "dir/x y.md", "50%.md", "a...b", "ñ/ü.txt"] {
            assert_eq!(check_relative_path(good), Ok(()), "{good:?}");
        }
        let long = "a".repeat(MAX_PATH_BYTES + 1);
        for bad in ["", "/a", "a/", "a//b", "./a", "a/../b", "..", "a\\b", "a\0b", "a\nb", "%2e%2e/x", " a", &long] {
            assert!(check_relative_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn too_large_is_told_to_the_model_and_the_rest_is_unavailable() {
        let mut error = WireError::new(TOO_LARGE, "too large");
        (error.bytes, error.files) = (Some(5_000_000), Some(3));
        assert!(matches!(error.into_sandbox_error(), SandboxError::TooLarge { bytes: 5_000_000, files: 3, .. }));
        let error = WireError::new(INTERNAL, "bwrap failed");
        assert!(matches!(error.into_sandbox_error(), SandboxError::Unavailable(detail) if detail.contains("bwrap")));
    }
}
