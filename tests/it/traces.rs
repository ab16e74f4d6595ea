//! A turn's OpenTelemetry spans through the compiled functions: with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! pointing at the loopback collector stand-in, a turn with a skill load and a tool call exports
//! its tree (turn → session.load, catalog, chat, execute_tool, commit) in the caller's trace
//! (`traceparent`), with the GenAI attributes the scripted model reported and never the user's
//! text, before the response is posted; streamed turns too; a queued turn joins the X-Ray trace its
//! record carries; a subagent's `invoke_agent` span carries its usage and a priced turn its cost;
//! and with traces off nothing is sent.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use local_stack::identity::IdentityProvider;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::otlp::{Collector, ReceivedSpan};
use local_stack::stack::{sqs_record, status_and_body, turn_event, Stack};
use serde_json::{json, Value};

use crate::streaming::{all_events, stream_event};

const USER: &str = "user-traces";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
/// The user's words: no span may carry them.
const SECRET: &str = "Mi número de cuenta es ES7921000813610123456789";
/// The model's reply: no span may carry it either.
const REPLY: &str = "Compraventa preparada con cuidado.";

fn traceparent() -> String {
    format!("00-{TRACE_ID}-{CALLER_SPAN}-01")
}

/// The replies of a turn that loads a skill, reads one of its files and answers.
fn skill_turn_script() -> Vec<Reply> {
    vec![
        Reply::tool("load_skill", json!({"skill_path": "escrituras/compraventa"})),
        Reply::tool("read_file", json!({"file_path": "/skills/compraventa/disclosure_clausulas.md"})),
        Reply::text(REPLY),
    ]
}

/// The span named `name`; panics with every span's name when there is none.
fn span<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    spans.iter().find(|span| span.name == name).unwrap_or_else(|| {
        panic!("no span `{name}` among {:?}", spans.iter().map(|span| &span.name).collect::<Vec<_>>())
    })
}

/// Whether `span` descends from `ancestor` through the spans received.
fn descends_from(spans: &[ReceivedSpan], span: &ReceivedSpan, ancestor: &ReceivedSpan) -> bool {
    let by_id: BTreeMap<&str, &ReceivedSpan> = spans.iter().map(|span| (span.span_id.as_str(), span)).collect();
    let mut parent = span.parent_span_id.as_str();
    for _ in 0..spans.len() {
        if parent == ancestor.span_id {
            return true;
        }
        match by_id.get(parent) {
            Some(next) => parent = next.parent_span_id.as_str(),
            None => return false,
        }
    }
    false
}

