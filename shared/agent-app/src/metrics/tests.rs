//! The layer and its lines against spans recorded as a turn records them.

use std::sync::Mutex;

use serde_json::{json, Value};
use tracing_subscriber::layer::SubscriberExt;

use super::*;

/// A turn span with the fields `agent_app::turn_span` declares, for turn `s/1` of session `s`.
fn turn_span() -> Span {
    tracing::info_span!(
        "turn",
        turnId = "s/1",
        sessionId = "s",
        strategy = "skills",
        tenant = "abc",
        status = tracing::field::Empty,
        errorCode = tracing::field::Empty,
        ending = tracing::field::Empty,
        steps = tracing::field::Empty,
        replayed = tracing::field::Empty,
    )
}

/// Runs `turn` under a subscriber with only the metrics layer; returns the lines it wrote.
fn lines_of(turn: impl FnOnce()) -> Vec<Value> {
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let written = lines.clone();
    let sink: Sink = Arc::new(move |line: &str| written.lock().unwrap().push(line.to_owned()));
    let subscriber = tracing_subscriber::registry().with(MetricsLayer::new("fn", sink));
    tracing::subscriber::with_default(subscriber, turn);
    let lines = lines.lock().unwrap();
    lines.iter().map(|line| serde_json::from_str(line).unwrap()).collect()
}

fn chat(model: &str, input: u64, output: u64) {
    let span = tracing::info_span!(
        "chat",
        gen_ai.request.model = model,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        time_to_first_token_ms = tracing::field::Empty,
    );
    span.record(field::INPUT_TOKENS, input);
    span.record(field::OUTPUT_TOKENS, output);
    span.record(field::TIME_TO_FIRST_TOKEN_MS, 5.0);
}

fn tool(name: &str, result: &str) {
    let span = telemetry::tool_span(name, "call-1");
    span.record(field::OUTCOME, result);
}

#[test]
fn a_turn_writes_its_summary_and_emf_lines() {
    let lines = lines_of(|| {
        let invocation = tracing::info_span!("Lambda runtime invoke", requestId = "req-9");
        let _entered = invocation.enter();
        let span = turn_span();
        span.in_scope(|| {
            chat("m1", 100, 10);
            tool("read_file", outcome::OK);
            tool("read_file", outcome::OK);
            tool("made_up", outcome::REFUSED);
            chat("m1", 120, 20);
            chat("m2", 7, 3);
            telemetry::summarize_span().record(field::OUTCOME, outcome::OK);
        });
        span.record("status", 200);
        span.record("ending", "answered");
        span.record("steps", 2u64);
    });
    let summary = &lines[0]["fields"];
    assert_eq!(summary["message"], "turn summary");
    assert_eq!(summary["requestId"], "req-9");
    assert_eq!((summary["model_calls"].as_u64(), summary["input_tokens"].as_u64()), (Some(3), Some(227)));
    assert_eq!((summary["tool_calls"].as_u64(), summary["refused_tool_calls"].as_u64()), (Some(3), Some(1)));
    assert_eq!(summary["tools"]["read_file"]["ok"], 2);
    assert_eq!(summary["tools"]["other"]["refused"], 1, "a made-up name is not a dimension");
    assert_eq!((summary["status"].as_str(), summary["ending"].as_str()), (Some("200"), Some("answered")));
    assert!(summary["time_to_first_token_ms"].as_f64().is_some());

    let turn = &lines[1];
    assert_eq!((turn["Turns"].as_u64(), turn["Status"].as_str()), (Some(1), Some("200")));
    assert_eq!((turn["Model"].as_str(), turn["ModelCalls"].as_u64()), (Some("m1"), Some(2)));
    assert_eq!(turn["InputTokens"], 220);
    assert_eq!(turn["ModelLatency"].as_array().map(Vec::len), Some(2), "one sample per call");
    assert_eq!(turn["Summaries"], 1);
    assert!(turn.get("tenant").is_none() && turn.get("sessionId").is_none());
    let names: Vec<&str> = turn["_aws"]["CloudWatchMetrics"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["Metrics"].as_array().unwrap().iter().map(|m| m["Name"].as_str().unwrap()))
        .collect();
    assert!(names.contains(&"Turns") && names.contains(&"TimeToFirstToken"), "{names:?}");
    assert_eq!((lines[2]["Model"].as_str(), lines[2]["InputTokens"].as_u64()), (Some("m2"), Some(7)));
    let tools: Vec<(&str, &str, u64)> = lines[3..]
        .iter()
        .map(|l| (l["Tool"].as_str().unwrap(), l["Outcome"].as_str().unwrap(), l["ToolCalls"].as_u64().unwrap()))
        .collect();
    assert_eq!(tools, [("other", "refused", 1), ("read_file", "ok", 2)]);
}

