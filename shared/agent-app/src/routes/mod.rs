//! The HTTP API's routes, for the function that serves them: a request becomes a call (routed,
//! its caller known, its parts validated), the call is made against the turn service, and what it
//! got back becomes the answer. Only the call reads or writes; routing and views touch no store.

pub mod background;
mod call;
mod files;
mod memories;
mod message;
mod outcome;
mod session_view;
mod sessions_list;
mod skill_versions;
mod skills_view;
mod uploads;
mod usage;
mod webhook_secret;

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use tokio::time::Instant;

pub use files::INLINE_MAX_BYTES;
pub use message::{Answer, Caller, Payload, Query, Request};
pub use sessions_list::{set_cursor_key, CURSOR_KEY_ENV, MIN_KEY_BYTES};
pub use skill_versions::MAX_STAGED_ZIP_BYTES;
pub use skills_view::MAX_SKILLS_QUERY_CHARS;
pub use uploads::DIRECT_UPLOAD_MAX_BYTES;
pub use usage::MAX_USAGE_DAYS;

/// A background turn's status as its poll shows it, which its webhook sends too.
use crate::api::{internal_error, ApiError};
use crate::app::App;
use crate::queue::TurnQueue;
use call::Call;

/// Answers one request. Never fails: every error becomes an answer. With `queue`, a turn sent with
/// `Prefer: respond-async` runs in the background.
pub async fn serve(
    app: &App,
    request: Request<'_>,
    deadline: Option<Instant>,
    queue: Option<&dyn TurnQueue>,
) -> Answer {
    let request_id = request.request_id;
    // A defect must cost one request a 500, never the runtime (and with it the warm process). The
    // answer is boxed: its future nests every route's, deeper than the compiler lays out unasked.
    let answered = AssertUnwindSafe(Box::pin(answer(app, &request, deadline, queue))).catch_unwind().await;
    let answered = answered.unwrap_or_else(|_| {
        tracing::error!(request_id, "the request panicked");
        Err(internal_error())
    });
    answered.unwrap_or_else(|err| {
        tracing::info!(status = err.status, code = err.code, request_id, "request refused");
        err.into()
    })
}

async fn answer(
    app: &App,
    request: &Request<'_>,
    deadline: Option<Instant>,
    queue: Option<&dyn TurnQueue>,
) -> Result<Answer, ApiError> {
    let call = Call::from_request(request, queue, deadline)?;
    let outcome = call.perform(app, request).await?;
    outcome.answer()
}
