//! The HTTP API's routes: routing on the raw path, identity from the JWT, and each route's answer.
//! The turn's body, its validation and the mapping of failures to statuses are `agent_app::api`,
//! shared with the other turn functions.

use agent_app::api::{internal_error, parse_session_id, parse_turn_body, turn_request, ApiError, REPLAYED_HEADER};
use agent_app::queue::TurnQueue;
use agent_core::skills::{Catalog, CatalogView, SkillEntry};
use agent_core::turn::{TurnService, UserProfile};
use agent_core::UserId;
use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::{HeaderMap, HeaderValue, Method};
use futures::FutureExt;
use serde_json::{json, Value};
use tokio::time::Instant;

mod background;
mod files;
mod session_view;
mod sessions_list;
mod usage;
pub use files::INLINE_MAX_BYTES;
use session_view::session_view;
pub use session_view::PageRequest;
pub use sessions_list::{decode_cursor, encode_cursor, set_cursor_key, SessionsPage, CURSOR_KEY_ENV, MIN_KEY_BYTES};
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
        ["sessions", id, "files", path @ ..] if !path.is_empty() && method == Method::GET => Route::GetFile(id, path),
        ["sessions"]
        | ["sessions", _, "turns"]
        | ["sessions", _]
        | ["sessions", _, "turns", _]
        | ["sessions", _, "files", _, ..]
        | ["skills"]
        | ["usage"] => {
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
}

/// Skills per page of `GET /skills`, by default and at most: a page stays far below Lambda's
/// 6 MB response limit even with 1,024-character descriptions.
const DEFAULT_SKILLS_PAGE: usize = 200;
const MAX_SKILLS_PAGE: usize = 1000;
/// Matches a search (`GET /skills?q=`) answers by default.
const DEFAULT_SKILLS_FOUND: usize = 20;
/// Longest search accepted, in characters (the search itself reads at most
/// [`agent_core::skills::search::MAX_QUERY_CHARS`]).
pub const MAX_SKILLS_QUERY_CHARS: usize = 256;

/// `GET /skills?limit=&cursor=`: the cursor is the last path of the previous page.
/// `GET /skills?q=&limit=`: the best matches for `q`, in one page.
struct SkillsPage {
    limit: usize,
    after: Option<String>,
    query: Option<String>,
}

impl SkillsPage {
    fn from_query(event: &ApiGatewayV2httpRequest) -> Result<Self, ApiError> {
        let query = &event.query_string_parameters;
        let search = match query.first("q") {
            None => None,
            Some(raw) => {
                let text = raw.trim();
                if text.is_empty() {
                    return Err(ApiError::bad_request("`q` must not be empty: send a few words about the task"));
                }
                if text.chars().count() > MAX_SKILLS_QUERY_CHARS {
                    return Err(ApiError::bad_request(format!(
                        "`q` must be at most {MAX_SKILLS_QUERY_CHARS} characters"
                    )));
                }
                Some(text.to_owned())
            }
        };
        let limit = match query.first("limit") {
            None if search.is_some() => DEFAULT_SKILLS_FOUND,
            None => DEFAULT_SKILLS_PAGE,
            Some(raw) => match raw.parse::<usize>() {
                Ok(limit) if (1..=MAX_SKILLS_PAGE).contains(&limit) => limit,
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "`limit` must be a whole number from 1 to {MAX_SKILLS_PAGE}"
                    )))
                }
            },
        };
        let after = query.first("cursor").map(str::to_owned).filter(|cursor| !cursor.is_empty());
        if after.as_ref().is_some_and(|cursor| cursor.len() > 256) {
            return Err(ApiError::bad_request("`cursor` is too long"));
        }
        if search.is_some() && after.is_some() {
            return Err(ApiError::bad_request("a search (`q`) answers in one page: send it without `cursor`"));
        }
        Ok(Self { limit, after, query: search })
    }
}

