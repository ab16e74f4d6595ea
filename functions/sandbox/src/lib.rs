//! The `sandbox` function's contract: the event is a [`WireRequest`], the answer a
//! [`WireResponse`] or a [`WireError`]; never a function error for a request it can read as JSON.
//! The command runs with the handler the local backend runs too, as a plain process in this
//! execution environment (`Isolation::Process`): Lambda's tenant isolation keeps one tenant per
//! environment, the VPC without a route out keeps the network away, and the handler bounds the rest.

use std::path::PathBuf;
use std::time::Instant;

use sandbox::handler::{self, bundle, Config};
use sandbox::wire::{INTERNAL, INVALID_REQUEST};
use sandbox::{lambda, WireBundlePart, WireError, WirePartAnswer, WireRequest, WireResponse};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What the function answers: the command's outcome, or why it did not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Answer {
    Response(WireResponse),
    Error(WireError),
    /// The answer to a bundle part.
    Part(WirePartAnswer),
}

/// Logs as JSON when Lambda asks for it (`AWS_LAMBDA_LOG_FORMAT=JSON`). Spans stay out of the
/// lines: the runtime's invocation span carries the raw tenant id, which this function only logs
/// hashed.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|format| format.eq_ignore_ascii_case("json"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).without_time();
    // A second initialisation (tests) keeps the first subscriber.
    let _ = if json {
        builder.json().with_current_span(false).with_span_list(false).try_init()
    } else {
        builder.try_init()
    };
}

/// The handler's configuration: [`Config::lambda_default`] (plain processes over `/tmp/sandbox`,
/// with the image's own tools, since the image is the function's root) and, for tests on a shared
/// machine, another scratch directory from `SANDBOX_SCRATCH_DIR`; `SANDBOX_BUNDLE_BYTES`, the
/// room the environment keeps for the tenant's installed bundles.
pub fn config_from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
    let mut config = Config::lambda_default();
    let set = |name: &str| lookup(name).filter(|value| !value.trim().is_empty()).map(PathBuf::from);
    if let Some(dir) = set("SANDBOX_SCRATCH_DIR") {
        // The handler wipes this directory on every call, so it must be somewhere of its own.
        if !dir.is_absolute() || dir.components().count() < 3 {
            return Err(format!(
                "SANDBOX_SCRATCH_DIR={} must be an absolute path at least two folders deep",
                dir.display()
            ));
        }
        config.scratch_base = dir;
    }
    if let Some(dir) = set("SANDBOX_BUNDLE_DIR") {
        if !dir.is_absolute() {
            return Err(format!("SANDBOX_BUNDLE_DIR={} must be an absolute path", dir.display()));
        }
        config.bundle_dir = dir;
    }
    if let Some(bytes) = lookup("SANDBOX_BUNDLE_BYTES").filter(|value| !value.trim().is_empty()) {
        config.bundle_bytes = handler::parse_bundle_bytes(&bytes)?;
    }
    Ok(config)
}

/// Runs one invocation: `event` is the payload, `invoked_tenant` Lambda's tenant id for it
/// (absent outside tenant isolation). Logs one line, without the command or any file's path.
pub async fn handle(config: &Config, event: Value, invoked_tenant: Option<&str>) -> Answer {
    let started = Instant::now();
    if let Some(part) = event.get("bundle_part") {
        return receive_bundle_part(config, part.clone(), invoked_tenant).await;
    }
    let request = match serde_json::from_value::<WireRequest>(event) {
        Ok(request) => request,
        Err(err) => {
            // Only the kind of error: serde's message may quote a value of the event (the command).
            tracing::warn!(outcome = INVALID_REQUEST, error_kind = ?err.classify(), "sandbox call refused: the event is not a request");
            return Answer::Error(WireError::new(
                INVALID_REQUEST,
                format!("the event is not a sandbox request: {err}"),
            ));
        }
    };
    let tenant = tenant_tag(&request.tenant);
    let (bytes_in, files_in) = request.file_totals();
    // Lambda routes by the tenant id it was given; files of another tenant never enter this
    // environment, even from a confused caller.
    if let Some(invoked) = invoked_tenant {
        if invoked != lambda::tenant_id(&request.tenant) {
            tracing::warn!(%tenant, outcome = INVALID_REQUEST, "sandbox call refused: not the invocation's tenant");
            return Answer::Error(WireError::new(
                INVALID_REQUEST,
                "the request's tenant is not the tenant this invocation was made for",
            ));
        }
    }
    let ran = handler::run(config, request).await;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match ran {
        Ok(response) => {
            let bytes_out: u64 = response.written.iter().map(|file| file.decoded_len()).sum();
            tracing::info!(
                %tenant,
                outcome = "ran",
                exit_code = response.exit_code,
                timed_out = response.timed_out,
                stopped = response.stopped.is_some(),
                duration_ms,
                command_ms = response.duration_ms,
                bytes_in,
                files_in,
                bytes_out,
                files_out = response.written.len(),
                deleted = response.deleted.len(),
                output_bytes = response.output.len(),
                "sandbox call"
            );
            Answer::Response(response)
        }
        Err(err) => {
            let error = WireError::from(&err);
            tracing::warn!(
                %tenant,
                outcome = %error.error,
                error = %err,
                duration_ms,
                bytes_in,
                files_in,
                "sandbox call refused"
            );
            Answer::Error(error)
        }
    }
}

