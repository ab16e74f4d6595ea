//! One streamed provider call: the response's Server-Sent Events, read as they arrive within fixed
//! bounds and handed to a provider's assembler; and [`stream_with_retry`], which tries the call
//! again through [`crate::retry`]'s loop until the first delta is shown.

use std::fmt;
use std::time::SystemTime;

use agent_ports::{ChatResponse, DeltaSink, ModelError};
use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use reqwest::RequestBuilder;

use crate::retry::{
    describe_transport_error, parse_retry_after_header, redact, retry_streamed, send_failure, status_failure, Attempt,
    RetryPolicy, Watched,
};

/// One event may not exceed this (nor may any line of the stream), so a runaway event is cut off early.
pub(crate) const MAX_EVENT_BYTES: usize = 1024 * 1024;
/// A whole streamed reply may not exceed this.
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
    /// Takes one event (`name` is the SSE event name, `message` when the server gave none) and
    /// hands any text in it to `sink`; returns true once the reply is complete.
    fn event(&mut self, name: &str, data: &str, sink: &dyn DeltaSink) -> Result<bool, StreamFault>;
    /// The reply, once complete (or once the stream ended, when [`Assembler::complete_without_end`]).
    fn finish(self) -> Result<ChatResponse, ModelError>;
    /// Whether a stream that ended without saying the reply was complete still carried a whole reply.
    fn complete_without_end(&self) -> bool {
        false
    }
}

/// Why the body stopped before its end: a transport failure is worth another attempt, an
/// oversized body is not.
#[derive(Debug)]
enum BodyError {
    Transport(reqwest::Error),
    TooLarge(String),
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::Transport(error) => f.write_str(&describe_transport_error(error)),
            BodyError::TooLarge(message) => f.write_str(message),
        }
    }
}

/// Byte counts that enforce the bounds on a body as its chunks arrive.
#[derive(Default)]
struct Bounds {
    total: usize,
    /// Bytes since the last line break; the SSE parser re-reads an unfinished line with every
    /// chunk, so a long line is refused before it grows expensive.
    line: usize,
}

impl Bounds {
    fn check(&mut self, chunk: &[u8]) -> Result<(), BodyError> {
        self.total += chunk.len();
        if self.total > MAX_STREAM_BYTES {
            return Err(BodyError::TooLarge(format!("the streamed reply is larger than {MAX_STREAM_BYTES} bytes")));
        }
        self.line = match chunk.iter().rposition(|byte| matches!(byte, b'\n' | b'\r')) {
            Some(last_break) => chunk.len() - last_break - 1,
            None => self.line + chunk.len(),
        };
        if self.line > MAX_EVENT_BYTES {
            return Err(BodyError::TooLarge(format!("a streamed event is larger than {MAX_EVENT_BYTES} bytes")));
        }
        Ok(())
    }
}

/// Sends the streaming request built by `make_request` and assembles its events with a fresh
/// assembler from `assembler` per attempt. Failures are retried like
/// [`crate::retry::send_with_retry`]'s until the first delta has been handed to `sink`; after that
/// a failure is final, since the text already shown cannot be taken back.
pub(crate) async fn stream_with_retry<A: Assembler>(
    policy: &RetryPolicy,
    provider: &'static str,
    secret: Option<&str>,
    make_request: impl Fn() -> RequestBuilder,
    assembler: impl Fn() -> A,
    sink: &dyn DeltaSink,
) -> Result<ChatResponse, ModelError> {
    let watched = Watched::new(sink);
    retry_streamed(policy, provider, &watched, || read_stream(make_request(), secret, assembler(), &watched)).await
}

/// Sends one streaming request and assembles its reply, handing text to `sink` as it arrives.
pub(crate) async fn read_stream<A: Assembler>(
    request: RequestBuilder,
    secret: Option<&str>,
    mut assembler: A,
    sink: &dyn DeltaSink,
) -> Attempt<ChatResponse> {
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => return send_failure(&error, secret),
    };
    let status = response.status();
    if !status.is_success() {
        let retry_after = parse_retry_after_header(response.headers(), SystemTime::now());
        let body = read_bounded(response, MAX_ERROR_BODY_BYTES).await;
        return status_failure(status, retry_after, &body, secret);
    }
    let mut bounds = Bounds::default();
    let chunks = response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(BodyError::Transport)?;
        bounds.check(&chunk)?;
        Ok::<_, BodyError>(chunk)
    });
    let mut events = std::pin::pin!(chunks.eventsource());
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(EventStreamError::Transport(BodyError::TooLarge(message))) => {
                return Attempt::Fail(ModelError::InvalidResponse(message))
            }
            // A body cut off mid-way is a transport failure, so it is retried like one.
            Err(EventStreamError::Transport(error @ BodyError::Transport(_))) => {
                return Attempt::Retry { status: None, message: redact(&error.to_string(), secret), retry_after: None }
            }
            Err(error) => {
                return Attempt::Fail(ModelError::InvalidResponse(format!("a malformed event stream: {error}")))
            }
        };
        // Several lines of data make one event, so the line bound alone does not cover it.
        if event.data.len() > MAX_EVENT_BYTES {
            return Attempt::Fail(ModelError::InvalidResponse(format!(
                "a streamed event is larger than {MAX_EVENT_BYTES} bytes"
            )));
        }
        match assembler.event(&event.event, &event.data, sink) {
            Ok(true) => return assembled(assembler),
            Ok(false) => {}
            Err(StreamFault::Retryable(message)) => {
                return Attempt::Retry { status: None, message: redact(&message, secret), retry_after: None }
            }
            Err(StreamFault::Fatal(ModelError::InvalidResponse(message))) => {
                return Attempt::Fail(ModelError::InvalidResponse(redact(&message, secret)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_is_refused_across_chunks() {
        let mut bounds = Bounds::default();
        let half = vec![b'x'; MAX_EVENT_BYTES / 2 + 1];
        assert!(bounds.check(b"data: {\"a\":\n").is_ok());
        assert!(bounds.check(&half).is_ok());
        assert!(matches!(bounds.check(&half), Err(BodyError::TooLarge(_))));
    }

    #[test]
    fn line_breaks_reset_the_line_count() {
        let mut bounds = Bounds::default();
        let mut chunk = vec![b'x'; MAX_EVENT_BYTES - 10];
        chunk.extend_from_slice(b"\n\nxx");
        assert!(bounds.check(&chunk).is_ok());
        assert_eq!(bounds.line, 2);
        assert!(bounds.check(&vec![b'y'; MAX_EVENT_BYTES - 2]).is_ok());
        assert!(bounds.check(b"\r").is_ok());
        assert_eq!(bounds.line, 0);
    }

    #[test]
    fn the_whole_stream_is_bounded() {
        let mut bounds = Bounds::default();
        let mut chunk = vec![b'x'; 1000];
        chunk.push(b'\n');
        let mut sent = 0;
        let error = loop {
            match bounds.check(&chunk) {
                Ok(()) => sent += chunk.len(),
                Err(error) => break error,
            }
        };
        assert!(matches!(error, BodyError::TooLarge(message) if message.contains("reply")));
        assert!(sent <= MAX_STREAM_BYTES && sent + chunk.len() > MAX_STREAM_BYTES);
    }
}
