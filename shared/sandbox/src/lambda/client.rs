//! [`LambdaSandbox`]: a command as one `Invoke` of the sandbox function, `RequestResponse`, with
//! the tenant's id, the wire request as its payload and the wire response as its answer.

use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use agent_ports::sandbox::{ExecOutcome, ExecRequest, Sandbox, SandboxError, SandboxLayout, MAX_CALL_FILES};
use async_trait::async_trait;
use aws_sdk_lambda::config::retry::RetryConfig;
use aws_sdk_lambda::config::timeout::TimeoutConfig;
use aws_sdk_lambda::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_lambda::operation::invoke::InvokeError;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;

use super::{tenant_id, INVOKE_MARGIN, MAX_INVOKE_PAYLOAD_BYTES, SANDBOX_FUNCTION_ENV};
use crate::bundles::{self, BundleSource};
use crate::handler::Config;
use crate::wire::{WireBundlePart, WireError, WirePartAnswer, WireRequest, WireResponse, MISSING_BUNDLES};

/// The most characters of a function's error payload kept in the log.
const LOGGED_ERROR_CHARS: usize = 2_000;

/// Bytes of a bundle per invocation: 4 MiB is 5.6 MB in base64, under the 6 MB request bound.
const BUNDLE_PART_BYTES: usize = 4 << 20;
/// How long one part (the last one installs the bundle) may take.
const BUNDLE_PART_TIMEOUT: Duration = Duration::from_secs(330);
/// Rounds of sending bundles before the call gives up.
const BUNDLE_ROUNDS: u32 = 2;

/// Error codes that mean the call was throttled: the command did not run and may run later.
const THROTTLING_CODES: [&str; 4] =
    ["TooManyRequestsException", "ThrottlingException", "Throttling", "RequestLimitExceeded"];

/// Runs commands in the `sandbox` Lambda function.
#[derive(Debug, Clone)]
pub struct LambdaSandbox {
    client: aws_sdk_lambda::Client,
    function: String,
    layout: SandboxLayout,
    bundles: Option<BundleSource>,
}

impl LambdaSandbox {
    /// A backend invoking `function` (a name or an ARN) with `sdk`'s region, credentials and
    /// endpoint (`AWS_ENDPOINT_URL_LAMBDA`, `AWS_ENDPOINT_URL`).
    pub fn new(sdk: &aws_config::SdkConfig, function: impl Into<String>) -> Self {
        // Standard mode with its default attempts, whatever the environment asks: a retried
        // command runs again from the start, so more attempts would only stretch the turn.
        let config = aws_sdk_lambda::config::Builder::from(sdk).retry_config(RetryConfig::standard()).build();
        Self {
            client: aws_sdk_lambda::Client::from_conf(config),
            function: function.into(),
            layout: Config::lambda_default().layout(),
            bundles: None,
        }
    }

    /// Sends the skills' bundles an environment lacks from `bundles`, in parts, those the runtime
    /// signed for the call's tenant only (without it, no bundle is sent or used).
    pub fn with_bundles(mut self, bundles: BundleSource) -> Self {
        self.bundles = Some(bundles);
        self
    }

    /// The backend named by `SANDBOX_FUNCTION` in this process's environment.
    pub fn from_env(sdk: &aws_config::SdkConfig) -> Result<Self, String> {
        Self::from_lookup(sdk, |name| std::env::var(name).ok())
    }

    /// The backend named by `SANDBOX_FUNCTION` as `lookup` reads it.
    pub fn from_lookup(sdk: &aws_config::SdkConfig, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let function = lookup(SANDBOX_FUNCTION_ENV)
            .map(|name| name.trim().to_owned())
            .filter(|name| !name.is_empty())
            .ok_or_else(|| {
                format!("SANDBOX=lambda needs {SANDBOX_FUNCTION_ENV}: the name or ARN of the sandbox function")
            })?;
        Ok(Self::new(sdk, function))
    }

    /// The function this backend invokes.
    pub fn function(&self) -> &str {
        &self.function
    }

    fn unavailable(&self, detail: String) -> SandboxError {
        tracing::warn!(sandbox = "lambda", function = %self.function, error = %detail, "the sandbox call failed");
        SandboxError::Unavailable(detail)
    }

    /// What an SDK error means for the model: throttled (busy) or anything else (unavailable).
    fn classify(&self, error: SdkError<InvokeError, aws_sdk_lambda::config::http::HttpResponse>) -> SandboxError {
        let (throttled, detail) = match &error {
            SdkError::ServiceError(service) => {
                let (err, status) = (service.err(), service.raw().status().as_u16());
                let throttled = matches!(err, InvokeError::TooManyRequestsException(_))
                    || err.code().is_some_and(|code| THROTTLING_CODES.contains(&code))
                    || status == 429;
                let code = err.code().unwrap_or("unknown error");
                (throttled, format!("{status} {code}: {}", err.message().unwrap_or_default()))
            }
            _ => (false, DisplayErrorContext(&error).to_string()),
        };
        if throttled {
            tracing::warn!(sandbox = "lambda", function = %self.function, error = %detail, "the sandbox call was throttled");
            SandboxError::Busy(detail)
        } else {
            self.unavailable(detail)
        }
    }

