//! Files shown to the model: an image or a PDF checked from its bytes and bounded (`media`),
//! stored once under the SHA-256 of what is sent, and read back at most once per turn when a
//! request is built. The session keeps only [`FileRef`]s; `fit` decides what each request shows.

mod fit;

pub use fit::{fit, Fitted, MAX_DOCUMENTS_PER_REQUEST, MAX_IMAGES_PER_REQUEST};

use std::sync::{Arc, Mutex};

use futures::stream::{self, StreamExt};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::ids::{SessionId, UserId};
use crate::keys;
use crate::message::{human_size, FileBytes, FileRef, MediaType};
use crate::model::FileInput;
use crate::store::{ObjectStore, StoreError};

pub use media::{Limits as MediaLimits, MediaError, Sniffed};

/// What part of the model's input window the files of one request may take, at most.
pub const FILE_SHARE_OF_CONTEXT: usize = 2;

/// Why a file could not be shown; `Display` is what the model or the client is told.
#[derive(Debug, Error)]
pub enum ShowError {
    /// The bytes broke a bound or could not be read as what they claim to be.
    #[error("{path}: {source}")]
    Media { path: String, source: MediaError },
    /// The bytes are not an image or a PDF at all.
    #[error("{path} is not an image (PNG, JPEG, GIF, WebP) or a PDF document: its bytes are {what}")]
    NotShowable { path: String, what: &'static str },
    /// A document this long would not leave the model room to work.
    #[error(
        "{path} has {pages} pages, about {tokens} tokens, more than the {limit} tokens a request may spend on files \
         with this model: render the pages you need as images with the pdf skill's scripts/convert_pdf_to_images.py \
         and read those, or split the PDF"
    )]
    TooLongForContext { path: String, pages: u32, tokens: usize, limit: usize },
    #[error("the file could not be stored: {0}")]
    Store(#[from] StoreError),
}

/// What a sniff found, in words, for a refusal.
pub fn describe(sniffed: &Sniffed) -> &'static str {
    match sniffed {
        Sniffed::Media(_) => "an image or a PDF",
        Sniffed::Svg => "an SVG drawing, which is text: read it as text, or render it to PNG with a command",
        Sniffed::Text => "text",
        Sniffed::OtherBinary => "another binary format",
    }
}

/// The files one turn shows: their bytes by SHA-256, each read or made at most once, shared by the
/// turn's agents.
pub struct ShownFiles<'a> {
    objects: &'a dyn ObjectStore,
    user: UserId,
    session: SessionId,
    input: FileInput,
    limits: MediaLimits,
    /// The most tokens one request may spend on files ([`FILE_SHARE_OF_CONTEXT`] of the window).
    file_tokens: usize,
    bytes: Mutex<FileBytes>,
}

impl<'a> ShownFiles<'a> {
    pub fn new(
        objects: &'a dyn ObjectStore,
        user: UserId,
        session: SessionId,
        input: FileInput,
        limits: MediaLimits,
        input_tokens: usize,
    ) -> Self {
        Self {
            objects,
            user,
            session,
            input,
            limits,
            file_tokens: input_tokens / FILE_SHARE_OF_CONTEXT,
            bytes: Mutex::new(FileBytes::new()),
        }
    }

    /// What the model can be shown.
    pub fn input(&self) -> FileInput {
        self.input
    }

