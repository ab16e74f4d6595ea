//! Images: bounds checked from the header before any pixel is decoded, then, when the image is not
//! already fit to send, its first frame decoded, downscaled and re-encoded until it fits.

use std::borrow::Cow;
use std::io::Cursor;

use agent_ports::message::MediaType;
use image::codecs::gif::GifDecoder;
use image::codecs::jpeg::{JpegDecoder, JpegEncoder};
use image::codecs::png::{CompressionType, FilterType, PngDecoder, PngEncoder};
use image::codecs::webp::WebPDecoder;
use image::error::ImageFormatHint;
use image::metadata::Orientation;
use image::{DynamicImage, GenericImageView, ImageDecoder, ImageEncoder, ImageError, RgbImage};

use crate::{Limits, MediaError, Original, Prepared};

/// The JPEG qualities tried in turn until the image fits; 85 keeps text and edges clean.
const JPEG_QUALITIES: [u8; 4] = [85, 70, 55, 40];
/// Each smaller try keeps this share of the edges.
const SHRINK: f64 = 0.75;
/// Below this long edge an image that still does not fit is refused rather than shrunk further.
const SMALLEST_EDGE: u32 = 256;

pub(crate) fn prepare<'a>(bytes: &'a [u8], media_type: MediaType, limits: &Limits) -> Result<Prepared<'a>, MediaError> {
    if bytes.len() > limits.input_bytes {
        return Err(MediaError::InputTooLarge { size: bytes.len(), limit: limits.input_bytes });
    }
    let undecodable = |error: ImageError| MediaError::Undecodable { media_type, reason: error.to_string() };
    // Only the header is read here: no pixel is decoded until every bound has passed.
    let (mut decoder, may_animate) = open(bytes, media_type).map_err(undecodable)?;
    let (width, height) = decoder.dimensions();
    let pixels = u64::from(width) * u64::from(height);
    if pixels > limits.max_pixels {
        return Err(MediaError::TooManyPixels { width, height, limit: limits.max_pixels });
    }
    let decoded_bytes = decoder.total_bytes();
    if decoded_bytes > limits.max_decoded_bytes() {
        let color = decoder.color_type();
        let bits = u32::from(color.bits_per_pixel()) / u32::from(color.channel_count().max(1));
        let (bytes, limit) = (decoded_bytes, limits.max_decoded_bytes());
        return Err(MediaError::TooMuchMemory { width, height, bits, bytes, limit });
    }
    // The decoder is bounded too, so a header that lies about the frames after it cannot make
    // it allocate more than the bounds allow.
    decoder.set_limits(decoder_limits(limits, decoded_bytes)).map_err(undecodable)?;
    // An unreadable EXIF block is no reason to refuse a picture; it is shown as stored.
    let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
    let original = Original { media_type, size: bytes.len(), width: Some(width), height: Some(height) };

    let fits = width.max(height) <= limits.long_edge && bytes.len() <= limits.image_bytes;
    if fits && !may_animate && orientation == Orientation::NoTransforms {
        // Sent as stored, but decoded once all the same: a file whose header is fine and whose body
        // is not would be refused by the provider, and with it every later request of the session
        // that shows it. At most 1,568 px a side, this costs a few tens of milliseconds, once.
        DynamicImage::from_decoder(decoder).map_err(undecodable)?;
        return Ok(Prepared {
            bytes: Cow::Borrowed(bytes),
            media_type,
            width: Some(width),
            height: Some(height),
            pages: None,
            original,
            changed: None,
        });
    }

    // Only the first frame is decoded, however many an animation has.
    let mut image = DynamicImage::from_decoder(decoder).map_err(undecodable)?;
    let mut changes = Vec::new();
    if may_animate {
        changes.push(match media_type {
            MediaType::Gif => "the first frame of a GIF".to_string(),
            _ => "the first frame of an animated WebP".to_string(),
        });
    }
    if width.max(height) > limits.long_edge {
        // `thumbnail` averages the source pixels under each target pixel, with no buffer but the
        // target: twice as fast as a triangle filter, no intermediate image, and little aliasing
        // at the large ratios a photo is shrunk by.
        image = image.thumbnail(limits.long_edge, limits.long_edge);
        changes.push(format!("downscaled from {width}×{height}"));
    }
    if orientation != Orientation::NoTransforms {
        // Turned after downscaling, so the turn copies the small image, not the large one.
        image.apply_orientation(orientation);
        changes.push("turned upright by its EXIF orientation".to_string());
    }
    let image = to_8bit(image);
    let prefer_png = image.color().has_alpha() || matches!(media_type, MediaType::Png | MediaType::Gif);
    let encoded = encode_to_fit(image, prefer_png, limits.image_bytes)?;
    if encoded.media_type != media_type {
        changes.push(format!("re-encoded as {}", encoded.media_type.format().to_uppercase()));
    } else if changes.is_empty() {
        changes.push(format!("re-encoded to fit {} bytes", crate::error::thousands(limits.image_bytes as u64)));
    }
    if let Some(note) = encoded.note {
        changes.push(note);
    }
    Ok(Prepared {
        bytes: Cow::Owned(encoded.bytes),
        media_type: encoded.media_type,
        width: Some(encoded.width),
        height: Some(encoded.height),
        pages: None,
        original,
        changed: Some(changes.join(", ")),
    })
}