    /// The outcome in a function's answer: a wire response, or a wire error the core is told of
    /// as such (too large) or as the sandbox being unavailable.
    fn decode(&self, payload: &[u8]) -> Result<ExecOutcome, SandboxError> {
        match serde_json::from_slice::<WireResponse>(payload) {
            Ok(response) => response
                .into_outcome()
                .map_err(|detail| self.unavailable(format!("the function's response breaks the contract: {detail}"))),
            Err(not_a_response) => match serde_json::from_slice::<WireError>(payload) {
                Ok(error) => {
                    let detail = format!("{}: {}", error.error, error.message);
                    match error.into_sandbox_error() {
                        too_large @ SandboxError::TooLarge { .. } => {
                            tracing::warn!(sandbox = "lambda", error = %detail, "the sandbox refused the call's files");
                            Err(too_large)
                        }
                        _ => Err(self.unavailable(format!("the function refused the call: {detail}"))),
                    }
                }
                Err(_) => Err(self.unavailable(format!("the function's answer does not decode: {not_a_response}"))),
            },
        }
    }
}

#[async_trait]
impl Sandbox for LambdaSandbox {
    fn layout(&self) -> SandboxLayout {
        self.layout.clone()
    }

    fn name(&self) -> &'static str {
        "lambda"
    }

    async fn execute(&self, mut request: ExecRequest) -> Result<ExecOutcome, SandboxError> {
        // Before the function hears of them: a bundle the runtime did not sign is never named or sent.
        let note = bundles::admit(self.bundles.as_ref(), &mut request);
        let wire = WireRequest::from_exec(&request);
        let payload = serde_json::to_vec(&wire)
            .map_err(|err| self.unavailable(format!("could not serialise the request: {err}")))?;
        // Lambda would refuse it (413) after the upload; the model can act on this instead.
        if payload.len() > MAX_INVOKE_PAYLOAD_BYTES {
            let (file_bytes, files) = wire.file_totals();
            tracing::warn!(
                sandbox = "lambda",
                payload_bytes = payload.len(),
                file_bytes,
                files,
                "the sandbox request is over Lambda's payload bound; not invoked"
            );
            return Err(SandboxError::TooLarge {
                bytes: payload.len() as u64,
                files,
                max_bytes: MAX_INVOKE_PAYLOAD_BYTES as u64,
                max_files: MAX_CALL_FILES,
            });
        }
        drop(wire);
        let started = Instant::now();
        let mut rounds = 0;
        let answer = loop {
            let answer = self.invoke(&request, payload.clone(), request.timeout + INVOKE_MARGIN).await?;
            // An environment without a skill's bundle gets it in parts, then the call again. Another
            // environment of the tenant may take the retry, so this is bounded.
            match missing_bundles(&answer) {
                Some(missing) if rounds < BUNDLE_ROUNDS => {
                    rounds += 1;
                    for sha256 in missing {
                        self.send_bundle(&request, &sha256).await?;
                    }
                }
                Some(_) => return Err(self.unavailable("the sandbox kept asking for a bundle already sent".to_owned())),
                None => break answer,
            }
        };
        let outcome = bundles::with_note(self.decode(&answer)?, note);
        tracing::debug!(
            sandbox = "lambda",
            elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            ran_ms = u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            "the sandbox call returned"
        );
        Ok(outcome)
    }
}

/// The bundles a `missing_bundles` answer names.
fn missing_bundles(answer: &[u8]) -> Option<Vec<String>> {
    let error = serde_json::from_slice::<WireError>(answer).ok()?;
    (error.error == MISSING_BUNDLES).then(|| error.missing.unwrap_or_default()).filter(|missing| !missing.is_empty())
}

impl LambdaSandbox {
    /// One `RequestResponse` invocation for the call's tenant: the answer's bytes.
    async fn invoke(&self, request: &ExecRequest, payload: Vec<u8>, within: Duration) -> Result<Vec<u8>, SandboxError> {
        let base = self.client.config().timeout_config();
        let timeouts =
            base.map_or_else(TimeoutConfig::builder, TimeoutConfig::to_builder).operation_timeout(within).build();
        let sent = self
            .client
            .invoke()
            .function_name(&self.function)
            .tenant_id(tenant_id(request.tenant.as_str()))
            .invocation_type(InvocationType::RequestResponse)
            .payload(Blob::new(payload))
            .customize()
            .config_override(aws_sdk_lambda::config::Builder::default().timeout_config(timeouts))
            .send()
            .await;
        let output = sent.map_err(|error| self.classify(error))?;
        if let Some(kind) = output.function_error() {
            let body = output.payload().map(|payload| String::from_utf8_lossy(payload.as_ref()).into_owned());
            let body: String = body.unwrap_or_default().chars().take(LOGGED_ERROR_CHARS).collect();
            return Err(self.unavailable(format!("the function failed ({kind}): {body}")));
        }
        match output.payload {
            Some(payload) => Ok(payload.into_inner()),
            None => Err(self.unavailable("the function answered no payload".to_owned())),
        }
    }

