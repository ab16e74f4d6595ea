//! The streaming endpoint's contract: `POST /sessions/{session_id}/turns` behind a Lambda Function
//! URL in `RESPONSE_STREAM` mode. With `Accept: text/event-stream` the turn is streamed as
//! Server-Sent Events while it runs; without it the answer is today's JSON. The caller's JWT is
//! verified here (there is no authorizer in front of a Function URL). The same URL speaks AG-UI
//! (`POST /ag-ui`, [`agui`]) and A2A (`GET /.well-known/agent-card.json`, `POST /a2a`, [`a2a`]).

pub mod a2a;
pub mod agui;
pub mod nodelay;

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use agent_app::api::{internal_error, parse_session_id, parse_turn_body, turn_request, ApiError, REPLAYED_HEADER};
use agent_app::jwt::{bearer_token, JwtVerifier, VerifiedClaims};
use agent_app::turn::{run_traced_turn, Invocation, RequestLog};
use agent_app::App;
use agent_core::turn::{TurnError, TurnReply, TurnRequest, TurnService, UserProfile};
use agent_core::{TurnEvent, TurnObserver, UserId};
use aws_lambda_events::http::{HeaderMap, HeaderValue, Method, StatusCode};
use aws_lambda_events::lambda_function_urls::LambdaFunctionUrlRequest;
use bytes::Bytes;
use futures::{FutureExt, Stream};
use lambda_runtime::{MetadataPrelude, StreamResponse};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The body a streaming response sends, chunk by chunk.
pub type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, Infallible>> + Send>>;

/// How often a comment line is sent while the turn is quiet (a slow model call, a long tool), so
/// that proxies and clients do not take the stream for dead.
const HEARTBEAT: Duration = Duration::from_secs(15);

/// What the request asks for once it is validated.
struct Accepted {
    request: TurnRequest,
    events: bool,
}

/// Handles one Function URL request. Never fails: every error becomes a response.
pub async fn handle(
    app: &App,
    verifier: &JwtVerifier,
    event: LambdaFunctionUrlRequest,
    deadline: Option<Instant>,
) -> StreamResponse<BodyStream> {
    match event.raw_path.as_deref().unwrap_or("") {
        agui::PATH => return agui::handle(app, verifier, event, deadline).await,
        a2a::PATH | a2a::CARD_PATH => return a2a::handle(app, verifier, event, deadline).await,
        _ => {}
    }
    let request_id = event.request_context.request_id.clone().unwrap_or_default();
    // A defect must cost one request a 500, never the runtime.
    let accepted = std::panic::AssertUnwindSafe(accept(verifier, &event, deadline)).catch_unwind().await;
    let accepted = accepted.unwrap_or_else(|_| {
        tracing::error!(request_id, "the request panicked");
        Err(internal_error())
    });
    match accepted {
        Err(err) => {
            tracing::info!(status = err.status, code = err.code, request_id, "request refused");
            error_response(&err)
        }
        Ok(Accepted { request, events: true }) => {
            // A tenant over its daily budget gets its 429 before a stream's 200 is sent (a read only
            // when a budget is configured); the turn checks again itself.
            match app.service.check_budget(&request.user, request.now).await {
                Ok(()) => event_stream(app, request, &request_id, &event.headers),
                Err(err) => {
                    let err = ApiError::from(err);
                    tracing::info!(status = err.status, code = err.code, request_id, "request refused");
                    error_response(&err)
                }
            }
        }
        Ok(Accepted { request, events: false }) => {
            let invocation =
                Invocation { request_id: &request_id, headers: &event.headers, request_log: RequestLog::Caller };
            let answer = run_traced_turn(app, request, invocation, run, |outcome| outcome).await;
            agent_app::traces::flush().await;
            match answer.and_then(|reply| {
                let body = serde_json::to_value(&reply).map_err(|_| internal_error())?;
                Ok((body, reply.replayed))
            }) {
                Ok((body, replayed)) => {
                    let mut headers = json_headers();
                    if replayed {
                        headers.insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
                    }
                    whole_body(StatusCode::OK, headers, body.to_string())
                }
                Err(err) => error_response(&err),
            }
        }
    }
}

