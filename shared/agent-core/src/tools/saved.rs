//! Tool results too large for the conversation, saved as workspace files: the file they go to
//! (`/workspace/.results/{call id}.txt`) and which results are never saved.

use crate::message::ToolCall;
use crate::vfs::Vfs;

/// The folder saved results go to, under `/workspace`.
pub const RESULTS_FOLDER: &str = "/workspace/.results";

/// The path a result of call `id` is saved to: the id with anything but ASCII letters, digits, `-`
/// and `_` replaced by `_` (ids are at most 128 bytes, so the path stays within the workspace's bound).
pub fn result_path(id: &str) -> String {
    let clean: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    let clean = if clean.is_empty() { "result".to_owned() } else { clean };
    format!("{RESULTS_FOLDER}/{clean}.txt")
}

/// Saves `content`, the result of `call`, when the model can read it back (`read_file` is among
/// `offered`) and it is not a read of a file (which the model reads in parts instead) or a search
/// of skills (which shrinks on its own); the workspace's quotas apply as to any write.
pub async fn save(vfs: &mut Vfs<'_>, offered: &[String], call: &ToolCall, content: &str) -> Option<String> {
    let readable = offered.iter().any(|name| name == "read_file");
    if !readable || call.name == "read_file" || call.name == super::FIND_SKILLS || super::reads_skill_text(call) {
        return None;
    }
    let path = result_path(&call.id);
    match vfs.write_file(&path, content).await {
        Ok(_) => Some(path),
        Err(err) => {
            tracing::info!(tool = %call.name, error = %err, "a large tool result could not be saved; it is cut");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_become_clean_file_names() {
        assert_eq!(result_path("call_1_0"), "/workspace/.results/call_1_0.txt");
        assert_eq!(result_path("toolu/../x y"), "/workspace/.results/toolu____x_y.txt");
        assert_eq!(result_path(""), "/workspace/.results/result.txt");
    }
}