/// One part of a skill's bundle (`{"bundle_part": ...}`), for the invocation's tenant only; the
/// last part installs the bundle for this environment's later calls.
async fn receive_bundle_part(config: &Config, part: Value, invoked_tenant: Option<&str>) -> Answer {
    let part = match serde_json::from_value::<WireBundlePart>(part) {
        Ok(part) => part,
        Err(err) => {
            tracing::warn!(outcome = INVALID_REQUEST, error_kind = ?err.classify(), "bundle part refused: not a part");
            return Answer::Error(WireError::new(INVALID_REQUEST, format!("the event is not a bundle part: {err}")));
        }
    };
    let tenant = tenant_tag(&part.tenant);
    if invoked_tenant.is_some_and(|invoked| invoked != lambda::tenant_id(&part.tenant)) {
        tracing::warn!(%tenant, outcome = INVALID_REQUEST, "bundle part refused: not the invocation's tenant");
        return Answer::Error(WireError::new(
            INVALID_REQUEST,
            "the part's tenant is not the tenant this invocation was made for",
        ));
    }
    let (config, started) = (config.clone(), Instant::now());
    let received = tokio::task::spawn_blocking(move || bundle::receive_part(&config, part)).await;
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match received {
        Ok(Ok(answer)) => {
            tracing::info!(%tenant, outcome = "bundle part", received = answer.received, installed = answer.installed, duration_ms, "sandbox call");
            Answer::Part(answer)
        }
        Ok(Err(err)) => {
            let error = WireError::from(&err);
            tracing::warn!(%tenant, outcome = %error.error, error = %err, duration_ms, "bundle part refused");
            Answer::Error(error)
        }
        Err(err) => Answer::Error(WireError::new(INTERNAL, format!("the bundle task failed: {err}"))),
    }
}

/// The tenant as logs show it: the first 12 hex digits of its SHA-256, enough to follow one
/// tenant's calls without naming them.
fn tenant_tag(tenant: &str) -> String {
    let digest = Sha256::digest(tenant.as_bytes());
    hex::encode(&digest[..6])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config() -> Config {
        let mut config = Config::lambda_default();
        config.scratch_base = std::env::temp_dir().join("sandbox-function-unit").join("never-used");
        config
    }

    #[tokio::test]
    async fn an_event_that_is_not_a_request_is_answered_invalid_request() {
        for event in [json!({"hello": "world"}), json!("text"), json!({"tenant": "u", "session": "s"})] {
            let Answer::Error(error) = handle(&config(), event, None).await else { panic!("not refused") };
            assert_eq!(error.error, INVALID_REQUEST);
            assert!(error.message.starts_with("the event is not a sandbox request"), "{}", error.message);
        }
        let unknown = json!({"tenant": "u", "session": "s", "command": "true", "timeout_ms": 1000, "extra": 1});
        assert!(matches!(handle(&config(), unknown, None).await, Answer::Error(_)));
    }

    #[tokio::test]
    async fn a_request_for_another_tenant_than_the_invocations_is_refused_before_anything_runs() {
        let event = json!({"tenant": "auth0|alice", "session": "s", "command": "touch /tmp/ran", "timeout_ms": 1000});
        let Answer::Error(error) = handle(&config(), event, Some("bob")).await else { panic!("not refused") };
        assert_eq!(error.error, INVALID_REQUEST);
        assert!(error.message.contains("tenant"), "{}", error.message);
        assert!(!config().scratch_base.exists(), "nothing was written");
    }

    #[test]
    fn answers_serialise_as_the_wire_types_do() {
        let error = WireError::new(INVALID_REQUEST, "bad");
        let json = serde_json::to_value(Answer::Error(error.clone())).expect("serializes");
        assert_eq!(json, json!({"error": "invalid_request", "message": "bad"}));
        assert_eq!(serde_json::from_value::<WireError>(json).expect("a wire error"), error);
    }

    #[test]
    fn the_configuration_takes_a_scratch_directory_of_its_own() {
        let none = config_from_env(|_| None).expect("defaults");
        assert_eq!(none, Config::lambda_default());
        for bad in ["relative/dir", "/tmp", "/"] {
            let error = config_from_env(|name| (name == "SANDBOX_SCRATCH_DIR").then(|| bad.into()));
            assert!(error.expect_err("refused").contains("SANDBOX_SCRATCH_DIR"), "{bad}");
        }
        let scratch = config_from_env(|name| (name == "SANDBOX_SCRATCH_DIR").then(|| "/tmp/x/sandbox".into()));
        assert_eq!(scratch.expect("deep enough").scratch_base, PathBuf::from("/tmp/x/sandbox"));
        let room = config_from_env(|name| (name == "SANDBOX_BUNDLE_BYTES").then(|| "1073741824".into()));
        assert_eq!(room.expect("a size").bundle_bytes, 1 << 30);
        for bad in ["many", "0", "-1"] {
            let error = config_from_env(|name| (name == "SANDBOX_BUNDLE_BYTES").then(|| bad.into()));
            assert!(error.expect_err("refused").contains("SANDBOX_BUNDLE_BYTES"), "{bad}");
        }
    }

    #[test]
    fn tenants_are_logged_as_a_short_stable_hash() {
        assert_eq!(tenant_tag("alice"), tenant_tag("alice"));
        assert_ne!(tenant_tag("alice"), tenant_tag("bob"));
        assert_eq!(tenant_tag("alice").len(), 12);
        assert!(!tenant_tag("alice").contains("alice"));
    }
}
