//! A turn's metrics and summary line as the compiled functions print them: the CloudWatch Embedded
//! Metric Format (EMF) lines and the `turn summary` line on stdout, parsed and checked against what
//! the turn did (the scripted model reports 100 input and 10 output tokens per call), for
//! `http-turn` (tools, a replay, a failure), `stream-turn` (time to first token), `queue-turn` and
//! background turns, and `skills-index` (an index rebuild).

use std::collections::BTreeMap;
use std::time::Duration;

use local_stack::identity::IdentityProvider;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{sqs_record, status_and_body, turn_event, Stack};
use serde_json::{json, Value};
use sha2::Digest;

use crate::streaming::{all_events, stream_event};

const USER: &str = "user-metrics";
const SALT: &str = "test-salt";
const MODEL: &str = "scripted-model";

/// Every metric the functions write (namespace `AgentRuntime`) and its unit: docs/operating.md's
/// table (`cargo xtask tidy` checks that it names every one), and what the template's alarms and
/// dashboard may name (checked in `template`).
pub(crate) const METRICS: &[(&str, &str)] = &[
    ("Turns", "Count"),
    ("TurnDuration", "Milliseconds"),
    ("ModelCalls", "Count"),
    ("ModelErrors", "Count"),
    ("ModelLatency", "Milliseconds"),
    ("TimeToFirstToken", "Milliseconds"),
    ("InputTokens", "Count"),
    ("OutputTokens", "Count"),
    ("CacheReadInputTokens", "Count"),
    ("CacheWriteInputTokens", "Count"),
    ("TurnCostUSD", "None"),
    ("ToolCalls", "Count"),
    ("ToolDuration", "Milliseconds"),
    ("RefusedToolCalls", "Count"),
    ("Summaries", "Count"),
    ("IdempotentReplays", "Count"),
    ("BackgroundTurnsQueued", "Count"),
    ("BackgroundTurnsCompleted", "Count"),
    ("BackgroundTurnsFailed", "Count"),
    ("BackgroundTurnsRetried", "Count"),
    ("SandboxExecutions", "Count"),
    ("SandboxDuration", "Milliseconds"),
    ("CatalogIndexRebuilds", "Count"),
    ("BudgetConfigErrors", "Count"),
];

/// One metric value as CloudWatch would file it: a metric of a directive under one dimension set.
#[derive(Debug, Clone)]
pub(crate) struct Datum {
    name: String,
    unit: String,
    dimensions: BTreeMap<String, String>,
    /// Every value (an EMF member may be an array of samples).
    values: Vec<f64>,
}

/// Every datum of the EMF lines among `lines`, checked for the EMF shape on the way.
pub(crate) fn emf_data(lines: &[Value]) -> Vec<Datum> {
    let mut data = Vec::new();
    for line in lines.iter().filter(|line| line.get("_aws").is_some()) {
        let aws = &line["_aws"];
        assert!(aws["Timestamp"].as_u64().is_some_and(|at| at > 1_600_000_000_000), "{line}");
        for directive in aws["CloudWatchMetrics"].as_array().expect("CloudWatchMetrics") {
            assert_eq!(directive["Namespace"], "AgentRuntime");
            for metric in directive["Metrics"].as_array().expect("Metrics") {
                let name = metric["Name"].as_str().expect("Name").to_owned();
                let values = match &line[&name] {
                    Value::Array(values) => values.iter().map(|v| v.as_f64().expect("a number")).collect(),
                    value => vec![value.as_f64().unwrap_or_else(|| panic!("{name} has no value in {line}"))],
                };
                for set in directive["Dimensions"].as_array().expect("Dimensions") {
                    let dimensions: BTreeMap<String, String> = set
                        .as_array()
                        .expect("a dimension set")
                        .iter()
                        .map(|key| {
                            let key = key.as_str().expect("a dimension name");
                            let value = line[key].as_str().unwrap_or_else(|| panic!("{key} is not a string: {line}"));
                            for forbidden in ["tenant", "sessionId", "Session", "Tenant", "User"] {
                                assert_ne!(key, forbidden, "a tenant or session is never a dimension");
                            }
                            (key.to_owned(), value.to_owned())
                        })
                        .collect();
                    let unit = metric["Unit"].as_str().expect("Unit");
                    assert!(METRICS.contains(&(name.as_str(), unit)), "{name} ({unit}) is in the documented list");
                    data.push(Datum {
                        name: name.clone(),
                        unit: metric["Unit"].as_str().expect("Unit").to_owned(),
                        dimensions,
                        values: values.clone(),
                    });
                }
            }
        }
    }
    data
}

