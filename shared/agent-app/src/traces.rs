//! OpenTelemetry traces of a turn: the `tracing` spans of our crates (the turn, its session load,
//! catalog, model calls, tool calls and commit) exported over OTLP/HTTP (protobuf) when the
//! deployment names an endpoint, joined to the caller's trace (`traceparent`, or Lambda's X-Ray
//! header), and sent before the invocation answers, since Lambda freezes the process after it.
//!
//! Off unless `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set (and
//! not `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`); when off no layer is installed,
//! and [`set_incoming_parent`] and [`flush`] return at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use opentelemetry::trace::{SpanKind, Status, TraceContextExt, TracerProvider as _};
use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter as _, SpanProcessor};
use opentelemetry_sdk::Resource;
use thiserror::Error;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// The crates whose spans are exported; every other crate's (the AWS SDK's, hyper's, the Lambda
/// runtime's invocation span) stays out of the traces.
const OUR_CRATES: &[&str] = &[
    "agent_core",
    "agent_app",
    "llm",
    "aws_store",
    "experts",
    "sandbox",
    "http_turn",
    "stream_turn",
    "queue_turn",
    "skills_index",
];

/// Spans kept for one invocation at most; beyond it they are counted and dropped, so a runaway
/// loop cannot grow the process.
const MAX_BUFFERED_SPANS: usize = 4096;

/// How long one export may take unless `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT` says otherwise: the
/// response waits for it, so it is far below the OTLP default of 10 s.
const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(2);

/// Attributes that would carry a conversation's text; they never leave the process.
const CONTENT_ATTRIBUTES: &[&str] = &[
    "gen_ai.prompt",
    "gen_ai.completion",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "message",
];

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

/// The process's exporter and the spans ended since the last [`flush`].
struct Pipeline {
    buffer: std::sync::Arc<SpanBuffer>,
    exporter: opentelemetry_otlp::SpanExporter,
    /// Kept so the tracer it hands out stays valid for the life of the process.
    _provider: SdkTracerProvider,
}

static PIPELINE: OnceLock<Pipeline> = OnceLock::new();

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

fn is_ours(target: &str) -> bool {
    OUR_CRATES
        .iter()
        .any(|name| target.strip_prefix(name).is_some_and(|rest| rest.is_empty() || rest.starts_with("::")))
}

/// Whether traces are exported by this process.
pub fn enabled() -> bool {
    PIPELINE.get().is_some()
}

/// The W3C `traceparent` (and `tracestate`) of an HTTP request's headers, for [`set_incoming_parent`].
pub fn trace_headers(headers: &http::HeaderMap) -> Option<TraceHeaders<'_>> {
    let value = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    Some(TraceHeaders { traceparent: value("traceparent")?, tracestate: value("tracestate") })
}

/// An incoming W3C trace context.
#[derive(Debug, Clone, Copy)]
pub struct TraceHeaders<'a> {
    pub traceparent: &'a str,
    pub tracestate: Option<&'a str>,
}

/// Makes the caller's span the parent of `span` (a turn span, before it is entered): the W3C
/// `headers` when they parse, or else the invocation's X-Ray header (`_X_AMZN_TRACE_ID`, which the
/// Lambda runtime sets for each invocation) when it is sampled. Without either the turn starts a
/// trace of its own. Does nothing when traces are off.
pub fn set_incoming_parent(span: &tracing::Span, headers: Option<TraceHeaders<'_>>) {
    if !enabled() {
        return;
    }
    let xray = std::env::var("_X_AMZN_TRACE_ID").ok();
    if let Some(parent) = incoming_context(headers, xray.as_deref()) {
        // A span already entered keeps the parent it started with; a turn span is not yet.
        let _ = span.set_parent(parent);
    }
}

/// Makes the X-Ray header a queue record carries (SQS's `AWSTraceHeader`, set when its sender was
/// traced) the parent of `span`, a record's turn span before it is entered; without a usable one,
/// the invocation's own header as [`set_incoming_parent`] does. Does nothing when traces are off.
pub fn set_record_parent(span: &tracing::Span, aws_trace_header: Option<&str>) {
    if !enabled() {
        return;
    }
    match aws_trace_header.and_then(xray_parent) {
        Some(parent) => {
            let _ = span.set_parent(Context::new().with_remote_span_context(parent));
        }
        None => set_incoming_parent(span, None),
    }
}

/// The remote parent from `headers` (W3C) or, failing that, from an X-Ray header.
pub fn incoming_context(headers: Option<TraceHeaders<'_>>, xray: Option<&str>) -> Option<Context> {
    use opentelemetry::propagation::TextMapPropagator;
    if let Some(headers) = headers {
        let mut carrier = std::collections::HashMap::new();
        carrier.insert("traceparent".to_owned(), headers.traceparent.to_owned());
        if let Some(state) = headers.tracestate {
            carrier.insert("tracestate".to_owned(), state.to_owned());
        }
        let context = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
        if context.span().span_context().is_valid() {
            return Some(context);
        }
    }
    let parent = xray_parent(xray?)?;
    Some(Context::new().with_remote_span_context(parent))
}

