//! Streamed provider calls: Server-Sent Events read as they arrive, handed to a provider's
//! assembler, with the retry policy applied only until the first delta has reached the caller.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use agent_core::{ChatResponse, DeltaSink, ModelError};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::RequestBuilder;

use crate::retry::{
    error_message, is_retryable, parse_retry_after_header, pause_before_retry, redact, Attempt, RetryPolicy,
};

/// One event's data may not exceed this; nor may a whole streamed reply exceed the second bound.
pub(crate) const MAX_EVENT_BYTES: usize = 1024 * 1024;
pub(crate) const MAX_STREAM_BYTES: usize = 8 * 1024 * 1024;
/// An error body read from a failed streaming request is cut at this size.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// Why an assembler could not take an event.
pub(crate) enum StreamFault {
    /// The provider reported a passing failure (overloaded, server error): worth another attempt
    /// while nothing has been shown.
    Retryable(String),
    /// Final: the stream is malformed or the request was refused.
    Fatal(ModelError),
}

/// Builds one reply from a provider's events.
pub(crate) trait Assembler: Send {
    /// Takes one event (`name` is the SSE event name, `message` when absent); returns true once
    /// the reply is complete.
    fn event(&mut self, name: &str, data: &str, sink: &dyn DeltaSink) -> Result<bool, StreamFault>;
    /// The reply, once complete (or once the stream ended, when the provider allows that).
    fn finish(self) -> Result<ChatResponse, ModelError>;
    /// Whether an ended stream that never said it was complete is still a whole reply.
    fn complete_without_end(&self) -> bool {
        false
    }
}

/// Passes deltas through and remembers that one went out.
struct Watched<'a> {
    inner: &'a dyn DeltaSink,
    sent: AtomicBool,
}

impl DeltaSink for Watched<'_> {
    fn delta(&self, text: &str) {
        if !text.is_empty() {
            self.sent.store(true, Ordering::Relaxed);
            self.inner.delta(text);
        }
    }
}

/// Sends the streaming request built by `make_request` and assembles its events with a fresh
/// assembler from `assembler` per attempt. Failures are retried by the policy until the first
/// delta has been handed to `sink`; after that, a failure is final.
pub(crate) async fn stream_with_retry<A: Assembler>(
    policy: &RetryPolicy,
    provider: &'static str,
    secret: Option<&str>,
    make_request: impl Fn() -> RequestBuilder,
    assembler: impl Fn() -> A,
    sink: &dyn DeltaSink,
) -> Result<ChatResponse, ModelError> {
    let watched = Watched { inner: sink, sent: AtomicBool::new(false) };
    let mut attempt = 1;
    loop {
        let outcome = try_stream(make_request(), secret, assembler(), &watched).await;
        let (status, message, retry_after) = match outcome {
            Attempt::Done(response) => return Ok(response),
            Attempt::Fail(error) => return Err(error),
            Attempt::Retry { status, message, retry_after } => (status, message, retry_after),
        };
        if watched.sent.load(Ordering::Relaxed) {
            return Err(ModelError::Unavailable {
                attempts: attempt,
                message: format!("the stream broke after the reply began: {message}"),
            });
        }
        pause_before_retry(policy, provider, attempt, status, message, retry_after).await?;
        attempt += 1;
    }
}

async fn try_stream<A: Assembler>(
    request: RequestBuilder,
    secret: Option<&str>,
    mut assembler: A,
    sink: &Watched<'_>,
) -> Attempt<ChatResponse> {
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) if error.is_builder() => {
            return Attempt::Fail(ModelError::Config(redact(&error.to_string(), secret)))
        }
        Err(error) => {
            return Attempt::Retry { status: None, message: redact(&error.to_string(), secret), retry_after: None }
        }
    };
    let status = response.status();
    if !status.is_success() {
        let retry_after = parse_retry_after_header(response.headers(), SystemTime::now());
        let body = read_bounded(response, MAX_ERROR_BODY_BYTES).await;
        let message = error_message(&body, secret);
        return if is_retryable(status) {
            Attempt::Retry {
                status: Some(status.as_u16()),
                message: format!("HTTP {}: {message}", status.as_u16()),
                retry_after,
            }
        } else {
            Attempt::Fail(ModelError::Rejected { status: status.as_u16(), message })
        };
    }
    // The body as a stream of chunks, cut off (as an error) past the stream's bound.
    let chunks = futures::stream::unfold((Some(response), 0usize), |(response, read)| async move {
        let mut response = response?;
        match response.chunk().await {
            Ok(Some(chunk)) if read + chunk.len() > MAX_STREAM_BYTES => {
                Some((Err(format!("the streamed reply is larger than {MAX_STREAM_BYTES} bytes")), (None, read)))
            }
            Ok(Some(chunk)) => {
                let read = read + chunk.len();
                Some((Ok(chunk), (Some(response), read)))
            }
            Ok(None) => None,
            Err(error) => Some((Err(error.to_string()), (None, read))),
        }
    });
    let mut events = std::pin::pin!(chunks.eventsource());
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(eventsource_stream::EventStreamError::Transport(message)) if message.contains("larger than") => {
                return Attempt::Fail(ModelError::InvalidResponse(message))
            }
            Err(eventsource_stream::EventStreamError::Transport(message)) => {
                return Attempt::Retry { status: None, message: redact(&message, secret), retry_after: None }
            }
            Err(error) => {
                return Attempt::Fail(ModelError::InvalidResponse(format!("a malformed event stream: {error}")))
            }
        };
        if event.data.len() > MAX_EVENT_BYTES {
            return Attempt::Fail(ModelError::InvalidResponse(format!(
                "a streamed event is larger than {MAX_EVENT_BYTES} bytes"
            )));
        }
        let name = if event.event.is_empty() { "message" } else { event.event.as_str() };
        match assembler.event(name, &event.data, sink) {
            Ok(true) => return assembled(assembler),
            Ok(false) => {}
            Err(StreamFault::Retryable(message)) => {
                return Attempt::Retry { status: None, message: redact(&message, secret), retry_after: None }
            }
            Err(StreamFault::Fatal(error)) => return Attempt::Fail(error),
        }
    }
    if assembler.complete_without_end() {
        return assembled(assembler);
    }
    Attempt::Retry {
        status: None,
        message: "the stream ended before the reply was complete".to_owned(),
        retry_after: None,
    }
}

fn assembled<A: Assembler>(assembler: A) -> Attempt<ChatResponse> {
    match assembler.finish() {
        Ok(response) => Attempt::Done(response),
        Err(error) => Attempt::Fail(error),
    }
}

/// At most `max` bytes of a response body; a body that fails mid-way is what was read.
async fn read_bounded(mut response: reqwest::Response, max: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = max.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= max {
            break;
        }
    }
    body
}
