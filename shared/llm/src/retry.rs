//! Retrying HTTP calls to a provider, buffered or streamed: exponential backoff with full jitter,
//! `Retry-After`, and error mapping.

use std::error::Error as _;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use agent_ports::{DeltaSink, ModelError};
use rand::Rng;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{RequestBuilder, StatusCode};

use crate::config::LlmConfig;

/// Longest wait between two attempts, whether computed or asked for by `Retry-After`.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(20);

/// Longest provider error message kept in a [`ModelError`], so logs stay readable.
pub(crate) const MAX_MESSAGE_CHARS: usize = 500;

/// When and how often a failed provider call is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total number of attempts, the first one included; at least 1.
    pub max_attempts: u32,
    /// The backoff before retry `n` is drawn from `[0, base_delay * 2^(n-1)]`.
    pub base_delay: Duration,
    /// Cap on any single wait, including one asked for by `Retry-After`.
    pub max_delay: Duration,
}

impl RetryPolicy {
    pub fn from_config(config: &LlmConfig) -> Self {
        RetryPolicy {
            max_attempts: config.max_attempts.max(1),
            base_delay: config.retry_base_delay,
            max_delay: DEFAULT_MAX_DELAY,
        }
    }

    /// The capped exponential ceiling for the wait after failed attempt `attempt` (1-based).
    pub fn backoff_ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.saturating_sub(1)).unwrap_or(u32::MAX);
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }

    /// A full-jitter wait: uniform in `[0, ceiling]`, which spreads out clients that failed together.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self.backoff_ceiling(attempt).as_millis() as u64;
        Duration::from_millis(rand::rng().random_range(0..=ceiling))
    }

    /// The wait before the next attempt: the server's `Retry-After` if any, otherwise the backoff.
    pub(crate) fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(wait) => wait.min(self.max_delay),
            None => self.backoff(attempt),
        }
    }
}

/// Builds the HTTP client shared by a provider's calls; `timeout` bounds each attempt.
pub(crate) fn http_client(timeout: Duration) -> Result<reqwest::Client, ModelError> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .build()
        .map_err(|e| ModelError::Config(format!("could not build the HTTP client: {e}")))
}

/// The client for streamed calls: a model may stream for minutes, so `timeout` bounds the wait
/// for each read (the silence between two chunks), not the whole response.
pub(crate) fn streaming_client(timeout: Duration) -> Result<reqwest::Client, ModelError> {
    reqwest::Client::builder()
        .read_timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .build()
        .map_err(|e| ModelError::Config(format!("could not build the HTTP client: {e}")))
}

/// What one attempt came to: its result, a failure worth another attempt, or a final failure.
pub(crate) enum Attempt<T> {
    Done(T),
    Retry { status: Option<u16>, message: String, retry_after: Option<Duration> },
    Fail(ModelError),
}

/// Sends the request built by `make_request` until it succeeds or the policy gives up, and
/// returns the body of the successful response. `secret` is scrubbed from every error message.
pub(crate) async fn send_with_retry(
    policy: &RetryPolicy,
    provider: &'static str,
    secret: Option<&str>,
    make_request: impl Fn() -> RequestBuilder,
) -> Result<Vec<u8>, ModelError> {
    retry(policy, provider, || try_once(make_request(), secret)).await
}

/// Runs `attempt_once` until it is done, fails for good, or the policy's attempts are spent,
/// pausing between attempts (the one retry loop of every provider's buffered calls).
pub(crate) async fn retry<T, F: Future<Output = Attempt<T>>>(
    policy: &RetryPolicy,
    provider: &'static str,
    attempt_once: impl FnMut() -> F,
) -> Result<T, ModelError> {
    retry_until_shown(policy, provider, None, attempt_once).await
}

/// [`retry`] for a streamed call whose deltas go through `watched`: once a delta has been shown a
/// failure is final, since the text already shown cannot be taken back.
pub(crate) async fn retry_streamed<T, F: Future<Output = Attempt<T>>>(
    policy: &RetryPolicy,
    provider: &'static str,
    watched: &Watched<'_>,
    attempt_once: impl FnMut() -> F,
) -> Result<T, ModelError> {
    retry_until_shown(policy, provider, Some(watched), attempt_once).await
}

