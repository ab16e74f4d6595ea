//! The files a message shows, as every provider sends them: the bytes of those the model may see,
//! and a short note in the message's text for each of the others.

use std::borrow::Cow;

use agent_ports::{FileBytes, FileInput, FileRef, MediaType};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// A file the request carries, with its bytes.
pub(crate) struct Shown<'a> {
    pub(crate) file: &'a FileRef,
    pub(crate) bytes: &'a [u8],
}

impl<'a> Shown<'a> {
    /// The bytes in standard base64, as the JSON APIs carry them.
    pub(crate) fn base64(&self) -> String {
        STANDARD.encode(self.bytes)
    }

    /// A `data:` URL of the bytes, as OpenAI takes images and files.
    pub(crate) fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.file.media_type.mime(), self.base64())
    }

    /// The file's name: the last segment of its path.
    pub(crate) fn file_name(&self) -> &'a str {
        file_name(&self.file.path)
    }
}

/// A message's text and files as a request sends them.
pub(crate) struct Split<'a> {
    /// The message's text, followed by a note for each file that is not sent.
    pub(crate) text: Cow<'a, str>,
    pub(crate) shown: Vec<Shown<'a>>,
}

/// Splits a message's files into those sent with their bytes and those sent as a note, because a
/// model must never be sent a block its API refuses: a kind it cannot see, or bytes the core did
/// not provide.
pub(crate) fn split<'a>(content: &'a str, files: &'a [FileRef], bytes: &'a FileBytes, input: FileInput) -> Split<'a> {
    let mut text = Cow::Borrowed(content);
    let mut shown = Vec::with_capacity(files.len());
    let mut noted = false;
    for file in files {
        let withheld = if !input.accepts(file.media_type) {
            Withheld::Unsupported
        } else if let Some(found) = bytes.get(&file.sha256) {
            shown.push(Shown { file, bytes: found });
            continue;
        } else {
            Withheld::Missing
        };
        let text = text.to_mut();
        if !text.is_empty() {
            // A blank line parts the message's own text from the notes, which follow one a line.
            text.push_str(if noted { "\n" } else { "\n\n" });
        }
        text.push_str(&note(file, withheld));
        noted = true;
    }
    Split { text, shown }
}

/// Why a file is sent as a note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Withheld {
    /// The model cannot take this kind of file.
    Unsupported,
    /// The request does not carry the file's bytes.
    Missing,
}

/// The note sent in place of a file, such as
/// `[image /workspace/id.jpg (image/jpeg, 1.2 MB, 1568×1176): this model cannot see images]`.
pub(crate) fn note(file: &FileRef, why: Withheld) -> String {
    let reason = match (why, file.media_type) {
        (Withheld::Missing, _) => "the file's bytes are not available",
        (Withheld::Unsupported, MediaType::Pdf) => "this model cannot read PDF documents",
        (Withheld::Unsupported, _) => "this model cannot see images",
    };
    file.note(reason)
}

/// The last segment of a virtual path.
pub(crate) fn file_name(path: &str) -> &str {
    path.trim_end_matches('/').rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn file(path: &str, media_type: MediaType, size: u64) -> FileRef {
        FileRef {
            path: path.into(),
            sha256: format!("{size:064}"),
            media_type,
            size,
            width: None,
            height: None,
            pages: None,
        }
    }

    #[test]
    fn notes_name_the_file_and_why() {
        let image =
            FileRef { width: Some(1568), height: Some(1176), ..file("/workspace/id.jpg", MediaType::Jpeg, 1_258_291) };
        assert_eq!(
            note(&image, Withheld::Unsupported),
            "[image /workspace/id.jpg (image/jpeg, 1.3 MB, 1568×1176): this model cannot see images]"
        );
        let pdf = FileRef { pages: Some(3), ..file("/workspace/deed.pdf", MediaType::Pdf, 235_000) };
        assert_eq!(
            note(&pdf, Withheld::Missing),
            "[document /workspace/deed.pdf (application/pdf, 235 KB, 3 pages): the file's bytes are not available]"
        );
        assert_eq!(
            note(&file("/a.pdf", MediaType::Pdf, 10), Withheld::Unsupported),
            "[document /a.pdf (application/pdf, 10 bytes): this model cannot read PDF documents]"
        );
    }

    #[test]
    fn files_are_shown_or_noted_after_the_text() {
        let png = file("/workspace/a.png", MediaType::Png, 1);
        let pdf = file("/workspace/b.pdf", MediaType::Pdf, 2);
        let gone = file("/workspace/c.png", MediaType::Png, 3);
        let bytes: FileBytes =
            [(png.sha256.clone(), Arc::from(&b"png"[..])), (pdf.sha256.clone(), Arc::from(&b"pdf"[..]))]
                .into_iter()
                .collect();
        let files = [png, pdf, gone];
        let images_only = FileInput { documents: false, ..FileInput::all(agent_ports::ImageTokens::PixelsOver750) };
        let split = split("look", &files, &bytes, images_only);
        assert_eq!(split.shown.len(), 1);
        assert_eq!((split.shown[0].file_name(), split.shown[0].bytes), ("a.png", &b"png"[..]));
        assert_eq!(split.shown[0].data_url(), "data:image/png;base64,cG5n");
        assert_eq!(
            split.text,
            "look\n\n[document /workspace/b.pdf (application/pdf, 2 bytes): this model cannot read PDF documents]\n\
             [image /workspace/c.png (image/png, 3 bytes): the file's bytes are not available]"
        );
        let plain = super::split("text only", &[], &bytes, FileInput::TEXT_ONLY);
        assert!(matches!(plain.text, Cow::Borrowed("text only")) && plain.shown.is_empty());
    }
}
