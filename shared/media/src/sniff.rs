//! What a file is, from its bytes alone: an image or PDF by its magic, SVG, text or other binary.

use agent_ports::message::MediaType;

/// What a file's bytes are. The name a file was given is never trusted: a model is shown what the
/// bytes say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    /// An image or PDF a model can be shown, by its magic bytes.
    Media(MediaType),
    /// An SVG document: text, shown as text and never rendered.
    Svg,
    /// Text (UTF-8 without NUL or stray control bytes).
    Text,
    /// Anything else.
    OtherBinary,
}

impl Sniffed {
    /// What the bytes are, for a message ("text", "an SVG document", "a JPEG image").
    pub fn describe(self) -> &'static str {
        match self {
            Sniffed::Media(MediaType::Png) => "a PNG image",
            Sniffed::Media(MediaType::Jpeg) => "a JPEG image",
            Sniffed::Media(MediaType::Gif) => "a GIF image",
            Sniffed::Media(MediaType::Webp) => "a WebP image",
            Sniffed::Media(MediaType::Pdf) => "a PDF document",
            Sniffed::Svg => "an SVG document (text)",
            Sniffed::Text => "text",
            Sniffed::OtherBinary => "binary data of another kind",
        }
    }
}

/// How much of the start of a file decides whether it is text (and SVG).
const TEXT_PROBE: usize = 8 * 1024;

/// What `bytes` are, from their first bytes; costs at most a look at the first 8 KiB.
pub fn sniff(bytes: &[u8]) -> Sniffed {
    if let Some(media_type) = magic(bytes) {
        return Sniffed::Media(media_type);
    }
    let probe = &bytes[..bytes.len().min(TEXT_PROBE)];
    if !is_text(probe, probe.len() < bytes.len()) {
        return Sniffed::OtherBinary;
    }
    if is_svg(probe) {
        Sniffed::Svg
    } else {
        Sniffed::Text
    }
}

/// The media type a file's name claims by its extension, if it names one.
pub fn type_of_name(name: &str) -> Option<MediaType> {
    let (_, extension) = name.rsplit_once('.')?;
    match extension.to_ascii_lowercase().as_str() {
        "png" => Some(MediaType::Png),
        "jpg" | "jpeg" | "jpe" => Some(MediaType::Jpeg),
        "gif" => Some(MediaType::Gif),
        "webp" => Some(MediaType::Webp),
        "pdf" => Some(MediaType::Pdf),
        _ => None,
    }
}

fn magic(bytes: &[u8]) -> Option<MediaType> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(MediaType::Png)
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(MediaType::Jpeg)
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some(MediaType::Gif)
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some(MediaType::Webp)
    } else if bytes.starts_with(b"%PDF-") {
        Some(MediaType::Pdf)
    } else {
        None
    }
}

/// Whether `probe` is UTF-8 text: no NUL, no control bytes but tab, newlines, form feed and escape.
/// When the probe was cut from a longer file, a character cut at its end is no sign of binary.
fn is_text(probe: &[u8], cut: bool) -> bool {
    let valid = match std::str::from_utf8(probe) {
        Ok(_) => true,
        Err(error) => cut && error.error_len().is_none(),
    };
    valid && probe.iter().all(|&b| b >= 0x20 || matches!(b, b'\t' | b'\n' | b'\r' | 0x0C | 0x1B))
}

/// Whether text is an SVG document: its root element, after any BOM, XML declaration, comments,
/// processing instructions and doctype, is `<svg`.
fn is_svg(probe: &[u8]) -> bool {
    let mut rest = probe.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(probe);
    loop {
        rest = trim_start(rest);
        let skip_to = |rest: &[u8], end: &[u8]| find(rest, end).map(|at| at + end.len());
        let skipped = if rest.starts_with(b"<?") {
            skip_to(rest, b"?>")
        } else if rest.starts_with(b"<!--") {
            skip_to(rest, b"-->")
        } else if rest.starts_with(b"<!") {
            // A doctype may hold an internal subset in brackets; its end is the `>` after them.
            match (find(rest, b"["), find(rest, b">")) {
                (Some(open), Some(close)) if open < close => skip_to(rest, b"]>").or_else(|| skip_to(rest, b"] >")),
                _ => skip_to(rest, b">"),
            }
        } else {
            let Some(after) = rest.strip_prefix(b"<svg") else { return false };
            return after.first().is_none_or(|&b| b.is_ascii_whitespace() || b == b'>' || b == b'/');
        };
        match skipped {
            Some(at) => rest = &rest[at..],
            None => return false,
        }
    }
}

fn trim_start(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
    &bytes[start..]
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}
