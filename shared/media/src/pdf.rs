//! PDFs: the bytes a provider takes, no encryption, no damage, and the pages a model is shown at
//! once; a PDF that passes is sent unchanged.

use std::borrow::Cow;
use std::cell::Cell;

use agent_ports::message::MediaType;
use lopdf::xref::XrefRecovery;
use lopdf::{Dictionary, Document, LoadOptions, Object, ObjectId};

use crate::error::thousands;
use crate::{Limits, MediaError, Original, Prepared};

/// The most bytes one object or cross-reference stream may inflate to while loading. Real object
/// streams hold about a hundred objects in tens of kilobytes; lopdf's default (256 MiB) is more
/// than the functions' memory.
const MAX_STREAM_BYTES: usize = 4 * 1024 * 1024;
/// The most objects read while loading: a real PDF of 4.5 MB has tens of thousands; this bounds
/// the memory of a file of millions of tiny objects.
const MAX_OBJECTS: usize = 200_000;
/// Where the `%%EOF` marker must be: within this many bytes of the end, as readers look for it.
const EOF_WINDOW: usize = 1024;
/// The only keys of a dictionary the page count reads.
const PAGE_TREE_KEYS: [&[u8]; 5] = [b"Type", b"Pages", b"Kids", b"Count", b"Parent"];

thread_local! {
    /// Objects read by [`keep_page_tree`] in the load under way on this thread (lopdf's filter is a
    /// plain function, so its count lives here; without rayon a load runs on the calling thread).
    static KEPT: Cell<usize> = const { Cell::new(0) };
}

pub(crate) fn prepare<'a>(bytes: &'a [u8], limits: &Limits) -> Result<Prepared<'a>, MediaError> {
    if bytes.len() > limits.pdf_bytes {
        return Err(MediaError::PdfTooLarge { size: bytes.len(), limit: limits.pdf_bytes });
    }
    let damaged = |reason: &str| MediaError::PdfDamaged { reason: reason.to_string() };
    // A download cut short loses its end first; readers look for the marker in the last kilobyte.
    let tail = &bytes[bytes.len().saturating_sub(EOF_WINDOW)..];
    if !tail.windows(5).any(|window| window == b"%%EOF") {
        return Err(damaged("it is truncated: its end has no %%EOF marker"));
    }
    // An encrypted PDF names /Encrypt in its trailer, always in the clear. Only a file that names
    // it is asked about it, with lopdf's reader of the trailer and catalog alone; one whose
    // encryption that reader cannot set up (an unknown security handler) is encrypted all the same.
    if names_encrypt(bytes) && Document::load_metadata_mem(bytes).ok().is_none_or(|metadata| metadata.encrypted) {
        return Err(MediaError::PdfEncrypted);
    }
    let options = LoadOptions {
        max_decompressed_size: Some(MAX_STREAM_BYTES),
        filter: Some(keep_page_tree),
        ..Default::default()
    };
    KEPT.set(0);
    let loaded = Document::load_mem_with_options(bytes, options);
    let kept = KEPT.replace(0);
    let document = loaded.map_err(|error| damaged(&error.to_string()))?;
    if kept > MAX_OBJECTS {
        return Err(damaged(&format!("it has over {} objects", thousands(MAX_OBJECTS as u64))));
    }
    if document.trailer.has(b"Encrypt") {
        return Err(MediaError::PdfEncrypted);
    }
    if document.xref_recovery == Some(XrefRecovery::Reconstructed) {
        return Err(damaged("its cross-reference table is missing or unreadable"));
    }
    let pages = u32::try_from(document.page_iter().count()).unwrap_or(u32::MAX);
    if pages == 0 {
        return Err(damaged("no pages were found"));
    }
    if pages > limits.pdf_pages {
        return Err(MediaError::PdfTooManyPages { pages, limit: limits.pdf_pages });
    }
    let original = Original { media_type: MediaType::Pdf, size: bytes.len(), width: None, height: None };
    Ok(Prepared {
        bytes: Cow::Borrowed(bytes),
        media_type: MediaType::Pdf,
        width: None,
        height: None,
        pages: Some(pages),
        original,
        changed: None,
    })
}

/// lopdf's load filter: keeps only what the page tree is read from (dictionaries cut to its keys,
/// arrays of references, numbers, references) and the object streams those may be in, and drops
/// everything else (content, fonts, images) as soon as it is parsed, so a load holds the page tree
/// rather than the document. Past [`MAX_OBJECTS`] read, nothing more is kept.
///
/// lopdf uses the object as changed in place for a top-level object and the returned one for an
/// object of an object stream, so both are set.
fn keep_page_tree(id: ObjectId, object: &mut Object) -> Option<(ObjectId, Object)> {
    let kept = KEPT.get() + 1;
    KEPT.set(kept);
    if kept > MAX_OBJECTS {
        return None;
    }
    match object {
        // Expanded by lopdf after this filter; a stream is never inside an object stream, so the
        // returned copy is never used and need not be the stream.
        Object::Stream(stream) if stream.dict.has_type(b"ObjStm") => Some((id, Object::Null)),
        Object::Dictionary(dictionary) => {
            *dictionary = page_tree_keys(dictionary);
            Some((id, object.clone()))
        }
        Object::Array(items) if items.iter().all(|item| matches!(item, Object::Reference(_))) => {
            Some((id, object.clone()))
        }
        Object::Integer(_) | Object::Reference(_) => Some((id, object.clone())),
        _ => None,
    }
}

fn page_tree_keys(dictionary: &Dictionary) -> Dictionary {
    let mut kept = Dictionary::new();
    for (key, value) in dictionary.iter() {
        if PAGE_TREE_KEYS.contains(&key.as_slice()) {
            kept.set(key.clone(), value.clone());
        }
    }
    kept
}

/// Whether any PDF name in `bytes` is `/Encrypt`, spelled plainly or with `#xx` escapes, as
/// lopdf's parser reads names.
fn names_encrypt(bytes: &[u8]) -> bool {
    const NAME: &[u8] = b"Encrypt";
    let mut rest = bytes;
    while let Some(slash) = rest.iter().position(|&b| b == b'/') {
        rest = &rest[slash + 1..];
        let mut matched = 0;
        let mut at = 0;
        loop {
            let byte = match rest.get(at) {
                Some(b'#') => match rest.get(at + 1..at + 3).and_then(hex_byte) {
                    Some(byte) => {
                        at += 3;
                        byte
                    }
                    None => break,
                },
                Some(&byte) if is_regular(byte) => {
                    at += 1;
                    byte
                }
                _ => break,
            };
            if matched == NAME.len() || NAME[matched] != byte {
                matched = usize::MAX;
                break;
            }
            matched += 1;
        }
        if matched == NAME.len() {
            return true;
        }
    }
    false
}

fn hex_byte(pair: &[u8]) -> Option<u8> {
    let digit = |byte: u8| char::from(byte).to_digit(16);
    Some((digit(pair[0])? * 16 + digit(pair[1])?) as u8)
}

/// A byte that may stand in a PDF name: neither white space nor a delimiter.
fn is_regular(byte: u8) -> bool {
    !matches!(
        byte,
        b'\0'
            | b'\t'
            | b'\n'
            | 0x0C
            | b'\r'
            | b' '
            | b'('
            | b')'
            | b'<'
            | b'>'
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'/'
            | b'%'
    )
}
