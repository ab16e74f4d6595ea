//! What a call got back from the turn service, and the answer it makes: each route's view.

use std::sync::Arc;

use agent_core::message::MediaType;
use agent_core::skills::{Catalog, CatalogView};
use agent_core::store::{SessionList, UsageDay};
use agent_core::turn::{FileDownload, MemoryFile, PresignedUpload, TurnReply, Upload};
use agent_core::{HistoryPage, MemoryPath, Session, SessionId, TurnStatus, UserId};

use super::background::queued_answer;
use super::files::{file_answer, FileRequest};
use super::memories::{deleted_view, memories_view};
use super::message::{Answer, Payload};
use super::session_view::session_view;
use super::sessions_list::sessions_view;
use super::skill_versions::{versions_answer, VersionOutcome};
use super::skills_view::{skills_answer, SkillsPage};
use super::uploads::{presigned_answer, shown_answer, uploaded_answer};
use super::usage::{usage_view, UsageDays};
use crate::api::{internal_error, ApiError, REPLAYED_HEADER};
use crate::poll::status_view;

/// What the service gave back, with what of the call its answer still needs.
pub(super) enum Outcome {
    Turn(TurnReply),
    Queued {
        session: SessionId,
        turn_id: String,
    },
    TurnStatus {
        turn_id: String,
        status: Option<TurnStatus>,
    },
    /// The session boxed, as it is far larger than any other outcome.
    Session {
        session: SessionId,
        found: Option<Box<(Session, HistoryPage)>>,
    },
    Sessions {
        user: UserId,
        list: SessionList,
    },
    Skills {
        page: SkillsPage,
        catalog: Arc<Catalog>,
        view: Arc<CatalogView>,
        has_sandbox: bool,
    },
    Usage {
        days: UsageDays,
        usage: Vec<UsageDay>,
        prices: Arc<agent_core::pricing::PriceTable>,
    },
    Memories(Vec<MemoryFile>),
    /// The caller's webhook signing key (`whsec_...`).
    WebhookSecret(String),
    Deleted {
        path: Option<MemoryPath>,
        deleted: Vec<MemoryFile>,
    },
    File {
        session: SessionId,
        file: FileRequest,
        download: Option<FileDownload>,
    },
    Uploaded(Upload),
    Presigned(Option<PresignedUpload>),
    Shown {
        sha256: String,
        found: Option<(MediaType, Vec<u8>)>,
    },
    /// Boxed: a version's record is larger than most outcomes.
    SkillVersions(Box<VersionOutcome>),
}

impl Outcome {
    /// The answer the client reads; what the service did not find is a 404.
    pub(super) fn answer(self) -> Result<Answer, ApiError> {
        Ok(match self {
            Outcome::Turn(reply) => {
                let body = serde_json::to_value(&reply).map_err(|_| internal_error())?;
                let headers = if reply.replayed { vec![(REPLAYED_HEADER, "true".to_owned())] } else { Vec::new() };
                Answer { status: 200, body: Payload::Json(body), headers }
            }
            Outcome::Queued { session, turn_id } => queued_answer(&session, &turn_id),
            Outcome::TurnStatus { turn_id, status } => status_view(&turn_id, status)?.into(),
            Outcome::Session { session, found } => {
                let (session, history) =
                    *found.ok_or_else(|| ApiError::not_found(format!("no session `{session}`")))?;
                session_view(&session, &history).into()
            }
            Outcome::Sessions { user, list } => sessions_view(&user, &list).into(),
            Outcome::Skills { page, catalog, view, has_sandbox } => {
                skills_answer(&catalog, &view, &page, has_sandbox).into()
            }
            Outcome::Usage { days, usage, prices } => usage_view(&days, &usage, &prices).into(),
            Outcome::Memories(files) => memories_view(&files).into(),
            Outcome::WebhookSecret(secret) => super::webhook_secret::secret_answer(secret),
            Outcome::Deleted { path, deleted } => deleted_view(path.as_ref(), &deleted)?.into(),
            Outcome::File { session, file, download } => file_answer(&session, &file, download)?,
            Outcome::Uploaded(upload) => uploaded_answer(&upload)?,
            Outcome::Presigned(link) => presigned_answer(link)?,
            Outcome::Shown { sha256, found } => shown_answer(&sha256, found)?,
            Outcome::SkillVersions(outcome) => versions_answer(*outcome)?,
        })
    }
}
