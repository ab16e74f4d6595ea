//! PDFs: sent unchanged with their page count, or refused with the bound or check they fail.

use std::borrow::Cow;

use media::{prepare, Limits, MediaError, MediaType};

use crate::fixtures;

#[test]
fn a_short_pdf_is_sent_unchanged_with_its_pages() {
    let pdf = fixtures::pdf(3);
    let prepared = prepare(&pdf, &Limits::default()).unwrap();
    assert!(matches!(prepared.bytes, Cow::Borrowed(_)));
    assert_eq!((prepared.media_type, prepared.pages, prepared.width), (MediaType::Pdf, Some(3), None));
    assert_eq!(prepared.changed, None);
}

#[test]
fn a_2000_page_pdf_is_refused_with_what_to_do() {
    let pdf = fixtures::pdf(2_000);
    let error = prepare(&pdf, &Limits::default()).unwrap_err();
    assert_eq!(error, MediaError::PdfTooManyPages { pages: 2_000, limit: 100 });
    let message = error.to_string();
    assert!(
        message.starts_with("the PDF has 2,000 pages, over the limit of 100: render the pages you need"),
        "{message}"
    );
    assert!(message.contains("scripts/convert_pdf_to_images.py"), "{message}");
}

#[test]
fn an_encrypted_pdf_is_refused() {
    let pdf = fixtures::encrypted_pdf();
    assert_eq!(prepare(&pdf, &Limits::default()).unwrap_err(), MediaError::PdfEncrypted);
    // The trailer's name spelled with a `#xx` escape is the same name.
    let escaped = replace(&pdf, b"/Encrypt", b"/Encr#79pt");
    assert_eq!(prepare(&escaped, &Limits::default()).unwrap_err(), MediaError::PdfEncrypted);
    let message = MediaError::PdfEncrypted.to_string();
    assert!(message.contains("qpdf --decrypt in.pdf out.pdf"), "{message}");
}

#[test]
fn a_truncated_pdf_is_refused() {
    let pdf = fixtures::pdf(3);
    let error = prepare(&pdf[..pdf.len() / 2], &Limits::default()).unwrap_err();
    assert!(matches!(&error, MediaError::PdfDamaged { reason } if reason.contains("truncated")), "{error}");
    // Cut short but given back its end marker, it is still refused: its cross-reference table is gone.
    let mut patched = pdf[..pdf.len() / 2].to_vec();
    patched.extend_from_slice(b"\n%%EOF\n");
    let error = prepare(&patched, &Limits::default()).unwrap_err();
    assert!(matches!(&error, MediaError::PdfDamaged { .. }), "{error}");
}

#[test]
fn a_pdf_over_the_bytes_or_without_pages_is_refused() {
    let pdf = fixtures::pdf(3);
    let limits = Limits { pdf_bytes: 100, ..Limits::default() };
    assert_eq!(prepare(&pdf, &limits).unwrap_err(), MediaError::PdfTooLarge { size: pdf.len(), limit: 100 });
    let empty = fixtures::pdf(0);
    let error = prepare(&empty, &Limits::default()).unwrap_err();
    assert_eq!(error, MediaError::PdfDamaged { reason: "no pages were found".into() });
}

fn replace(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = haystack.windows(from.len()).position(|window| window == from).unwrap();
    [&haystack[..at], to, &haystack[at + from.len()..]].concat()
}