/// The tenant's skills as the operator needs to see them: every usable skill with what it
/// declares and what was repaired, and every skipped SKILL.md with the reason.
/// One page of the catalog, in path order, as its owner reads it (see [`skill_entry_view`]).
fn skills_view(catalog: &Catalog, view: &CatalogView, page: &SkillsPage, has_sandbox: bool) -> Value {
    let entries = &view.entries;
    let start = match &page.after {
        Some(after) => entries.partition_point(|entry| entry.path.to_string().as_str() <= after.as_str()),
        None => 0,
    };
    let shown = &entries[start..(start + page.limit).min(entries.len())];
    let skills: Vec<Value> = shown.iter().map(|entry| skill_entry_view(entry, has_sandbox)).collect();
    let next_cursor = (start + shown.len() < entries.len()).then(|| shown.last().map(|e| e.path.to_string())).flatten();
    catalog_answer(catalog, view, skills, next_cursor)
}

/// `GET /skills?q=`: the best matches for `query`, best first, found by the same search and ranking
/// as the model's `find_skills`, in the shape of a listing page (no `next_cursor`) with the query.
fn skills_search_view(catalog: &Catalog, view: &CatalogView, query: &str, limit: usize, has_sandbox: bool) -> Value {
    let found = view.find(query, limit);
    let skills: Vec<Value> = found.iter().map(|entry| skill_entry_view(entry, has_sandbox)).collect();
    let mut answer = catalog_answer(catalog, view, skills, None);
    answer["query"] = Value::from(query);
    answer
}

/// The fields every `GET /skills` answer has around its `skills`: the catalog's count, its skipped
/// files and its base prompt.
fn catalog_answer(catalog: &Catalog, view: &CatalogView, skills: Vec<Value>, next_cursor: Option<String>) -> Value {
    // Skipped files are few in practice; a page of them keeps the answer bounded all the same.
    let skipped: Vec<Value> = view
        .skipped
        .iter()
        .take(MAX_SKILLS_PAGE)
        .map(|skipped| json!({"file": skipped.file, "reason": skipped.reason}))
        .collect();
    let base_prompt = catalog.base_prompt_entry().map(|base| {
        json!({"file": "BASE_PROMPT.md", "size": base.size, "usable": base.text.is_some(), "problem": base.problem})
    });
    json!({
        "count": view.entries.len(),
        "skills": skills,
        "next_cursor": next_cursor,
        "skipped": skipped,
        "skipped_count": view.skipped.len(),
        "base_prompt": base_prompt,
    })
}

/// One usable skill as its owner reads it. Without a sandbox, `execute` is not among its tools and
/// its `Bash` declarations get the warning any tool this deployment lacks gets.
fn skill_entry_view(entry: &SkillEntry, has_sandbox: bool) -> Value {
    let mut tools = entry.tools.clone();
    let mut warnings = entry.warnings.clone();
    warnings.extend(agent_core::skills::bundle::unmet_warning(&entry.unmet_needs));
    if !has_sandbox {
        let bash: Vec<&str> = entry
            .declared_tools
            .iter()
            .flatten()
            .map(|name| name.trim())
            .filter(|name| *name == "Bash" || name.starts_with("Bash("))
            .collect();
        if let Some(tools) = tools.as_mut() {
            tools.retain(|tool| tool != agent_core::tools::EXECUTE);
        }
        if !bash.is_empty() {
            warnings.push(format!(
                "`allowed-tools` names {}, which runs commands, and this deployment has no sandbox (SANDBOX)",
                bash.join(", ")
            ));
        }
    }
    json!({
        "path": entry.path.to_string(),
        "name": entry.name,
        "description": entry.description,
        // The category the listing groups it under: its folder's, else its frontmatter's.
        "category": entry.path.category().or(entry.category.as_deref()),
        "tools": tools,
        "declared_tools": entry.declared_tools,
        "warnings": warnings,
        "unmet_needs": entry.unmet_needs,
    })
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