/// The data of `name` whose dimensions are exactly `dimensions`.
pub(crate) fn find<'a>(data: &'a [Datum], name: &str, dimensions: &[(&str, &str)]) -> Vec<&'a Datum> {
    let wanted: BTreeMap<String, String> = dimensions.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    data.iter().filter(|datum| datum.name == name && datum.dimensions == wanted).collect()
}

/// The sum of `name`'s values under exactly `dimensions`, checking its unit.
pub(crate) fn total(data: &[Datum], name: &str, unit: &str, dimensions: &[(&str, &str)]) -> f64 {
    let found = find(data, name, dimensions);
    for datum in &found {
        assert_eq!(datum.unit, unit, "{name}'s unit");
    }
    found.iter().flat_map(|datum| datum.values.iter()).sum()
}

/// The JSON lines after `mark`, once `summaries` `turn summary` lines (and the EMF lines written
/// with them) are in, or after 5 s.
pub(crate) async fn lines_after(function: &Function, mark: usize, summaries: usize) -> Vec<Value> {
    let waited = std::time::Instant::now();
    loop {
        let lines: Vec<Value> =
            function.logs_since(mark).iter().filter_map(|line| serde_json::from_str(line).ok()).collect();
        if summaries_of(&lines).len() >= summaries || waited.elapsed() > Duration::from_secs(5) {
            // The EMF lines follow their summary line at once; give the pipe a moment for them.
            tokio::time::sleep(Duration::from_millis(100)).await;
            return function.logs_since(mark).iter().filter_map(|line| serde_json::from_str(line).ok()).collect();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn summaries_of(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|line| line["fields"]["message"] == "turn summary").map(|line| &line["fields"]).collect()
}

fn tenant_of(user: &str) -> String {
    hex::encode(&sha2::Sha256::digest(format!("{SALT}{user}").as_bytes())[..8])
}

#[tokio::test]
async fn an_http_turn_reports_what_it_did() {
    let stack = Stack::new().await;
    let http = stack.http(&[("LOG_TENANT_SALT", SALT)]).await;
    stack.model.push([Reply::text("Calentando.")]);
    http.call(turn_event(Some(USER), "warm", json!({"message": "Hola"}))).await;

    let mark = http.log_mark();
    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/nota.md", "content": "hola"})),
        Reply::Tools(vec![
            ("read_file".into(), json!({"file_path": "/workspace/falta.md"})),
            ("made_up_tool".into(), json!({})),
        ]),
        Reply::text("Listo."),
    ]);
    let mut event = turn_event(Some(USER), "m1", json!({"message": "Escribe una nota"}));
    event["headers"]["idempotency-key"] = json!("key-m1");
    let (status, reply) = status_and_body(&http.call(event.clone()).await);
    assert_eq!(status, 200, "{reply}");
    let lines = lines_after(&http, mark, 1).await;
    let summary = summaries_of(&lines);
    assert_eq!(summary.len(), 1, "one summary line per turn");
    let summary = summary[0];
    assert_eq!(summary["status"], "200");
    assert_eq!(summary["ending"], "answered");
    assert_eq!(summary["steps"], 3);
    assert_eq!(summary["sessionId"], "m1");
    assert_eq!(summary["strategy"], "skills");
    assert_eq!(summary["tenant"], tenant_of(USER), "the keyed hash of the user id");
    let ours = lines.iter().filter(|line| line.get("_aws").is_some() || line["fields"]["message"] == "turn summary");
    assert!(!ours.clone().any(|line| line.to_string().contains(USER)), "the summary and metrics never name the user");
    assert!(ours.count() > 1);
    assert_eq!(summary["requestId"], "req-2");
    assert!(summary["turnId"].as_str().is_some_and(|turn| turn.starts_with("m1/")), "{summary}");
    assert_eq!((summary["model_calls"].as_u64(), summary["input_tokens"].as_u64()), (Some(3), Some(300)));
    assert_eq!(summary["output_tokens"], 30);
    assert_eq!((summary["tool_calls"].as_u64(), summary["refused_tool_calls"].as_u64()), (Some(3), Some(1)));
    assert_eq!(summary["tools"], json!({"write_file": {"ok": 1}, "read_file": {"error": 1}, "other": {"refused": 1}}));
    assert_eq!(summary["replayed"], false);
    let storage = http.storage_requests_since(mark).await;
    assert_eq!(
        summary["storage_requests"].as_u64(),
        Some(storage.values().sum::<u64>()),
        "the turn's storage requests are the invocation's: {summary}"
    );
    assert!(summary["duration_ms"].as_f64().is_some_and(|ms| ms > 0.0));
    for step in ["session_load_ms", "catalog_ms", "commit_ms"] {
        assert!(summary[step].as_f64().is_some(), "{step}: {summary}");
    }

    let data = emf_data(&lines);
    let function = ("Function", "http-turn");
    assert_eq!(total(&data, "Turns", "Count", &[function]), 1.0);
    assert_eq!(total(&data, "Turns", "Count", &[function, ("Status", "200")]), 1.0);
    assert_eq!(total(&data, "Turns", "Count", &[function, ("Ending", "answered")]), 1.0);
    assert_eq!(total(&data, "Turns", "Count", &[function, ("ErrorCode", "none")]), 1.0);
    assert_eq!(total(&data, "Turns", "Count", &[function, ("Strategy", "skills")]), 1.0);
    assert_eq!(find(&data, "TurnDuration", &[function])[0].unit, "Milliseconds");
    let model = [function, ("Model", MODEL)];
    assert_eq!(total(&data, "ModelCalls", "Count", &model), 3.0);
    assert_eq!(total(&data, "InputTokens", "Count", &model), 300.0);
    assert_eq!(total(&data, "OutputTokens", "Count", &model), 30.0);
    assert_eq!(find(&data, "ModelLatency", &model)[0].values.len(), 3, "one latency sample per call");
    assert!(find(&data, "TimeToFirstToken", &model).is_empty(), "buffered calls have no first token");
    let tool = |name: &str, outcome: &str| {
        total(&data, "ToolCalls", "Count", &[function, ("Tool", name), ("Outcome", outcome)])
    };
    assert_eq!((tool("write_file", "ok"), tool("read_file", "error"), tool("other", "refused")), (1.0, 1.0, 1.0));
    assert_eq!(total(&data, "ToolCalls", "Count", &[function, ("Tool", "read_file")]), 1.0);
    assert_eq!(total(&data, "RefusedToolCalls", "Count", &[function]), 1.0);
    assert_eq!(total(&data, "IdempotentReplays", "Count", &[function]), 0.0);

    // The same key again: a replay, counted as one, with no model call.
    let mark = http.log_mark();
    let (status, _) = status_and_body(&http.call(event).await);
    assert_eq!(status, 200);
    let lines = lines_after(&http, mark, 1).await;
    let summary = summaries_of(&lines)[0];
    assert_eq!((summary["replayed"].as_bool(), summary["model_calls"].as_u64()), (Some(true), Some(0)));
    let data = emf_data(&lines);
    assert_eq!(total(&data, "IdempotentReplays", "Count", &[function]), 1.0);
    assert!(find(&data, "ModelCalls", &model).is_empty());

    // A model that refuses the request: a 502 with its code, the failed call counted.
    let mark = http.log_mark();
    stack.model.push([Reply::Status(400)]);
    let (status, body) = status_and_body(&http.call(turn_event(Some(USER), "m2", json!({"message": "Hola"}))).await);
    assert_eq!(status, 502, "{body}");
    let lines = lines_after(&http, mark, 1).await;
    let summary = summaries_of(&lines)[0];
    assert_eq!(
        (summary["status"].as_str(), summary["errorCode"].as_str()),
        (Some("502"), Some("model_provider_failed"))
    );
    assert_eq!((summary["ending"].as_str(), summary["model_errors"].as_u64()), (Some("error"), Some(1)));
    let data = emf_data(&lines);
    assert_eq!(total(&data, "Turns", "Count", &[function, ("Status", "502")]), 1.0);
    assert_eq!(total(&data, "Turns", "Count", &[function, ("ErrorCode", "model_provider_failed")]), 1.0);
    assert_eq!(total(&data, "Turns", "Count", &[function, ("Ending", "error")]), 1.0);
    assert_eq!(total(&data, "ModelErrors", "Count", &model), 1.0);
    assert_eq!(total(&data, "InputTokens", "Count", &model), 0.0);
}

