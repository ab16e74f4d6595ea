//! Every log line of a turn names its invocation and its turn: the compiled `stream-turn`,
//! `http-turn` and `queue-turn` functions log JSON lines whose spans carry the Lambda `requestId`
//! and the turn's `turnId` (with its `sessionId`, `strategy` and `tenant` tag), streamed turns
//! included (they run in a task of their own), and a turn delivered again under its idempotency key
//! keeps its `turnId`. The turn's summary and metrics lines name them too.

use std::collections::BTreeSet;
use std::time::Duration;

use local_stack::identity::IdentityProvider;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{sqs_record, status_and_body, turn_event, Stack};
use serde_json::{json, Value};

use crate::streaming::{all_events, stream_event};

const USER: &str = "user-logs";

/// The JSON log lines printed after `mark`, once `invocations` `storage requests` lines (each
/// invocation's last) are among them, or after 5 s.
async fn invocation_lines(function: &Function, mark: usize, invocations: usize) -> Vec<Value> {
    let waited = std::time::Instant::now();
    loop {
        let lines: Vec<Value> =
            function.logs_since(mark).iter().filter_map(|line| serde_json::from_str(line).ok()).collect();
        let closed = lines.iter().filter(|line| message(line) == "storage requests").count();
        if closed >= invocations || waited.elapsed() > Duration::from_secs(5) {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn message(line: &Value) -> &str {
    line["fields"]["message"].as_str().unwrap_or_default()
}

/// A field of one of the spans the line was logged in; for a metrics (EMF) line, which has no
/// spans, the member of that name it carries for the same purpose.
fn span_field<'a>(line: &'a Value, name: &str) -> Option<&'a str> {
    if line.get("_aws").is_some() {
        return line.get(name)?.as_str();
    }
    line["spans"].as_array()?.iter().find_map(|span| span.get(name)?.as_str())
}

/// Checks that every line names one of `request_ids`, and every line but the invocation's
/// `storage requests` total a turn (its session, strategy and tenant tag too); returns the turn ids seen per request id, in order of lines.
fn turn_ids_by_request(lines: &[Value], request_ids: &[&str]) -> Vec<(String, BTreeSet<String>)> {
    assert!(!lines.is_empty(), "nothing was logged");
    let mut seen: Vec<(String, BTreeSet<String>)> =
        request_ids.iter().map(|id| (id.to_string(), BTreeSet::new())).collect();
    for line in lines {
        let request = span_field(line, "requestId").unwrap_or_else(|| panic!("a line without its requestId: {line}"));
        let slot = seen
            .iter_mut()
            .find(|(id, _)| id == request)
            .unwrap_or_else(|| panic!("a line of another invocation ({request}): {line}"));
        if message(line) == "storage requests" {
            continue;
        }
        let turn = span_field(line, "turnId").unwrap_or_else(|| panic!("a line without its turnId: {line}"));
        slot.1.insert(turn.to_owned());
        if line.get("_aws").is_none() {
            let session = span_field(line, "sessionId").unwrap_or_else(|| panic!("a line without its session: {line}"));
            assert!(turn.starts_with(&format!("{session}/")), "{line}");
            assert_eq!(span_field(line, "strategy"), Some("skills"), "{line}");
            let tenant = span_field(line, "tenant").unwrap_or_else(|| panic!("a line without its tenant: {line}"));
            assert!(tenant.len() == 16 && tenant.chars().all(|c| c.is_ascii_hexdigit()), "{line}");
        }
    }
    seen
}

#[tokio::test]
async fn every_line_of_a_streamed_turn_names_its_invocation_and_its_turn() {
    let stack = Stack::new().await;
    let identity = IdentityProvider::start().await;
    let function = Function::start("stream-turn", &stack.env(&identity.env())).await;
    let post = |session: &str, key: Option<&str>| {
        let mut event = stream_event(Some(&identity.token(USER)), session, json!({"message": "Hola"}), true);
        if let Some(key) = key {
            event["headers"]["idempotency-key"] = json!(key);
        }
        function.invoke_streaming(event, Duration::from_secs(120))
    };
    // The first invocation (req-1) pays the cold start; its lines are not looked at.
    stack.model.push([Reply::text("Calentando.")]);
    all_events(&mut post("warm", None).await).await;

    let mark = function.log_mark();
    stack.model.push([Reply::text("Primera."), Reply::Status(400)]);
    let first = all_events(&mut post("s1", Some("key-1")).await).await;
    assert_eq!(first.last().unwrap().name, "turn.completed");
    let replay = all_events(&mut post("s1", Some("key-1")).await).await;
    assert_eq!(replay.last().unwrap().data, first.last().unwrap().data, "the committed reply, replayed");
    let failed = all_events(&mut post("s2", None).await).await;
    assert_eq!(failed.last().unwrap().name, "turn.failed", "{:?}", failed.last());

    let lines = invocation_lines(&function, mark, 3).await;
    let seen = turn_ids_by_request(&lines, &["req-2", "req-3", "req-4"]);
    for (request, turns) in &seen {
        assert_eq!(turns.len(), 1, "{request} logged one turn: {turns:?}");
    }
    assert_eq!(seen[0].1, seen[1].1, "a replay under the same key is the same turn");
    assert_ne!(seen[0].1, seen[2].1);
    assert!(lines
        .iter()
        .any(|line| message(line) == "turn committed" && span_field(line, "requestId") == Some("req-2")));
    assert!(seen[0].1.iter().all(|turn| turn.starts_with("s1/")), "{:?}", seen[0].1);
}

#[tokio::test]
async fn every_line_of_an_http_turn_names_its_invocation_and_its_turn() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    stack.model.push([Reply::text("Calentando."), Reply::text("Primera."), Reply::text("Segunda.")]);
    http.call(turn_event(Some(USER), "warm", json!({"message": "Hola"}))).await;

    let mark = http.log_mark();
    let mut keyed = turn_event(Some(USER), "h1", json!({"message": "Uno"}));
    keyed["headers"]["idempotency-key"] = json!("key-h1");
    for event in [keyed.clone(), keyed, turn_event(Some(USER), "h2", json!({"message": "Dos"}))] {
        let (status, body) = status_and_body(&http.call(event).await);
        assert_eq!(status, 200, "{body}");
    }
    let lines = invocation_lines(&http, mark, 3).await;
    let summaries = lines.iter().filter(|line| message(line) == "turn summary").count();
    assert_eq!(summaries, 3, "one summary line per turn");
    let seen = turn_ids_by_request(&lines, &["req-2", "req-3", "req-4"]);
    for (request, turns) in &seen {
        assert_eq!(turns.len(), 1, "{request} logged one turn: {turns:?}");
    }
    assert_eq!(seen[0].1, seen[1].1, "a replay under the same key is the same turn");
    assert_ne!(seen[0].1, seen[2].1);
}

#[tokio::test]
async fn every_line_of_a_queued_turn_names_its_invocation_and_its_turn() {
    let stack = Stack::new().await;
    let queue = stack.queue(&[]).await;
    let record = |id: &str, session: &str| {
        sqs_record(id, session, &json!({"user_id": USER, "session_id": session, "message": "Hola"}).to_string())
    };
    stack.model.push([Reply::text("Calentando.")]);
    queue.call(json!({"Records": [record("m0", "warm")]})).await;

    let mark = queue.log_mark();
    stack.model.push([Reply::text("Uno."), Reply::Status(400)]);
    let response = queue.call(json!({"Records": [record("m1", "q1"), record("m2", "q2")]})).await;
    assert_eq!(response["batchItemFailures"].as_array().map(Vec::len), Some(1), "{response}");
    let lines = invocation_lines(&queue, mark, 1).await;
    let seen = turn_ids_by_request(&lines, &["req-2"]);
    let turns = &seen[0].1;
    assert_eq!(turns.len(), 2, "one turn id per record: {turns:?}");
    assert!(turns.iter().any(|turn| turn.starts_with("q1/")) && turns.iter().any(|turn| turn.starts_with("q2/")));
}
