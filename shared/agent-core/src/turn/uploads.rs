//! Files a person hands a session: uploaded (directly, or through a presigned link for a large
//! file), then attached to a turn's message, whose commit puts them in `/workspace`. An upload is
//! named by the SHA-256 of its bytes, so a repeated upload changes nothing; its bytes are checked
//! (length, hash, and type from the bytes, not the name) before a turn uses them.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{TurnError, TurnService};
use crate::events::{TurnEvent, TurnObserver};
use crate::files::{read_checked, Checked, ShowError, ShownFiles, Sniffed};
use crate::ids::{SessionId, UserId};
use crate::keys;
use crate::message::{human_size, FileRef, MediaType, ATTACHED_FILES_HEADING};
use crate::store::{StoreError, UploadLink, WorkspaceFile};
use crate::vfs::{self, MAX_WORKSPACE_BYTES, MAX_WORKSPACE_FILES};

/// Largest file an upload may carry: the workspace's whole quota.
pub const MAX_UPLOAD_BYTES: u64 = MAX_WORKSPACE_BYTES;
/// Most files one turn may attach.
pub const MAX_ATTACHMENTS: usize = 10;
/// How long a presigned upload link lasts.
pub const UPLOAD_LINK_LIFETIME: Duration = Duration::from_secs(900);

/// A file named by a turn's request: an upload of this session, and where it goes in `/workspace`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The upload's id: the hex SHA-256 of its bytes.
    pub upload: String,
    /// Its path under `/workspace` (`scan.jpg`, `docs/deed.pdf`).
    pub name: String,
}

impl Attachment {
    /// Checks an attachment as a client sent it.
    pub fn new(upload: &str, name: &str) -> Result<Self, String> {
        let Some(id) = upload_id(upload) else {
            return Err(format!("attachment `{upload}` is not an upload id (the 64 hex digits of its SHA-256)"));
        };
        let name = name.strip_prefix("/workspace/").unwrap_or(name);
        if !vfs::is_clean_workspace_path(name) {
            return Err(format!("attachment name `{name}` is not a clean relative path of at most 256 bytes"));
        }
        Ok(Self { upload: id, name: name.to_owned() })
    }

    /// What the attachments add to a turn's idempotency fingerprint.
    pub fn fingerprint(attachments: &[Attachment]) -> String {
        attachments.iter().map(|a| format!("{}={}", a.upload, a.name)).collect::<Vec<_>>().join("\n")
    }
}

/// What an upload stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Upload {
    /// The upload's id, to name in a turn's `attachments`: the hex SHA-256 of its bytes.
    pub upload: String,
    pub name: String,
    pub size: u64,
    /// The type its bytes show (`image/png`, `application/pdf`, `text/plain`, `image/svg+xml`,
    /// `application/octet-stream`).
    pub media_type: String,
}

/// A presigned upload: where to PUT the bytes, with which headers, until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresignedUpload {
    pub upload: String,
    pub link: UploadLink,
    pub expires_in: Duration,
}

/// The type a file's bytes show, as a media type.
pub fn sniffed_type(bytes: &[u8]) -> &'static str {
    match media::sniff(bytes) {
        Sniffed::Media(media_type) => media_type.mime(),
        Sniffed::Svg => "image/svg+xml",
        Sniffed::Text => "text/plain",
        Sniffed::OtherBinary => "application/octet-stream",
    }
}

/// Refuses bytes that are not what their name says they are (a `.png` that is not an image).
fn check_type(name: &str, bytes: &[u8]) -> Result<(), TurnError> {
    media::check_name(name, media::sniff(bytes)).map_err(|error| TurnError::InvalidInput(format!("`{name}`: {error}")))
}

/// An upload's id as a client may write it (hex digits in either case), as stored: lowercase.
fn upload_id(text: &str) -> Option<String> {
    let id = text.to_ascii_lowercase();
    agent_ports::bundle::is_sha256(&id).then_some(id)
}

