//! Why a file cannot be shown to a model: which bound or check it failed, with its numbers and what
//! to do instead, in words a model can act on.

use agent_ports::message::MediaType;

use crate::sniff::Sniffed;

/// A file that cannot be shown to a model. Each message names the bound or the check, the file's
/// numbers against it, and a command or step that makes a file that can be shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MediaError {
    /// The file's name claims an image or PDF, but its bytes are something else.
    #[error(
        "the file is named .{extension} but its bytes are not {}: they are {}; read it as text, or make a \
         real {} from it",
        Sniffed::Media(*expected).describe(), found.describe(), expected.format().to_uppercase()
    )]
    Mismatch { extension: String, expected: MediaType, found: Sniffed },

    /// The bytes are not an image or PDF a model can be shown.
    #[error(
        "the file's bytes are {}, not an image (PNG, JPEG, GIF, WebP) or a PDF that a model can be shown; \
         read it as text, or convert it (e.g. `convert in.svg out.png`)",
        found.describe()
    )]
    NotMedia { found: Sniffed },

    /// More bytes than are read in at all.
    #[error(
        "the file is {} bytes, over the limit of {} bytes read for an image: make a smaller copy with a \
         command first (e.g. `convert in.png -resize 2000x2000 out.jpg`)",
        thousands(*size as u64), thousands(*limit as u64)
    )]
    InputTooLarge { size: usize, limit: usize },

    /// More pixels than are ever decoded (a decompression bomb, or a huge scan).
    #[error(
        "the image is {width}×{height} pixels ({} megapixels), over the limit of {} megapixels decoded: \
         make a smaller copy with a command (e.g. `convert in.png -resize 2000x2000 out.png`)",
        megapixels(*width as u64 * *height as u64), megapixels(*limit)
    )]
    TooManyPixels { width: u32, height: u32, limit: u64 },

    /// Within the pixel bound, but its samples (16-bit channels) need more memory than is allowed.
    #[error(
        "the image is {width}×{height} pixels of {bits}-bit samples: decoding it needs {} MB, over the \
         limit of {} MB: make an 8-bit or smaller copy (e.g. `convert in.png -depth 8 -resize 2000x2000 \
         out.png`)",
        bytes / 1_000_000, limit / 1_000_000
    )]
    TooMuchMemory { width: u32, height: u32, bits: u32, bytes: u64, limit: u64 },

    /// The bytes start like an image of this type but do not decode.
    #[error(
        "the file's bytes start like {} but do not decode ({reason}): it is damaged or truncated; ask for \
         the file again, or check it with a command (e.g. `identify in.png`)",
        Sniffed::Media(*media_type).describe()
    )]
    Undecodable { media_type: MediaType, reason: String },

    /// Even the smallest tried version does not fit the bytes an image may have as sent.
    #[error(
        "the image could not be made to fit {} bytes, even as a {width}×{height} JPEG: make a smaller \
         copy with a command (e.g. `convert in.png -resize 800x800 -quality 70 out.jpg`)",
        thousands(*limit as u64)
    )]
    CannotFit { width: u32, height: u32, limit: usize },

    /// A PDF larger than the providers take.
    #[error(
        "the PDF is {} bytes, over the limit of {} bytes: render the pages you need as images (the pdf \
         skill's scripts/convert_pdf_to_images.py, or `pdftoppm -png -r 100 -f 1 -l 10 in.pdf page`), or \
         split it (`qpdf in.pdf --split-pages=20 part.pdf`) and read a part",
        thousands(*size as u64), thousands(*limit as u64)
    )]
    PdfTooLarge { size: usize, limit: usize },

    /// An encrypted PDF, which no provider opens.
    #[error(
        "the PDF is encrypted, and a model is shown only unencrypted PDFs: make a decrypted copy with \
         `qpdf --decrypt in.pdf out.pdf` (no password is needed when only an owner password is set; \
         otherwise add `--password=...`)"
    )]
    PdfEncrypted,

    /// A PDF that does not load: truncated, damaged, or without pages.
    #[error(
        "the PDF is damaged ({reason}): ask for the file again, or try to repair a copy with `qpdf in.pdf \
         out.pdf` and read that"
    )]
    PdfDamaged { reason: String },

    /// More pages than a model is shown at once.
    #[error(
        "the PDF has {} pages, over the limit of {}: render the pages you need as images with the pdf \
         skill's scripts/convert_pdf_to_images.py (or `pdftoppm -png -r 100 -f 1 -l 10 in.pdf page`), or \
         split it (`qpdf in.pdf --pages . 1-{} -- part.pdf`) and read a part",
        thousands(*pages as u64), thousands(*limit as u64), limit
    )]
    PdfTooManyPages { pages: u32, limit: u32 },
}

/// `n` with a comma between thousands: 4,500,000.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Pixels as megapixels, to one decimal below 10 and whole above.
fn megapixels(pixels: u64) -> String {
    let mp = pixels as f64 / 1e6;
    if mp < 10.0 {
        format!("{mp:.1}")
    } else {
        thousands(mp.round() as u64)
    }
}