/// Checks one skill turn's spans: all in the caller's trace, the turn a child of the caller's span,
/// the steps under the turn, the GenAI attributes as the scripted model reported them, and no text.
fn check_turn_tree(spans: &[ReceivedSpan], service: &str, session: &str) {
    assert!(spans.iter().all(|span| span.trace_id == TRACE_ID), "every span in the caller's trace: {spans:#?}");
    assert!(spans.iter().all(|span| span.service == service), "{spans:#?}");
    let turn = span(spans, "turn");
    assert_eq!(turn.parent_span_id, CALLER_SPAN, "the turn is the caller's span's child");
    assert!(turn.attribute("turnId").and_then(Value::as_str).is_some_and(|id| id.starts_with(&format!("{session}/"))));
    assert_eq!(turn.attribute("sessionId"), Some(&json!(session)));
    assert_eq!(turn.attribute("status"), Some(&json!(200)), "{turn:#?}");
    for name in ["session.load", "catalog", "commit", "execute_tool load_skill", "execute_tool read_file"] {
        assert!(descends_from(spans, span(spans, name), turn), "{name} is under the turn: {spans:#?}");
    }
    let chats: Vec<&ReceivedSpan> = spans.iter().filter(|span| span.name == "chat scripted-model").collect();
    assert_eq!(chats.len(), 3, "one chat span per model call: {spans:#?}");
    for chat in &chats {
        assert!(descends_from(spans, chat, turn));
        assert_eq!(chat.kind, 3, "a model call is a client span");
        assert_eq!(chat.attribute("gen_ai.operation.name"), Some(&json!("chat")));
        assert_eq!(chat.attribute("gen_ai.request.model"), Some(&json!("scripted-model")));
        assert!(chat.attribute("gen_ai.provider.name").and_then(Value::as_str).is_some_and(|p| !p.is_empty()));
        // What the scripted model reports for every call.
        assert_eq!(chat.attribute("gen_ai.usage.input_tokens"), Some(&json!(100)), "{chat:#?}");
        assert_eq!(chat.attribute("gen_ai.usage.output_tokens"), Some(&json!(10)), "{chat:#?}");
        let cached = ["gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_creation.input_tokens"]
            .map(|key| chat.attribute(key).and_then(Value::as_u64).unwrap_or_else(|| panic!("{key}: {chat:#?}")));
        assert!(cached[0] + cached[1] <= 100, "the cached parts are parts of the input: {chat:#?}");
    }
    // The turn's own tokens: every call's, with the same split.
    assert_eq!(turn.attribute("gen_ai.usage.input_tokens"), Some(&json!(300)), "{turn:#?}");
    assert_eq!(turn.attribute("gen_ai.usage.output_tokens"), Some(&json!(30)), "{turn:#?}");
    for key in ["gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_creation.input_tokens"] {
        let of_chats: u64 = chats.iter().filter_map(|chat| chat.attribute(key).and_then(Value::as_u64)).sum();
        assert_eq!(turn.attribute(key).and_then(Value::as_u64), Some(of_chats), "{key}: {turn:#?}");
    }
    assert_eq!(turn.attribute("agent.turn.cost_usd"), None, "the scripted model has no price: {turn:#?}");
    let finish = |chat: &ReceivedSpan| chat.attribute("gen_ai.response.finish_reasons").map(Value::to_string);
    let finishes: Vec<String> = chats.iter().filter_map(|chat| finish(chat)).collect();
    assert_eq!(finishes.iter().filter(|f| f.contains("tool_calls")).count(), 2, "{finishes:?}");
    assert_eq!(finishes.iter().filter(|f| f.contains("stop")).count(), 1, "{finishes:?}");
    for (name, tool) in [("execute_tool load_skill", "load_skill"), ("execute_tool read_file", "read_file")] {
        let call = span(spans, name);
        assert_eq!(call.attribute("gen_ai.operation.name"), Some(&json!("execute_tool")));
        assert_eq!(call.attribute("gen_ai.tool.name"), Some(&json!(tool)));
        assert!(call.attribute("gen_ai.tool.call.id").and_then(Value::as_str).is_some_and(|id| !id.is_empty()));
        assert_eq!(call.attribute("outcome"), Some(&json!("ok")), "{call:#?}");
    }
    for span in spans {
        let attributes = serde_json::to_string(&span.attributes).unwrap();
        for text in [SECRET, "cuenta", REPLY] {
            assert!(!attributes.contains(text) && !span.name.contains(text), "{text:?} leaked into {span:#?}");
        }
    }
    // Only our crates' spans: not the Lambda runtime's invocation span, nor the AWS SDK's.
    assert!(spans.iter().all(|span| !span.name.starts_with("Lambda runtime")), "{spans:#?}");
}

#[tokio::test]
async fn an_http_turns_spans_reach_the_collector_in_the_callers_trace_before_it_answers() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    let collector = Collector::start().await;
    let http = stack.http(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint)]).await;

    stack.model.push(skill_turn_script());
    let mut event = turn_event(Some(USER), "t1", json!({ "message": SECRET }));
    event["headers"]["traceparent"] = json!(traceparent());
    let (status, body) = status_and_body(&http.call(event).await);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], REPLY);

    // Read at once: the spans were exported before the response was posted.
    let spans = collector.spans();
    check_turn_tree(&spans, "http-turn", "t1");
    assert!(collector.content_types().iter().all(|kind| kind == "application/x-protobuf"));
    assert_eq!(collector.requests(), 1, "one export per invocation");

    // A turn without a caller's context starts a trace of its own, with the turn at its root.
    let before = collector.spans().len();
    stack.model.push([Reply::text("Hola.")]);
    let (status, _) = status_and_body(&http.call(turn_event(Some(USER), "t2", json!({"message": "Hola"}))).await);
    assert_eq!(status, 200);
    let spans = collector.spans().split_off(before);
    let turn = span(&spans, "turn");
    assert!(turn.parent_span_id.is_empty(), "a root span: {turn:#?}");
    assert_ne!(turn.trace_id, TRACE_ID);
    assert!(spans.iter().all(|span| span.trace_id == turn.trace_id));
}

