//! The HTTP API's routes: routing on the raw path, identity from the JWT, and each route's answer.
//! The turn's body, its validation and the mapping of failures to statuses are `agent_app::api`,
//! shared with the other turn functions.

use agent_app::api::{internal_error, parse_session_id, parse_turn_body, turn_request, ApiError, REPLAYED_HEADER};
use agent_app::queue::TurnQueue;
use agent_core::turn::{TurnService, UserProfile};
use agent_core::UserId;
use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::{HeaderMap, HeaderValue, Method};
use futures::FutureExt;
use serde_json::Value;
use tokio::time::Instant;

mod background;
mod files;
mod memories;
mod session_view;
mod sessions_list;
mod skills_view;
mod usage;
pub use files::INLINE_MAX_BYTES;
use session_view::session_view;
pub use session_view::PageRequest;
pub use sessions_list::{decode_cursor, encode_cursor, set_cursor_key, SessionsPage, CURSOR_KEY_ENV, MIN_KEY_BYTES};
pub use skills_view::MAX_SKILLS_QUERY_CHARS;
use skills_view::{skills_search_view, skills_view, SkillsPage};
pub use usage::{parse_day, usage_range, MAX_USAGE_DAYS};

/// Handles one API Gateway (HTTP API, payload 2.0) event. Never fails: every error becomes a
/// response. With `queue`, a turn sent with `Prefer: respond-async` runs in the background.
pub async fn handle(
    service: &TurnService,
    event: ApiGatewayV2httpRequest,
    deadline: Option<Instant>,
    queue: Option<&dyn TurnQueue>,
) -> ApiGatewayV2httpResponse {
    let request_id = event.request_context.request_id.clone().unwrap_or_default();
    // A defect must cost one request a 500, never the runtime (and with it the warm process).
    let routed = std::panic::AssertUnwindSafe(route(service, &event, deadline, queue)).catch_unwind().await;
    let routed = routed.unwrap_or_else(|_| {
        tracing::error!(request_id, "the request panicked");
        Err(internal_error())
    });
    match routed {
        Ok(answer) => {
            let mut response = match answer.body {
                Payload::Json(body) => respond(answer.status, &body),
                Payload::Bytes(bytes) => respond_bytes(answer.status, bytes),
            };
            if answer.replayed {
                response.headers.insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
            }
            for (name, value) in answer.headers {
                if let Ok(value) = HeaderValue::from_str(&value) {
                    response.headers.insert(name, value);
                }
            }
            response
        }
        Err(err) => {
            tracing::info!(status = err.status, code = err.code, request_id, "request refused");
            let mut response = respond(err.status, &err.body());
            if let Some(seconds) = err.retry_after {
                response.headers.insert("retry-after", HeaderValue::from(seconds));
            }
            response
        }
    }
}

