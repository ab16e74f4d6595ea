//! The files the vision tests show the model, made here with the image crate and lopdf (and a
//! hand-written deflate stream for the decompression bomb), so no binary fixture is kept.

use std::io::Cursor;
use std::sync::OnceLock;

use image::codecs::gif::{GifEncoder, Repeat};
use image::codecs::jpeg::JpegEncoder;
use image::{Delay, DynamicImage, Frame, ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};
use lopdf::{dictionary, Document, Object, Stream};

/// A photo-like RGB image: a gradient under pseudo-random noise, which compresses like a photo
/// (a flat image would meet every size bound trivially).
pub fn photo(width: u32, height: u32, seed: u64) -> RgbImage {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    RgbImage::from_fn(width, height, |x, y| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let noise = (state & 0x3F) as u8;
        let gradient = |value: u32, span: u32| (value * 180 / span.max(1)) as u8;
        Rgb([
            gradient(x, width).saturating_add(noise),
            gradient(y, height).saturating_add(noise >> 1),
            gradient(x + y, width + height).saturating_add(noise >> 2),
        ])
    })
}

/// A 4000 × 3000 JPEG (12 megapixels, a phone photo, 3 MB), made once per test process.
pub fn big_photo_jpeg() -> &'static [u8] {
    static JPEG: OnceLock<Vec<u8>> = OnceLock::new();
    JPEG.get_or_init(|| {
        let mut out = Vec::new();
        JpegEncoder::new_with_quality(&mut out, 75).encode_image(&photo(4_000, 3_000, 7)).expect("encode the photo");
        out
    })
}

/// A small PNG whose pixels depend on `seed`, so each is a distinct file.
pub fn png(width: u32, height: u32, seed: u64) -> Vec<u8> {
    encode(&DynamicImage::ImageRgb8(photo(width, height, seed)), ImageFormat::Png)
}

pub fn encode(image: &DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image.write_to(&mut out, format).expect("encode");
    out.into_inner()
}

/// The format and size of image bytes, decoded whole (a header that lies would fail here).
pub fn decoded(bytes: &[u8]) -> (ImageFormat, u32, u32) {
    let format = image::guess_format(bytes).expect("image bytes");
    let image = image::load_from_memory_with_format(bytes, format).expect("the bytes decode");
    (format, image.width(), image.height())
}

/// An animated GIF of `frames` frames of 16 × 16: the first red, every other blue.
pub fn animated_gif(frames: usize) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut encoder = GifEncoder::new_with_speed(&mut out, 30);
        encoder.set_repeat(Repeat::Infinite).expect("repeat");
        let frame = |color: Rgba<u8>| {
            Frame::from_parts(RgbaImage::from_pixel(16, 16, color), 0, 0, Delay::from_numer_denom_ms(10, 1))
        };
        let first = std::iter::once(frame(Rgba([255, 0, 0, 255])));
        let rest = std::iter::repeat_with(|| frame(Rgba([0, 0, 255, 255]))).take(frames - 1);
        encoder.encode_frames(first.chain(rest)).expect("encode the frames");
    }
    out
}

/// A real, complete 1-bit PNG of `edge` × `edge` black pixels: 20,000 × 20,000 is 400
/// megapixels in about 300 KB. Its zlib stream is written here with deflate's fixed codes, each
/// run of 258 zero bytes one back-reference of 13 bits: no encoder holds the 50 MB of rows.
pub fn bomb_png(edge: u32) -> Vec<u8> {
    let raw = u64::from(edge) * (1 + u64::from(edge.div_ceil(8)));
    let mut bits = Bits::default();
    bits.push(1, 1); // the final block,
    bits.push(1, 2); // with the fixed codes;
    bits.code(0b0011_0000, 8); // a literal zero byte,
    let mut written = 1;
    while raw - written >= 258 {
        bits.code(0b1100_0101, 8); // then length 258 (symbol 285)
        bits.code(0, 5); // at distance 1, again and again;
        written += 258;
    }
    while written < raw {
        bits.code(0b0011_0000, 8);
        written += 1;
    }
    bits.code(0, 7); // the end of the block.
                     // Zlib around it: a 32 KiB window, and the Adler-32 of all-zero data (A = 1, B = n).
    let mut zlib = vec![0x78, 0x01];
    zlib.extend_from_slice(&bits.bytes);
    zlib.extend_from_slice(&((((raw % 65_521) as u32) << 16) | 1).to_be_bytes());

    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let header = [edge.to_be_bytes().as_slice(), &edge.to_be_bytes(), &[1, 0, 0, 0, 0]].concat();
    chunk(&mut png, b"IHDR", &header);
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

    fn code(&mut self, code: u32, count: u32) {
        for i in (0..count).rev() {
            self.push((code >> i) & 1, 1);
        }
    }
}

fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    png.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let body = [kind.as_slice(), data].concat();
    png.extend_from_slice(&body);
    png.extend_from_slice(&crc32(&body).to_be_bytes());
}

fn crc32(bytes: &[u8]) -> u32 {
    let table: Vec<u32> =
        (0..256u32).map(|n| (0..8).fold(n, |c, _| if c & 1 == 1 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 })).collect();
    !bytes.iter().fold(!0u32, |crc, &byte| table[((crc ^ u32::from(byte)) & 0xFF) as usize] ^ (crc >> 8))
}

/// A PDF of `pages` Letter pages, each saying its number, all in one flat page tree.
pub fn pdf(pages: usize) -> Vec<u8> {
    save(&mut document(pages))
}

/// A one-page PDF whose trailer names an encryption dictionary (RC4, 40-bit).
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
    let font = document.add_object(dictionary! { "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica" });
    let resources = document.add_object(dictionary! { "Font" => dictionary! { "F1" => font } });
    let kids: Vec<Object> = (1..=pages)
        .map(|number| {
            let text = format!("BT /F1 24 Tf 72 700 Td (Page {number}) Tj ET");
            let content = document.add_object(Stream::new(dictionary! {}, text.into_bytes()));
            let page = document.add_object(dictionary! {
                "Type" => "Page",
                "Parent" => pages_id,
                "Contents" => content,
                "Resources" => resources,
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
    document.save_to(&mut out).expect("save the PDF");
    out
}

/// An SVG drawing: text, whatever its name says.
pub const SVG: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"><rect width=\"10\" height=\"10\"/></svg>\n";