/// A turn run as it is: its reply at the end.
async fn run(service: Arc<TurnService>, request: TurnRequest) -> Result<TurnReply, TurnError> {
    service.run_turn(request).await
}

/// Routes on the raw path and method, verifies the caller's token, and validates the body.
async fn accept(
    verifier: &JwtVerifier,
    event: &LambdaFunctionUrlRequest,
    deadline: Option<Instant>,
) -> Result<Accepted, ApiError> {
    let method = event.request_context.http.method.as_deref().unwrap_or("");
    let path = event.raw_path.as_deref().unwrap_or("");
    let segments: Vec<&str> = path.strip_prefix('/').map(|rest| rest.split('/').collect()).unwrap_or_default();
    let session_id = match segments.as_slice() {
        ["sessions", id, "turns"] if !id.is_empty() => {
            if !method.eq_ignore_ascii_case(Method::POST.as_str()) {
                return Err(ApiError::new(405, "method_not_allowed", format!("{method} is not allowed on this path")));
            }
            *id
        }
        _ => return Err(ApiError::not_found("no such route")),
    };
    let claims = authenticate(verifier, &event.headers).await?;
    let user = UserId::parse(&claims.sub)
        .map_err(|_| ApiError::new(401, "unauthorized", "the authenticated user id is not supported"))?;
    let session = parse_session_id(session_id)?;
    let body = parse_turn_body(event.body.as_deref(), event.is_base64_encoded)?;
    let profile = UserProfile { name: claims.name, language: claims.locale, description: claims.profile };
    let request = turn_request(user, session, body, &event.headers, profile, deadline)?;
    Ok(Accepted { request, events: wants_events(&event.headers) })
}

/// The verified claims of the `Authorization: Bearer` token.
pub(crate) async fn authenticate(verifier: &JwtVerifier, headers: &HeaderMap) -> Result<VerifiedClaims, ApiError> {
    let header = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .ok_or_else(|| ApiError::new(401, "unauthorized", "send the token as `Authorization: Bearer <jwt>`"))?;
    let token = bearer_token(header)
        .ok_or_else(|| ApiError::new(401, "unauthorized", "send the token as `Authorization: Bearer <jwt>`"))?;
    verifier.verify(token).await.map_err(|err| {
        let status = err.status();
        tracing::info!(status, error = %err, "token refused");
        if status == 503 {
            ApiError::new(503, "identity_unavailable", err.to_string())
        } else {
            ApiError::new(401, "unauthorized", err.to_string())
        }
    })
}

/// Whether the client asked for Server-Sent Events.
fn wants_events(headers: &HeaderMap) -> bool {
    headers
        .get_all("accept")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|media| media.split(';').next().is_some_and(|kind| kind.trim().eq_ignore_ascii_case("text/event-stream")))
}

/// Sends a turn's events as Server-Sent Events while it runs in a task of its own: the stream ends
/// when the turn has ended (`turn.completed` or `turn.failed`). The task does not depend on the
/// stream being read, so a client that goes away does not stop the turn from committing. The task
/// runs in the turn's span, a child of the invocation's, so its lines carry both ids.
fn event_stream(app: &App, request: TurnRequest, request_id: &str, headers: &HeaderMap) -> StreamResponse<BodyStream> {
    let (sender, receiver) = mpsc::unbounded_channel::<Bytes>();
    spawn_heartbeat(&sender);
    // The turn runs in a task of its own, in its span opened here, in the invocation's span; it
    // writes the storage requests line itself, as the handler returns before it ends.
    let invocation = Invocation { request_id, headers, request_log: RequestLog::Turn };
    let observer = SseObserver { sender: sender.clone() };
    let observed =
        move |service: Arc<TurnService>, request| async move { service.run_turn_observed(request, &observer).await };
    // The turn's span closes (and its summary and metrics are written) before the last event
    // ends the response, after which Lambda may freeze the process.
    let traced = run_traced_turn(app, request, invocation, observed, |outcome| {
        match outcome.and_then(|reply| serde_json::to_value(&reply).map_err(|_| internal_error())) {
            Ok(reply) => ("turn.completed", reply),
            Err(err) => {
                tracing::info!(status = err.status, code = err.code, "streamed turn failed");
                ("turn.failed", err.body())
            }
        }
    });
    let last = SseObserver { sender };
    let turn = async move {
        let (name, body) = traced.await;
        agent_app::traces::flush().await;
        last.send(name, &body);
    };
    tokio::spawn(turn);
    event_stream_response(receiver)
}

