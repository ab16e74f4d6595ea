//! What the demo model is shown besides text, read from an OpenAI Chat Completions request as the
//! runtime sends it: a user message's text and its `image_url` and `file` parts (their `data:`
//! URLs), the runtime's note naming a message's attachments, and the user message the runtime adds
//! after tool results to show the files they returned (`read_file` of an image).

use base64::Engine as _;
use serde_json::Value;

use super::texts::say;

/// What opens the user message that shows the files of a run of tool results (shared/llm's OpenAI
/// request: a tool message takes text only).
const TOOL_FILES_HEADING: &str = "Files shown by the tool results above:";
/// What opens the runtime's note naming the files attached to the user's message.
const ATTACHED_HEADING: &str = "Attached files:";
/// The start of the note's line for a file the model is shown with the message.
const SHOWING: &str = "Showing the ";
/// A forced skill's per-step reminder, a user message of the runtime's.
const SKILL_REMINDER: &str = "[SKILL REMINDER]";

/// A file the request showed the model: its path (from the runtime's lines naming it), its type
/// and, for an image, its pixels as read from the bytes sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub path: Option<String>,
    pub media_type: String,
    pub pixels: Option<(u32, u32)>,
}

impl Seen {
    fn is_image(&self) -> bool {
        self.media_type.starts_with("image/")
    }

    /// The file in words: its path, and an image's size as it arrived.
    fn described(&self) -> String {
        let path = self.path.clone().unwrap_or_else(|| "(sin nombre)".to_owned());
        match self.pixels {
            Some((width, height)) => format!("{path}, de {width}×{height} píxeles"),
            None => path,
        }
    }

    /// What the demo says of a file a tool result showed it.
    pub fn said_by_tool(&self) -> String {
        let kind = if self.is_image() { "imagen" } else { "PDF" };
        say("TOOL_SEEN").replace("{file}", &self.described()).replace("{kind}", kind)
    }
}

/// What the demo says of the files attached to the message: its images in one sentence, then
/// each PDF.
pub fn said_attached(files: &[Seen]) -> String {
    let (images, documents): (Vec<&Seen>, Vec<&Seen>) = files.iter().partition(|file| file.is_image());
    let mut said = Vec::new();
    match images.as_slice() {
        [] => {}
        [image] => said.push(say("IMAGE_SEEN").replace("{file}", &image.described())),
        _ => {
            let described: Vec<String> = images.iter().map(|image| image.described()).collect();
            let text = say("IMAGES_SEEN").replace("{count}", &images.len().to_string());
            said.push(text.replace("{files}", &described.join("; ")));
        }
    }
    said.extend(documents.iter().map(|document| say("PDF_SEEN").replace("{file}", &document.described())));
    said.join(" ")
}

/// A message's text: a string, or its text parts joined by blank lines.
pub fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts.iter().filter_map(|part| part["text"].as_str()).collect();
            texts.join("\n\n")
        }
        _ => String::new(),
    }
}

/// Whether a user message's text is the runtime's rather than the person's.
pub fn is_runtimes(text: &str) -> bool {
    text.starts_with(SKILL_REMINDER) || text.starts_with(TOOL_FILES_HEADING)
}

/// The files a user message of the person's shows, named by the note's lines for them.
pub fn attached(content: &Value) -> Vec<Seen> {
    let text = text_of(content);
    let Some((_, note)) = text.split_once(ATTACHED_HEADING) else {
        return files(content, Vec::new());
    };
    let paths = note.lines().filter(|line| line.contains(SHOWING)).filter_map(first_path).collect();
    files(content, paths)
}

/// The files the runtime's message after tool results shows, named by its lines.
pub fn shown_by_tools(content: &Value) -> Vec<Seen> {
    let text = text_of(content);
    let Some(lines) = text.strip_prefix(TOOL_FILES_HEADING) else {
        return Vec::new();
    };
    let paths = lines.lines().filter(|line| line.starts_with("- ")).filter_map(first_path).collect();
    files(content, paths)
}

/// The files of a message's parts, in order, each with the path of the same rank.
fn files(content: &Value, paths: Vec<String>) -> Vec<Seen> {
    let urls = content.as_array().into_iter().flatten().filter_map(|part| match part["type"].as_str() {
        Some("image_url") => part["image_url"]["url"].as_str(),
        Some("file") => part["file"]["file_data"].as_str(),
        _ => None,
    });
    let mut paths = paths.into_iter();
    urls.filter_map(data_url)
        .map(|(media_type, bytes)| Seen { path: paths.next(), pixels: pixels(&bytes), media_type })
        .collect()
}

/// The first absolute path of a line: `- Showing the image /workspace/a.png (image/png, …).`
fn first_path(line: &str) -> Option<String> {
    let word = line.split_whitespace().find(|word| word.starts_with('/'))?;
    Some(word.trim_end_matches(['.', ',', ';', ':', ')']).to_owned())
}

/// A `data:` URL's media type and bytes.
fn data_url(url: &str) -> Option<(String, Vec<u8>)> {
    let (head, data) = url.strip_prefix("data:")?.split_once(',')?;
    let media_type = head.strip_suffix(";base64")?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(data).ok()?;
    Some((media_type.to_owned(), bytes))
}

