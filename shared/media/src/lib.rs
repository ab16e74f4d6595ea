//! Images and PDFs shown to a model: what a file is from its bytes, and the bounded version of it a
//! model is sent. Every file is hostile; nothing here does I/O or panics, and the work and memory
//! of one file are bounded by [`Limits`] before any pixel is decoded.
//!
//! - [`sniff`] says what bytes are (an image or PDF by its magic, SVG, text, other binary).
//! - [`check_name`] refuses a file whose name claims an image or PDF and whose bytes are not one.
//! - [`prepare`] checks a file and makes what the model is sent: an image within the long edge and
//!   the bytes a provider takes (unchanged when it already is, without decoding it), or a PDF
//!   within the bytes and pages a provider takes, unchanged.

mod error;
mod pdf;
mod raster;
mod sniff;

use std::borrow::Cow;

pub use agent_ports::message::MediaType;
pub use error::MediaError;
pub use sniff::{sniff, type_of_name, Sniffed};

/// The bounds of one file. The defaults are the strictest of the providers (Anthropic, Bedrock
/// Converse, OpenAI), so what passes is taken by all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The longest edge of an image as sent, in pixels. 1568 is the long edge Anthropic
    /// recommends (about 1.15 megapixels); larger images are downscaled by the API anyway, after
    /// being uploaded and paid for in latency.
    pub long_edge: u32,
    /// The most bytes an image may have as sent: 3.75 MB is Bedrock's per-image limit, the
    /// strictest (Anthropic's is 5 MB, OpenAI's 20 MB).
    pub image_bytes: usize,
    /// The most bytes of an image read in at all: 20 MiB.
    pub input_bytes: usize,
    /// The most pixels ever decoded. An image is decoded whole before it is downscaled, at 3 bytes
    /// a pixel (RGB) or 4 (RGBA): see [`Limits::DEFAULT_MAX_PIXELS`].
    pub max_pixels: u64,
    /// The most pages of a PDF: 100, Anthropic's limit for a PDF shown with its page images.
    pub pdf_pages: u32,
    /// The most bytes of a PDF: 4.5 MB, Bedrock's per-document limit, the strictest.
    pub pdf_bytes: usize,
}

impl Limits {
    /// 50 megapixels: a 48-megapixel phone photo (recent iPhones take 24 by default) or a 600 dpi
    /// A4 scan (35) is shown. An image is decoded whole before it is downscaled, so memory follows
    /// pixels: measured by benches' media-bench, a 12-megapixel JPEG peaks 41 MiB above the process
    /// holding it, a 48-megapixel one 157 MiB, and an RGBA PNG at this bound 201 MiB. A function
    /// that shows images to a model therefore needs 512 MB of memory; at 128 MB lower this to 12
    /// megapixels, and the model makes smaller copies of larger images in the sandbox.
    pub const DEFAULT_MAX_PIXELS: u64 = 50_000_000;

    /// The most bytes a decoded image may take: every pixel at 8-bit RGBA. A 16-bit image is
    /// decoded only at half the pixels.
    pub fn max_decoded_bytes(&self) -> u64 {
        self.max_pixels.saturating_mul(4)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            long_edge: 1568,
            image_bytes: 3_750_000,
            input_bytes: 20 * 1024 * 1024,
            max_pixels: Self::DEFAULT_MAX_PIXELS,
            pdf_pages: 100,
            pdf_bytes: 4_500_000,
        }
    }
}

/// What a model is sent for a file, and what the file was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared<'a> {
    /// The bytes sent: borrowed when the file is sent unchanged.
    pub bytes: Cow<'a, [u8]>,
    pub media_type: MediaType,
    /// An image's pixels as sent.
    pub width: Option<u32>,
    pub height: Option<u32>,
    /// A PDF's page count.
    pub pages: Option<u32>,
    /// The file as it was given.
    pub original: Original,
    /// What was done to the file, for the model and the logs ("downscaled from 4000×3000"); `None`
    /// when it is sent unchanged.
    pub changed: Option<String>,
}

/// A file as it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Original {
    pub media_type: MediaType,
    pub size: usize,
    pub width: Option<u32>,
    pub height: Option<u32>,
}

/// Refuses a file whose name claims an image or PDF (`scan.png`) when its bytes are not an image or
/// PDF at all. Bytes of another image type than the name says are no error: the bytes decide.
pub fn check_name(name: &str, sniffed: Sniffed) -> Result<(), MediaError> {
    match (type_of_name(name), sniffed) {
        (Some(expected), found) if !matches!(found, Sniffed::Media(_)) => {
            let extension = name.rsplit_once('.').map(|(_, extension)| extension).unwrap_or_default();
            Err(MediaError::Mismatch { extension: extension.to_string(), expected, found })
        }
        _ => Ok(()),
    }
}

/// An image's width and height, from its header alone (no pixel is decoded); `None` for a PDF or
/// a header that does not read.
pub fn dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    match sniff(bytes) {
        Sniffed::Media(MediaType::Pdf) | Sniffed::Svg | Sniffed::Text | Sniffed::OtherBinary => None,
        Sniffed::Media(media_type) => raster::dimensions(bytes, media_type),
    }
}

/// Checks a file and makes what a model is sent for it. Images over the long edge, over the bytes
/// sent, animated (GIF, animated WebP) or turned by their EXIF orientation are decoded, downscaled
/// and re-encoded; other images and every PDF that passes its checks are sent unchanged.
pub fn prepare<'a>(bytes: &'a [u8], limits: &Limits) -> Result<Prepared<'a>, MediaError> {
    let media_type = match sniff(bytes) {
        Sniffed::Media(media_type) => media_type,
        found => return Err(MediaError::NotMedia { found }),
    };
    // The decoders are fuzzed and meant never to panic; should one still do so on a hostile file,
    // the file is refused rather than the turn lost.
    let outcome = std::panic::catch_unwind(|| {
        if media_type == MediaType::Pdf {
            pdf::prepare(bytes, limits)
        } else {
            raster::prepare(bytes, media_type, limits)
        }
    });
    outcome.unwrap_or_else(|_| {
        let reason = "the decoder failed".to_string();
        Err(match media_type {
            MediaType::Pdf => MediaError::PdfDamaged { reason },
            media_type => MediaError::Undecodable { media_type, reason },
        })
    })
}