fn too_large(size: u64) -> TurnError {
    TurnError::TooLarge(format!(
        "the file is {}, over the upload limit of {}",
        human_size(size),
        human_size(MAX_UPLOAD_BYTES)
    ))
}

impl TurnService {
    /// Stores `bytes`, named `name`, for the caller's session to attach; the same bytes again
    /// store nothing new. Refused: an empty or oversized file, a bad name, bytes that are not
    /// what the name says.
    pub async fn upload(
        &self,
        user: &UserId,
        session: &SessionId,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<Upload, TurnError> {
        let name = Attachment::new(&"0".repeat(64), name).map_err(TurnError::InvalidInput)?.name;
        if bytes.is_empty() {
            return Err(TurnError::InvalidInput("the upload is empty".into()));
        }
        if bytes.len() as u64 > MAX_UPLOAD_BYTES {
            return Err(too_large(bytes.len() as u64));
        }
        check_type(&name, &bytes)?;
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let media_type = sniffed_type(&bytes).to_owned();
        let size = bytes.len() as u64;
        // Content-named: a retried upload writes the same object again, and nothing else. It is
        // staged like a presigned upload, so one never attached expires.
        self.objects.put_staged(&keys::upload_key(user, session, &sha256), bytes).await?;
        Ok(Upload { upload: sha256, name, size, media_type })
    }

    /// A link to upload `size` bytes whose SHA-256 is `sha256` for the caller's session; the store
    /// refuses any other length or bytes. `None` when the store makes no links.
    pub async fn presign_upload(
        &self,
        user: &UserId,
        session: &SessionId,
        size: u64,
        sha256: &str,
    ) -> Result<Option<PresignedUpload>, TurnError> {
        let Some(sha256) = upload_id(sha256) else {
            return Err(TurnError::InvalidInput("`sha256` must be the 64 hex digits of the file's SHA-256".into()));
        };
        if size == 0 {
            return Err(TurnError::InvalidInput("`size` must be at least 1 byte".into()));
        }
        if size > MAX_UPLOAD_BYTES {
            return Err(too_large(size));
        }
        let key = keys::upload_key(user, session, &sha256);
        let link = self.objects.presign_put(&key, size, &sha256, UPLOAD_LINK_LIFETIME).await?;
        Ok(link.map(|link| PresignedUpload { upload: sha256, link, expires_in: UPLOAD_LINK_LIFETIME }))
    }

    /// The bytes of a file the session showed the model, by their SHA-256; `None` if there is none.
    pub async fn shown_file(
        &self,
        user: &UserId,
        session: &SessionId,
        sha256: &str,
    ) -> Result<Option<(MediaType, Vec<u8>)>, TurnError> {
        let Some(sha256) = upload_id(sha256) else { return Ok(None) };
        let bytes =
            match read_checked(self.objects.as_ref(), &keys::shown_file_key(user, session, &sha256), &sha256).await? {
                Checked::Missing => return Ok(None),
                Checked::Mismatch => {
                    return Err(TurnError::Store(StoreError::Corrupt("a shown file does not match its hash".into())))
                }
                Checked::Bytes(bytes) => bytes,
            };
        match media::sniff(&bytes) {
            Sniffed::Media(media_type) => Ok(Some((media_type, bytes))),
            _ => Ok(None),
        }
    }

    /// Brings a turn's attachments into its workspace and its message: each upload's bytes are
    /// read once and checked, an image or a PDF is made ready to show. Returns the text naming
    /// them (for the message) and the files shown. Nothing is committed here: the turn's commit
    /// puts the files in `/workspace`.
    pub(super) async fn attach(
        &self,
        user: &UserId,
        session: &SessionId,
        attachments: &[Attachment],
        workspace: &mut std::collections::BTreeMap<String, WorkspaceFile>,
        shown: &ShownFiles<'_>,
        events: &dyn TurnObserver,
    ) -> Result<(String, Vec<FileRef>), TurnError> {
        if attachments.len() > MAX_ATTACHMENTS {
            return Err(TurnError::InvalidInput(format!("a turn attaches at most {MAX_ATTACHMENTS} files")));
        }
        let mut lines = Vec::new();
        let mut files = Vec::new();
        for attachment in attachments {
            let bytes = self.upload_bytes(user, session, &attachment.upload).await?;
            check_type(&attachment.name, &bytes)?;
            workspace.insert(
                attachment.name.clone(),
                WorkspaceFile { sha256: attachment.upload.clone(), size: bytes.len() as u64 },
            );
            let path = format!("/workspace/{}", attachment.name);
            let kind = sniffed_type(&bytes);
            let size = human_size(bytes.len() as u64);
            if !matches!(media::sniff(&bytes), Sniffed::Media(_)) {
                lines.push(format!("- {path} ({kind}, {size})"));
                continue;
            }
            match shown.show(&path, bytes).await {
                Ok((file, said)) if shown.input().accepts(file.media_type) => {
                    events.event(TurnEvent::FileShown {
                        path: path.clone(),
                        media_type: file.media_type.mime().to_owned(),
                        size: file.size,
                        sha256: file.sha256.clone(),
                        attached: true,
                    });
                    lines.push(format!("- {said}"));
                    files.push(file);
                }
                Ok((_, note)) => lines.push(format!("- {note}")),
                Err(ShowError::Store(err)) => return Err(err.into()),
                // A file that cannot be shown is still attached: the model is told why, and may
                // work on it with a command.
                Err(error) => lines.push(format!("- {path} ({kind}, {size}), not shown: {error}")),
            }
        }
        let count = workspace.len();
        let total: u64 = workspace.values().map(|file| file.size).sum();
        if count > MAX_WORKSPACE_FILES || total > MAX_WORKSPACE_BYTES {
            return Err(TurnError::TooLarge(format!(
                "with its attachments the workspace would hold {count} files and {}, over its limits of \
                 {MAX_WORKSPACE_FILES} files and {}: delete files or start a new session",
                human_size(total),
                human_size(MAX_WORKSPACE_BYTES)
            )));
        }
        let text =
            if lines.is_empty() { String::new() } else { format!("{ATTACHED_FILES_HEADING}\n{}", lines.join("\n")) };
        Ok((text, files))
    }

    /// An upload's bytes: stored by a direct upload, or put through a presigned link (then checked
    /// against the hash it was declared with, and moved beside the workspace's files).
    async fn upload_bytes(&self, user: &UserId, session: &SessionId, sha256: &str) -> Result<Vec<u8>, TurnError> {
        let blob = keys::workspace_blob_key(user, session, sha256);
        if let Checked::Bytes(bytes) = read_checked(self.objects.as_ref(), &blob, sha256).await? {
            return Ok(bytes);
        }
        let staged = keys::upload_key(user, session, sha256);
        let missing =
            || TurnError::InvalidInput(format!("there is no upload {sha256} in this session: upload the file first"));
        // The size is known from the listing before a byte is read: a presigned upload's length is
        // bound by its signature, and checked again here.
        let listed = self.objects.list(&staged).await?;
        let Some(meta) = listed.iter().find(|meta| meta.key == staged) else { return Err(missing()) };
        if meta.size > MAX_UPLOAD_BYTES {
            self.objects.delete(&staged).await?;
            return Err(too_large(meta.size));
        }
        let bytes = match read_checked(self.objects.as_ref(), &staged, sha256).await? {
            Checked::Missing => return Err(missing()),
            Checked::Bytes(bytes) => bytes,
            Checked::Mismatch => {
                // Whatever was put there is not the file that was declared: it is removed, not kept.
                self.objects.delete(&staged).await?;
                return Err(TurnError::InvalidInput(format!(
                    "the bytes uploaded as {sha256} do not have that SHA-256: upload the file again"
                )));
            }
        };
        self.objects.put(&blob, bytes.clone()).await?;
        self.objects.delete(&staged).await?;
        Ok(bytes)
    }
}