/// The span context of an X-Ray trace header (`Root=1-5759e988-bd862e3fe1be46a994272793;
/// Parent=53995c3f42cd8ad8;Sampled=1`): the root's two parts are the W3C trace id. Only a sampled
/// header with a parent is joined: Lambda sends `Sampled=0` whenever X-Ray tracing is off, and
/// following it would export nothing.
pub fn xray_parent(header: &str) -> Option<opentelemetry::trace::SpanContext> {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    let (mut root, mut parent, mut sampled) = (None, None, false);
    for part in header.split(';') {
        match part.trim().split_once('=') {
            Some(("Root", value)) => root = Some(value),
            Some(("Parent", value)) => parent = Some(value),
            Some(("Sampled", value)) => sampled = value == "1",
            _ => {}
        }
    }
    let mut root_parts = root?.split('-');
    let (version, time, random) = (root_parts.next()?, root_parts.next()?, root_parts.next()?);
    if version != "1" || time.len() != 8 || random.len() != 24 || root_parts.next().is_some() {
        return None;
    }
    let parent = parent.filter(|value| value.len() == 16)?;
    let trace_id = TraceId::from_hex(&format!("{time}{random}")).ok()?;
    let span_id = SpanId::from_hex(parent).ok()?;
    let context = SpanContext::new(trace_id, span_id, TraceFlags::SAMPLED, true, TraceState::default());
    (sampled && context.is_valid()).then_some(context)
}

/// Sends the spans ended since the last call to the OTLP endpoint and waits for the answer (at most
/// the export timeout). Call it at the end of each invocation, after its turn's span has closed and
/// before the response is posted. A failed export is logged and its spans dropped; it never fails
/// the invocation. Returns at once when traces are off or nothing was recorded.
pub async fn flush() {
    let Some(pipeline) = PIPELINE.get() else { return };
    let spans = std::mem::take(&mut *pipeline.buffer.spans.lock().unwrap_or_else(|poison| poison.into_inner()));
    let dropped = pipeline.buffer.dropped.swap(0, Ordering::Relaxed);
    if dropped > 0 {
        tracing::warn!(dropped, "spans over the per-invocation bound were not exported");
    }
    if spans.is_empty() {
        return;
    }
    let count = spans.len();
    let started = std::time::Instant::now();
    if let Err(err) = pipeline.exporter.export(spans).await {
        tracing::warn!(spans = count, error = %err, "the turn's spans could not be exported");
    } else {
        tracing::debug!(spans = count, elapsed_us = started.elapsed().as_micros() as u64, "spans exported");
    }
}

/// The spans ended in this invocation, waiting for [`flush`].
#[derive(Debug, Default)]
struct SpanBuffer {
    spans: Mutex<Vec<SpanData>>,
    dropped: AtomicU64,
}

/// Keeps each sampled span as it ends, in the GenAI conventions' shape, for [`flush`]; exports
/// nothing by itself, so no thread or timer runs behind the invocation.
#[derive(Debug)]
struct BufferProcessor(std::sync::Arc<SpanBuffer>);