#[tokio::test]
async fn a_streamed_turn_reports_its_time_to_first_token() {
    let stack = Stack::new().await;
    let identity = IdentityProvider::start().await;
    let function = Function::start("stream-turn", &stack.env(&identity.env())).await;
    let mark = function.log_mark();
    stack.model.push([Reply::Chunks(["Hola ", "de ", "nuevo."].map(String::from).to_vec())]);
    let event = stream_event(Some(&identity.token(USER)), "st1", json!({"message": "Hola"}), true);
    let events = all_events(&mut function.invoke_streaming(event, Duration::from_secs(60)).await).await;
    assert_eq!(events.last().unwrap().name, "turn.completed");
    let lines = lines_after(&function, mark, 1).await;
    let summary = summaries_of(&lines)[0];
    assert_eq!(summary["requestId"], "req-1", "a streamed turn's summary names its invocation");
    assert_eq!((summary["status"].as_str(), summary["model_calls"].as_u64()), (Some("200"), Some(1)));
    let first = summary["time_to_first_token_ms"].as_f64().expect("time to first token");
    assert!(first > 0.0 && first <= summary["duration_ms"].as_f64().unwrap(), "{summary}");
    let data = emf_data(&lines);
    let model = [("Function", "stream-turn"), ("Model", MODEL)];
    let samples = find(&data, "TimeToFirstToken", &model);
    assert_eq!((samples.len(), samples[0].unit.as_str(), samples[0].values.len()), (1, "Milliseconds", 1));
    assert!(samples[0].values[0] <= find(&data, "ModelLatency", &model)[0].values[0]);
    assert_eq!(total(&data, "Turns", "Count", &[("Function", "stream-turn"), ("Status", "200")]), 1.0);
}

