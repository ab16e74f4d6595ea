//! A turn in the logs and traces: its id, its span, the tenant's tag, its deadline, and the one
//! traced run ([`run_traced_turn`]) every HTTP turn goes through, whatever function serves it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agent_core::turn::{Strategy, TurnError, TurnReply, TurnRequest, TurnService};
use tracing::Instrument;

use crate::api::ApiError;
use crate::app::App;
use crate::logs::with_request_log;
use crate::{metrics, traces};

/// The invocation an HTTP turn arrives in: what names its span, the trace it joins, and who writes
/// its `storage requests` line.
#[derive(Clone, Copy)]
pub struct Invocation<'a> {
    /// The API Gateway or Function URL request id: the turn's id when it has no idempotency key.
    pub request_id: &'a str,
    /// The request's headers, whose `traceparent` the turn's trace joins.
    pub headers: &'a http::HeaderMap,
    pub request_log: RequestLog,
}

/// Who writes the `storage requests` line of the invocation a turn runs in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum RequestLog {
    /// The function, around its whole handler (or nobody).
    Caller,
    /// The turn, in its span as it ends: a streamed turn outlives the handler that started it.
    Turn,
}

/// One HTTP turn, traced: its span is opened here, in the invocation's span, with the caller's
/// trace as its parent, so the returned future may run in a task of its own. `run` is the part that
/// differs (a plain run, or one observed for streaming); its outcome is mapped to an [`ApiError`],
/// recorded on the span for the turn's summary and metrics, and handed to `finish` while the span
/// is still open. The span closes, writing the summary, as the future ends.
pub fn run_traced_turn<Fut, T>(
    app: &App,
    request: TurnRequest,
    invocation: Invocation<'_>,
    run: impl FnOnce(Arc<TurnService>, TurnRequest) -> Fut,
    finish: impl FnOnce(Result<TurnReply, ApiError>) -> T,
) -> impl Future<Output = T>
where
    Fut: Future<Output = Result<TurnReply, TurnError>>,
{
    let span = turn_span(&app.service, &request, invocation.request_id);
    traces::set_incoming_parent(&span, traces::trace_headers(invocation.headers));
    let counter = (invocation.request_log == RequestLog::Turn).then(|| app.storage_requests.clone());
    let turn = run(app.service.clone(), request);
    async move {
        let outcome = match counter {
            Some(counter) => with_request_log(&counter, turn).await,
            None => turn.await,
        };
        let outcome = outcome.map_err(ApiError::from);
        let span = tracing::Span::current();
        match &outcome {
            Ok(reply) => metrics::record_turn(&span, 200, None, Some(reply)),
            Err(err) => metrics::record_turn(&span, err.status, Some(err.code), None),
        }
        finish(outcome)
    }
    .instrument(span)
}

/// A turn's id in the logs: `{session}/{k}` where `k` is the first 16 hex digits of the hash of
/// the turn's idempotency key when it has one (the `Idempotency-Key` header, or a queue record's key
/// or message id), so every delivery and replay of one turn, in any function, logs the same id;
/// without a key the turn is one invocation and `k` is `request_id` (the API Gateway or Function
/// URL request id of the event).
pub fn turn_id(request: &TurnRequest, request_id: &str) -> String {
    match &request.idempotency {
        Some(key) => format!("{}/{}", request.session, &key.key_hash[..key.key_hash.len().min(16)]),
        None => format!("{}/{request_id}", request.session),
    }
}

/// The span a turn runs in: every line it logs carries its `turnId` ([`turn_id`]) next to the
/// Lambda runtime's `requestId` of the invocation span it is created in. A turn that runs in a
/// task of its own must be instrumented with this span, or its lines lose both.
pub fn turn_span(service: &TurnService, request: &TurnRequest, request_id: &str) -> tracing::Span {
    let span = unnamed_turn_span(service);
    name_turn(&span, request, request_id);
    span
}

