//! A2A over the Function URL (docs/a2a.md): `GET /.well-known/agent-card.json`, the card (the
//! tenant's skills only for a valid token), and `POST /a2a`, the JSON-RPC methods, over the same
//! JWT as a streamed turn. The protocol itself is agent-app's `a2a`; this module verifies the
//! caller, runs the turn (blocking, streamed as SSE, or queued) and makes the responses.

use std::sync::{Arc, Mutex, OnceLock};

use agent_app::a2a::params::{send_params, task_params};
use agent_app::a2a::rpc::{self, check_version, parse_request, Method, Refusal, RpcError};
use agent_app::a2a::serve::{self, PlannedSend};
use agent_app::a2a::task::pending_task;
use agent_app::a2a::wire::{self, TaskState};
use agent_app::a2a::{agent_card, AgentInfo, Dialect, StreamEncoder, TurnEnd};
use agent_app::api::{body_bytes, internal_error, ApiError};
use agent_app::jwt::{JwtVerifier, VerifiedClaims};
use agent_app::queue::TurnQueue;
use agent_app::turn::{run_traced_turn, Invocation, RequestLog};
use agent_app::App;
use agent_core::turn::{TurnReply, TurnService, UserProfile};
use agent_core::{TurnEvent, TurnObserver, UserId};
use aws_lambda_events::http::{HeaderValue, StatusCode};
use aws_lambda_events::lambda_function_urls::LambdaFunctionUrlRequest;
use bytes::Bytes;
use futures::FutureExt;
use lambda_runtime::StreamResponse;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::{
    authenticate, error_response, event_stream_response, json_headers, spawn_heartbeat, whole_body, BodyStream,
};

/// The route this module answers.
pub const PATH: &str = "/a2a";
/// The agent card's well-known path.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// The turn queue non-blocking sends go to, when the deployment has one (set once by `main`).
static TURN_QUEUE: OnceLock<Arc<dyn TurnQueue>> = OnceLock::new();

/// Gives the process its turn queue for non-blocking sends.
pub fn set_turn_queue(queue: Arc<dyn TurnQueue>) {
    let _ = TURN_QUEUE.set(queue);
}

/// Answers one request of this route. Never fails: every error becomes a response.
pub async fn handle(
    app: &App,
    verifier: &JwtVerifier,
    event: LambdaFunctionUrlRequest,
    deadline: Option<Instant>,
) -> StreamResponse<BodyStream> {
    // A defect must cost one request a 500, never the runtime. Boxed: the methods' futures nest
    // deeper than the compiler lays out inline.
    let routed = Box::pin(route(app, verifier, &event, deadline));
    let answer = std::panic::AssertUnwindSafe(routed).catch_unwind().await;
    answer.unwrap_or_else(|_| {
        tracing::error!(request_id = event.request_context.request_id.as_deref().unwrap_or(""), "the request panicked");
        error_response(&internal_error())
    })
}

async fn route(
    app: &App,
    verifier: &JwtVerifier,
    event: &LambdaFunctionUrlRequest,
    deadline: Option<Instant>,
) -> StreamResponse<BodyStream> {
    let method = event.request_context.http.method.as_deref().unwrap_or("").to_ascii_uppercase();
    match (event.raw_path.as_deref().unwrap_or(""), method.as_str()) {
        (CARD_PATH, "GET") => card(app, verifier, event).await,
        (PATH, "POST") => match call(app, verifier, event, deadline).await {
            Ok(response) => response,
            Err(err) => error_response(&err),
        },
        _ => error_response(&ApiError::new(405, "method_not_allowed", format!("{method} is not allowed on this path"))),
    }
}