#[tokio::test]
async fn queued_turns_count_as_completed_or_retried() {
    let stack = Stack::new().await;
    let queue = stack.queue(&[]).await;
    let record = |id: &str, session: &str| {
        sqs_record(id, session, &json!({"user_id": USER, "session_id": session, "message": "Hola"}).to_string())
    };
    let mark = queue.log_mark();
    stack.model.push([Reply::text("Uno."), Reply::Status(400)]);
    let response = queue.call(json!({"Records": [record("q-1", "q1"), record("q-2", "q2")]})).await;
    assert_eq!(response["batchItemFailures"].as_array().map(Vec::len), Some(1), "{response}");
    let lines = lines_after(&queue, mark, 2).await;
    let summaries = summaries_of(&lines);
    let statuses: Vec<(&str, Option<&str>)> =
        summaries.iter().map(|s| (s["status"].as_str().unwrap(), s["errorCode"].as_str())).collect();
    assert_eq!(statuses, [("completed", None), ("retried", Some("model_provider_failed"))]);
    let data = emf_data(&lines);
    let function = ("Function", "queue-turn");
    assert_eq!(total(&data, "Turns", "Count", &[function]), 2.0);
    assert_eq!(total(&data, "BackgroundTurnsCompleted", "Count", &[function]), 1.0);
    assert_eq!(total(&data, "BackgroundTurnsRetried", "Count", &[function]), 1.0);
    assert_eq!(total(&data, "Turns", "Count", &[function, ("Status", "retried")]), 1.0);
    assert_eq!(total(&data, "ModelCalls", "Count", &[function, ("Model", MODEL)]), 2.0);
}