impl SpanProcessor for BufferProcessor {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &Context) {}

    fn on_end(&self, mut span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        shape(&mut span);
        let mut spans = self.0.spans.lock().unwrap_or_else(|poison| poison.into_inner());
        if spans.len() < MAX_BUFFERED_SPANS {
            spans.push(span);
        } else {
            self.0.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// Gives a span the GenAI semantic conventions' name, kind and status (`chat {model}`, a client
/// span; `execute_tool {tool}`), marks a failure (`error.type`, a turn's `errorCode`) as an error,
/// and drops any attribute that would carry a conversation's text.
fn shape(span: &mut SpanData) {
    span.attributes.retain(|attribute| !CONTENT_ATTRIBUTES.contains(&attribute.key.as_str()));
    for attribute in &mut span.attributes {
        let key = attribute.key.as_str();
        let Value::String(text) = &attribute.value else { continue };
        // `tracing-opentelemetry` records a `u64` field (token counts, statuses) by its `Debug`
        // text; an OTLP backend sums and compares integers. Ids stay text even when all digits.
        let is_id = key.ends_with("Id") || key.ends_with(".id") || key.ends_with("_id");
        if !is_id {
            if let Some(number) = unsigned_text(text.as_str()) {
                attribute.value = Value::I64(number);
                continue;
            }
        }
        // The conventions make the finish reasons an array, one per choice.
        if key == "gen_ai.response.finish_reasons" {
            let reasons = text.as_str().split(',').map(|reason| reason.trim().to_owned().into()).collect();
            attribute.value = Value::Array(opentelemetry::Array::String(reasons));
        }
    }
    let text = |span: &SpanData, key: &str| {
        span.attributes.iter().find(|attribute| attribute.key.as_str() == key).and_then(|attribute| {
            match &attribute.value {
                Value::String(text) => Some(text.as_str().to_owned()),
                _ => None,
            }
        })
    };
    match span.name.as_ref() {
        "chat" => {
            if let Some(model) = text(span, "gen_ai.request.model") {
                span.name = format!("chat {model}").into();
            }
            if span.span_kind == SpanKind::Internal {
                span.span_kind = SpanKind::Client;
            }
        }
        "execute_tool" => {
            if let Some(tool) = text(span, "gen_ai.tool.name") {
                span.name = format!("execute_tool {tool}").into();
            }
        }
        _ => {}
    }
    if matches!(span.status, Status::Unset) {
        if let Some(error) = text(span, "error.type").or_else(|| text(span, "errorCode")) {
            span.status = Status::error(error);
        }
    }
}

/// The number a `u64`'s `Debug` text spells, when it fits an OTLP integer.
fn unsigned_text(text: &str) -> Option<i64> {
    let canonical =
        !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse::<i64>().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceContextExt;

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

    #[test]
    fn an_xray_header_gives_the_trace_and_the_parent() {
        let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        let parent = xray_parent(header).unwrap();
        assert_eq!(parent.trace_id().to_string(), "5759e988bd862e3fe1be46a994272793");
        assert_eq!(parent.span_id().to_string(), "53995c3f42cd8ad8");
        assert!(parent.is_remote() && parent.is_sampled());
        assert!(xray_parent(&header.replace("Sampled=1", "Sampled=0")).is_none(), "not sampled: not joined");
        assert!(xray_parent("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1").is_none(), "no parent");
        assert!(xray_parent("Root=1-00000000-000000000000000000000000").is_none());
        assert!(xray_parent("Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1").is_none());
    }

    #[test]
    fn a_traceparent_comes_before_the_xray_header() {
        let xray = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
        let headers = TraceHeaders {
            traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            tracestate: Some("vendor=1"),
        };
        let context = incoming_context(Some(headers), Some(xray)).unwrap();
        let parent = context.span().span_context().clone();
        assert_eq!(parent.trace_id().to_string(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(parent.span_id().to_string(), "b7ad6b7169203331");
        assert_eq!(parent.trace_state().get("vendor"), Some("1"));
        let broken = TraceHeaders { traceparent: "00-zz-b7ad6b7169203331-01", tracestate: None };
        let context = incoming_context(Some(broken), Some(xray)).unwrap();
        assert_eq!(context.span().span_context().span_id().to_string(), "53995c3f42cd8ad8", "the X-Ray parent");
        assert!(incoming_context(None, None).is_none());
    }

    #[test]
    fn spans_take_the_gen_ai_names_and_lose_any_text() {
        let mut span = SpanData {
            span_context: opentelemetry::trace::SpanContext::empty_context(),
            parent_span_id: opentelemetry::trace::SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "chat".into(),
            start_time: std::time::SystemTime::now(),
            end_time: std::time::SystemTime::now(),
            attributes: vec![
                KeyValue::new("gen_ai.request.model", "gpt-x"),
                KeyValue::new("gen_ai.input.messages", "hola"),
                KeyValue::new("error.type", "timeout"),
                KeyValue::new("gen_ai.usage.input_tokens", "100"),
                KeyValue::new("gen_ai.response.finish_reasons", "stop"),
                KeyValue::new("sessionId", "0042"),
                KeyValue::new("turnId", "42"),
            ],
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        };
        shape(&mut span);
        assert_eq!((span.name.as_ref(), span.span_kind.clone()), ("chat gpt-x", SpanKind::Client));
        assert!(span.attributes.iter().all(|attribute| attribute.key.as_str() != "gen_ai.input.messages"));
        assert_eq!(span.status, Status::error("timeout"));
        let value = |key: &str| span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| kv.value.clone());
        assert_eq!(value("gen_ai.usage.input_tokens"), Some(Value::I64(100)));
        assert_eq!(value("turnId"), Some(Value::from("42")), "ids stay text");
        assert_eq!(value("sessionId"), Some(Value::from("0042")));
        let stop = opentelemetry::Array::String(vec!["stop".into()]);
        assert_eq!(value("gen_ai.response.finish_reasons"), Some(Value::Array(stop)));
        span.name = "execute_tool".into();
        span.attributes.push(KeyValue::new("gen_ai.tool.name", "read_file"));
        shape(&mut span);
        assert_eq!(span.name.as_ref(), "execute_tool read_file");
        assert!(is_ours("agent_core::turn") && is_ours("llm") && !is_ours("llmx") && !is_ours("lambda_runtime"));
    }
}
