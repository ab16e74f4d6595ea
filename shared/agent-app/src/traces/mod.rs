//! OpenTelemetry traces of a turn: the `tracing` spans of our crates (the turn, its session load,
//! catalog, model calls, tool calls and commit) exported over OTLP/HTTP (protobuf) when the
//! deployment names an endpoint, joined to the caller's trace (`traceparent`, or Lambda's X-Ray
//! header), and sent before the invocation answers, since Lambda freezes the process after it.
//!
//! Off unless `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set (and
//! not `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`); when off no layer is installed,
//! and [`set_incoming_parent`] and [`flush`] return at once.
//!
//! A file per part: `spans` (which spans leave the process, and in what shape), `export` (the spans
//! kept for the invocation and sent by [`flush`]), `parent` (the caller's trace a turn joins); this
//! file reads the settings and installs the layer.

mod export;
mod parent;
mod spans;

use std::time::Duration;

use agent_core::message::Usage;
use agent_core::telemetry::field;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanExporter as _};
use opentelemetry_sdk::Resource;
use thiserror::Error;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

pub use export::{enabled, flush};
use export::{BufferProcessor, Pipeline, SpanBuffer, PIPELINE};
pub use parent::{incoming_context, set_incoming_parent, set_record_parent, trace_headers, xray_parent, TraceHeaders};
use spans::is_ours;

/// How long one export may take unless `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT` says otherwise: the
/// response waits for it, so it is far below the OTLP default of 10 s.
const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(2);

/// Why traces could not be turned on; the functions log it and run without them.
#[derive(Debug, Error)]
pub enum TracesError {
    #[error("{name} is `{value}`: only `http/protobuf` is built in")]
    Protocol { name: &'static str, value: String },
    #[error("{name} is `{value}`: expected `otlp` or `none`")]
    Exporter { name: &'static str, value: String },
    #[error("{name} is `{value}`: expected milliseconds")]
    Timeout { name: &'static str, value: String },
    #[error("the OTLP exporter could not be built: {0}")]
    Build(String),
}

/// What the environment asks of traces.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSettings {
    pub service_name: String,
    pub timeout: Duration,
}

impl TraceSettings {
    /// `None` when traces are off: no endpoint, `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`.
    /// The endpoint itself, `OTEL_EXPORTER_OTLP_HEADERS` and the sampler (`OTEL_TRACES_SAMPLER`) are
    /// read by the OpenTelemetry crates.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<TraceSettings>, TracesError> {
        let value = |name: &str| lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        if value("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        if let Some(exporter) = value("OTEL_TRACES_EXPORTER") {
            match exporter.to_ascii_lowercase().as_str() {
                "none" => return Ok(None),
                "otlp" => {}
                _ => return Err(TracesError::Exporter { name: "OTEL_TRACES_EXPORTER", value: exporter }),
            }
        }
        if value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none() && value("OTEL_EXPORTER_OTLP_ENDPOINT").is_none() {
            return Ok(None);
        }
        for name in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            if let Some(protocol) = value(name) {
                if protocol != "http/protobuf" {
                    return Err(TracesError::Protocol { name, value: protocol });
                }
                break;
            }
        }
        let mut timeout = DEFAULT_EXPORT_TIMEOUT;
        for name in ["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"] {
            if let Some(millis) = value(name) {
                let millis = millis.parse::<u64>().map_err(|_| TracesError::Timeout { name, value: millis })?;
                timeout = Duration::from_millis(millis);
                break;
            }
        }
        let service_name = value("OTEL_SERVICE_NAME")
            .or_else(|| value("AWS_LAMBDA_FUNCTION_NAME"))
            .unwrap_or_else(|| "agent-runtime".to_owned());
        Ok(Some(TraceSettings { service_name, timeout }))
    }
}

/// Adds a finished turn's tokens (every model call's, subagents' and summaries' included, with the
/// cache split) and, when some call had a price, its cost to the turn's span. The turn span cannot
/// declare them as fields of its own (the usage is the reply's), so they go to the exported span
/// as attributes; with traces off this does nothing.
pub fn record_turn_usage(span: &tracing::Span, usage: &Usage, cost_usd: Option<f64>) {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if !enabled() {
        return;
    }
    let count = |tokens: u64| i64::try_from(tokens).unwrap_or(i64::MAX);
    span.set_attribute(field::INPUT_TOKENS, count(usage.input_tokens));
    span.set_attribute(field::OUTPUT_TOKENS, count(usage.output_tokens));
    span.set_attribute(field::CACHE_READ_TOKENS, count(usage.cache_read_tokens));
    span.set_attribute(field::CACHE_WRITE_TOKENS, count(usage.cache_write_tokens));
    if let Some(usd) = cost_usd {
        span.set_attribute(field::TURN_COST_USD, usd);
    }
}