async fn retry_until_shown<T, F: Future<Output = Attempt<T>>>(
    policy: &RetryPolicy,
    provider: &'static str,
    watched: Option<&Watched<'_>>,
    mut attempt_once: impl FnMut() -> F,
) -> Result<T, ModelError> {
    let mut attempt = 1;
    loop {
        let (status, message, retry_after) = match attempt_once().await {
            Attempt::Done(value) => return Ok(value),
            Attempt::Fail(error) => return Err(error),
            Attempt::Retry { status, message, retry_after } => (status, message, retry_after),
        };
        if watched.is_some_and(Watched::sent) {
            tracing::warn!(provider, attempt, error = %message, "streamed model call broke after the reply began");
            return Err(ModelError::Unavailable {
                attempts: attempt,
                message: format!("the stream broke after the reply began: {message}"),
            });
        }
        pause_before_retry(policy, provider, attempt, status, message, retry_after).await?;
        attempt += 1;
    }
}

/// After failed attempt `attempt`: gives up (the error to return) once the policy's attempts are
/// spent, otherwise logs the failure and waits the backoff or `Retry-After`.
pub(crate) async fn pause_before_retry(
    policy: &RetryPolicy,
    provider: &'static str,
    attempt: u32,
    status: Option<u16>,
    message: String,
    retry_after: Option<Duration>,
) -> Result<(), ModelError> {
    let max_attempts = policy.max_attempts.max(1);
    if attempt >= max_attempts {
        return Err(ModelError::Unavailable { attempts: attempt, message });
    }
    let delay = policy.delay(attempt, retry_after);
    tracing::warn!(
        provider,
        attempt,
        max_attempts,
        status,
        delay_ms = delay.as_millis() as u64,
        error = %message,
        "model call failed; retrying"
    );
    tokio::time::sleep(delay).await;
    Ok(())
}

/// Passes deltas through and remembers that one went out, which ends the retries.
pub(crate) struct Watched<'a> {
    inner: &'a dyn DeltaSink,
    sent: AtomicBool,
}

impl<'a> Watched<'a> {
    pub(crate) fn new(inner: &'a dyn DeltaSink) -> Self {
        Watched { inner, sent: AtomicBool::new(false) }
    }

    /// Whether a delta has reached the sink, after which no attempt may start over.
    pub(crate) fn sent(&self) -> bool {
        self.sent.load(Ordering::Relaxed)
    }
}

impl DeltaSink for Watched<'_> {
    fn delta(&self, text: &str) {
        if !text.is_empty() {
            self.sent.store(true, Ordering::Relaxed);
            self.inner.delta(text);
        }
    }
}

/// The attempt a request that could not be sent comes to: one that cannot even be built will fail
/// the same way every time, anything else (connect, timeout, reset) is worth another attempt.
pub(crate) fn send_failure<T>(error: &reqwest::Error, secret: Option<&str>) -> Attempt<T> {
    let message = redact(&describe_transport_error(error), secret);
    if error.is_builder() {
        Attempt::Fail(ModelError::Config(message))
    } else {
        Attempt::Retry { status: None, message, retry_after: None }
    }
}

/// The attempt a non-success status comes to, given the body (or its start) that came with it:
/// 429 and 5xx are retried (after `Retry-After` when given), other statuses are rejections.
pub(crate) fn status_failure<T>(
    status: StatusCode,
    retry_after: Option<Duration>,
    body: &[u8],
    secret: Option<&str>,
) -> Attempt<T> {
    let message = error_message(body, secret);
    if is_retryable(status) {
        Attempt::Retry {
            status: Some(status.as_u16()),
            message: format!("HTTP {}: {message}", status.as_u16()),
            retry_after,
        }
    } else {
        Attempt::Fail(ModelError::Rejected { status: status.as_u16(), message })
    }
}

async fn try_once(request: RequestBuilder, secret: Option<&str>) -> Attempt<Vec<u8>> {
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => return send_failure(&error, secret),
    };

    let status = response.status();
    let retry_after = parse_retry_after_header(response.headers(), SystemTime::now());
    // A body cut off mid-way is a transport failure, so it is retried like one.
    let body = match response.bytes().await {
        Ok(body) => body.to_vec(),
        Err(error) => {
            return Attempt::Retry {
                status: Some(status.as_u16()),
                message: redact(&describe_transport_error(&error), secret),
                retry_after: None,
            }
        }
    };

    if status.is_success() {
        Attempt::Done(body)
    } else {
        status_failure(status, retry_after, &body, secret)
    }
}