/// A decoder over the header of `bytes`, and whether the image must be re-encoded as one frame
/// (every GIF, since whether it is animated is known only by reading every frame; an animated
/// WebP, whose header says so).
fn open<'a>(bytes: &'a [u8], media_type: MediaType) -> Result<(Box<dyn ImageDecoder + 'a>, bool), ImageError> {
    let cursor = Cursor::new(bytes);
    Ok(match media_type {
        MediaType::Png => (Box::new(PngDecoder::new(cursor)?), false),
        MediaType::Jpeg => (Box::new(JpegDecoder::new(cursor)?), false),
        MediaType::Gif => (Box::new(GifDecoder::new(cursor)?), true),
        MediaType::Webp => {
            let decoder = WebPDecoder::new(cursor)?;
            let animated = decoder.has_animation();
            (Box::new(decoder), animated)
        }
        // Never reached: a PDF is sent to `pdf`. Refused all the same rather than panicked on.
        MediaType::Pdf => return Err(ImageError::Unsupported(ImageFormatHint::Name("PDF".into()).into())),
    })
}

/// The decoder's own bounds: no edge past the pixel bound, and no more memory beside the output
/// (`decoded_bytes`, reserved first) than the decoded-bytes bound.
fn decoder_limits(limits: &Limits, decoded_bytes: u64) -> image::Limits {
    let edge = u32::try_from(limits.max_pixels).unwrap_or(u32::MAX);
    let mut bounds = image::Limits::default();
    bounds.max_image_width = Some(edge);
    bounds.max_image_height = Some(edge);
    bounds.max_alloc = Some(limits.max_decoded_bytes().saturating_sub(decoded_bytes).max(1));
    bounds
}

/// 16-bit and floating-point images as 8-bit, which every encoder and provider takes.
fn to_8bit(image: DynamicImage) -> DynamicImage {
    match image {
        DynamicImage::ImageLuma8(_)
        | DynamicImage::ImageLumaA8(_)
        | DynamicImage::ImageRgb8(_)
        | DynamicImage::ImageRgba8(_) => image,
        DynamicImage::ImageLuma16(_) => DynamicImage::ImageLuma8(image.to_luma8()),
        DynamicImage::ImageLumaA16(_) => DynamicImage::ImageLumaA8(image.to_luma_alpha8()),
        _ if image.color().has_alpha() => DynamicImage::ImageRgba8(image.to_rgba8()),
        _ => DynamicImage::ImageRgb8(image.to_rgb8()),
    }
}

struct Encoded {
    bytes: Vec<u8>,
    media_type: MediaType,
    width: u32,
    height: u32,
    /// What fitting cost beyond the plain re-encoding, if anything.
    note: Option<String>,
}