/// A successful answer: its status, body and extra headers, and whether it replays an earlier delivery.
struct Answer {
    status: u16,
    body: Payload,
    headers: Vec<(&'static str, String)>,
    replayed: bool,
}

/// The body of an answer: JSON, or a file's bytes (sent base64-encoded; its headers say what they are).
enum Payload {
    Json(Value),
    Bytes(Vec<u8>),
}

impl From<Value> for Payload {
    fn from(body: Value) -> Self {
        Payload::Json(body)
    }
}

impl From<Value> for Answer {
    fn from(body: Value) -> Self {
        Self { status: 200, body: body.into(), headers: Vec::new(), replayed: false }
    }
}

async fn route(
    service: &TurnService,
    event: &ApiGatewayV2httpRequest,
    deadline: Option<Instant>,
    queue: Option<&dyn TurnQueue>,
) -> Result<Answer, ApiError> {
    let method = event.request_context.http.method.clone();
    let path = event.raw_path.as_deref().unwrap_or("");
    let not_found = || ApiError::not_found("no such route");
    // The raw path decides, never `pathParameters`: exactly the documented paths, after the stage
    // name when the API has a named stage (`/prod/skills`).
    let mut segments: Vec<&str> = path.strip_prefix('/').ok_or_else(not_found)?.split('/').collect();
    let stage = event.request_context.stage.as_deref().filter(|stage| !stage.is_empty() && *stage != "$default");
    if stage.is_some() && segments.first().copied() == stage {
        segments.remove(0);
    }
    if segments.iter().any(|segment| segment.is_empty()) {
        return Err(not_found());
    }
    let route = match segments.as_slice() {
        ["sessions"] if method == Method::GET => Route::ListSessions,
        ["sessions", id, "turns"] if method == Method::POST => Route::PostTurn(id),
        ["sessions", id] if method == Method::GET => Route::GetSession(id),
        ["sessions", id, "turns", turn] if method == Method::GET => Route::GetTurn(id, turn),
        ["skills"] if method == Method::GET => Route::ListSkills,
        ["usage"] if method == Method::GET => Route::Usage,
        ["memories"] if method == Method::GET => Route::ListMemories,
        ["memories"] if method == Method::DELETE => Route::DeleteMemories(None),
        ["memories", path @ ..] if method == Method::DELETE => Route::DeleteMemories(Some(path)),
        ["sessions", id, "files", path @ ..] if !path.is_empty() && method == Method::GET => Route::GetFile(id, path),
        ["sessions"]
        | ["sessions", _, "turns"]
        | ["sessions", _]
        | ["sessions", _, "turns", _]
        | ["sessions", _, "files", _, ..]
        | ["skills"]
        | ["usage"]
        | ["memories", ..] => {
            return Err(ApiError::new(405, "method_not_allowed", format!("{method} is not allowed on this path")))
        }
        _ => return Err(not_found()),
    };
    let user = authenticated_user(event)?;
    match route {
        Route::PostTurn(id) => {
            let session = parse_session_id(id)?;
            let body = parse_turn_body(event.body.as_deref(), event.is_base64_encoded)?;
            if let (Some(queue), true) = (queue, background::prefers_async(&event.headers)) {
                return background::accept(service, queue, user, session, body, &event.headers).await;
            }
            let request = turn_request(user, session, body, &event.headers, profile_from_claims(event), deadline)?;
            let span = agent_app::turn_span(&request, event.request_context.request_id.as_deref().unwrap_or(""));
            agent_app::traces::set_incoming_parent(&span, agent_app::traces::trace_headers(&event.headers));
            let reply = tracing::Instrument::instrument(service.run_turn(request), span.clone()).await;
            // The turn's status and error code, for its summary line and metrics (when `span` closes).
            let reply = span.in_scope(|| reply.map_err(ApiError::from));
            match &reply {
                Ok(reply) => agent_app::metrics::record_turn(&span, 200, None, Some(reply)),
                Err(err) => agent_app::metrics::record_turn(&span, err.status, Some(err.code), None),
            }
            let reply = reply?;
            let body = serde_json::to_value(&reply).map_err(|_| internal_error())?;
            Ok(Answer { status: 200, body: body.into(), headers: Vec::new(), replayed: reply.replayed })
        }
        Route::Usage => Ok(usage::usage(service, &user, event).await?.into()),
        Route::ListMemories => Ok(memories::list(service, &user).await?.into()),
        Route::DeleteMemories(path) => Ok(memories::delete(service, &user, path).await?.into()),
        Route::GetTurn(id, turn) => {
            let session = parse_session_id(id)?;
            background::status(service, &user, &session, turn).await
        }
        Route::GetFile(id, path) => {
            let session = parse_session_id(id)?;
            files::download(service, &user, &session, path).await
        }
        Route::ListSkills => {
            let page = SkillsPage::from_query(event)?;
            let (catalog, view) = service.skill_catalog_view(&user).await?;
            let has_sandbox = service.sandbox_name().is_some();
            Ok(match &page.query {
                Some(query) => skills_search_view(&catalog, &view, query, page.limit, has_sandbox),
                None => skills_view(&catalog, &view, &page, has_sandbox),
            }
            .into())
        }
        Route::ListSessions => {
            let page = SessionsPage::from_query(event, &user)?;
            let list = service.list_sessions(&user, page.after.as_ref(), page.limit).await?;
            Ok(sessions_list::sessions_view(&user, &list).into())
        }
        Route::GetSession(id) => {
            let session_id = parse_session_id(id)?;
            let page = PageRequest::from_query(event)?;
            let (session, history) = service
                .session_page(&user, &session_id, page.before, page.limit, session_view::MAX_PAGE_READ_BYTES)
                .await?
                .ok_or_else(|| ApiError::not_found(format!("no session `{session_id}`")))?;
            Ok(session_view(&session, &history).into())
        }
    }
}

enum Route<'a> {
    PostTurn(&'a str),
    GetTurn(&'a str, &'a str),
    GetSession(&'a str),
    GetFile(&'a str, &'a [&'a str]),
    ListSkills,
    ListSessions,
    Usage,
    ListMemories,
    DeleteMemories(Option<&'a [&'a str]>),
}

/// The JWT `sub` verified by API Gateway's authorizer; the body is never consulted.
fn authenticated_user(event: &ApiGatewayV2httpRequest) -> Result<UserId, ApiError> {
    let unauthorized = |message: &str| ApiError::new(401, "unauthorized", message);
    let sub = event
        .request_context
        .authorizer
        .as_ref()
        .and_then(|authorizer| authorizer.jwt.as_ref())
        .and_then(|jwt| jwt.claims.get("sub"))
        .filter(|sub| !sub.is_empty())
        .ok_or_else(|| unauthorized("no authenticated user"))?;
    UserId::parse(sub.as_str()).map_err(|_| unauthorized("the authenticated user id is not supported"))
}

fn profile_from_claims(event: &ApiGatewayV2httpRequest) -> UserProfile {
    let claims = event.request_context.authorizer.as_ref().and_then(|a| a.jwt.as_ref()).map(|jwt| &jwt.claims);
    let claim = |name: &str| claims.and_then(|c| c.get(name)).filter(|v| !v.trim().is_empty()).cloned();
    UserProfile { name: claim("name"), language: claim("locale"), description: claim("profile") }
}

fn respond(status: u16, body: &Value) -> ApiGatewayV2httpResponse {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    let mut response = ApiGatewayV2httpResponse::default();
    response.status_code = i64::from(status);
    response.headers = headers;
    response.body = Some(Body::Text(body.to_string()));
    response
}

/// A binary answer: the bytes base64-encoded for API Gateway, which decodes them (and sets
/// `Content-Length`); the caller adds `Content-Type`.
fn respond_bytes(status: u16, bytes: Vec<u8>) -> ApiGatewayV2httpResponse {
    let mut response = ApiGatewayV2httpResponse::default();
    response.status_code = i64::from(status);
    response.body = Some(Body::Binary(bytes));
    response.is_base64_encoded = true;
    response
}
