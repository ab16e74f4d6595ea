//! The files the tests feed `media`, made here with the image crate, the png crate and lopdf, so no
//! binary fixture is kept in the repository.

use std::io::Cursor;

use image::codecs::gif::{GifEncoder, Repeat};
use image::codecs::jpeg::JpegEncoder;
use image::codecs::webp::WebPEncoder;
use image::{Delay, DynamicImage, Frame, ImageEncoder, ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};
use lopdf::{dictionary, Document, Object, Stream};

/// A photo-like RGB image: a gradient under pseudo-random noise, which compresses like a photo
/// (a flat image would make every size bound trivially met).
pub fn photo(width: u32, height: u32) -> RgbImage {
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    RgbImage::from_fn(width, height, |x, y| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let noise = (seed & 0x3F) as u32;
        let gradient = |value: u32, span: u32| (value * 180 / span.max(1)) as u8;
        Rgb([
            gradient(x, width).saturating_add(noise as u8),
            gradient(y, height).saturating_add((noise >> 1) as u8),
            gradient(x + y, width + height).saturating_add((noise >> 2) as u8),
        ])
    })
}

pub fn jpeg(image: &RgbImage, quality: u8) -> Vec<u8> {
    let mut out = Vec::new();
    JpegEncoder::new_with_quality(&mut out, quality).encode_image(image).unwrap();
    out
}

/// A JPEG carrying an EXIF orientation (6: the stored image is to be turned 90° clockwise).
pub fn jpeg_with_orientation(image: &RgbImage, orientation: u16) -> Vec<u8> {
    // A TIFF header, big-endian, and one IFD with the one Orientation (0x0112) SHORT entry.
    let mut exif = b"MM\0\x2a\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01".to_vec();
    exif.extend_from_slice(&orientation.to_be_bytes());
    exif.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    let mut out = Vec::new();
    let mut encoder = JpegEncoder::new_with_quality(&mut out, 90);
    encoder.set_exif_metadata(exif).unwrap();
    encoder.write_image(image.as_raw(), image.width(), image.height(), image::ExtendedColorType::Rgb8).unwrap();
    out
}

pub fn encode(image: &DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image.write_to(&mut out, format).unwrap();
    out.into_inner()
}

/// A lossless WebP.
pub fn webp(image: &RgbaImage) -> Vec<u8> {
    let mut out = Vec::new();
    WebPEncoder::new_lossless(&mut out)
        .encode(image.as_raw(), image.width(), image.height(), image::ExtendedColorType::Rgba8)
        .unwrap();
    out
}

/// An animated GIF of `frames` frames of 16 × 16: the first red, every other blue.
pub fn animated_gif(frames: usize) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut encoder = GifEncoder::new_with_speed(&mut out, 30);
        encoder.set_repeat(Repeat::Infinite).unwrap();
        let frame = |color: Rgba<u8>| {
            Frame::from_parts(RgbaImage::from_pixel(16, 16, color), 0, 0, Delay::from_numer_denom_ms(10, 1))
        };
        let first = std::iter::once(frame(Rgba([255, 0, 0, 255])));
        let rest = std::iter::repeat_with(|| frame(Rgba([0, 0, 255, 255]))).take(frames - 1);
        encoder.encode_frames(first.chain(rest)).unwrap();
    }
    out
}