/// PNG when preferred and it fits, else JPEG at falling quality, else the same at smaller sizes.
fn encode_to_fit(mut image: DynamicImage, prefer_png: bool, limit: usize) -> Result<Encoded, MediaError> {
    let start = image.dimensions();
    loop {
        let (width, height) = image.dimensions();
        let smaller = (width, height) != start;
        let note = |quality: Option<u8>| {
            let mut notes = Vec::new();
            if smaller {
                notes.push(format!("made {width}×{height} to fit"));
            }
            if let Some(quality) = quality.filter(|&q| q != JPEG_QUALITIES[0]) {
                notes.push(format!("JPEG quality {quality}"));
            }
            (!notes.is_empty()).then(|| notes.join(", "))
        };
        if prefer_png {
            let png = encode_png(&image)?;
            if png.len() <= limit {
                return Ok(Encoded { bytes: png, media_type: MediaType::Png, width, height, note: note(None) });
            }
        }
        let flat = flatten(&image);
        for quality in JPEG_QUALITIES {
            let jpeg = encode_jpeg(&flat, quality)?;
            if jpeg.len() <= limit {
                let note = note(Some(quality));
                return Ok(Encoded { bytes: jpeg, media_type: MediaType::Jpeg, width, height, note });
            }
        }
        if width.max(height) <= SMALLEST_EDGE {
            return Err(MediaError::CannotFit { width, height, limit });
        }
        let shrink = |edge: u32| ((f64::from(edge) * SHRINK) as u32).max(1);
        image = image.thumbnail(shrink(width), shrink(height));
    }
}

/// A PNG at the default level: fdeflate's fast level takes a tenth of the time but makes a
/// screenshot ten times larger.
fn encode_png(image: &DynamicImage) -> Result<Vec<u8>, MediaError> {
    let mut out = Vec::new();
    let encoder = PngEncoder::new_with_quality(&mut out, CompressionType::Default, FilterType::Adaptive);
    image.write_with_encoder(encoder).map_err(|error| encode_failed(MediaType::Png, error))?;
    Ok(out)
}

fn encode_jpeg(image: &DynamicImage, quality: u8) -> Result<Vec<u8>, MediaError> {
    let mut out = Vec::new();
    let encoder = JpegEncoder::new_with_quality(&mut out, quality);
    encoder
        .write_image(image.as_bytes(), image.width(), image.height(), image.color().into())
        .map_err(|error| encode_failed(MediaType::Jpeg, error))?;
    Ok(out)
}

/// Encoding an 8-bit image into memory fails only on a bug; it is reported, not panicked on.
fn encode_failed(media_type: MediaType, error: ImageError) -> MediaError {
    MediaError::Undecodable { media_type, reason: format!("re-encoding failed: {error}") }
}

/// The image as JPEG can hold it: gray or RGB, with any transparency laid over white (as a viewer
/// shows a transparent picture on a page).
fn flatten(image: &DynamicImage) -> Cow<'_, DynamicImage> {
    match image {
        DynamicImage::ImageLuma8(_) | DynamicImage::ImageRgb8(_) => Cow::Borrowed(image),
        DynamicImage::ImageLumaA8(gray) => {
            let flat = image::GrayImage::from_fn(gray.width(), gray.height(), |x, y| {
                let [value, alpha] = gray.get_pixel(x, y).0;
                image::Luma([over_white(value, alpha)])
            });
            Cow::Owned(DynamicImage::ImageLuma8(flat))
        }
        _ => {
            let rgba = image.to_rgba8();
            let flat = RgbImage::from_fn(rgba.width(), rgba.height(), |x, y| {
                let [r, g, b, alpha] = rgba.get_pixel(x, y).0;
                image::Rgb([over_white(r, alpha), over_white(g, alpha), over_white(b, alpha)])
            });
            Cow::Owned(DynamicImage::ImageRgb8(flat))
        }
    }
}

fn over_white(value: u8, alpha: u8) -> u8 {
    let (value, alpha) = (u32::from(value), u32::from(alpha));
    ((value * alpha + 255 * (255 - alpha) + 127) / 255) as u8
}

/// An image's width and height from its header alone, no pixel decoded; `None` when the header
/// does not read.
pub(crate) fn dimensions(bytes: &[u8], media_type: MediaType) -> Option<(u32, u32)> {
    let decoder = std::panic::catch_unwind(|| open(bytes, media_type).ok()).ok().flatten()?;
    Some(decoder.0.dimensions())
}