#[tokio::test]
async fn a_background_turn_is_counted_when_queued() {
    let stack = Stack::new().await;
    let sqs = aws_sdk_sqs::Client::new(&local_stack::moto::sdk_config(&stack.endpoint).await);
    let queue_url = local_stack::moto::create_fifo_queue(&sqs).await;
    let http = stack.http(&[("TURN_QUEUE_URL", &queue_url)]).await;
    let mark = http.log_mark();
    let mut event = turn_event(Some(USER), "b1", json!({"message": "Más tarde"}));
    event["headers"]["prefer"] = json!("respond-async");
    let (status, body) = status_and_body(&http.call(event).await);
    assert_eq!(status, 202, "{body}");
    let waited = std::time::Instant::now();
    let data = loop {
        let lines: Vec<Value> = http.logs_since(mark).iter().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let data = emf_data(&lines);
        if !data.is_empty() || waited.elapsed() > Duration::from_secs(5) {
            break data;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(total(&data, "BackgroundTurnsQueued", "Count", &[("Function", "http-turn")]), 1.0);
    assert!(find(&data, "Turns", &[("Function", "http-turn")]).is_empty(), "no turn ran in http-turn");
}

#[tokio::test]
async fn an_index_rebuild_is_counted() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    let indexer = stack.skills_index(&[]).await;
    let mark = indexer.log_mark();
    let answer = indexer.call(json!({"rebuild": {"user_id": USER}})).await;
    assert_eq!(answer["rebuilt"], 1, "{answer}");
    let waited = std::time::Instant::now();
    let data = loop {
        let lines: Vec<Value> = indexer.logs_since(mark).iter().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let data = emf_data(&lines);
        if !data.is_empty() || waited.elapsed() > Duration::from_secs(5) {
            break data;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(total(&data, "CatalogIndexRebuilds", "Count", &[("Function", "skills-index")]), 1.0);
}

/// User and system CPU time `pid` has used (Linux `/proc`, in clock ticks of 10 ms).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/pid/stat");
    // Fields after the command name (which may hold spaces) start at its closing parenthesis.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("a command") + 2..].split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// One warm turn of the cost measurement: a file written, then the answer; its wall time.
async fn cost_turn(stack: &Stack, function: &Function, session: String) -> Duration {
    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/nota.md", "content": "hola"})),
        Reply::text("Listo."),
    ]);
    let event = turn_event(Some(USER), &session, json!({"message": "Escribe"}));
    let started = std::time::Instant::now();
    let (status, body) = status_and_body(&function.call(event).await);
    assert_eq!(status, 200, "{body}");
    started.elapsed()
}

/// What logs and metrics add to a warm turn: three `http-turn` processes, one with no logs (and so
/// no spans and no metrics: `RUST_LOG=off`), one with the JSON logs only (`AGENT_METRICS=off`), one
/// with both (the default), called in turn for `TURNS` warm turns each (a file written, then the
/// answer: 2 model calls and a tool call); CPU from `/proc`, wall time at the caller.
/// `cargo test -p tests --test it metrics::cost -- --ignored --nocapture`
#[tokio::test]
#[ignore]
async fn cost_of_logs_and_metrics() {
    const TURNS: usize = 300;
    let stack = Stack::new().await;
    let variants = [
        ("no logs, no metrics", vec![("RUST_LOG", "off")]),
        ("logs only", vec![("AGENT_METRICS", "off")]),
        ("logs and metrics", vec![]),
    ];
    let mut functions = Vec::new();
    for (_, env) in &variants {
        functions.push(stack.http(env).await);
    }
    // Warm: the cold start and the caches' first fill are not measured; each process keeps one session.
    for (index, function) in functions.iter().enumerate() {
        for _ in 0..3 {
            cost_turn(&stack, function, format!("cost-{index}")).await;
        }
    }
    let mut cpu = [0u64; 3];
    let mut wall = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..TURNS {
        for (index, function) in functions.iter().enumerate() {
            let before = cpu_ticks(function.pid().unwrap());
            wall[index].push(cost_turn(&stack, function, format!("cost-{index}")).await);
            cpu[index] += cpu_ticks(function.pid().unwrap()) - before;
        }
    }
    println!("| {TURNS} warm turns each | CPU per turn | wall per turn (median) |");
    println!("| --- | --- | --- |");
    for (index, (name, _)) in variants.iter().enumerate() {
        wall[index].sort();
        let per_turn = cpu[index] as f64 * 10.0 / TURNS as f64;
        let median = wall[index][TURNS / 2].as_secs_f64() * 1000.0;
        println!("| {name} | {per_turn:.2} ms | {median:.2} ms |");
    }
}

#[tokio::test]
async fn a_planner_turn_counts_every_model_call_by_model_and_expert_tools_as_one_dimension() {
    let (alpha, beta) = (local_stack::experts::ExpertServer::start(), local_stack::experts::ExpertServer::start());
    let stack = Stack::new().await;
    let structured = |value: Value| Reply::Text(value.to_string());
    let no_prompt = || {
        structured(
            json!({"prompts": [{"name": "draft_contract", "description": "", "match_confidence": 0.1, "arguments": []}]}),
        )
    };
    let done = || structured(json!({"is_completed": true, "explanation": "complete", "confidence": 0.95}));
    stack.model.push([
        structured(json!({"decision": "replace", "plan": [{"expert": "alpha", "task": "Add"}, {"expert": "beta", "task": "Add"}],
                          "next_task": 0, "clarification": null})),
        no_prompt(),
        Reply::tool("alpha__add", json!({"a": 2, "b": 3})),
        Reply::text("5."),
        done(),
        no_prompt(),
        Reply::Tools(vec![("beta__add".into(), json!({"a": 1, "b": 1})), ("beta__nothing".into(), json!({}))]),
        Reply::text("2."),
        done(),
        Reply::text("5 and 2."),
    ]);
    let servers = json!({"mcpServers": {
        "alpha": {"url": alpha.url, "description": "The alpha expert"},
        "beta": {"url": beta.url, "description": "The beta expert"},
    }})
    .to_string();
    let http = stack
        .http(&[
            ("AGENT_STRATEGY", "planner"),
            ("EXPERTS_CONFIG", servers.as_str()),
            ("EXPERT_TIMEOUT_SECS", "5"),
            ("PLANNER_MODEL", "planner-model"),
        ])
        .await;
    let mark = http.log_mark();
    let (status, body) = status_and_body(&http.call(turn_event(Some(USER), "p1", json!({"message": "Suma"}))).await);
    assert_eq!(status, 200, "{body}");
    assert_eq!(stack.model.requests().len(), 10);
    let lines = lines_after(&http, mark, 1).await;
    let summary = summaries_of(&lines)[0];
    assert_eq!((summary["strategy"].as_str(), summary["model_calls"].as_u64()), (Some("planner"), Some(10)));
    assert_eq!(summary["models"]["planner-model"]["calls"], 1);
    assert_eq!(summary["tools"], json!({"expert": {"ok": 2, "refused": 1}}));
    let data = emf_data(&lines);
    let function = ("Function", "http-turn");
    assert_eq!(total(&data, "Turns", "Count", &[function, ("Strategy", "planner")]), 1.0);
    assert_eq!(total(&data, "ModelCalls", "Count", &[function, ("Model", "planner-model")]), 1.0);
    assert_eq!(total(&data, "ModelCalls", "Count", &[function, ("Model", MODEL)]), 9.0);
    assert_eq!(total(&data, "InputTokens", "Count", &[function, ("Model", MODEL)]), 900.0);
    assert_eq!(total(&data, "ToolCalls", "Count", &[function, ("Tool", "expert")]), 3.0);
    assert_eq!(total(&data, "RefusedToolCalls", "Count", &[function]), 1.0);
}