/// An image's width and height from its header: PNG, GIF or JPEG.
fn pixels(bytes: &[u8]) -> Option<(u32, u32)> {
    let be32 = |at: usize| Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some((be32(16)?, be32(20)?));
    }
    if bytes.starts_with(b"GIF8") {
        let le16 = |at: usize| Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?) as u32);
        return Some((le16(6)?, le16(8)?));
    }
    if bytes.starts_with(&[0xff, 0xd8]) {
        return jpeg_pixels(bytes);
    }
    None
}

/// A JPEG's size, from its first start-of-frame segment.
fn jpeg_pixels(bytes: &[u8]) -> Option<(u32, u32)> {
    let be16 = |at: usize| Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?) as u32);
    let mut at = 2;
    while at + 4 <= bytes.len() {
        if bytes[at] != 0xff {
            return None;
        }
        let marker = bytes[at + 1];
        let length = be16(at + 2)? as usize;
        // SOF0 to SOF15, less DHT (C4), JPG (C8) and DAC (CC).
        if (0xc0..=0xcf).contains(&marker) && ![0xc4, 0xc8, 0xcc].contains(&marker) {
            return Some((be16(at + 7)?, be16(at + 5)?));
        }
        at += 2 + length;
    }
    None
}

/// The file a message names to look at (`sello.png`, `/workspace/fotos/a.jpg`), as an absolute
/// path: a bare name is in `/workspace`.
pub fn named_file(text: &str) -> Option<String> {
    const KINDS: [&str; 6] = [".png", ".jpg", ".jpeg", ".gif", ".webp", ".pdf"];
    let word = text
        .split_whitespace()
        .map(|word| word.trim_matches(|c: char| "«»\"'.,;:¿?¡!()".contains(c)))
        .find(|word| KINDS.iter().any(|kind| word.to_lowercase().ends_with(kind)))?;
    Some(if word.starts_with('/') { word.to_owned() } else { format!("/workspace/{word}") })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A 3 × 2 PNG's first bytes: the signature and its IHDR chunk.
    fn png_header() -> Vec<u8> {
        let mut bytes = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        bytes.extend(3u32.to_be_bytes());
        bytes.extend(2u32.to_be_bytes());
        bytes
    }

    fn data(media_type: &str, bytes: &[u8]) -> String {
        format!("data:{media_type};base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    #[test]
    fn an_attached_image_is_named_by_the_note_and_measured_from_its_bytes() {
        let content = json!([
            {"type": "text", "text": "¿Qué ves?\n\nAttached files:\n- /workspace/notas.txt (text/plain, 3 bytes)\n- Showing the image /workspace/sello.png (image/png, 3×2, 60 bytes)."},
            {"type": "image_url", "image_url": {"url": data("image/png", &png_header())}},
        ]);
        let seen = attached(&content);
        assert_eq!(
            seen,
            [Seen { path: Some("/workspace/sello.png".into()), media_type: "image/png".into(), pixels: Some((3, 2)) }]
        );
        assert_eq!(said_attached(&seen), say("IMAGE_SEEN").replace("{file}", "/workspace/sello.png, de 3×2 píxeles"));
        let pdf = Seen { path: Some("/workspace/acta.pdf".into()), media_type: "application/pdf".into(), pixels: None };
        let two = [seen[0].clone(), seen[0].clone(), pdf];
        let images = "/workspace/sello.png, de 3×2 píxeles; /workspace/sello.png, de 3×2 píxeles";
        let expected = format!(
            "{} {}",
            say("IMAGES_SEEN").replace("{count}", "2").replace("{files}", images),
            say("PDF_SEEN").replace("{file}", "/workspace/acta.pdf")
        );
        assert_eq!(said_attached(&two), expected);
        assert!(attached(&json!("Hola")).is_empty());
    }

    #[test]
    fn a_tool_results_files_are_the_runtimes_message_and_a_pdf_has_no_pixels() {
        let content = json!([
            {"type": "text", "text": format!("{TOOL_FILES_HEADING}\n- /workspace/acta.pdf (application/pdf, from tool call c1)")},
            {"type": "file", "file": {"filename": "acta.pdf", "file_data": data("application/pdf", b"%PDF-1.4")}},
        ]);
        assert!(is_runtimes(&text_of(&content)));
        let seen = shown_by_tools(&content);
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].path.as_deref(), Some("/workspace/acta.pdf"));
        assert_eq!(seen[0].pixels, None);
        assert!(seen[0].said_by_tool().contains("/workspace/acta.pdf"));
    }

    #[test]
    fn a_gif_and_a_jpeg_are_measured_too() {
        assert_eq!(pixels(b"GIF89a\x05\x00\x04\x00"), Some((5, 4)));
        let jpeg =
            [0xff, 0xd8, 0xff, 0xe0, 0x00, 0x04, 0x00, 0x00, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x00, 0x20, 0x00, 0x40];
        assert_eq!(pixels(&jpeg), Some((64, 32)));
        assert_eq!(pixels(b"not an image"), None);
    }

    #[test]
    fn the_file_to_look_at_is_the_one_the_message_names() {
        assert_eq!(named_file("Vuelve a mirar «sello.png», por favor").as_deref(), Some("/workspace/sello.png"));
        assert_eq!(named_file("vuelve a mirar /workspace/fotos/A.JPG").as_deref(), Some("/workspace/fotos/A.JPG"));
        assert_eq!(named_file("vuelve a mirar la imagen"), None);
    }
}