    /// Sends bundle `sha256` of the call's skills in parts; the last part installs it.
    async fn send_bundle(&self, request: &ExecRequest, sha256: &str) -> Result<(), SandboxError> {
        let source = self.bundles.as_ref().ok_or_else(|| {
            self.unavailable("a skill has a bundle and this sandbox has no store to read it from".to_owned())
        })?;
        let started = Instant::now();
        let (bundle, bytes) = source.fetch(request, sha256).await?;
        let mut offset = 0;
        let mut parts = 0;
        loop {
            let end = (offset + BUNDLE_PART_BYTES).min(bytes.len());
            let part = WireBundlePart {
                tenant: request.tenant.as_str().to_owned(),
                sha256: bundle.sha256.clone(),
                size: bytes.len() as u64,
                offset: offset as u64,
                data: STANDARD.encode(&bytes[offset..end]),
            };
            let payload = serde_json::to_vec(&serde_json::json!({ "bundle_part": part }))
                .map_err(|err| self.unavailable(format!("could not serialise a bundle part: {err}")))?;
            parts += 1;
            let answer = self.invoke(request, payload, BUNDLE_PART_TIMEOUT).await?;
            let answer = match serde_json::from_slice::<WirePartAnswer>(&answer) {
                Ok(answer) => answer,
                Err(_) => {
                    return Err(match serde_json::from_slice::<WireError>(&answer) {
                        Ok(error) => match error.into_sandbox_error() {
                            SandboxError::Unavailable(detail) => self.unavailable(detail),
                            other => other,
                        },
                        Err(err) => {
                            self.unavailable(format!("the function's answer to a bundle part does not decode: {err}"))
                        }
                    })
                }
            };
            if answer.installed {
                tracing::info!(
                    sandbox = "lambda",
                    bytes = bytes.len(),
                    parts,
                    took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    "sent a skill's bundle"
                );
                return Ok(());
            }
            // Parts go in order; an environment that holds another count (a new one) says where to go on.
            let received = usize::try_from(answer.received).unwrap_or(usize::MAX);
            if received >= bytes.len() || parts > 2 * bytes.len().div_ceil(BUNDLE_PART_BYTES) + 2 {
                return Err(self.unavailable("the sandbox did not take the bundle's parts in order".to_owned()));
            }
            offset = if received == end { end } else { 0 };
        }
    }
}

#[cfg(test)]
mod tests {
    use aws_config::{BehaviorVersion, Region, SdkConfig};

    use super::*;
    use crate::wire::{INTERNAL, TOO_LARGE};

    fn sdk() -> SdkConfig {
        SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .http_client(aws_http::http_client())
            .build()
    }

    #[test]
    fn the_function_name_is_required_and_named_when_missing() {
        let error = LambdaSandbox::from_lookup(&sdk(), |_| None).expect_err("no function");
        assert!(error.contains("SANDBOX_FUNCTION"), "{error}");
        let error = LambdaSandbox::from_lookup(&sdk(), |_| Some("  ".into())).expect_err("blank");
        assert!(error.contains("SANDBOX_FUNCTION"), "{error}");
        let sandbox = LambdaSandbox::from_lookup(&sdk(), |_| Some(" sandbox ".into())).expect("named");
        assert_eq!((sandbox.function(), sandbox.name()), ("sandbox", "lambda"));
        assert_eq!(sandbox.layout().workspace, "/tmp/sandbox/workspace");
        assert_eq!(sandbox.layout().skills, "/tmp/sandbox/skills");
    }

    #[test]
    fn answers_that_are_not_responses_are_errors_the_model_can_read() {
        let sandbox = LambdaSandbox::new(&sdk(), "sandbox");
        let mut too_large = WireError::new(TOO_LARGE, "too large");
        (too_large.bytes, too_large.files) = (Some(5_000_000), Some(4));
        let json = serde_json::to_vec(&too_large).expect("serializes");
        assert!(matches!(sandbox.decode(&json), Err(SandboxError::TooLarge { bytes: 5_000_000, files: 4, .. })));
        let json = serde_json::to_vec(&WireError::new(INTERNAL, "disk full")).expect("serializes");
        let error = sandbox.decode(&json).expect_err("an internal error");
        assert!(matches!(&error, SandboxError::Unavailable(detail) if detail.contains("disk full")));
        assert!(!error.to_string().contains("disk full"), "the detail is not shown: {error}");
        for garbage in [&b"not json"[..], b"{}", b"null", br#"{"output": 3}"#] {
            assert!(matches!(sandbox.decode(garbage), Err(SandboxError::Unavailable(_))));
        }
    }
}
