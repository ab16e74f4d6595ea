//! What the context budget puts in place of what it cuts: tool-call arguments become a small, valid
//! JSON stub that says what was cut, and texts keep their head with a marker.

use serde_json::{json, Map, Value};

/// Arguments at most this long are never cut: they cost little and say what the call did.
pub const MIN_CUT_ARGUMENT_BYTES: usize = 512;
/// A field of cut arguments is kept when its JSON is at most this long (a path, a query, a flag).
const MAX_KEPT_FIELD_BYTES: usize = 256;
/// The marker after a text cut to fit.
pub const TRUNCATED_MARKER: &str = "\n[truncated to fit the model's context]";

/// The arguments of a call of `tool` with their large parts cut: in an object, every field whose
/// JSON is longer than [`MAX_KEPT_FIELD_BYTES`] becomes a note saying how many bytes were cut, so
/// the small fields (`file_path`, say) still tell what the call did; anything else, or an object
/// that stays large, becomes `{"_cut_to_fit_context": {"tool": …, "bytes": …}}`. `None` when
/// nothing would be saved.
pub fn cut_arguments(tool: &str, arguments: &Value) -> Option<Value> {
    let before = arguments.to_string().len();
    if before <= MIN_CUT_ARGUMENT_BYTES {
        return None;
    }
    let mut cut = None;
    if let Value::Object(fields) = arguments {
        let fields: Map<String, Value> = fields
            .iter()
            .map(|(key, value)| {
                let size = match value {
                    Value::String(text) => text.len(),
                    other => other.to_string().len(),
                };
                let kept = value.to_string().len() <= MAX_KEPT_FIELD_BYTES;
                let value = if kept {
                    value.clone()
                } else {
                    Value::String(format!("[{size} bytes cut to fit the model's context]"))
                };
                (key.clone(), value)
            })
            .collect();
        let fields = Value::Object(fields);
        if fields.to_string().len() <= MIN_CUT_ARGUMENT_BYTES {
            cut = Some(fields);
        }
    }
    let cut = cut.unwrap_or_else(|| json!({"_cut_to_fit_context": {"tool": tool, "bytes": before}}));
    (cut.to_string().len() < before).then_some(cut)
}

/// Cuts `text` to at most `keep` bytes (at a character boundary) and appends [`TRUNCATED_MARKER`].
pub fn truncate_text(text: &mut String, keep: usize) {
    text.truncate(text.floor_char_boundary(keep));
    text.push_str(TRUNCATED_MARKER);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_fields_become_notes_and_small_ones_stay() {
        let content = "x".repeat(200 * 1024);
        let cut = cut_arguments("write_file", &json!({"file_path": "/workspace/a.md", "content": content})).unwrap();
        assert_eq!(cut["file_path"], "/workspace/a.md");
        assert_eq!(cut["content"], format!("[{} bytes cut to fit the model's context]", 200 * 1024));
    }

    #[test]
    fn many_small_fields_or_a_non_object_become_one_stub() {
        let many: Map<String, Value> = (0..100).map(|i| (format!("k{i}"), json!("v".repeat(100)))).collect();
        let cut = cut_arguments("todowrite", &Value::Object(many)).unwrap();
        assert_eq!(cut["_cut_to_fit_context"]["tool"], "todowrite");
        let cut = cut_arguments("x", &json!("s".repeat(4000))).unwrap();
        assert_eq!(cut["_cut_to_fit_context"]["bytes"], 4002);
    }

    #[test]
    fn small_or_already_cut_arguments_are_left_alone() {
        assert_eq!(cut_arguments("ls", &json!({"path": "/workspace"})), None);
        let once = cut_arguments("write_file", &json!({"file_path": "a", "content": "c".repeat(9000)})).unwrap();
        assert_eq!(cut_arguments("write_file", &once), None);
    }
}
