//! The process's logs: JSON or text lines, with the traces and the metrics layered under the same
//! filter, and each invocation's `storage requests` line.

use std::future::Future;

use aws_store::CallCounter;

use crate::metrics::operations_since;
use crate::{metrics, traces};

mod json;

/// Awaits `fut` (one invocation's handler), then logs one info event `storage requests` with
/// `storage_requests` (the number of requests `counter` saw meanwhile) and `storage_operations`
/// (those requests per operation, as a compact JSON object such as
/// `{"DynamoDB.Query":1,"S3.GetObject":1}`). The Lambda runtime runs one invocation at a time
/// per process, so the difference is exactly the invocation's requests. Wrap the handler, not
/// the runtime, so the line is written before the response is posted.
pub async fn with_request_log<F: Future>(counter: &CallCounter, fut: F) -> F::Output {
    let before = counter.operations();
    let output = fut.await;
    let operations = operations_since(&before, &counter.operations());
    let total: u64 = operations.values().sum();
    let operations = serde_json::to_string(&operations).unwrap_or_default();
    tracing::info!(storage_requests = total, storage_operations = %operations, "storage requests");
    output
}

/// JSON logs when Lambda asks for them (`AWS_LAMBDA_LOG_FORMAT=JSON`), text otherwise; `RUST_LOG` filters.
/// Each JSON line lists its spans (`spans`): the runtime's invocation span with `requestId`, and a
/// turn's span (`turn::turn_span`) with `turnId`. When the deployment names an OTLP endpoint, the spans are
/// also exported as traces ([`traces`]).
pub fn init_logging() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|format| format.eq_ignore_ascii_case("json"));
    let fmt = tracing_subscriber::fmt::layer();
    let fmt = if json {
        // The lines of `.json().with_current_span(false)` without time and target, written without
        // parsing each span's fields again at every line (`json::LambdaJson`).
        fmt.fmt_fields(tracing_subscriber::fmt::format::JsonFields::new()).event_format(json::LambdaJson).boxed()
    } else {
        fmt.with_target(false).without_time().boxed()
    };
    // A configuration the traces cannot follow leaves them off; it is logged once the logs work.
    let (traces, traces_error) = match traces::layer() {
        Ok(layer) => (layer, None),
        Err(err) => (None, Some(err)),
    };
    // The filter is global, so every layer sees what `RUST_LOG` lets through, and nothing else.
    let result = tracing_subscriber::registry().with(filter).with(fmt).with(traces).with(metrics::layer()).try_init();
    // A second initialisation (tests) keeps the first subscriber.
    if result.is_ok() {
        if let Some(err) = traces_error {
            tracing::error!(error = %err, "traces are off: the OpenTelemetry settings cannot be followed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_since_keeps_only_new_requests() {
        use std::collections::BTreeMap;
        let map = |pairs: &[(&str, u64)]| pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>();
        let before = map(&[("DynamoDB.Query", 2), ("S3.GetObject", 1)]);
        let after = map(&[("DynamoDB.Query", 3), ("S3.GetObject", 1), ("S3.PutObject", 2)]);
        assert_eq!(operations_since(&before, &after), map(&[("DynamoDB.Query", 1), ("S3.PutObject", 2)]));
        assert!(operations_since(&after, &after).is_empty());
    }

    #[tokio::test]
    async fn with_request_log_passes_the_output_through() {
        let counter = CallCounter::new();
        assert_eq!(with_request_log(&counter, async { 7 }).await, 7);
    }
}