#[test]
fn images_and_documents_sent_are_counted_per_request_that_carried_them() {
    let sending = |images: u64, documents: u64| {
        let span = tracing::info_span!(
            "chat",
            gen_ai.request.model = "m",
            request.images = tracing::field::Empty,
            request.documents = tracing::field::Empty,
        );
        span.record(field::REQUEST_IMAGES, images);
        span.record(field::REQUEST_DOCUMENTS, documents);
    };
    let lines = lines_of(|| {
        let span = turn_span();
        span.in_scope(|| {
            sending(2, 1);
            sending(3, 0);
        });
        span.record("status", 200);
    });
    assert_eq!(
        (lines[0]["fields"]["images_sent"].as_u64(), lines[0]["fields"]["documents_sent"].as_u64()),
        (Some(5), Some(1))
    );
    assert_eq!((lines[1]["ImagesSent"].as_u64(), lines[1]["DocumentsSent"].as_u64()), (Some(5), Some(1)));
    // A turn that sent none writes neither metric.
    let plain = lines_of(|| turn_span().in_scope(|| chat("m", 1, 1)));
    assert!(plain[1].get("ImagesSent").is_none());
}

#[test]
fn steps_outside_a_turn_are_not_counted() {
    let lines = lines_of(|| chat("m", 1, 1));
    assert!(lines.is_empty());
}

/// The spans and events of a warm turn like the benchmark's: the storage steps, 3 model calls,
/// 2 tool calls and the loop's lines.
fn synthetic_turn() {
    let span = turn_span();
    span.in_scope(|| {
        drop(telemetry::storage_span(telemetry::SESSION_LOAD));
        drop(telemetry::storage_span(telemetry::CATALOG));
        for step in 0..3 {
            chat("m1", 100, 10);
            if step < 2 {
                tracing::info!(tool = "read_file", step, "tool call");
                tool("read_file", outcome::OK);
            }
        }
        drop(telemetry::storage_span(telemetry::COMMIT));
        tracing::info!(steps = 3, "turn committed");
    });
    span.record("status", 200);
    span.record("ending", "answered");
}

/// CPU per turn of the JSON logs alone and with this layer, over synthetic turns in this process
/// (`cargo test -p agent-app --release metrics::tests::cost -- --ignored --nocapture`).
#[test]
#[ignore]
fn cost() {
    const TURNS: u32 = 20_000;
    let json =
        || tracing_subscriber::fmt::layer().json().with_current_span(false).without_time().with_writer(std::io::sink);
    let run = |name: &str, dispatch: tracing::Dispatch| {
        tracing::dispatcher::with_default(&dispatch, || {
            let started = std::time::Instant::now();
            for _ in 0..TURNS {
                synthetic_turn();
            }
            println!("{name}: {:.1} µs per turn", started.elapsed().as_secs_f64() * 1e6 / f64::from(TURNS));
        });
    };
    let drop_lines: Sink = Arc::new(|line: &str| {
        std::hint::black_box(line);
    });
    let lines = lines_of(synthetic_turn);
    let bytes: usize = lines.iter().map(|line| line.to_string().len()).sum();
    // (Re-serialised, so about the size written.)
    println!("{} lines, {bytes} bytes per turn", lines.len());
    let mut turn = Turn { started: Some(Instant::now()), ..Turn::default() };
    turn.models.insert("m1".into(), ModelStats { calls: 3, latency_ms: vec![1.0, 2.0, 3.0], ..Default::default() });
    turn.tools.insert(("read_file".into(), "ok".into()), ToolStats { calls: 2, duration_ms: vec![1.0, 2.0] });
    let started = std::time::Instant::now();
    for _ in 0..TURNS {
        std::hint::black_box(summary_line(&turn, 1.0, None));
        std::hint::black_box(emf_lines("fn", &turn, 1.0));
    }
    println!("the lines alone: {:.1} µs per turn", started.elapsed().as_secs_f64() * 1e6 / f64::from(TURNS));
    for _ in 0..2 {
        run("no subscriber", tracing::Dispatch::none());
        run("JSON logs", tracing::Dispatch::new(tracing_subscriber::registry().with(json())));
        let both = tracing_subscriber::registry().with(json()).with(MetricsLayer::new("fn", drop_lines.clone()));
        run("JSON logs and metrics", tracing::Dispatch::new(both));
    }
}

