//! A request as a call of the API: routed on its raw path and method, its caller known, its parts
//! validated; and the call made against the turn service, the one step that reads or writes.

use agent_core::turn::MemoryFile;
use agent_core::turn::{FileDownload, TurnReply, TurnRequest, Upload};
use agent_core::{SessionId, TurnStatus, UserId};
use http::Method;

use super::background::{self, Queued, Refusal};
use super::files::FileRequest;
use super::memories::memory_path;
use super::message::Request;
use super::outcome::Outcome;
use super::session_view::{PageRequest, MAX_PAGE_READ_BYTES};
use super::sessions_list::SessionsPage;
use super::skill_versions::{self, SkillRoute, VersionCall};
use super::skills_view::SkillsPage;
use super::uploads::{DirectUpload, PresignRequest};
use super::usage::UsageDays;
use crate::api::{parse_session_id, parse_turn_body, turn_request, ApiError};
use crate::app::App;
use crate::queue::TurnQueue;
use crate::turn::{run_traced_turn, Invocation, RequestLog};

/// What a request asks of the turn service, validated.
pub(super) enum Call<'q> {
    Turn(TurnRequest),
    Background { queue: &'q dyn TurnQueue, turn: Queued },
    TurnStatus { user: UserId, session: SessionId, turn_id: String },
    Session { user: UserId, session: SessionId, page: PageRequest },
    Sessions { user: UserId, page: SessionsPage },
    Skills { user: UserId, page: SkillsPage },
    Usage { user: UserId, days: UsageDays },
    Memories { user: UserId },
    DeleteMemories { user: UserId, path: Option<agent_core::MemoryPath> },
    File { user: UserId, session: SessionId, file: FileRequest },
    Upload { user: UserId, session: SessionId, upload: DirectUpload },
    Presign { user: UserId, session: SessionId, presign: PresignRequest },
    Shown { user: UserId, session: SessionId, sha256: String },
    SkillVersions { user: UserId, call: VersionCall, queue: Option<&'q dyn TurnQueue> },
    WebhookSecret { user: UserId },
}

impl<'q> Call<'q> {
    /// The call `request` makes: exactly the documented paths, a 405 for another method on one of
    /// them, then the caller (401 without one), then the route's own parts. With `queue`, a turn
    /// sent with `Prefer: respond-async` runs in the background.
    pub(super) fn from_request(
        request: &Request<'_>,
        queue: Option<&'q dyn TurnQueue>,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Self, ApiError> {
        let method = &request.method;
        let not_found = || ApiError::not_found("no such route");
        let segments: Vec<&str> = request.path.strip_prefix('/').ok_or_else(not_found)?.split('/').collect();
        if segments.iter().any(|segment| segment.is_empty()) {
            return Err(not_found());
        }
        let route = match segments.as_slice() {
            ["sessions"] if method == Method::GET => Route::ListSessions,
            ["sessions", id, "turns"] if method == Method::POST => Route::PostTurn(id),
            ["sessions", id] if method == Method::GET => Route::GetSession(id),
            ["sessions", id, "turns", turn] if method == Method::GET => Route::GetTurn(id, turn),
            ["skills"] if method == Method::GET => Route::ListSkills,
            // A skill's versions: the route is read from the path's right end, with its own 405s.
            ["skills", rest @ ..] if !rest.is_empty() => Route::SkillVersions(SkillRoute::resolve(method, rest)?),
            ["usage"] if method == Method::GET => Route::Usage,
            ["webhooks", "secret"] if method == Method::GET => Route::WebhookSecret,
            ["memories"] if method == Method::GET => Route::ListMemories,
            ["memories"] if method == Method::DELETE => Route::DeleteMemories(None),
            ["memories", path @ ..] if method == Method::DELETE => Route::DeleteMemories(Some(path)),
            ["sessions", id, "files", path @ ..] if !path.is_empty() && method == Method::GET => {
                Route::GetFile(id, path)
            }
            ["sessions", id, "uploads"] if method == Method::POST => Route::PresignUpload(id),
            ["sessions", id, "uploads", name @ ..] if !name.is_empty() && method == Method::PUT => {
                Route::PutUpload(id, name)
            }
            ["sessions", id, "shown", sha256] if method == Method::GET => Route::GetShown(id, sha256),
            ["sessions"]
            | ["sessions", _, "turns"]
            | ["sessions", _]
            | ["sessions", _, "turns", _]
            | ["sessions", _, "files", _, ..]
            | ["sessions", _, "uploads", ..]
            | ["sessions", _, "shown", _]
            | ["skills"]
            | ["usage"]
            | ["webhooks", "secret"]
            | ["memories", ..] => {
                return Err(ApiError::new(405, "method_not_allowed", format!("{method} is not allowed on this path")))
            }
            _ => return Err(not_found()),
        };
        let caller = request.caller.clone()?;
        let user = caller.user;
        let query = &request.query;
        Ok(match route {
            Route::PostTurn(id) => {
                let session = parse_session_id(id)?;
                let body = parse_turn_body(request.body, request.base64)?;
                match queue {
                    Some(queue) if background::prefers_async(request.headers) => {
                        Call::Background { queue, turn: Queued::new(user, session, body, request.headers)? }
                    }
                    _ => Call::Turn(turn_request(user, session, body, request.headers, caller.profile, deadline)?),
                }
            }
            Route::GetTurn(id, turn) => {
                let session = parse_session_id(id)?;
                Call::TurnStatus { user, session, turn_id: background::parse_turn_id(turn)? }
            }
            Route::GetSession(id) => {
                let session = parse_session_id(id)?;
                Call::Session { user, session, page: PageRequest::from_query(query)? }
            }
            Route::ListSessions => {
                let page = SessionsPage::from_query(query, &user)?;
                Call::Sessions { user, page }
            }
            Route::ListSkills => Call::Skills { user, page: SkillsPage::from_query(query)? },
            Route::Usage => Call::Usage { user, days: UsageDays::from_query(query)? },
            Route::WebhookSecret => Call::WebhookSecret { user },
            Route::ListMemories => Call::Memories { user },
            Route::DeleteMemories(path) => Call::DeleteMemories { user, path: memory_path(path)? },
            Route::GetFile(id, path) => {
                let session = parse_session_id(id)?;
                Call::File { user, session, file: FileRequest::from_segments(path)? }
            }
            Route::PutUpload(id, name) => {
                let session = parse_session_id(id)?;
                let upload = DirectUpload::from_request(name, request.body, request.base64, request.headers)?;
                Call::Upload { user, session, upload }
            }
            Route::PresignUpload(id) => {
                let session = parse_session_id(id)?;
                Call::Presign { user, session, presign: PresignRequest::from_body(request.body, request.base64)? }
            }
            Route::GetShown(id, sha256) => {
                Call::Shown { user, session: parse_session_id(id)?, sha256: (*sha256).to_owned() }
            }
            Route::SkillVersions(route) => {
                // Eval runs go to the turn queue.
                Call::SkillVersions { user, call: VersionCall::from_route(route, request)?, queue }
            }
        })
    }

    /// Makes the call against the turn service. Nothing here shapes an answer: the outcome keeps
    /// what the service gave back for [`Outcome::answer`].
    pub(super) async fn perform(self, app: &App, request: &Request<'_>) -> Result<Outcome, ApiError> {
        let service = &app.service;
        Ok(match self {
            Call::TurnStatus { user, session, turn_id } => {
                let status: Option<TurnStatus> =
                    service.turn_status(&user, &session, &turn_id, time::OffsetDateTime::now_utc()).await?;
                Outcome::TurnStatus { turn_id, status }
            }
            Call::Session { user, session, page } => {
                let found = service.session_page(&user, &session, page.before, page.limit, MAX_PAGE_READ_BYTES).await?;
                Outcome::Session { session, found: found.map(Box::new) }
            }
            Call::Sessions { user, page } => {
                let list = service.list_sessions(&user, page.after.as_ref(), page.limit).await?;
                Outcome::Sessions { user, list }
            }
            Call::Skills { user, page } => {
                let (catalog, view) = service.skill_catalog_view(&user).await?;
                Outcome::Skills { page, catalog, view, has_sandbox: service.sandbox_name().is_some() }
            }
            Call::Usage { user, days } => {
                let usage = service.usage(&user, &days.from, &days.to).await?;
                Outcome::Usage { days, usage, prices: std::sync::Arc::clone(&service.config().prices) }
            }
            Call::Memories { user } => Outcome::Memories(service.memories(&user).await?),
            Call::WebhookSecret { user } => Outcome::WebhookSecret(super::webhook_secret::tenant_secret(&user).await?),
            Call::DeleteMemories { user, path } => {
                let deleted: Vec<MemoryFile> = service.delete_memories(&user, path.as_ref()).await?;
                Outcome::Deleted { path, deleted }
            }
            Call::File { user, session, file } => {
                let download: Option<FileDownload> = service
                    .workspace_file(&user, &session, &file.path(), super::files::INLINE_MAX_BYTES, &file.link_headers)
                    .await?;
                Outcome::File { session, file, download }
            }
            Call::Upload { user, session, upload } => {
                let stored: Upload = service.upload(&user, &session, &upload.name, upload.bytes).await?;
                tracing::info!(session = %session, size = stored.size, media_type = stored.media_type, "upload stored");
                Outcome::Uploaded(stored)
            }
            Call::Presign { user, session, presign } => {
                let link = service.presign_upload(&user, &session, presign.size, &presign.sha256).await?;
                tracing::info!(session = %session, size = presign.size, linked = link.is_some(), "upload link asked for");
                Outcome::Presigned(link)
            }
            Call::Shown { user, session, sha256 } => {
                let found = service.shown_file(&user, &session, &sha256).await?;
                Outcome::Shown { sha256, found }
            }
            Call::SkillVersions { user, call, queue } => {
                let context = skill_versions::Context {
                    objects: app.objects.as_ref(),
                    queue,
                    // A default changed rewrites the catalog index with the listing budget turns use.
                    listing_budget: service.config().listing_tokens(),
                    model_id: &service.config().model_id,
                };
                let outcome = skill_versions::perform(&context, &user, call).await?;
                Outcome::SkillVersions(Box::new(outcome))
            }
            Call::Background { queue, turn } => {
                turn.accept(service, queue).await.map_err(|refusal| match refusal {
                    Refusal::KeyReused => ApiError::new(
                        422,
                        "idempotency_key_reused",
                        "this Idempotency-Key was already used with a different request",
                    ),
                    Refusal::Failed(error) => error,
                    Refusal::QueueUnavailable => ApiError::new(
                        503,
                        "queue_unavailable",
                        "the turn could not be queued; send it again with the same Idempotency-Key",
                    ),
                })?;
                let Queued { session, turn_id, .. } = turn;
                Outcome::Queued { session, turn_id }
            }
            Call::Turn(turn) => {
                let invocation = Invocation {
                    request_id: request.request_id,
                    headers: request.headers,
                    request_log: RequestLog::Caller,
                };
                let run = |service: std::sync::Arc<agent_core::turn::TurnService>, turn| async move {
                    service.run_turn(turn).await
                };
                let reply: TurnReply = run_traced_turn(app, turn, invocation, run, |outcome| outcome).await?;
                Outcome::Turn(reply)
            }
        })
    }
}

/// A documented path, with the parts of it a call needs.
enum Route<'a> {
    PostTurn(&'a str),
    GetTurn(&'a str, &'a str),
    GetSession(&'a str),
    GetFile(&'a str, &'a [&'a str]),
    PutUpload(&'a str, &'a [&'a str]),
    PresignUpload(&'a str),
    GetShown(&'a str, &'a str),
    SkillVersions(SkillRoute<'a>),
    ListSkills,
    ListSessions,
    Usage,
    WebhookSecret,
    ListMemories,
    DeleteMemories(Option<&'a [&'a str]>),
}