pub(crate) fn is_retryable(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// A one-line description of a transport error with its causes, which reqwest keeps apart.
pub(crate) fn describe_transport_error(error: &reqwest::Error) -> String {
    let mut text = if error.is_timeout() { format!("request timed out: {error}") } else { error.to_string() };
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The provider's own error message from a JSON error body, or the raw body, truncated and redacted.
/// OpenAI and Anthropic both use `{"error": {"message": ...}}`; Ollama uses `{"error": "..."}`.
pub(crate) fn error_message(body: &[u8], secret: Option<&str>) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let from_json = parsed.as_ref().and_then(|value| {
        let error = value.get("error");
        error
            .and_then(|e| e.get("message"))
            .or(error)
            .or_else(|| value.get("message"))
            .and_then(|m| m.as_str())
            .map(str::to_string)
    });
    let text = from_json.unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    if text.is_empty() {
        return "(empty response body)".to_string();
    }
    truncate(&redact(&text, secret), MAX_MESSAGE_CHARS)
}

pub(crate) fn redact(text: &str, secret: Option<&str>) -> String {
    match secret {
        Some(secret) if !secret.is_empty() => text.replace(secret, "[redacted]"),
        _ => text.to_string(),
    }
}

pub(crate) fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

pub(crate) fn parse_retry_after_header(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    headers.get(RETRY_AFTER)?.to_str().ok().and_then(|value| parse_retry_after(value, now))
}

/// Parses a `Retry-After` value: delta-seconds or an HTTP date (a date in the past means now).
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(base_ms: u64) -> RetryPolicy {
        RetryPolicy { max_attempts: 4, base_delay: Duration::from_millis(base_ms), max_delay: Duration::from_secs(20) }
    }

    #[test]
    fn backoff_grows_exponentially_and_is_capped() {
        let p = policy(500);
        assert_eq!(p.backoff_ceiling(1), Duration::from_millis(500));
        assert_eq!(p.backoff_ceiling(2), Duration::from_millis(1000));
        assert_eq!(p.backoff_ceiling(3), Duration::from_millis(2000));
        assert_eq!(p.backoff_ceiling(6), Duration::from_millis(16000));
        assert_eq!(p.backoff_ceiling(7), Duration::from_secs(20));
        assert_eq!(p.backoff_ceiling(200), Duration::from_secs(20));
    }

    #[test]
    fn jitter_stays_within_the_ceiling_and_varies() {
        let p = policy(500);
        let draws: Vec<Duration> = (0..200).map(|_| p.backoff(3)).collect();
        assert!(draws.iter().all(|d| *d <= Duration::from_millis(2000)));
        assert!(draws.iter().any(|d| *d != draws[0]), "full jitter should not be constant");
    }

    #[test]
    fn retry_after_is_honoured_but_capped() {
        let p = policy(500);
        assert_eq!(p.delay(1, Some(Duration::from_secs(3))), Duration::from_secs(3));
        assert_eq!(p.delay(1, Some(Duration::from_secs(3600))), Duration::from_secs(20));
    }

    #[test]
    fn parses_retry_after_seconds_and_dates() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        assert_eq!(parse_retry_after("0", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
    }

    #[test]
    fn error_message_prefers_the_provider_message() {
        let openai = br#"{"error":{"message":"Invalid model","type":"invalid_request_error"}}"#;
        assert_eq!(error_message(openai, None), "Invalid model");
        let anthropic =
            br#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: required"}}"#;
        assert_eq!(error_message(anthropic, None), "max_tokens: required");
        assert_eq!(error_message(br#"{"error":"model 'x' not found"}"#, None), "model 'x' not found");
        assert_eq!(error_message(b"  Bad Gateway \n", None), "Bad Gateway");
        assert_eq!(error_message(b"", None), "(empty response body)");
    }

    #[test]
    fn error_message_is_truncated_and_redacted() {
        let body = format!(r#"{{"error":{{"message":"bad key sk-secret-123 {}"}}}}"#, "x".repeat(2000));
        let message = error_message(body.as_bytes(), Some("sk-secret-123"));
        assert!(!message.contains("sk-secret-123"), "{message}");
        assert!(message.starts_with("bad key [redacted] "), "{message}");
        assert_eq!(message.chars().count(), MAX_MESSAGE_CHARS + 1);
        assert!(message.ends_with('…'));
    }
}