/// The card: public, with the tenant's skills when the request carries a valid token.
async fn card(app: &App, verifier: &JwtVerifier, event: &LambdaFunctionUrlRequest) -> StreamResponse<BodyStream> {
    let info = AgentInfo::from_env(event.request_context.domain_name.as_deref().unwrap_or("localhost"));
    let caller = match event.headers.contains_key("authorization") {
        // A token that fails verification gets the public card, as no token does.
        true => authenticate(verifier, &event.headers).await.ok().and_then(|claims| UserId::parse(claims.sub).ok()),
        false => None,
    };
    let mut headers = json_headers();
    headers.insert("vary", HeaderValue::from_static("authorization"));
    let card = match &caller {
        None => {
            headers.insert("cache-control", HeaderValue::from_static("public, max-age=300"));
            agent_card(&info, None::<Vec<&agent_core::skills::SkillEntry>>)
        }
        Some(user) => match app.service.skill_catalog_view(user).await {
            Ok((_, view)) => {
                headers.insert("cache-control", HeaderValue::from_static("private, no-store"));
                agent_card(&info, Some(view.entries.iter().map(|entry| entry.as_ref())))
            }
            Err(err) => return error_response(&ApiError::from(err)),
        },
    };
    whole_body(StatusCode::OK, headers, card.to_string())
}

/// A JSON-RPC request of a verified caller; `Err` is an HTTP-level refusal (no valid token).
async fn call(
    app: &App,
    verifier: &JwtVerifier,
    event: &LambdaFunctionUrlRequest,
    deadline: Option<Instant>,
) -> Result<StreamResponse<BodyStream>, ApiError> {
    let claims = authenticate(verifier, &event.headers).await?;
    let user = UserId::parse(&claims.sub)
        .map_err(|_| ApiError::new(401, "unauthorized", "the authenticated user id is not supported"))?;
    let raw = event.body.as_deref().unwrap_or("");
    let unreadable = |error| Refusal { id: Value::Null, error };
    let body = match raw.len() > 2 * rpc::MAX_RPC_BODY_BYTES {
        true => Err(unreadable(RpcError::InvalidRequest("the request is too large".to_owned()))),
        false => body_bytes(raw, event.is_base64_encoded).map_err(|err| unreadable(RpcError::Parse(err.message))),
    };
    let request = match body.and_then(|body| parse_request(&body)) {
        Ok(request) => request,
        Err(refusal) => return Ok(answer(rpc::failure(&refusal.id, &refusal.error))),
    };
    let version = event.headers.get("a2a-version").and_then(|value| value.to_str().ok());
    if let Err(error) = check_version(version) {
        return Ok(answer(rpc::failure(&request.id, &error)));
    }
    let id = request.id.clone();
    let method = request.method;
    tracing::info!(method = ?method, dialect = ?request.dialect, "A2A request");
    let outcome = match method {
        Method::GetTask => match task_params(&request.params) {
            Ok(task) => serve::get_task(&app.service, &user, &task, request.dialect).await,
            Err(error) => Err(error),
        },
        Method::CancelTask => match task_params(&request.params) {
            Ok(task) => serve::cancel_task(&app.service, &user, &task, request.dialect).await,
            Err(error) => Err(error),
        },
        Method::SendMessage | Method::SendStreamingMessage => {
            let planned = match send_params(request.params) {
                Ok(params) => serve::plan_send(&app.service, &user, params).await,
                Err(error) => Err(error),
            };
            let sent = Sent { app, event, deadline, id: &id, dialect: request.dialect, profile: profile(claims) };
            match planned {
                Ok(planned) if method == Method::SendStreamingMessage => return Ok(sent.stream(user, planned)),
                Ok(planned) => sent.send(user, planned).await,
                Err(error) => Err(error),
            }
        }
    };
    Ok(answer(match outcome {
        Ok(result) => rpc::result(&id, result),
        Err(error) => {
            tracing::info!(code = error.code(), error = %error, "A2A request refused");
            rpc::failure(&id, &error)
        }
    }))
}

fn profile(claims: VerifiedClaims) -> UserProfile {
    UserProfile { name: claims.name, language: claims.locale, description: claims.profile }
}

/// A JSON-RPC response: always `200`, the outcome is in the body.
fn answer(body: Value) -> StreamResponse<BodyStream> {
    whole_body(StatusCode::OK, json_headers(), body.to_string())
}

/// What a send needs besides its plan.
struct Sent<'a> {
    app: &'a App,
    event: &'a LambdaFunctionUrlRequest,
    deadline: Option<Instant>,
    id: &'a Value,
    dialect: Dialect,
    profile: UserProfile,
}