/// The `tracing-opentelemetry` layer when the environment asks for traces (see [`TraceSettings`]),
/// `Ok(None)` when it does not. Call once, from `init_logging`: it installs the process's exporter.
pub fn layer<S>() -> Result<Option<impl Layer<S>>, TracesError>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    let Some(settings) = TraceSettings::from_lookup(|name| std::env::var(name).ok())? else { return Ok(None) };
    let mut attributes = vec![KeyValue::new("cloud.provider", "aws"), KeyValue::new("cloud.platform", "aws_lambda")];
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(region) = env("AWS_REGION") {
        attributes.push(KeyValue::new("cloud.region", region));
    }
    if let Some(function) = env("AWS_LAMBDA_FUNCTION_NAME") {
        attributes.push(KeyValue::new("faas.name", function));
    }
    if let Some(version) = env("AWS_LAMBDA_FUNCTION_VERSION") {
        attributes.push(KeyValue::new("faas.version", version));
    }
    let resource =
        Resource::builder().with_service_name(settings.service_name.clone()).with_attributes(attributes).build();
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_timeout(settings.timeout)
        // One attempt: the invocation's answer waits for it, and a trace is worth less than that.
        .with_retry_policy(opentelemetry_otlp::RetryPolicy::disabled())
        .build()
        .map_err(|err| TracesError::Build(err.to_string()))?;
    exporter.set_resource(&resource);
    let buffer = std::sync::Arc::new(SpanBuffer::default());
    let provider = SdkTracerProvider::builder()
        .with_span_processor(BufferProcessor(buffer.clone()))
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("agent-runtime");
    if PIPELINE.set(Pipeline { buffer, exporter, _provider: provider }).is_err() {
        // A second initialisation (tests) keeps the first pipeline and installs no second layer.
        return Ok(None);
    }
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_target(false)
        // Only our crates' spans at INFO or above, and no log events: they are in the logs, and
        // some carry text a trace must not.
        .with_filter(tracing_subscriber::filter::filter_fn(|metadata| {
            metadata.is_span() && *metadata.level() <= tracing::Level::INFO && is_ours(metadata.target())
        }));
    Ok(Some(layer))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string())
    }

    #[test]
    fn traces_are_off_unless_an_endpoint_is_named() {
        assert_eq!(TraceSettings::from_lookup(lookup(&[])).unwrap(), None);
        assert_eq!(TraceSettings::from_lookup(lookup(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "")])).unwrap(), None);
        let on = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"), ("AWS_LAMBDA_FUNCTION_NAME", "http-turn")];
        let settings = TraceSettings::from_lookup(lookup(&on)).unwrap().unwrap();
        assert_eq!(settings, TraceSettings { service_name: "http-turn".into(), timeout: DEFAULT_EXPORT_TIMEOUT });
        let named = [("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c/v1/traces"), ("OTEL_SERVICE_NAME", "agents")];
        assert_eq!(TraceSettings::from_lookup(lookup(&named)).unwrap().unwrap().service_name, "agents");
        for off in [("OTEL_SDK_DISABLED", "true"), ("OTEL_TRACES_EXPORTER", "none")] {
            let pairs = [on[0], off];
            assert_eq!(TraceSettings::from_lookup(lookup(&pairs)).unwrap(), None, "{off:?}");
        }
        let grpc = [on[0], ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")];
        assert!(TraceSettings::from_lookup(lookup(&grpc)).unwrap_err().to_string().contains("http/protobuf"));
        let timeout = [on[0], ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "500")];
        assert_eq!(TraceSettings::from_lookup(lookup(&timeout)).unwrap().unwrap().timeout, Duration::from_millis(500));
        let zipkin = [on[0], ("OTEL_TRACES_EXPORTER", "zipkin")];
        assert!(TraceSettings::from_lookup(lookup(&zipkin)).is_err());
    }
}