/// A queue record's turn span, before its body is read ([`name_turn`] names it then), whose trace
/// joins the X-Ray header the record carries (SQS's `AWSTraceHeader`), if any.
pub fn record_turn_span(service: &TurnService, aws_trace_header: Option<&str>) -> tracing::Span {
    let span = unnamed_turn_span(service);
    traces::set_record_parent(&span, aws_trace_header);
    span
}

/// A turn span whose turn is not known yet: [`name_turn`] gives it its `turnId`.
fn unnamed_turn_span(service: &TurnService) -> tracing::Span {
    use tracing::field::Empty;
    // The outcome fields are recorded with `metrics::record_turn`.
    let span = tracing::info_span!(
        "turn",
        turnId = Empty,
        sessionId = Empty,
        strategy = strategy_name(service.config().strategy),
        tenant = Empty,
        status = Empty,
        errorCode = Empty,
        ending = Empty,
        steps = Empty,
        replayed = Empty,
    );
    // Exported traces join the invocation's X-Ray trace; HTTP functions then offer a `traceparent`.
    traces::set_incoming_parent(&span, None);
    span
}

/// How a strategy is named in the turn's span, its summary and its metrics.
fn strategy_name(strategy: Strategy) -> &'static str {
    match strategy {
        Strategy::Skills => "skills",
        Strategy::Planner => "planner",
    }
}

/// Names the turn of a span from [`record_turn_span`], as [`turn_span`] would have.
pub fn name_turn(span: &tracing::Span, request: &TurnRequest, request_id: &str) {
    span.record("turnId", turn_id(request, request_id));
    span.record("sessionId", request.session.as_str());
    span.record("tenant", tenant_tag(request.user.as_str()));
}

/// How a tenant appears in the logs: the first 16 hex digits of SHA-256 over the deployment's
/// `LOG_TENANT_SALT` followed by the user id. An operator who knows a user id (and the salt) finds
/// that tenant's lines; the lines themselves spread no identity (user ids are often e-mail
/// addresses or directory ids), and without the salt the tag cannot be reversed by hashing guesses.
pub fn tenant_tag(user_id: &str) -> String {
    use sha2::Digest;
    static SALT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let salt = SALT.get_or_init(|| std::env::var("LOG_TENANT_SALT").unwrap_or_default());
    let digest = sha2::Sha256::new().chain_update(salt.as_bytes()).chain_update(user_id.as_bytes()).finalize();
    hex::encode(&digest[..8])
}

/// Deadlines below this many milliseconds cannot be epoch times (it is September 2001): they are
/// durations, as `cargo lambda watch` sends them (`600000`).
const EPOCH_MILLIS_FLOOR: u64 = 1_000_000_000_000;

/// Converts Lambda's deadline into a monotonic instant. The Runtime API sends milliseconds since
/// the Unix epoch; a value too small to be one is read as milliseconds from now, with a warning.
pub fn deadline_from_epoch_millis(deadline_ms: u64) -> Option<tokio::time::Instant> {
    if deadline_ms == 0 {
        return None;
    }
    if deadline_ms < EPOCH_MILLIS_FLOOR {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            tracing::warn!(
                deadline_ms,
                "the runtime's deadline is not an epoch time (cargo lambda sends a duration); reading it as relative"
            )
        });
        return Some(tokio::time::Instant::now() + Duration::from_millis(deadline_ms));
    }
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as u64;
    let remaining = Duration::from_millis(deadline_ms.saturating_sub(now_ms));
    Some(tokio::time::Instant::now() + remaining)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn deadlines_are_epoch_times_or_durations() {
        let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        let left = |deadline: tokio::time::Instant| deadline - tokio::time::Instant::now();
        let epoch = deadline_from_epoch_millis(now_ms + 30_000).unwrap();
        assert!(left(epoch) > Duration::from_secs(29) && left(epoch) <= Duration::from_secs(30));
        let relative = deadline_from_epoch_millis(600_000).unwrap();
        assert!(left(relative) > Duration::from_secs(599), "cargo lambda's duration is read as relative");
        let past = deadline_from_epoch_millis(now_ms - 5_000).unwrap();
        assert_eq!(left(past), Duration::ZERO);
        assert!(deadline_from_epoch_millis(0).is_none());
    }
}