impl Sent<'_> {
    /// `SendMessage`: the turn run to its end and answered as a task, or queued when the caller
    /// asked not to wait.
    async fn send(self, user: UserId, planned: PlannedSend) -> Result<Value, RpcError> {
        let dialect = self.dialect;
        if planned.return_immediately {
            let queue = TURN_QUEUE.get().ok_or_else(|| {
                RpcError::UnsupportedOperation(
                    "this deployment has no turn queue: send without `returnImmediately`".to_owned(),
                )
            })?;
            let task = serve::send_in_background(&self.app.service, queue.as_ref(), user, planned, dialect).await?;
            return Ok(wire::task_result(task, dialect));
        }
        let task = planned.task.clone();
        let request = planned.turn_request(user, self.profile, self.deadline)?;
        let request_id = self.event.request_context.request_id.clone().unwrap_or_default();
        let invocation =
            Invocation { request_id: &request_id, headers: &self.event.headers, request_log: RequestLog::Caller };
        let outcome = run_traced_turn(self.app, request, invocation, run, |outcome| outcome).await;
        agent_app::traces::flush().await;
        let task = match outcome {
            Ok(reply) => {
                let reply = serde_json::to_value(&reply).map_err(|_| RpcError::Internal("internal error".into()))?;
                TurnEnd::Replied(&reply).task(&task, dialect)
            }
            // The same message is running now (a retry): the task is working.
            Err(err) if err.code == "turn_in_progress" => pending_task(&task, TaskState::Working, dialect),
            Err(err) => TurnEnd::Failed(&err.stored()).task(&task, dialect),
        };
        Ok(wire::task_result(task, dialect))
    }

    /// `SendStreamingMessage`: the turn runs in a task of its own while its events go out as SSE
    /// (see `crate::event_stream`, which this follows); the stream ends when the turn has ended.
    fn stream(self, user: UserId, planned: PlannedSend) -> StreamResponse<BodyStream> {
        let encoder = StreamEncoder::new(self.id.clone(), planned.task.clone(), self.dialect);
        let request = match planned.turn_request(user, self.profile, self.deadline) {
            Ok(request) => request,
            Err(error) => return answer(rpc::failure(self.id, &error)),
        };
        let (sender, receiver) = mpsc::unbounded_channel::<Bytes>();
        spawn_heartbeat(&sender);
        let request_id = self.event.request_context.request_id.clone().unwrap_or_default();
        let invocation =
            Invocation { request_id: &request_id, headers: &self.event.headers, request_log: RequestLog::Turn };
        let observer = Arc::new(A2aObserver { sender, encoder: Mutex::new(encoder) });
        let watching = observer.clone();
        let observed = move |service: Arc<TurnService>, request| async move {
            service.run_turn_observed(request, watching.as_ref()).await
        };
        let traced = run_traced_turn(self.app, request, invocation, observed, |outcome| outcome);
        tokio::spawn(async move {
            let outcome = traced.await;
            agent_app::traces::flush().await;
            let reply = outcome.as_ref().ok().and_then(|reply| serde_json::to_value(reply).ok());
            let stored = outcome.as_ref().err().map(ApiError::stored).unwrap_or_else(|| internal_error().stored());
            let end = match &reply {
                Some(reply) => TurnEnd::Replied(reply),
                None => TurnEnd::Failed(&stored),
            };
            let last = observer.encoder.lock().map(|mut encoder| encoder.end(end)).unwrap_or_default();
            let _ = observer.sender.send(Bytes::from(last));
        });
        event_stream_response(receiver)
    }
}

/// A turn run as it is: its reply at the end.
async fn run(
    service: Arc<TurnService>,
    request: agent_core::turn::TurnRequest,
) -> Result<TurnReply, agent_core::turn::TurnError> {
    service.run_turn(request).await
}

/// Encodes each event of the turn as the A2A responses it makes, in order.
struct A2aObserver {
    sender: mpsc::UnboundedSender<Bytes>,
    encoder: Mutex<StreamEncoder>,
}

impl TurnObserver for A2aObserver {
    fn event(&self, event: TurnEvent) {
        let Ok(mut encoder) = self.encoder.lock() else { return };
        let bytes = encoder.event(&event);
        // A client that went away leaves nobody to read; the turn carries on regardless.
        if !bytes.is_empty() {
            let _ = self.sender.send(Bytes::from(bytes));
        }
    }
}
