//! A tool result on its way into the conversation: one over the offload bound is saved as a
//! workspace file (through the turn's environment, so it is committed with the turn) and the model
//! is given its path with its head and tail; one that cannot be saved is cut to the loop's bound
//! by `cut_text`, which also cuts an overlong reply or tool name.

use super::{TurnEnv, MAX_TOOL_RESULT_BYTES};
use crate::budget::estimate::BYTES_PER_TOKEN;
use crate::message::ToolCall;

/// The largest result saved whole: the largest file a write may make (`vfs::MAX_FILE_BYTES`).
/// A longer one is saved cut to it, with a note at its end.
pub const MAX_SAVED_RESULT_BYTES: usize = 256 * 1024;
/// The offload bound never goes below this, so small contexts still see a useful head and tail.
const MIN_OFFLOAD_BYTES: usize = 2 * 1024;
/// Nor above this, so a large context is not filled by a few results.
const MAX_OFFLOAD_BYTES: usize = 16 * 1024;

/// Results longer than this many bytes are saved to a file: an eighth of the input budget (in the
/// budget's three bytes a token), between 2 and 16 KiB. 10,752 bytes for a 32,768-token model that
/// keeps 4,096 tokens for its answer.
pub fn offload_bound(input_tokens: usize) -> usize {
    (input_tokens.saturating_mul(BYTES_PER_TOKEN) / 8).clamp(MIN_OFFLOAD_BYTES, MAX_OFFLOAD_BYTES)
}

/// What the conversation keeps of `content`, the result of `call`: itself when it is within
/// `bound`; else, when the environment saves it, a note naming the file with the result's head and
/// tail; else the result cut to [`MAX_TOOL_RESULT_BYTES`].
pub(super) async fn place(env: &mut dyn TurnEnv, call: &ToolCall, mut content: String, bound: usize) -> String {
    if content.len() <= bound {
        return content;
    }
    let total = content.len();
    let saved = if total > MAX_SAVED_RESULT_BYTES {
        // Only the part that is saved is copied, not the whole result.
        let kept = &content[..content.floor_char_boundary(MAX_SAVED_RESULT_BYTES)];
        let whole = format!("{kept}\n[result cut: showing {} of {total} bytes]", kept.len());
        env.save_result(call, &whole).await
    } else {
        env.save_result(call, &content).await
    };
    match saved {
        Some(path) => preview(&content, &path, bound),
        None => {
            truncate(&mut content);
            content
        }
    }
}

/// The note that replaces a saved result: where it is, how to read it, then its head and tail, in
/// about half of `bound` bytes.
fn preview(content: &str, path: &str, bound: usize) -> String {
    let (head_bytes, tail_bytes) = (bound / 4, bound / 8);
    let head = &content[..content.floor_char_boundary(head_bytes)];
    let tail = &content[content.ceil_char_boundary(content.len().saturating_sub(tail_bytes).max(head.len()))..];
    format!(
        "[This result is {total} bytes, more than the {bound} bytes kept in the conversation; the whole of it was \
         saved to {path}. Read it in parts with read_file (offset and limit) or search it with grep.]\n\
         --- first {} bytes ---\n{head}\n--- last {} bytes ---\n{tail}",
        head.len(),
        tail.len(),
        total = content.len(),
    )
}

/// Cuts a result that could not be saved to [`MAX_TOOL_RESULT_BYTES`], saying so.
pub(super) fn truncate(content: &mut String) {
    if content.len() > MAX_TOOL_RESULT_BYTES {
        let (shown, total) = (content.floor_char_boundary(MAX_TOOL_RESULT_BYTES), content.len());
        let marker = format!("[truncated: showing {shown} of {total} bytes; read a smaller range]");
        cut_text(content, MAX_TOOL_RESULT_BYTES, &marker);
    }
}

/// Cuts `text` to at most `max` bytes at a character boundary, then appends `marker` (on its own line).
pub(super) fn cut_text(text: &mut String, max: usize, marker: &str) {
    if text.len() <= max {
        return;
    }
    text.truncate(text.floor_char_boundary(max));
    if !marker.is_empty() {
        text.push('\n');
        text.push_str(marker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_an_eighth_of_the_input_budget_within_its_limits() {
        assert_eq!(offload_bound(32_768 - 4_096), 10_752);
        assert_eq!(offload_bound(1_024), MIN_OFFLOAD_BYTES);
        assert_eq!(offload_bound(1_000_000), MAX_OFFLOAD_BYTES);
    }

    #[test]
    fn a_preview_names_the_file_and_keeps_the_head_and_the_tail() {
        let content = format!("HEAD{}TAIL", "ñ".repeat(20_000));
        let shown = preview(&content, "/workspace/.results/c1.txt", 8_192);
        assert!(shown.contains("saved to /workspace/.results/c1.txt"), "{shown}");
        assert!(shown.contains(&format!("This result is {} bytes", content.len())), "{shown}");
        assert!(shown.contains("\nHEAD") && shown.ends_with("TAIL"), "{shown}");
        assert!(shown.len() < 8_192 / 4 + 8_192 / 8 + 400, "{}", shown.len());
    }
}
