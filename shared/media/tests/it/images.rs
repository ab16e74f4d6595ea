//! Images: bounds checked before decoding, fit images sent untouched, the rest downscaled,
//! flattened to one frame, turned upright and re-encoded until they fit.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use image::{DynamicImage, ImageBuffer, ImageFormat, Rgba, RgbaImage};
use media::{prepare, Limits, MediaError, MediaType};

use crate::fixtures;

fn decode(bytes: &[u8]) -> DynamicImage {
    image::load_from_memory(bytes).unwrap()
}

#[test]
fn a_small_png_is_sent_unchanged_without_a_copy() {
    let png = fixtures::encode(&DynamicImage::ImageRgb8(fixtures::photo(64, 48)), ImageFormat::Png);
    let prepared = prepare(&png, &Limits::default()).unwrap();
    assert!(matches!(prepared.bytes, Cow::Borrowed(bytes) if std::ptr::eq(bytes, png.as_slice())));
    assert_eq!((prepared.media_type, prepared.width, prepared.height), (MediaType::Png, Some(64), Some(48)));
    assert_eq!(prepared.changed, None);
    assert_eq!((prepared.original.size, prepared.original.width), (png.len(), Some(64)));
}

#[test]
fn a_decompression_bomb_is_refused_before_decoding() {
    // The generator makes real PNGs: a small one decodes, all black.
    let small = decode(&fixtures::bomb_png(61));
    assert_eq!((small.width(), small.height(), small.to_luma8().get_pixel(60, 60).0), (61, 61, [0]));
    let bomb = fixtures::bomb_png(20_000);
    assert!(bomb.len() < 400_000, "the bomb is {} bytes", bomb.len());
    let started = Instant::now();
    let error = prepare(&bomb, &Limits::default()).unwrap_err();
    // Decoding 400 megapixels would take seconds and 400 MB; reading the header takes microseconds.
    assert!(started.elapsed() < Duration::from_millis(200), "{:?}", started.elapsed());
    assert_eq!(error, MediaError::TooManyPixels { width: 20_000, height: 20_000, limit: 50_000_000 });
    let message = error.to_string();
    assert!(message.contains("20000×20000 pixels (400 megapixels), over the limit of 50 megapixels"), "{message}");
    assert!(message.contains("convert in.png -resize 2000x2000 out.png"), "{message}");
}

#[test]
fn the_pixel_bound_holds_for_every_format() {
    let photo = fixtures::photo(2_000, 1_000);
    let limits = Limits { max_pixels: 1_000_000, ..Limits::default() };
    let jpeg = fixtures::jpeg(&photo, 80);
    let error = prepare(&jpeg, &limits).unwrap_err();
    assert_eq!(error, MediaError::TooManyPixels { width: 2_000, height: 1_000, limit: 1_000_000 });
    // 2,000,000 pixels read as 2.0 megapixels, over 1.0.
    assert!(error.to_string().contains("(2.0 megapixels), over the limit of 1.0 megapixels"), "{error}");
}

#[test]
fn sixteen_bit_samples_count_against_the_memory_bound() {
    let deep = ImageBuffer::<Rgba<u16>, _>::from_pixel(100, 100, Rgba([1_000, 2_000, 3_000, 65_535]));
    let png = fixtures::encode(&DynamicImage::ImageRgba16(deep), ImageFormat::Png);
    // 10,000 pixels pass a 15,000-pixel bound, but at 8 bytes each need 80,000 of 60,000 bytes.
    let limits = Limits { max_pixels: 15_000, ..Limits::default() };
    let error = prepare(&png, &limits).unwrap_err();
    assert_eq!(error, MediaError::TooMuchMemory { width: 100, height: 100, bits: 16, bytes: 80_000, limit: 60_000 });
    // Within the default bound it is sent as an 8-bit PNG once it must be re-encoded.
    let limits = Limits { long_edge: 50, ..Limits::default() };
    let prepared = prepare(&png, &limits).unwrap();
    assert_eq!((prepared.media_type, prepared.width, prepared.height), (MediaType::Png, Some(50), Some(50)));
    assert_eq!(decode(&prepared.bytes).color(), image::ColorType::Rgba8);
}

#[test]
fn an_animated_gif_of_thousands_of_frames_costs_one_frame() {
    let gif = fixtures::animated_gif(3_000);
    let started = Instant::now();
    let prepared = prepare(&gif, &Limits::default()).unwrap();
    let elapsed = started.elapsed();
    assert_eq!((prepared.media_type, prepared.width, prepared.height), (MediaType::Png, Some(16), Some(16)));
    assert_eq!(prepared.changed.as_deref(), Some("the first frame of a GIF, re-encoded as PNG"));
    // The first frame, red; every later frame is blue.
    assert_eq!(decode(&prepared.bytes).to_rgba8().get_pixel(8, 8), &Rgba([255, 0, 0, 255]));
    // Decoding all 3,000 frames would cost 3,000 times one; one frame of 16 × 16 is microseconds
    // even unoptimised.
    assert!(elapsed < Duration::from_millis(100), "{elapsed:?}");
}

#[test]
fn a_12_megapixel_photo_is_downscaled_to_the_long_edge() {
    let jpeg = fixtures::jpeg(&fixtures::photo(4_000, 3_000), 90);
    let prepared = prepare(&jpeg, &Limits::default()).unwrap();
    assert_eq!((prepared.media_type, prepared.width, prepared.height), (MediaType::Jpeg, Some(1_568), Some(1_176)));
    assert!(prepared.bytes.len() <= 3_750_000);
    assert_eq!(prepared.changed.as_deref(), Some("downscaled from 4000×3000"));
    assert_eq!((prepared.original.width, prepared.original.height), (Some(4_000), Some(3_000)));
    let sent = decode(&prepared.bytes);
    assert_eq!((sent.width(), sent.height()), (1_568, 1_176));
}

