//! A stand-in for an OpenTelemetry collector on loopback: it accepts OTLP/HTTP protobuf exports
//! (`POST /v1/traces`), decodes them with `opentelemetry-proto`'s types, and keeps every span it
//! received (name, ids, parent, kind, attributes, the service that sent it) for the tests to check.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use prost::Message;
use serde_json::Value;

/// One received span; ids in lowercase hex, an empty `parent_span_id` for a root.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    /// The OTLP `SpanKind` number: 1 internal, 2 server, 3 client.
    pub kind: i32,
    /// The OTLP status code: 0 unset, 1 ok, 2 error.
    pub status_code: i32,
    pub attributes: BTreeMap<String, Value>,
    /// The resource's `service.name`.
    pub service: String,
}

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&Value> {
        self.attributes.get(key)
    }
}

#[derive(Default)]
struct Received {
    spans: Vec<ReceivedSpan>,
    /// Every export request, decodable or not.
    requests: usize,
    /// The content types of the requests, in order.
    content_types: Vec<String>,
}

/// A running collector stand-in.
#[derive(Clone)]
pub struct Collector {
    /// What a function's `OTEL_EXPORTER_OTLP_ENDPOINT` is set to (`/v1/traces` is appended).
    pub endpoint: String,
    received: Arc<Mutex<Received>>,
}

impl Collector {
    pub async fn start() -> Collector {
        let received: Arc<Mutex<Received>> = Arc::default();
        let app = Router::new().route("/v1/traces", post(export)).with_state(received.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the collector");
        let address = listener.local_addr().expect("collector address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Collector { endpoint: format!("http://{address}"), received }
    }

    /// Every span received so far, in order of arrival.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.received.lock().unwrap().spans.clone()
    }

    /// How many export requests arrived.
    pub fn requests(&self) -> usize {
        self.received.lock().unwrap().requests
    }

    /// The `Content-Type` of each export request.
    pub fn content_types(&self) -> Vec<String> {
        self.received.lock().unwrap().content_types.clone()
    }

    /// Waits up to `within` until a span named `name` has arrived; the spans received then.
    pub async fn wait_for(&self, name: &str, within: Duration) -> Vec<ReceivedSpan> {
        let started = std::time::Instant::now();
        loop {
            let spans = self.spans();
            if spans.iter().any(|span| span.name == name) || started.elapsed() > within {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn export(State(received): State<Arc<Mutex<Received>>>, headers: HeaderMap, body: Bytes) -> impl IntoResponse {
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let decoded = ExportTraceServiceRequest::decode(body.as_ref());
    let mut received = received.lock().unwrap();
    received.requests += 1;
    received.content_types.push(content_type);
    let Ok(request) = decoded else { return (StatusCode::BAD_REQUEST, Vec::new()) };
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .as_ref()
            .and_then(|resource| resource.attributes.iter().find(|kv| kv.key == "service.name"))
            .and_then(|kv| kv.value.as_ref())
            .map(any_to_json)
            .and_then(|value| value.as_str().map(str::to_owned))
            .unwrap_or_default();
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                received.spans.push(ReceivedSpan {
                    name: span.name,
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: hex::encode(&span.parent_span_id),
                    kind: span.kind,
                    status_code: span.status.as_ref().map_or(0, |status| status.code),
                    attributes: attributes(&span.attributes),
                    service: service.clone(),
                });
            }
        }
    }
    (StatusCode::OK, ExportTraceServiceResponse::default().encode_to_vec())
}

fn attributes(pairs: &[KeyValue]) -> BTreeMap<String, Value> {
    pairs.iter().map(|kv| (kv.key.clone(), kv.value.as_ref().map(any_to_json).unwrap_or(Value::Null))).collect()
}

fn any_to_json(value: &AnyValue) -> Value {
    match &value.value {
        Some(any_value::Value::StringValue(text)) => Value::String(text.clone()),
        Some(any_value::Value::BoolValue(flag)) => Value::Bool(*flag),
        Some(any_value::Value::IntValue(number)) => Value::from(*number),
        Some(any_value::Value::DoubleValue(number)) => Value::from(*number),
        Some(any_value::Value::ArrayValue(array)) => Value::Array(array.values.iter().map(any_to_json).collect()),
        Some(any_value::Value::KvlistValue(list)) => {
            Value::Object(attributes(&list.values).into_iter().collect::<serde_json::Map<_, _>>())
        }
        Some(any_value::Value::BytesValue(bytes)) => Value::String(hex::encode(bytes)),
        _ => Value::Null,
    }
}
