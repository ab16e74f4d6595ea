//! The lines [`LambdaJson`] writes are the bytes `tracing_subscriber`'s JSON format writes for the
//! same spans and events.

use std::io;
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::format::JsonFields;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::Registry;
use tracing_subscriber::Layer;

use super::LambdaJson;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl io::Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The lines `layer` writes while `scenario` runs.
fn lines(layer: impl FnOnce(Buffer) -> Box<dyn Layer<Registry> + Send + Sync>, scenario: impl Fn()) -> String {
    let buffer = Buffer::default();
    let subscriber = tracing_subscriber::registry().with(layer(buffer.clone()));
    tracing::subscriber::with_default(subscriber, scenario);
    let bytes = buffer.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

fn upstream(buffer: Buffer) -> Box<dyn Layer<Registry> + Send + Sync> {
    tracing_subscriber::fmt::layer()
        .with_target(false)
        .without_time()
        .json()
        .with_current_span(false)
        .with_writer(move || buffer.clone())
        .boxed()
}

fn ours(buffer: Buffer) -> Box<dyn Layer<Registry> + Send + Sync> {
    tracing_subscriber::fmt::layer()
        .fmt_fields(JsonFields::new())
        .event_format(LambdaJson)
        .with_writer(move || buffer.clone())
        .boxed()
}

/// Spans and events with every kind of field value the functions log, and the ways spans get them.
fn scenario() {
    let error = io::Error::other("disk \"full\"\nagain");
    tracing::info!("outside any span");
    tracing::warn!(
        text = "quote \" backslash \\ newline \n tab \t bell \u{7} ñ ✓ 😀",
        negative = -42_i64,
        big = u64::MAX,
        half = 1.5_f64,
        whole = 3.0_f64,
        huge = 1e300_f64,
        tiny = 5e-324_f64,
        not_a_number = f64::NAN,
        yes = true,
        list = ?vec!["a", "b"],
        shown = %"display \"value\"",
        error = &error as &dyn std::error::Error,
        "every kind of value"
    );
    let invocation = tracing::info_span!("Lambda runtime invoke", requestId = "req-1", xrayTraceId = "Root=1-abc");
    let _entered = invocation.enter();
    tracing::info!("in one span");
    let turn =
        tracing::info_span!("turn", turnId = tracing::field::Empty, sessionId = "s1", strategy = "auto", depth = 2_u64);
    // Recorded after the span opened: JsonFields merges the stored object with the new fields.
    turn.record("turnId", "t-1");
    let _turn = turn.enter();
    tracing::info!(tokens = 1234_u64, cost = 0.25_f64, "in two spans");
    let chat = tracing::info_span!("chat", model = tracing::field::Empty, calls = tracing::field::Empty);
    chat.record("model", "m\"1");
    chat.record("calls", 2_i64);
    chat.in_scope(|| tracing::error!(reason = "timeout", "in three spans"));
    let bare = tracing::info_span!("bare");
    bare.in_scope(|| tracing::debug!("in a span without fields"));
    let odd = tracing::span!(tracing::Level::INFO, "odd \"name\"", value = 1);
    odd.in_scope(|| tracing::info!("in a span whose name needs escaping"));
    drop(_turn);
    drop(_entered);
    // An explicit parent with no current span: that format writes an empty list.
    tracing::info!(parent: &turn, "explicit parent, no current span");
    tracing::info!(parent: None, "no parent at all");
}

#[test]
fn lines_are_byte_for_byte_those_of_tracing_subscribers_json_format() {
    let expected = lines(upstream, scenario);
    let written = lines(ours, scenario);
    assert_eq!(expected.lines().count(), 9, "{expected}");
    for (expected, written) in expected.lines().zip(written.lines()) {
        assert_eq!(written, expected);
    }
    assert_eq!(written, expected);
    // And they are what Lambda's log filters read: one JSON object per line, with the spans.
    let three: serde_json::Value = serde_json::from_str(written.lines().nth(4).unwrap()).unwrap();
    assert_eq!(three["fields"]["message"], "in three spans");
    let names: Vec<&str> =
        three["spans"].as_array().unwrap().iter().map(|span| span["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Lambda runtime invoke", "turn", "chat"]);
    assert_eq!(three["spans"][1]["turnId"], "t-1");
    assert_eq!(three["spans"][2]["model"], "m\"1");
}

#[test]
fn fields_that_are_not_an_object_are_written_as_that_format_would() {
    let mut line = Vec::new();
    super::reparsed_span_object(&mut line, "[1,2]", "s").unwrap();
    assert_eq!(
        String::from_utf8(line).unwrap(),
        r#"{"field":[1,2],"field_error":"field was no a valid object","name":"s"}"#
    );
    let mut line = Vec::new();
    super::reparsed_span_object(&mut line, "{\"b\": 1, \"a\": 2}", "s").unwrap();
    assert_eq!(String::from_utf8(line).unwrap(), r#"{"a":2,"b":1,"name":"s"}"#);
}
