//! What one request shows: within the model's abilities, a count of images and documents, and a
//! share of its window, newest first. A file left out becomes a note that names it; the files of
//! the newest message that has any (the image the model just asked for) are always kept.

use crate::message::Message;
use crate::model::FileInput;

use super::cannot_see;

/// Most images one request shows (Bedrock Converse accepts 20).
pub const MAX_IMAGES_PER_REQUEST: usize = 20;
/// Most PDF documents one request shows (Bedrock Converse accepts 5).
pub const MAX_DOCUMENTS_PER_REQUEST: usize = 5;

/// The note of a file left out to make room.
const LEFT_OUT: &str = "shown earlier, left out of this request to make room; read it again with read_file to see it";

/// What [`fit`] did to a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fitted {
    pub images: usize,
    pub documents: usize,
    /// Files the model cannot see, sent as notes.
    pub unseeable: usize,
    /// Older files left out to make room, sent as notes.
    pub left_out: usize,
}

/// Makes `messages` show at most what `input` accepts, [`MAX_IMAGES_PER_REQUEST`] images,
/// [`MAX_DOCUMENTS_PER_REQUEST`] documents and `file_tokens` tokens of files, keeping the newest.
pub fn fit(messages: &mut [Message], input: FileInput, file_tokens: usize) -> Fitted {
    let mut fitted = Fitted::default();
    let mut tokens = 0usize;
    let newest_with_files = messages.iter().rposition(|message| !message.files().is_empty());
    for (index, message) in messages.iter_mut().enumerate().rev() {
        let (content, files) = match message {
            Message::User { content, files } | Message::Tool { content, files, .. } if !files.is_empty() => {
                (content, files)
            }
            _ => continue,
        };
        let protected = Some(index) == newest_with_files;
        let mut notes = Vec::new();
        let mut kept = Vec::new();
        for file in std::mem::take(files).into_iter().rev() {
            if !input.accepts(file.media_type) {
                fitted.unseeable += 1;
                notes.push(file.note(cannot_see(file.media_type)));
                continue;
            }
            let cost = input.tokens(&file);
            let (count, max) = if file.media_type.is_image() {
                (&mut fitted.images, MAX_IMAGES_PER_REQUEST)
            } else {
                (&mut fitted.documents, MAX_DOCUMENTS_PER_REQUEST)
            };
            if protected || (*count < max && tokens + cost <= file_tokens) {
                *count += 1;
                tokens += cost;
                kept.push(file);
            } else {
                fitted.left_out += 1;
                notes.push(file.note(LEFT_OUT));
            }
        }
        kept.reverse();
        *files = kept;
        for note in notes.into_iter().rev() {
            if !content.is_empty() {
                content.push('\n');
            }
            content.push_str(&note);
        }
    }
    fitted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{FileRef, MediaType};
    use crate::model::ImageTokens;

    fn image(n: usize) -> FileRef {
        FileRef {
            path: format!("/workspace/{n}.png"),
            sha256: format!("{n:064}"),
            media_type: MediaType::Png,
            size: 1000,
            width: Some(1568),
            height: Some(1176),
            pages: None,
        }
    }

    fn shown(n: usize) -> Message {
        Message::Tool {
            tool_call_id: format!("c{n}"),
            name: "read_file".into(),
            content: "Showing".into(),
            files: vec![image(n)],
        }
    }

    #[test]
    fn older_images_give_way_to_newer_ones_and_say_so() {
        let mut messages: Vec<Message> = (0..30).map(shown).collect();
        let fitted = fit(&mut messages, FileInput::all(ImageTokens::PixelsOver750), 1_000_000);
        assert_eq!(fitted.images, MAX_IMAGES_PER_REQUEST);
        assert_eq!(fitted.left_out, 10);
        assert!(messages[29].files().len() == 1 && messages[10].files().len() == 1);
        assert!(messages[9].files().is_empty());
        let Message::Tool { content, .. } = &messages[9] else { unreachable!() };
        assert!(content.contains("/workspace/9.png") && content.contains("read it again with read_file"), "{content}");
    }

    #[test]
    fn the_window_share_bounds_files_but_never_the_newest() {
        let mut messages: Vec<Message> = (0..3).map(shown).collect();
        // One 1568×1176 image is 2,459 tokens by Anthropic's rule: a share of 3,000 keeps one.
        let fitted = fit(&mut messages, FileInput::all(ImageTokens::PixelsOver750), 3_000);
        assert_eq!((fitted.images, fitted.left_out), (1, 2));
        let fitted = fit(&mut messages[2..], FileInput::all(ImageTokens::PixelsOver750), 10);
        assert_eq!(fitted.images, 1, "the image just asked for is kept whatever the share");
    }

    #[test]
    fn a_text_only_model_gets_notes() {
        let mut messages = vec![Message::User { content: "look".into(), files: vec![image(1)] }];
        let fitted = fit(&mut messages, FileInput::TEXT_ONLY, 1_000_000);
        assert_eq!(fitted.unseeable, 1);
        assert!(messages[0].files().is_empty());
        let Message::User { content, .. } = &messages[0] else { unreachable!() };
        assert_eq!(
            content,
            "look\n[image /workspace/1.png (image/png, 1 KB, 1568×1176): this model cannot see images]"
        );
    }
}