#[test]
fn a_count_is_one_emf_document() {
    let document: Value = serde_json::from_str(&count_document("skills-index", "CatalogIndexRebuilds", 2)).unwrap();
    assert_eq!(document["CatalogIndexRebuilds"], 2);
    assert_eq!(document["_aws"]["CloudWatchMetrics"][0]["Namespace"], NAMESPACE);
    assert_eq!(document["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Function"]]));
}

#[test]
fn a_turn_counts_its_cached_input_and_its_cost_when_priced() {
    let cached = |model: &str, read: u64, write: u64| {
        let span = tracing::info_span!(
            "chat",
            gen_ai.request.model = model,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.cache_read.input_tokens = tracing::field::Empty,
            gen_ai.usage.cache_creation.input_tokens = tracing::field::Empty,
        );
        span.record(field::INPUT_TOKENS, 100u64);
        span.record(field::CACHE_READ_TOKENS, read);
        span.record(field::CACHE_WRITE_TOKENS, write);
    };
    let reply = |cost: Value| -> TurnReply {
        serde_json::from_value(json!({
            "session_id": "s", "reply": "hola", "current_skill": null, "forced_skill": null,
            "refused_tool_calls": 0, "steps": 2, "ending": "answered", "version": 1,
            "usage": {"input_tokens": 200, "output_tokens": 0, "cache_read_tokens": 80, "cache_write_tokens": 20},
            "cost": cost,
        }))
        .unwrap()
    };
    let priced = reply(json!({"usd": 0.0125}));
    let lines = lines_of(|| {
        let span = turn_span();
        span.in_scope(|| {
            cached("m1", 0, 20);
            cached("m1", 80, 0);
        });
        record_turn(&span, 200, None, Some(&priced));
    });
    let summary = &lines[0]["fields"];
    assert_eq!((summary["cache_read_tokens"].as_u64(), summary["cache_write_tokens"].as_u64()), (Some(80), Some(20)));
    assert_eq!(summary["models"]["m1"]["cache_read_tokens"], 80);
    assert_eq!(summary["cost_usd"], 0.0125);
    let turn = &lines[1];
    assert_eq!((turn["CacheReadInputTokens"].as_u64(), turn["CacheWriteInputTokens"].as_u64()), (Some(80), Some(20)));
    assert_eq!(turn["TurnCostUSD"], 0.0125);
    let units: Vec<(&str, &str)> = turn["_aws"]["CloudWatchMetrics"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["Metrics"].as_array().unwrap().iter())
        .map(|m| (m["Name"].as_str().unwrap(), m["Unit"].as_str().unwrap()))
        .collect();
    assert!(units.contains(&("TurnCostUSD", "None")) && units.contains(&("CacheReadInputTokens", "Count")));
    // A turn of unpriced models writes no cost: its tokens are counted, its cost is not known.
    let unpriced = reply(json!({"usd": null, "unpriced_models": ["m1"]}));
    let lines = lines_of(|| {
        let span = turn_span();
        span.in_scope(|| cached("m1", 0, 0));
        record_turn(&span, 200, None, Some(&unpriced));
    });
    assert!(lines[0]["fields"]["cost_usd"].is_null() && lines[1].get("TurnCostUSD").is_none());
}