/// A real, complete 1-bit PNG of `edge` × `edge` black pixels: 20,000 × 20,000 is 400 megapixels
/// in about 300 KB. Its zlib stream is written here with deflate's fixed codes (each 258 zero bytes
/// as one back-reference, 13 bits), since compressing 50 MB in an unoptimised test takes a minute.
pub fn bomb_png(edge: u32) -> Vec<u8> {
    let raw = u64::from(edge) * (1 + u64::from(edge.div_ceil(8)));
    let mut bits = Bits::default();
    bits.push(1, 1); // the final block,
    bits.push(1, 2); // with the fixed codes.
    let zero = |bits: &mut Bits| bits.push_code(0b0011_0000, 8);
    zero(bits.by_ref());
    let mut written = 1;
    while raw - written >= 258 {
        bits.push_code(0b1100_0101, 8); // length 258 (symbol 285),
        bits.push_code(0, 5); // distance 1.
        written += 258;
    }
    while written < raw {
        zero(bits.by_ref());
        written += 1;
    }
    bits.push_code(0, 7); // end of block
                          // Zlib: deflate with a 32 KiB window, then the Adler-32 of all-zero data (A = 1, B = n).
    let mut zlib = vec![0x78, 0x01];
    zlib.extend_from_slice(&bits.bytes);
    zlib.extend_from_slice(&(((raw % 65_521) as u32) << 16 | 1).to_be_bytes());

    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let ihdr = [edge.to_be_bytes().as_slice(), &edge.to_be_bytes(), &[1, 0, 0, 0, 0]].concat();
    chunk(&mut png, b"IHDR", &ihdr);
    chunk(&mut png, b"IDAT", &zlib);
    chunk(&mut png, b"IEND", &[]);
    png
}

/// Deflate's bit order: fields from their least significant bit, Huffman codes from their most.
#[derive(Default)]
struct Bits {
    bytes: Vec<u8>,
    used: u32,
}

impl Bits {
    fn by_ref(&mut self) -> &mut Self {
        self
    }

    fn push(&mut self, value: u32, count: u32) {
        for i in 0..count {
            if self.used.is_multiple_of(8) {
                self.bytes.push(0);
            }
            let last = self.bytes.len() - 1;
            self.bytes[last] |= (((value >> i) & 1) as u8) << (self.used % 8);
            self.used += 1;
        }
    }

    fn push_code(&mut self, code: u32, count: u32) {
        for i in (0..count).rev() {
            self.push((code >> i) & 1, 1);
        }
    }
}

pub fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    png.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let body = [kind.as_slice(), data].concat();
    png.extend_from_slice(&body);
    png.extend_from_slice(&crc32(&body).to_be_bytes());
}

pub fn crc32(bytes: &[u8]) -> u32 {
    let table: Vec<u32> =
        (0..256u32).map(|n| (0..8).fold(n, |c, _| if c & 1 == 1 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 })).collect();
    !bytes.iter().fold(!0u32, |crc, &byte| table[((crc ^ u32::from(byte)) & 0xFF) as usize] ^ (crc >> 8))
}

/// A PDF of `pages` empty Letter pages, all in one flat page tree.
pub fn pdf(pages: usize) -> Vec<u8> {
    save(&mut document(pages))
}

/// A PDF whose trailer names an encryption dictionary (RC4, 40-bit, as the oldest readers wrote).
pub fn encrypted_pdf() -> Vec<u8> {
    let mut document = document(1);
    let encrypt = document.add_object(dictionary! {
        "Filter" => "Standard",
        "V" => 1,
        "R" => 2,
        "O" => Object::string_literal(vec![0x41; 32]),
        "U" => Object::string_literal(vec![0x42; 32]),
        "P" => -4,
    });
    document.trailer.set("Encrypt", encrypt);
    document.trailer.set("ID", vec![Object::string_literal(vec![1; 16]), Object::string_literal(vec![1; 16])]);
    save(&mut document)
}

fn document(pages: usize) -> Document {
    let mut document = Document::with_version("1.5");
    let pages_id = document.new_object_id();
    let content = document.add_object(Stream::new(dictionary! {}, b"BT ET".to_vec()));
    let kids: Vec<Object> = (0..pages)
        .map(|_| {
            let page = document.add_object(dictionary! {
                "Type" => "Page",
                "Parent" => pages_id,
                "Contents" => content,
                "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
            });
            page.into()
        })
        .collect();
    let tree = dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => pages as i64 };
    document.objects.insert(pages_id, Object::Dictionary(tree));
    let catalog = document.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    document.trailer.set("Root", catalog);
    document
}

fn save(document: &mut Document) -> Vec<u8> {
    let mut out = Vec::new();
    document.save_to(&mut out).unwrap();
    out
}

pub const SVG: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!-- drawn by hand -->
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>
"#;
