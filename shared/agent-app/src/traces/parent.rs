//! The caller's trace a turn joins: the W3C `traceparent` of an HTTP request, the X-Ray header a
//! queue record carries, or the invocation's own X-Ray header.

use opentelemetry::trace::TraceContextExt;
use opentelemetry::Context;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::export::enabled;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
