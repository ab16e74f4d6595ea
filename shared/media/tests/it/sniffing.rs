//! What bytes are, whatever the file is named.

use image::{DynamicImage, ImageFormat, RgbaImage};
use media::{check_name, sniff, MediaError, MediaType, Sniffed};

use crate::fixtures;

#[test]
fn magic_decides_not_the_name() {
    let photo = fixtures::jpeg(&fixtures::photo(32, 24), 80);
    assert_eq!(sniff(&photo), Sniffed::Media(MediaType::Jpeg));
    // A JPEG named .png is shown as the JPEG it is.
    assert_eq!(check_name("holiday.png", sniff(&photo)), Ok(()));
    let small = DynamicImage::ImageRgba8(RgbaImage::new(4, 4));
    assert_eq!(sniff(&fixtures::encode(&small, ImageFormat::Png)), Sniffed::Media(MediaType::Png));
    assert_eq!(sniff(&fixtures::encode(&small, ImageFormat::Gif)), Sniffed::Media(MediaType::Gif));
    assert_eq!(sniff(&fixtures::webp(&RgbaImage::new(4, 4))), Sniffed::Media(MediaType::Webp));
    assert_eq!(sniff(&fixtures::pdf(1)), Sniffed::Media(MediaType::Pdf));
    assert_eq!(sniff(b"GIF87a"), Sniffed::Media(MediaType::Gif));
}

#[test]
fn a_fake_png_is_text_and_its_name_is_refused() {
    let fake = b"this is not a picture\n";
    assert_eq!(sniff(fake), Sniffed::Text);
    let error = check_name("scan.PNG", sniff(fake)).unwrap_err();
    assert!(matches!(&error, MediaError::Mismatch { expected: MediaType::Png, found: Sniffed::Text, .. }));
    let message = error.to_string();
    assert!(message.contains("named .PNG but its bytes are not a PNG image: they are text"), "{message}");
    // A name that claims nothing is no mismatch.
    assert_eq!(check_name("notes.txt", Sniffed::Text), Ok(()));
    assert_eq!(check_name("Makefile", Sniffed::OtherBinary), Ok(()));
}

#[test]
fn svg_is_recognised_as_text_never_as_an_image() {
    assert_eq!(sniff(fixtures::SVG.as_bytes()), Sniffed::Svg);
    assert_eq!(sniff(b"\xEF\xBB\xBF  <svg viewBox='0 0 1 1'/>"), Sniffed::Svg);
    assert_eq!(sniff(b"<svg>"), Sniffed::Svg);
    // Other XML, and text that merely mentions svg, are text.
    assert_eq!(sniff(b"<?xml version='1.0'?><html><svg/></html>"), Sniffed::Text);
    assert_eq!(sniff(b"<svgfoo/>"), Sniffed::Text);
    assert_eq!(sniff(b"<!-- never closed <svg"), Sniffed::Text);
    let error = media::prepare(fixtures::SVG.as_bytes(), &media::Limits::default()).unwrap_err();
    assert_eq!(error, MediaError::NotMedia { found: Sniffed::Svg });
    assert!(error.to_string().contains("an SVG document"), "{error}");
}

#[test]
fn binary_and_text_edges() {
    assert_eq!(sniff(b""), Sniffed::Text);
    assert_eq!(sniff(b"\x00\x01\x02"), Sniffed::OtherBinary);
    assert_eq!(sniff(b"PK\x03\x04zip"), Sniffed::OtherBinary);
    assert_eq!(sniff("déjà vu\r\n\tok".as_bytes()), Sniffed::Text);
    assert_eq!(sniff(b"\xFF\xFE broken utf-8"), Sniffed::OtherBinary);
    // Truncated magic is no image.
    assert_eq!(sniff(b"\x89PN"), Sniffed::OtherBinary);
    assert_eq!(sniff(b"RIFF\0\0\0\0WEB"), Sniffed::OtherBinary);
    // A multi-byte character cut at the 8 KiB probe's end is still text.
    let mut long = "a".repeat(8 * 1024 - 1).into_bytes();
    long.extend_from_slice("é and more".as_bytes());
    assert_eq!(sniff(&long), Sniffed::Text);
}
