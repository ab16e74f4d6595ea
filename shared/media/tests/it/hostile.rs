//! Truncated and garbled versions of every format: `prepare` answers each without panicking (its
//! panic net, which would answer "the decoder failed", is never reached) and within its bounds.

use std::time::{Duration, Instant};

use image::{DynamicImage, ImageFormat, Rgba, RgbaImage};
use media::{prepare, Limits, MediaError};

use crate::fixtures;

fn samples() -> Vec<(&'static str, Vec<u8>)> {
    let photo = DynamicImage::ImageRgb8(fixtures::photo(48, 32));
    let translucent = RgbaImage::from_fn(24, 16, |x, y| Rgba([x as u8 * 9, y as u8 * 13, 60, (x * y) as u8]));
    vec![
        ("png", fixtures::encode(&photo, ImageFormat::Png)),
        ("jpeg", fixtures::jpeg(&fixtures::photo(48, 32), 80)),
        ("gif", fixtures::animated_gif(3)),
        ("webp", fixtures::webp(&translucent)),
        ("pdf", fixtures::pdf(2)),
        ("encrypted pdf", fixtures::encrypted_pdf()),
    ]
}

/// Deterministic variants: every prefix length up to 64 bytes and 64 more spread over the file,
/// then single-byte, multi-byte and stretch corruptions at pseudo-random places.
fn variants(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = (0..bytes.len().min(64)).map(|n| bytes[..n].to_vec()).collect();
    out.extend((1..64).map(|i| bytes[..bytes.len() * i / 64].to_vec()));
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |below: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % below.max(1) as u64) as usize
    };
    for round in 0..300 {
        let mut garbled = bytes.to_vec();
        let edits = 1 + round % 8;
        for _ in 0..edits {
            let at = next(garbled.len());
            match round % 3 {
                0 => garbled[at] ^= 1 << next(8),
                1 => garbled[at] = [0x00, 0xFF, 0x7F, 0x80][next(4)],
                _ => {
                    let end = (at + next(32)).min(garbled.len());
                    garbled[at..end].fill(next(256) as u8);
                }
            }
        }
        out.push(garbled);
    }
    out
}

#[test]
fn nothing_panics_on_truncated_or_garbled_files() {
    let limits = Limits::default();
    for (name, sample) in samples() {
        let started = Instant::now();
        for (i, variant) in variants(&sample).into_iter().enumerate() {
            let caught = match prepare(&variant, &limits) {
                Err(MediaError::Undecodable { reason, .. } | MediaError::PdfDamaged { reason }) => {
                    reason == "the decoder failed"
                }
                _ => false,
            };
            assert!(!caught, "{name} variant {i} panicked in its decoder");
        }
        // Hundreds of variants of a small file take well under a second each format, unoptimised.
        assert!(started.elapsed() < Duration::from_secs(20), "{name}: {:?}", started.elapsed());
    }
}

#[test]
fn lying_headers_are_bounded_by_the_header() {
    // A GIF whose screen is 65,535 × 65,535 (4.3 gigapixels) with a 1 × 1 frame.
    let mut gif = b"GIF89a\xFF\xFF\xFF\xFF\x00\x00\x00".to_vec();
    gif.extend_from_slice(b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02\x44\x01\x00;");
    assert!(matches!(prepare(&gif, &Limits::default()), Err(MediaError::TooManyPixels { width: 65_535, .. })));
    // A PNG whose IHDR claims 1,000,000 × 1,000,000, its CRC right, and nothing after it.
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let ihdr = [1_000_000u32.to_be_bytes().as_slice(), &1_000_000u32.to_be_bytes(), &[8, 6, 0, 0, 0]].concat();
    fixtures::chunk(&mut png, b"IHDR", &ihdr);
    let error = prepare(&png, &Limits::default()).unwrap_err();
    assert!(matches!(error, MediaError::TooManyPixels { .. } | MediaError::Undecodable { .. }), "{error}");
}

#[test]
fn extreme_shapes_are_downscaled_without_fault() {
    for (width, height) in [(100_000, 1), (1, 20_000), (3, 5_000)] {
        let strip = DynamicImage::ImageRgba8(RgbaImage::from_pixel(width, height, Rgba([9, 99, 199, 128])));
        let png = fixtures::encode(&strip, ImageFormat::Png);
        let prepared = prepare(&png, &Limits::default()).unwrap();
        let (w, h) = (prepared.width.unwrap(), prepared.height.unwrap());
        assert_eq!(w.max(h), 1_568, "{width}×{height} became {w}×{h}");
        assert!(w.min(h) >= 1);
    }
}
