//! The spans of one invocation: kept as they end (in the GenAI conventions' shape, within a bound)
//! and sent to the OTLP endpoint by [`flush`] before the invocation answers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter as _, SpanProcessor};

use super::spans::shape;

/// Spans kept for one invocation at most; beyond it they are counted and dropped, so a runaway
/// loop cannot grow the process.
const MAX_BUFFERED_SPANS: usize = 4096;

/// The process's exporter and the spans ended since the last [`flush`].
pub(super) struct Pipeline {
    pub(super) buffer: std::sync::Arc<SpanBuffer>,
    pub(super) exporter: opentelemetry_otlp::SpanExporter,
    /// Kept so the tracer it hands out stays valid for the life of the process.
    pub(super) _provider: SdkTracerProvider,
}

pub(super) static PIPELINE: OnceLock<Pipeline> = OnceLock::new();

/// Whether traces are exported by this process.
pub fn enabled() -> bool {
    PIPELINE.get().is_some()
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
pub(super) struct SpanBuffer {
    spans: Mutex<Vec<SpanData>>,
    dropped: AtomicU64,
}

/// Keeps each sampled span as it ends, in the GenAI conventions' shape, for [`flush`]; exports
/// nothing by itself, so no thread or timer runs behind the invocation.
#[derive(Debug)]
pub(super) struct BufferProcessor(pub(super) std::sync::Arc<SpanBuffer>);

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
