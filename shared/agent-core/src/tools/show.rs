//! `read_file` when the turn can show files: a text file reads as always, an image or a PDF comes
//! back to the model as itself (checked and bounded by `files`), other binary files keep the
//! "binary file" error.

use serde_json::Value;

use super::SkillsEnv;
use crate::agent::ToolOutput;
use crate::vfs::{self, Read};

pub(super) const READ_FILE: &str = "read_file";

impl SkillsEnv<'_> {
    pub(super) async fn run_read_file(&mut self, arguments: &Value) -> ToolOutput {
        let read = {
            let vfs = self.shared.vfs.lock().await;
            vfs::read_file_or_bytes(&vfs, arguments).await
        };
        let (path, bytes) = match read {
            Ok(Read::Text(text)) => return ToolOutput::from(text),
            Err(error) => return ToolOutput::from(error),
            Ok(Read::Binary { path, bytes }) => (path, bytes),
        };
        let Some(shown) = self.shared.shown else {
            return ToolOutput::from(binary_error(&path, bytes.len()));
        };
        if !matches!(media::sniff(&bytes), media::Sniffed::Media(_)) {
            return ToolOutput::from(binary_error(&path, bytes.len()));
        }
        match shown.show(&path, bytes).await {
            // A model that cannot see the file gets the note alone.
            Ok((file, said)) if !shown.input().accepts(file.media_type) => ToolOutput::from(said),
            Ok((file, said)) => ToolOutput { content: said, files: vec![file], ..ToolOutput::default() },
            Err(error) => ToolOutput::from(format!("Error: {error}")),
        }
    }
}

fn binary_error(path: &str, size: usize) -> String {
    vfs::VfsError::Binary { path: path.to_owned(), size: size as u64 }.to_string()
}