#[tokio::test]
async fn a_subagents_span_carries_its_usage_and_a_priced_turn_its_cost() {
    let stack = Stack::new().await;
    let collector = Collector::start().await;
    let prices = json!({"models": {"scripted-model": {"input": 3.0, "output": 15.0}}}).to_string();
    let http = stack.http(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint), ("MODEL_PRICES", &prices)]).await;
    stack
        .model
        .push([Reply::tool("task", json!({"description": "Resume las notas.", "subagent_type": "general-purpose"}))]);
    stack
        .model
        .push_for("Resume las notas", [Reply::tool("ls", json!({"path": "/workspace"})), Reply::text("No hay notas.")]);
    stack.model.push([Reply::text(REPLY)]);
    let (status, body) = status_and_body(&http.call(turn_event(Some(USER), "sa", json!({"message": SECRET}))).await);
    assert_eq!(status, 200, "{body}");
    let spans = collector.spans();
    let turn = span(&spans, "turn");
    let agent = span(&spans, "invoke_agent general-purpose");
    // The reply's task calls run together, so the subagent's span is the turn's, beside its call's.
    assert!(descends_from(&spans, agent, turn), "{spans:#?}");
    assert_eq!(span(&spans, "execute_tool task").attribute("outcome"), Some(&json!("ok")));
    assert_eq!(agent.attribute("gen_ai.operation.name"), Some(&json!("invoke_agent")));
    assert_eq!(agent.attribute("gen_ai.agent.id"), Some(&json!("sa-1")));
    // Its two calls, under it; the turn's four include them.
    let under: Vec<&ReceivedSpan> =
        spans.iter().filter(|chat| chat.name == "chat scripted-model" && descends_from(&spans, chat, agent)).collect();
    assert_eq!(under.len(), 2, "{spans:#?}");
    assert_eq!(agent.attribute("gen_ai.usage.input_tokens"), Some(&json!(200)), "{agent:#?}");
    assert_eq!(agent.attribute("gen_ai.usage.output_tokens"), Some(&json!(20)), "{agent:#?}");
    assert!(agent.attribute("gen_ai.usage.cache_read.input_tokens").is_some(), "{agent:#?}");
    assert_eq!(turn.attribute("gen_ai.usage.input_tokens"), Some(&json!(400)), "{turn:#?}");
    // 400 input tokens at $3 and 40 output at $15 per million: $0.0018.
    let cost = turn.attribute("agent.turn.cost_usd").and_then(Value::as_f64);
    assert!(cost.is_some_and(|usd| (usd - 0.0018).abs() < 1e-9), "{cost:?} {turn:#?}");
    assert_eq!(body["cost"]["usd"].as_f64(), cost, "{body}");
}

#[tokio::test]
async fn a_streamed_turns_spans_arrive_before_its_last_event() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    let collector = Collector::start().await;
    let identity = IdentityProvider::start().await;
    let mut env = identity.env();
    env.push(("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.as_str()));
    let function = Function::start("stream-turn", &stack.env(&env)).await;

    stack.model.push(skill_turn_script());
    let mut event = stream_event(Some(&identity.token(USER)), "st1", json!({ "message": SECRET }), true);
    event["headers"]["traceparent"] = json!(traceparent());
    let mut stream = function.invoke_streaming(event, Duration::from_secs(120)).await;
    let events = all_events(&mut stream).await;
    assert_eq!(events.last().map(|event| event.name.as_str()), Some("turn.completed"), "{events:?}");
    check_turn_tree(&collector.spans(), "stream-turn", "st1");
}

#[tokio::test]
async fn a_queued_turn_joins_the_trace_its_record_carries() {
    let stack = Stack::new().await;
    let collector = Collector::start().await;
    let queue = stack.queue(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint)]).await;
    let mut record =
        sqs_record("m1", "q1", &json!({"user_id": USER, "session_id": "q1", "message": SECRET}).to_string());
    // What SQS sets when the sender was traced: the X-Ray form of the caller's trace and span.
    let header = format!("Root=1-{}-{};Parent={CALLER_SPAN};Sampled=1", &TRACE_ID[..8], &TRACE_ID[8..]);
    record["attributes"]["AWSTraceHeader"] = json!(header);
    stack.model.push([Reply::text(REPLY)]);
    let response = queue.call(json!({ "Records": [record] })).await;
    assert_eq!(response["batchItemFailures"].as_array().map(Vec::len), Some(0), "{response}");

    let spans = collector.spans();
    let turn = span(&spans, "turn");
    assert_eq!((turn.trace_id.as_str(), turn.parent_span_id.as_str()), (TRACE_ID, CALLER_SPAN));
    assert!(spans.iter().all(|span| span.trace_id == TRACE_ID && span.service == "queue-turn"), "{spans:#?}");
    assert_eq!(spans.iter().filter(|span| span.name == "chat scripted-model").count(), 1, "{spans:#?}");
    let attributes = serde_json::to_string(&spans.iter().map(|span| &span.attributes).collect::<Vec<_>>()).unwrap();
    assert!(!attributes.contains(SECRET) && !attributes.contains(REPLY));
}

