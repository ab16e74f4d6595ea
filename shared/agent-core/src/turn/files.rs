//! Downloads of a session's workspace files for their owner (`GET /sessions/{id}/files/{path}`):
//! the committed manifest names the file, and its content-addressed blob holds the bytes.

use std::time::Duration;

use super::{TurnError, TurnService};
use crate::files::{read_checked, Checked};
use crate::ids::{SessionId, UserId};
use crate::keys;
use crate::store::{LinkHeaders, StoreError};

/// How a workspace file is handed over: its bytes, or a short-lived link for a large one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileDownload {
    Bytes { path: String, bytes: Vec<u8> },
    Link { path: String, size: u64, url: String, expires_in: Duration },
}

/// How long a download link lasts.
pub const DOWNLOAD_LINK_LIFETIME: Duration = Duration::from_secs(300);

impl TurnService {
    /// The workspace file at `path` (relative to `/workspace`, or the whole `/workspace/...` path)
    /// of the caller's own session, as committed by its last turn: its bytes when they are at most
    /// `inline_max`, else a presigned link served with `link_headers` where the object store makes
    /// them (else the bytes).
    /// `None` when the session or the file does not exist, or the path is not a clean workspace path.
    pub async fn workspace_file(
        &self,
        user: &UserId,
        session: &SessionId,
        path: &str,
        inline_max: u64,
        link_headers: &LinkHeaders,
    ) -> Result<Option<FileDownload>, TurnError> {
        let rel = path.strip_prefix("/workspace/").or_else(|| path.strip_prefix("workspace/")).unwrap_or(path);
        if !crate::vfs::is_clean_workspace_path(rel) {
            return Ok(None);
        }
        let Some((stored, _)) = self.sessions.history_page(user, session, None, 1, 1).await? else {
            return Ok(None);
        };
        let Some(file) = stored.state.workspace.get(rel) else { return Ok(None) };
        let key = keys::workspace_blob_key(user, session, &file.sha256);
        let shown = format!("/workspace/{rel}");
        if file.size > inline_max {
            if let Some(url) = self.objects.presign_get(&key, DOWNLOAD_LINK_LIFETIME, link_headers).await? {
                return Ok(Some(FileDownload::Link {
                    path: shown,
                    size: file.size,
                    url,
                    expires_in: DOWNLOAD_LINK_LIFETIME,
                }));
            }
        }
        let bytes = match read_checked(self.objects.as_ref(), &key, &file.sha256).await? {
            Checked::Bytes(bytes) => bytes,
            Checked::Missing => {
                return Err(TurnError::Store(StoreError::Corrupt(format!("the blob of {shown} is missing"))))
            }
            Checked::Mismatch => {
                return Err(TurnError::Store(StoreError::Corrupt(format!(
                    "the blob of {shown} does not match its hash"
                ))))
            }
        };
        Ok(Some(FileDownload::Bytes { path: shown, bytes }))
    }
}