#[test]
fn transparency_stays_png_and_is_laid_over_white_in_jpeg() {
    let translucent =
        RgbaImage::from_fn(1_000, 500, |x, y| Rgba([(x % 256) as u8, (y % 256) as u8, 90, (x / 4) as u8]));
    let png = fixtures::encode(&DynamicImage::ImageRgba8(translucent), ImageFormat::Png);
    let limits = Limits { long_edge: 800, ..Limits::default() };
    let prepared = prepare(&png, &limits).unwrap();
    assert_eq!((prepared.media_type, prepared.width, prepared.height), (MediaType::Png, Some(800), Some(400)));
    assert!(decode(&prepared.bytes).color().has_alpha());

    // When no PNG fits, a JPEG does: a transparent pixel becomes white.
    let clear = fixtures::webp(&RgbaImage::from_pixel(300, 200, Rgba([0, 0, 0, 0])));
    let limits = Limits { long_edge: 200, ..Limits::default() };
    let prepared = prepare(&clear, &limits).unwrap();
    assert_eq!((prepared.media_type, prepared.width), (MediaType::Png, Some(200)));
    let noisy = fixtures::photo(600, 400);
    let with_alpha = RgbaImage::from_fn(600, 400, |x, y| {
        let [r, g, b] = noisy.get_pixel(x, y).0;
        Rgba([r, g, b, if x < 10 { 0 } else { 255 }])
    });
    let png = fixtures::encode(&DynamicImage::ImageRgba8(with_alpha), ImageFormat::Png);
    let limits = Limits { image_bytes: 120_000, ..Limits::default() };
    let prepared = prepare(&png, &limits).unwrap();
    assert_eq!(prepared.media_type, MediaType::Jpeg);
    assert!(prepared.bytes.len() <= 120_000);
    let corner = decode(&prepared.bytes).to_rgb8().get_pixel(2, 200).0;
    assert!(corner.iter().all(|&c| c > 240), "{corner:?}");
}

#[test]
fn an_image_over_the_bytes_is_re_encoded_smaller_until_it_fits() {
    let jpeg = fixtures::jpeg(&fixtures::photo(800, 600), 100);
    let limits = Limits { image_bytes: 40_000, ..Limits::default() };
    let prepared = prepare(&jpeg, &limits).unwrap();
    assert!(prepared.bytes.len() <= 40_000, "{}", prepared.bytes.len());
    let changed = prepared.changed.unwrap();
    assert!(changed.starts_with("re-encoded to fit 40,000 bytes"), "{changed}");

    let limits = Limits { image_bytes: 100, ..Limits::default() };
    let error = prepare(&jpeg, &limits).unwrap_err();
    assert!(matches!(error, MediaError::CannotFit { limit: 100, .. }), "{error}");
}

#[test]
fn exif_orientation_is_applied() {
    // Stored 40 wide and 20 high; orientation 6 shows it 20 wide and 40 high.
    let jpeg = fixtures::jpeg_with_orientation(&fixtures::photo(40, 20), 6);
    let prepared = prepare(&jpeg, &Limits::default()).unwrap();
    assert_eq!((prepared.width, prepared.height), (Some(20), Some(40)));
    assert_eq!(prepared.changed.as_deref(), Some("turned upright by its EXIF orientation"));
    // Orientation 1 is the identity: the file goes unchanged.
    let upright = fixtures::jpeg_with_orientation(&fixtures::photo(40, 20), 1);
    assert!(matches!(prepare(&upright, &Limits::default()).unwrap().bytes, Cow::Borrowed(_)));
}

#[test]
fn webp_is_accepted() {
    let small = fixtures::webp(&RgbaImage::from_pixel(30, 20, Rgba([10, 200, 30, 255])));
    let prepared = prepare(&small, &Limits::default()).unwrap();
    assert!(matches!(prepared.bytes, Cow::Borrowed(_)));
    assert_eq!((prepared.media_type, prepared.width, prepared.height), (MediaType::Webp, Some(30), Some(20)));
    // A large one is downscaled; the image crate writes no lossy WebP, and this one has an alpha
    // channel, so it becomes a PNG.
    let photo = fixtures::photo(1_000, 750);
    let large = fixtures::webp(&DynamicImage::ImageRgb8(photo).to_rgba8());
    let limits = Limits { long_edge: 800, ..Limits::default() };
    let prepared = prepare(&large, &limits).unwrap();
    assert_eq!((prepared.media_type, prepared.width, prepared.height), (MediaType::Png, Some(800), Some(600)));
    assert_eq!(prepared.changed.as_deref(), Some("downscaled from 1000×750, re-encoded as PNG"));
}

#[test]
fn more_bytes_than_are_read_are_refused() {
    let png = fixtures::encode(&DynamicImage::ImageRgb8(fixtures::photo(16, 16)), ImageFormat::Png);
    let limits = Limits { input_bytes: 100, ..Limits::default() };
    let error = prepare(&png, &limits).unwrap_err();
    assert_eq!(error, MediaError::InputTooLarge { size: png.len(), limit: 100 });
}

#[test]
fn a_small_image_with_a_broken_body_is_refused_not_sent() {
    // Its header is fine, so only decoding it finds the damage a provider would refuse.
    let png = fixtures::encode(&DynamicImage::ImageRgb8(fixtures::photo(64, 48)), ImageFormat::Png);
    let cut = &png[..png.len() / 2];
    let error = prepare(cut, &Limits::default()).unwrap_err();
    assert!(matches!(error, MediaError::Undecodable { media_type: MediaType::Png, .. }), "{error:?}");
    assert!(error.to_string().contains("damaged or truncated"), "{error}");
}