/// A comment line every [`HEARTBEAT`] while the turn is quiet, until the stream's last sender is gone.
pub(crate) fn spawn_heartbeat(sender: &mpsc::UnboundedSender<Bytes>) {
    let heartbeat = sender.downgrade();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(Instant::now() + HEARTBEAT, HEARTBEAT);
        loop {
            tick.tick().await;
            match heartbeat.upgrade() {
                Some(sender) => {
                    let _ = sender.send(Bytes::from_static(b": keep-alive\n\n"));
                }
                None => return,
            }
        }
    });
}

/// A `200` Server-Sent Events response whose body is every chunk `receiver` gets, until its senders
/// are gone; no proxy may buffer or cache it.
pub(crate) fn event_stream_response(mut receiver: mpsc::UnboundedReceiver<Bytes>) -> StreamResponse<BodyStream> {
    let stream = futures::stream::poll_fn(move |context| receiver.poll_recv(context).map(|chunk| chunk.map(Ok)));
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("text/event-stream; charset=utf-8"));
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    StreamResponse {
        metadata_prelude: MetadataPrelude { status_code: StatusCode::OK, headers, cookies: Vec::new() },
        stream: Box::pin(stream),
    }
}

/// Writes each event as one SSE block: `event: <name>` and one `data:` line of JSON.
struct SseObserver {
    sender: mpsc::UnboundedSender<Bytes>,
}

impl SseObserver {
    fn send(&self, name: &str, data: &Value) {
        // A client that went away leaves nobody to read; the turn carries on regardless.
        let _ = self.sender.send(Bytes::from(format!("event: {name}\ndata: {data}\n\n")));
    }
}

impl TurnObserver for SseObserver {
    fn event(&self, event: TurnEvent) {
        let name = event.name();
        let data = serde_json::to_value(&event).unwrap_or(Value::Null);
        self.send(name, &data);
    }
}

pub(crate) fn json_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    headers
}

pub(crate) fn error_response(err: &ApiError) -> StreamResponse<BodyStream> {
    let mut headers = json_headers();
    if err.status == 401 {
        headers.insert("www-authenticate", HeaderValue::from_static("Bearer"));
    }
    if let Some(seconds) = err.retry_after {
        headers.insert("retry-after", HeaderValue::from(seconds));
    }
    let status = StatusCode::from_u16(err.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    whole_body(status, headers, err.body().to_string())
}

/// A response whose body is known at once, sent as one chunk.
pub(crate) fn whole_body(status: StatusCode, headers: HeaderMap, body: String) -> StreamResponse<BodyStream> {
    StreamResponse {
        metadata_prelude: MetadataPrelude { status_code: status, headers, cookies: Vec::new() },
        stream: Box::pin(futures::stream::once(async move { Ok(Bytes::from(body)) })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_header_negotiation() {
        let mut headers = HeaderMap::new();
        assert!(!wants_events(&headers));
        headers.insert("accept", HeaderValue::from_static("application/json, Text/Event-Stream;q=0.9"));
        assert!(wants_events(&headers));
        headers.insert("accept", HeaderValue::from_static("application/json"));
        assert!(!wants_events(&headers));
    }
}