#[tokio::test]
async fn with_traces_off_nothing_is_sent() {
    let stack = Stack::new().await;
    let collector = Collector::start().await;
    for off in [("OTEL_SDK_DISABLED", "true"), ("OTEL_TRACES_EXPORTER", "none")] {
        let http = stack.http(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint), off]).await;
        stack.model.push([Reply::text("Hola.")]);
        let mut event = turn_event(Some(USER), "off", json!({"message": "Hola"}));
        event["headers"]["traceparent"] = json!(traceparent());
        let (status, body) = status_and_body(&http.call(event).await);
        assert_eq!(status, 200, "{off:?}: {body}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(collector.requests(), 0, "{off:?} sends nothing");
    }
}

/// What exporting costs a warm turn: the same turn through two functions, traces off and on
/// (the collector on loopback), called alternately so that the machine's load falls on both alike,
/// and the export's own time as the function logs it. Run on demand:
/// `cargo test -p tests --test it traces::export_cost -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "a measurement, not a check"]
async fn export_cost() {
    const TURNS: usize = 50;
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    let collector = Collector::start().await;
    let off = stack.http(&[]).await;
    let on = stack
        .http(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint), ("RUST_LOG", "info,agent_app::traces=debug")])
        .await;
    for (label, function) in [("off", &off), ("on", &on)] {
        stack.model.push([Reply::text("Calentando.")]);
        function.call(turn_event(Some(USER), &format!("warm-{label}"), json!({"message": "Hola"}))).await;
    }
    let mark = on.log_mark();
    let cpu_before = [cpu_ticks(&off), cpu_ticks(&on)];
    let (mut off_times, mut on_times) = (Vec::new(), Vec::new());
    for turn in 0..TURNS {
        for (label, function, times) in [("off", &off, &mut off_times), ("on", &on, &mut on_times)] {
            stack.model.push(skill_turn_script());
            let event = turn_event(Some(USER), &format!("c-{label}-{turn}"), json!({"message": "Hola"}));
            let started = Instant::now();
            let (status, _) = status_and_body(&function.call(event).await);
            times.push(started.elapsed());
            assert_eq!(status, 200);
        }
    }
    // CPU time holds still under the machine's other load, where wall time does not.
    let cpu_ms = |function: &Function, before: u64| (cpu_ticks(function) - before) * 10 / TURNS as u64;
    let cpu = format!("CPU per turn: off {} ms, on {} ms", cpu_ms(&off, cpu_before[0]), cpu_ms(&on, cpu_before[1]));
    let summary = |times: &mut Vec<Duration>| {
        times.sort();
        let mean = times.iter().sum::<Duration>() / times.len() as u32;
        format!("mean {mean:?}, p50 {:?}, p90 {:?}", times[times.len() / 2], times[times.len() * 9 / 10])
    };
    let mut exports: Vec<(u64, u64)> = on
        .logs_since(mark)
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["fields"]["message"] == "spans exported")
        .filter_map(|line| Some((line["fields"]["elapsed_us"].as_u64()?, line["fields"]["spans"].as_u64()?)))
        .collect();
    exports.sort();
    let export_us: Vec<u64> = exports.iter().map(|(us, _)| *us).collect();
    eprintln!(
        "{cpu}\ntraces off: {}\ntraces on: {}\nexports: {} of {:?} spans each, p50 {} µs, p90 {} µs, max {} µs",
        summary(&mut off_times),
        summary(&mut on_times),
        exports.len(),
        exports.iter().map(|(_, spans)| *spans).collect::<std::collections::BTreeSet<_>>(),
        export_us.get(export_us.len() / 2).copied().unwrap_or(0),
        export_us.get(export_us.len() * 9 / 10).copied().unwrap_or(0),
        export_us.last().copied().unwrap_or(0),
    );
}

/// The user and system CPU time the function's process has used, in clock ticks (10 ms).
fn cpu_ticks(function: &Function) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", function.pid().expect("running"))).unwrap();
    // The fields after the command name (which is in parentheses): utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}
