//! The Runtime API's routes: the next invocation for the function, and its response (buffered or
//! streamed), its error or its initialisation error handed to the invocation's caller.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, Mutex as AsyncMutex};

use super::stream::{StreamFrame, StreamedResponse};
use super::Invocation;

pub(super) type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Invocation>>>>;

pub(super) struct Queued {
    pub(super) id: String,
    pub(super) event: Value,
    pub(super) deadline_ms: u64,
    /// Lambda's tenant id for the invocation (`Lambda-Runtime-Aws-Tenant-Id`), for PER_TENANT functions.
    pub(super) tenant: Option<String>,
}

#[derive(Clone)]
pub(super) struct ApiState {
    pub(super) next: Arc<AsyncMutex<mpsc::UnboundedReceiver<Queued>>>,
    pub(super) pending: Pending,
    pub(super) init_error: Arc<Mutex<Option<Value>>>,
    /// When set, a posted response is never taken: the function waits on it until it is killed.
    pub(super) swallow: Arc<std::sync::atomic::AtomicBool>,
    pub(super) swallowed: Arc<tokio::sync::Notify>,
}

/// The Runtime API's routes, as the Lambda runtime client calls them.
pub(super) fn router(state: ApiState) -> Router {
    Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next_invocation))
        .route("/2018-06-01/runtime/invocation/{id}/response", post(invocation_response))
        .route("/2018-06-01/runtime/invocation/{id}/error", post(invocation_error))
        .route("/2018-06-01/runtime/init/error", post(init_error_handler))
        .with_state(state)
}

async fn next_invocation(State(state): State<ApiState>) -> Response {
    let queued = state.next.lock().await.recv().await;
    let Some(queued) = queued else { return StatusCode::GONE.into_response() };
    let mut headers = HeaderMap::new();
    headers.insert("lambda-runtime-aws-request-id", queued.id.parse().unwrap());
    headers.insert("lambda-runtime-deadline-ms", queued.deadline_ms.to_string().parse().unwrap());
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:us-east-1:123456789012:function:test".parse().unwrap(),
    );
    headers.insert("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000".parse().unwrap());
    headers.insert("content-type", "application/json".parse().unwrap());
    if let Some(tenant) = queued.tenant.as_deref().and_then(|tenant| tenant.parse().ok()) {
        headers.insert("lambda-runtime-aws-tenant-id", tenant);
    }
    (headers, queued.event.to_string()).into_response()
}

fn settle(state: &ApiState, id: &str, outcome: Invocation) {
    if let Some(sender) = state.pending.lock().unwrap().remove(id) {
        let _ = sender.send(outcome);
    }
}

async fn invocation_response(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> StatusCode {
    if state.swallow.load(std::sync::atomic::Ordering::SeqCst) {
        state.swallowed.notify_one();
        std::future::pending::<()>().await;
    }
    let streaming = headers
        .get("lambda-runtime-function-response-mode")
        .is_some_and(|mode| mode.as_bytes().eq_ignore_ascii_case(b"streaming"));
    if streaming {
        return stream_response(&state, &id, body).await;
    }
    let Ok(body) = axum::body::to_bytes(body, usize::MAX).await else { return StatusCode::BAD_REQUEST };
    let body = String::from_utf8_lossy(&body).into_owned();
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    settle(&state, &id, Invocation::Response(value));
    StatusCode::ACCEPTED
}

/// Hands the invocation's caller a [`StreamedResponse`] at once, then forwards the body frame by
/// frame until the function ends it. Frames keep being read after the caller went away.
async fn stream_response(state: &ApiState, id: &str, mut body: axum::body::Body) -> StatusCode {
    let (sender, frames) = mpsc::unbounded_channel();
    let response = StreamedResponse::new(frames);
    settle(state, id, Invocation::Stream(response));
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        let frame = match frame.into_data() {
            Ok(data) => StreamFrame::Data(data, std::time::Instant::now()),
            Err(frame) => match frame.into_trailers() {
                Ok(trailers) => StreamFrame::Trailers(trailers),
                Err(_) => continue,
            },
        };
        let _ = sender.send(frame);
    }
    StatusCode::ACCEPTED
}

async fn invocation_error(State(state): State<ApiState>, Path(id): Path<String>, body: String) -> StatusCode {
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    settle(&state, &id, Invocation::Error(value));
    StatusCode::ACCEPTED
}

async fn init_error_handler(State(state): State<ApiState>, body: String) -> StatusCode {
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    *state.init_error.lock().unwrap() = Some(value);
    StatusCode::ACCEPTED
}
