//! Which spans leave the process (our crates' only) and in what shape: the GenAI conventions'
//! names, kinds and status, integers as integers, and no attribute that carries a conversation's
//! text.

use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::Value;
use opentelemetry_sdk::trace::SpanData;

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

/// Whether a span of `target` (a module path) is one of our crates'.
pub(super) fn is_ours(target: &str) -> bool {
    OUR_CRATES
        .iter()
        .any(|name| target.strip_prefix(name).is_some_and(|rest| rest.is_empty() || rest.starts_with("::")))
}

/// Gives a span the GenAI semantic conventions' name, kind and status (`chat {model}`, a client
/// span; `execute_tool {tool}`; a subagent's `invoke_agent {agent type}`), marks a failure (`error.type`, a turn's `errorCode`) as an error,
/// and drops any attribute that would carry a conversation's text.
pub(super) fn shape(span: &mut SpanData) {
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
        "invoke_agent" => {
            if let Some(agent) = text(span, "gen_ai.agent.name") {
                span.name = format!("invoke_agent {agent}").into();
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
    use opentelemetry::KeyValue;

    use super::*;

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
