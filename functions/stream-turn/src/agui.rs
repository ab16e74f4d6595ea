//! AG-UI over the Function URL: `POST /ag-ui` with a `RunAgentInput`, answered with the turn's AG-UI
//! events as Server-Sent Events (`data: <json>` blocks, which `@ag-ui/client`'s `HttpAgent` reads).
//! The caller is the verified token's subject; the input's thread is one of the caller's sessions.
//! Everything refused before the turn starts is a JSON error with its status; a turn that fails
//! once the stream has started ends it with `RUN_ERROR`. The translation is
//! [`agent_app::agui`]'s; this module does the I/O.

use std::sync::{Arc, Mutex};

use agent_app::agui::{parse_run_input, plan_view, AgentState, RunInput, Translator};
use agent_app::api::{internal_error, ApiError};
use agent_app::jwt::JwtVerifier;
use agent_app::turn::{run_traced_turn, Invocation, RequestLog};
use agent_app::App;
use agent_core::store::SessionState;
use agent_core::turn::{TurnRequest, TurnService, UserProfile};
use agent_core::{TurnEvent, TurnObserver, UserId};
use aws_lambda_events::http::{HeaderMap, Method};
use aws_lambda_events::lambda_function_urls::LambdaFunctionUrlRequest;
use bytes::Bytes;
use futures::FutureExt;
use lambda_runtime::StreamResponse;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::{authenticate, error_response, event_stream_response, spawn_heartbeat, BodyStream};

/// The route this module answers.
pub const PATH: &str = "/ag-ui";

/// A run accepted: its input and the turn it asks for.
struct Accepted {
    input: RunInput,
    request: TurnRequest,
}

/// Answers one request of this route. Never fails: every error becomes a response.
pub async fn handle(
    app: &App,
    verifier: &JwtVerifier,
    event: LambdaFunctionUrlRequest,
    deadline: Option<Instant>,
) -> StreamResponse<BodyStream> {
    let request_id = event.request_context.request_id.clone().unwrap_or_default();
    // A defect must cost one request a 500, never the runtime.
    let accepted = std::panic::AssertUnwindSafe(accept(app, verifier, &event, deadline)).catch_unwind().await;
    let accepted = accepted.unwrap_or_else(|_| {
        tracing::error!(request_id, "the AG-UI request panicked");
        Err(internal_error())
    });
    match accepted {
        Ok(accepted) => run_stream(app, accepted, &request_id, &event.headers),
        Err(err) => {
            tracing::info!(status = err.status, code = err.code, request_id, "AG-UI request refused");
            error_response(&err)
        }
    }
}

/// Checks the method, the caller's token, the input and the caller's budget, all before a stream's
/// 200 is sent.
async fn accept(
    app: &App,
    verifier: &JwtVerifier,
    event: &LambdaFunctionUrlRequest,
    deadline: Option<Instant>,
) -> Result<Accepted, ApiError> {
    let method = event.request_context.http.method.as_deref().unwrap_or("");
    if !method.eq_ignore_ascii_case(Method::POST.as_str()) {
        return Err(ApiError::new(405, "method_not_allowed", format!("{method} is not allowed on this path")));
    }
    let claims = authenticate(verifier, &event.headers).await?;
    let user = UserId::parse(&claims.sub)
        .map_err(|_| ApiError::new(401, "unauthorized", "the authenticated user id is not supported"))?;
    let input = parse_run_input(event.body.as_deref(), event.is_base64_encoded)?;
    let profile = UserProfile { name: claims.name, language: claims.locale, description: claims.profile };
    let request = input.turn_request(user, profile, deadline)?;
    // A tenant over its daily budget gets its 429 before the stream starts; the turn checks again.
    app.service.check_budget(&request.user, request.now).await.map_err(ApiError::from)?;
    Ok(Accepted { input, request })
}

/// Streams the run while the turn runs in a task of its own, as `event_stream` does for our own
/// events: the turn commits whether or not the client still reads.
fn run_stream(app: &App, accepted: Accepted, request_id: &str, headers: &HeaderMap) -> StreamResponse<BodyStream> {
    let Accepted { input, request } = accepted;
    let (sender, receiver) = mpsc::unbounded_channel::<Bytes>();
    spawn_heartbeat(&sender);
    let mut translator = Translator::new(&input.thread_id, &input.run_id, input.known_calls);
    let mut opening = Vec::new();
    translator.start(&mut opening);
    let _ = sender.send(Bytes::from(opening));
    let translator = Arc::new(Mutex::new(translator));
    let observer = AguiObserver { translator: translator.clone(), sender: sender.clone() };
    let invocation = Invocation { request_id, headers, request_log: RequestLog::Turn };
    let observed =
        move |service: Arc<TurnService>, request| async move { service.run_turn_observed(request, &observer).await };
    let traced = run_traced_turn(app, request, invocation, observed, |outcome| {
        if let Err(err) = &outcome {
            tracing::info!(status = err.status, code = err.code, "streamed AG-UI turn failed");
        }
        outcome
    });
    tokio::spawn(async move {
        let outcome = traced.await;
        agent_app::traces::flush().await;
        let mut closing = Vec::new();
        let mut translator = translator.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        translator.finish(outcome.as_ref(), &mut closing);
        let _ = sender.send(Bytes::from(closing));
    });
    event_stream_response(receiver)
}

/// Translates each of the turn's events as it comes and sends what it writes.
struct AguiObserver {
    translator: Arc<Mutex<Translator>>,
    sender: mpsc::UnboundedSender<Bytes>,
}

impl AguiObserver {
    /// Runs `write` on the translator and sends what it wrote.
    fn send(&self, write: impl FnOnce(&mut Translator, &mut Vec<u8>)) {
        let mut out = Vec::new();
        write(&mut self.translator.lock().unwrap_or_else(|poisoned| poisoned.into_inner()), &mut out);
        if !out.is_empty() {
            // A client that went away leaves nobody to read; the turn carries on regardless.
            let _ = self.sender.send(Bytes::from(out));
        }
    }
}

impl TurnObserver for AguiObserver {
    fn event(&self, event: TurnEvent) {
        self.send(|translator, out| translator.event(&event, out));
    }

    /// The snapshot a front-end starts from is the caller's own session as the turn loaded it (keys
    /// are under the verified user, so another user's thread id names an empty session of the
    /// caller's), with no read of its own.
    fn session_loaded(&self, state: &SessionState) {
        let state = AgentState::of_session(state);
        self.send(|translator, out| translator.loaded(state, out));
    }

    /// The planner keeps its plan to itself during a turn: the plan shown is the one it committed.
    fn plan_committed(&self, plan: Option<&serde_json::Value>) {
        let plan = plan_view(plan);
        self.send(|translator, out| translator.plan(plan, out));
    }
}
