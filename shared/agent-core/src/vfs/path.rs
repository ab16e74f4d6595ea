//! Normalisation of the paths the model sends. Nothing here touches storage: a path is turned
//! into clean segments, and only then does the filesystem decide which root (if any) it names.

use super::{VfsError, MAX_PATH_BYTES};

/// Splits a model-supplied path into clean segments, `/` being no segment at all.
///
/// Rejected as "not found" (they can only be escape attempts or names that do not exist):
/// `..` segments, doubled slashes and percent-encoded bytes (`%2e`, `%2F`, ...).
/// Rejected as invalid (malformed, and the message tells the model how to fix the call):
/// empty or relative paths, backslashes, control characters and paths over [`MAX_PATH_BYTES`].
/// `.` segments and one trailing slash are dropped; surrounding whitespace is trimmed.
pub(crate) fn parse(input: &str) -> Result<Vec<String>, VfsError> {
    let path = input.trim();
    if path.is_empty() {
        return Err(VfsError::InvalidPath(
            "the path is empty; use an absolute path such as /workspace/notes.md".into(),
        ));
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(VfsError::InvalidPath(format!("the path is longer than {MAX_PATH_BYTES} bytes")));
    }
    if path.chars().any(char::is_control) {
        return Err(VfsError::InvalidPath("the path contains control characters".into()));
    }
    if path.contains('\\') {
        return Err(VfsError::InvalidPath(format!("{path} (use / as the separator, not \\)")));
    }
    if has_percent_escape(path) {
        return Err(VfsError::NotFound(path.to_owned()));
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(VfsError::InvalidPath(format!(
            "{path} (paths must be absolute and start with /workspace, /memories, /ticket or /skills)"
        )));
    };
    if path.contains("//") {
        return Err(VfsError::NotFound(path.to_owned()));
    }
    let mut segments = Vec::new();
    for segment in rest.split('/') {
        match segment {
            // Only possible as the last segment (a trailing slash) or for "/" itself.
            "" | "." => {}
            ".." => return Err(VfsError::NotFound(path.to_owned())),
            name => segments.push(name.to_owned()),
        }
    }
    Ok(segments)
}

/// The absolute virtual path of clean segments.
pub(crate) fn display(segments: &[String]) -> String {
    format!("/{}", segments.join("/"))
}

/// Whether `rel` (a listed object's key relative to its root prefix) is already a clean,
/// normalised relative file path; anything else stays invisible to the model.
pub(crate) fn is_clean_relative(rel: &str) -> bool {
    !rel.is_empty() && !rel.ends_with('/') && parse(&format!("/{rel}")).is_ok_and(|segments| segments.join("/") == rel)
}

/// `%` followed by two hex digits, in any case.
fn has_percent_escape(path: &str) -> bool {
    path.as_bytes().windows(3).any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(path: &str) -> Vec<String> {
        parse(path).unwrap_or_else(|e| panic!("{path:?} should parse: {e}"))
    }

    #[test]
    fn normalises_clean_paths() {
        assert!(ok("/").is_empty());
        assert_eq!(ok("/workspace/notes/a.md"), ["workspace", "notes", "a.md"]);
        assert_eq!(ok("  /workspace/./notes/ "), ["workspace", "notes"]);
        assert_eq!(ok("/skills/compraventa/"), ["skills", "compraventa"]);
        assert_eq!(ok("/workspace/50%.md"), ["workspace", "50%.md"]);
        assert_eq!(ok("/workspace/a...b"), ["workspace", "a...b"]);
    }

    #[test]
    fn escapes_are_not_found() {
        for bad in [
            "/skills/compraventa/../hipoteca/SKILL.md",
            "/workspace/..",
            "/skills/compraventa/%2e%2e/x",
            "/skills/compraventa/..%2F..%2Fu2",
            "//skills/compraventa/SKILL.md",
            "/workspace//a",
        ] {
            assert!(matches!(parse(bad), Err(VfsError::NotFound(_))), "{bad:?}");
        }
    }

    #[test]
    fn malformed_paths_are_invalid() {
        let long = format!("/workspace/{}", "a".repeat(MAX_PATH_BYTES));
        for bad in
            ["", "   ", "notes.md", "workspace/a", "/workspace\\a", "/workspace/a\0b", "/workspace/\u{1b}[31m", &long]
        {
            assert!(matches!(parse(bad), Err(VfsError::InvalidPath(_))), "{bad:?}");
        }
    }

    #[test]
    fn listed_keys_must_already_be_clean() {
        assert!(is_clean_relative("resources/ejemplo.md"));
        for bad in ["", "a/", "a//b", "./a", "a/../b", "a%2fb", "a\\b", "/a"] {
            assert!(!is_clean_relative(bad), "{bad:?}");
        }
    }
}