    /// Checks `bytes`, read from `path`, and makes what the model is sent (an image downscaled or
    /// re-encoded when over a bound); stores it under its SHA-256, once per session. The returned
    /// text says what is shown and what was done to it.
    pub async fn show(&self, path: &str, bytes: Vec<u8>) -> Result<(FileRef, String), ShowError> {
        let sniffed_type = match media::sniff(&bytes) {
            Sniffed::Media(media_type) => media_type,
            other => return Err(ShowError::NotShowable { path: path.to_owned(), what: other.describe() }),
        };
        if !self.input.accepts(sniffed_type) {
            // Nothing is decoded or stored for a model that cannot see the file: it gets a note,
            // with an image's size read from its header.
            let (width, height) = media::dimensions(&bytes).unzip();
            let file = FileRef {
                path: path.to_owned(),
                sha256: hex::encode(Sha256::digest(&bytes)),
                media_type: sniffed_type,
                size: bytes.len() as u64,
                width,
                height,
                pages: None,
            };
            let note = file.note(cannot_see(sniffed_type));
            return Ok((file, note));
        }
        let original = bytes.len() as u64;
        let limits = self.limits.clone();
        // Decoding a photo takes a few hundred milliseconds of CPU: off the runtime's threads. A
        // file sent unchanged is not copied.
        let prepared = tokio::task::spawn_blocking(move || {
            let prepared = media::prepare(&bytes, &limits)?;
            let made = match prepared.bytes {
                std::borrow::Cow::Owned(made) => Some(made),
                std::borrow::Cow::Borrowed(_) => None,
            };
            let shape = (prepared.media_type, prepared.width, prepared.height, prepared.pages, prepared.changed);
            Ok::<_, MediaError>((made, shape, bytes))
        })
        .await;
        let (made, (media_type, width, height, pages, changed), bytes) = match prepared {
            Ok(Ok(prepared)) => prepared,
            Ok(Err(source)) => return Err(ShowError::Media { path: path.to_owned(), source }),
            Err(_) => {
                let source = MediaError::Undecodable { media_type: sniffed_type, reason: "the decoder failed".into() };
                return Err(ShowError::Media { path: path.to_owned(), source });
            }
        };
        let bytes = made.unwrap_or(bytes);
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let file = FileRef {
            path: path.to_owned(),
            sha256: sha256.clone(),
            media_type,
            size: bytes.len() as u64,
            width,
            height,
            pages,
        };
        if let Some(pages) = file.pages {
            let tokens = self.input.tokens(&file);
            if tokens > self.file_tokens {
                return Err(ShowError::TooLongForContext {
                    path: path.to_owned(),
                    pages,
                    tokens,
                    limit: self.file_tokens,
                });
            }
        }
        let bytes: Arc<[u8]> = bytes.into();
        let known = self.lock().contains_key(&sha256);
        if !known {
            self.objects.put(&keys::shown_file_key(&self.user, &self.session, &sha256), bytes.to_vec()).await?;
            self.lock().insert(sha256, bytes);
        }
        let mut said = match media_type {
            MediaType::Pdf => format!(
                "Showing the PDF document {path} ({}, {} page{}).",
                human_size(file.size),
                file.pages.unwrap_or(1),
                if file.pages == Some(1) { "" } else { "s" }
            ),
            _ => format!(
                "Showing the image {path} ({}, {}×{}, {}).",
                file.media_type.mime(),
                file.width.unwrap_or(0),
                file.height.unwrap_or(0),
                human_size(file.size)
            ),
        };
        if let Some(changed) = &changed {
            said.push_str(&format!(" It was {changed} (the file itself, {}, is unchanged).", human_size(original)));
        }
        Ok((file, said))
    }

    /// The bytes of `files`, from what this turn already holds or read once from storage (checked
    /// against their hash). A file that cannot be read is left out: the request shows a note.
    pub async fn bytes(&self, files: &[&FileRef]) -> Arc<FileBytes> {
        let missing: Vec<String> = {
            let held = self.lock();
            let mut missing: Vec<String> =
                files.iter().filter(|file| !held.contains_key(&file.sha256)).map(|file| file.sha256.clone()).collect();
            missing.sort();
            missing.dedup();
            missing
        };
        let read: Vec<(String, Option<Vec<u8>>)> = stream::iter(missing)
            .map(|sha256| async move {
                let key = keys::shown_file_key(&self.user, &self.session, &sha256);
                let bytes = match read_checked(self.objects, &key, &sha256).await {
                    Ok(Checked::Bytes(bytes)) => Some(bytes),
                    Ok(Checked::Mismatch) => {
                        tracing::warn!(sha256, "a shown file's bytes do not match their hash; a note is sent");
                        None
                    }
                    Ok(Checked::Missing) => None,
                    Err(err) => {
                        tracing::warn!(sha256, error = %err, "a shown file could not be read; a note is sent");
                        None
                    }
                };
                (sha256, bytes)
            })
            .buffer_unordered(crate::vfs::LOAD_CONCURRENCY)
            .collect()
            .await;
        let mut held = self.lock();
        for (sha256, bytes) in read {
            if let Some(bytes) = bytes {
                held.insert(sha256, bytes.into());
            }
        }
        let wanted: FileBytes = files
            .iter()
            .filter_map(|file| held.get(&file.sha256).map(|bytes| (file.sha256.clone(), bytes.clone())))
            .collect();
        Arc::new(wanted)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FileBytes> {
        self.bytes.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// An object read back by the SHA-256 its key names.
pub enum Checked {
    Missing,
    Bytes(Vec<u8>),
    /// The object's bytes do not have that hash.
    Mismatch,
}

/// Reads `key`, whose bytes should have the SHA-256 `sha256` (hex), and says whether they do.
pub async fn read_checked(objects: &dyn ObjectStore, key: &str, sha256: &str) -> Result<Checked, StoreError> {
    Ok(match objects.get(key).await? {
        None => Checked::Missing,
        Some(object) if hex::encode(Sha256::digest(&object.bytes)) == sha256 => Checked::Bytes(object.bytes),
        Some(_) => Checked::Mismatch,
    })
}

/// Why a file is not shown to a model that cannot see its kind.
pub fn cannot_see(media_type: MediaType) -> &'static str {
    if media_type.is_image() {
        "this model cannot see images"
    } else {
        "this model cannot read PDF documents"
    }
}
