//! Exactly-once turns through the compiled functions: SQS redeliveries (also after a kill between
//! the commit and the answer), HTTP retries with and without `Idempotency-Key`, a key reused for
//! another body, and two requests with one key at once.

use std::time::Duration;

use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, sqs_record, status_and_body, turn_event, Stack};
use serde_json::{json, Value};

const USER: &str = "user-once";

fn record(id: &str, session: &str, message: &str) -> Value {
    sqs_record(id, session, &json!({"user_id": USER, "session_id": session, "message": message}).to_string())
}

fn failures(response: &Value) -> Vec<String> {
    let failures = response["batchItemFailures"].as_array().expect("batchItemFailures");
    failures.iter().map(|f| f["itemIdentifier"].as_str().unwrap().to_owned()).collect()
}

fn keyed_turn(session: &str, message: &str, key: Option<&str>) -> Value {
    let mut event = turn_event(Some(USER), session, json!({ "message": message }));
    if let Some(key) = key {
        event["headers"]["idempotency-key"] = json!(key);
    }
    event
}

async fn session(http: &Function, session: &str) -> Value {
    let (status, body) = status_and_body(&http.call(get_event(Some(USER), session)).await);
    assert_eq!(status, 200, "{body}");
    body
}

fn history_len(session: &Value) -> usize {
    session["history"].as_array().expect("history").len()
}

#[tokio::test]
async fn a_record_delivered_three_times_runs_and_is_stored_once() {
    let stack = Stack::new().await;
    stack.model.push([Reply::text("Hecho."), Reply::text("never sent")]);
    let queue = stack.queue(&[]).await;
    for delivery in 0..3 {
        let response = queue.call(json!({"Records": [record("m-1", "q1", "Haz la tarea")]})).await;
        assert!(failures(&response).is_empty(), "delivery {delivery}: {response}");
    }
    // A standard queue may even put two copies into one batch.
    let twice = json!({"Records": [record("m-1", "q1", "Haz la tarea"), record("m-1", "q1", "Haz la tarea")]});
    let response = queue.call(twice).await;
    assert!(failures(&response).is_empty(), "{response}");
    assert_eq!(stack.model.requests().len(), 1, "the model ran once");
    let http = stack.http(&[]).await;
    let stored = session(&http, "q1").await;
    assert_eq!(stored["version"], 1);
    assert_eq!(history_len(&stored), 2, "one user message and one reply: {stored}");
    assert!(queue.logs().iter().any(|line| line.contains("replayed a committed turn")));
}

#[tokio::test]
async fn a_function_killed_after_its_commit_is_redelivered_without_a_second_run() {
    let stack = Stack::new().await;
    stack.model.push([Reply::text("Hecho una vez."), Reply::text("never sent")]);
    let mut first = stack.queue(&[]).await;
    first.invoke_and_kill_before_answer(json!({"Records": [record("m-kill", "q2", "Una vez")]})).await;
    assert_eq!(stack.model.requests().len(), 1);

    // SQS never got the answer: after the visibility timeout it delivers the record again.
    let second = stack.queue(&[]).await;
    let response = second.call(json!({"Records": [record("m-kill", "q2", "Una vez")]})).await;
    assert!(failures(&response).is_empty(), "{response}");
    assert_eq!(stack.model.requests().len(), 1, "the redelivery did not call the model");
    let stored = session(&stack.http(&[]).await, "q2").await;
    assert_eq!((stored["version"].as_u64(), history_len(&stored)), (Some(1), 2), "{stored}");
}

#[tokio::test]
async fn an_http_retry_with_the_key_replays_and_without_it_runs_again() {
    let stack = Stack::new().await;
    stack.model.push([Reply::text("Primera respuesta."), Reply::text("Segunda respuesta.")]);
    let http = stack.http(&[]).await;

    let first = http.call(keyed_turn("h1", "Hola", Some("key-123"))).await;
    let retried = http.call(keyed_turn("h1", "Hola", Some("key-123"))).await;
    let (first_status, first_body) = status_and_body(&first);
    let (retry_status, retry_body) = status_and_body(&retried);
    assert_eq!((first_status, retry_status), (200, 200), "{first_body} {retry_body}");
    assert_eq!(retry_body, first_body, "the original body, byte for byte in meaning");
    assert!(first["headers"].get("idempotent-replayed").is_none(), "{first}");
    assert_eq!(retried["headers"]["idempotent-replayed"], "true", "{retried}");
    assert_eq!(stack.model.requests().len(), 1, "the retry did not call the model");
    assert_eq!(history_len(&session(&http, "h1").await), 2);

    // Without a key a retry is a new turn, as before.
    let (status, body) = status_and_body(&http.call(keyed_turn("h1", "Hola", None)).await);
    assert_eq!((status, body["version"].as_u64()), (200, Some(2)), "{body}");
    assert_eq!(history_len(&session(&http, "h1").await), 4);
}

#[tokio::test]
async fn a_key_reused_with_another_body_is_refused_and_keys_are_per_session() {
    let stack = Stack::new().await;
    stack.model.push([Reply::text("Uno."), Reply::text("Otra sesión.")]);
    let http = stack.http(&[]).await;
    let (status, _) = status_and_body(&http.call(keyed_turn("k1", "Hola", Some("same-key"))).await);
    assert_eq!(status, 200);
    let (status, body) = status_and_body(&http.call(keyed_turn("k1", "Adiós", Some("same-key"))).await);
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("idempotency_key_reused")), "{body}");
    // The same key on another session is another turn.
    let (status, body) = status_and_body(&http.call(keyed_turn("k2", "Adiós", Some("same-key"))).await);
    assert_eq!((status, body["reply"].as_str()), (200, Some("Otra sesión.")), "{body}");
    // A key that is not a valid header value is a clear 400 and writes nothing.
    let long = "k".repeat(300);
    let (status, body) = status_and_body(&http.call(keyed_turn("k3", "Hola", Some(&long))).await);
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("bad_request")), "{body}");
    assert_eq!(stack.model.requests().len(), 2);
    assert_eq!(history_len(&session(&http, "k1").await), 2);
}

#[tokio::test]
async fn two_requests_with_one_key_at_once_run_once() {
    let stack = Stack::new().await;
    let slow = Reply::Delayed(Duration::from_millis(1500), Box::new(Reply::text("Lento.")));
    stack.model.push([slow, Reply::text("never sent")]);
    let first = stack.http(&[]).await;
    let second = stack.http(&[]).await;
    let run_first = first.call(keyed_turn("c1", "Hola", Some("dup")));
    let run_second = async {
        // Starts while the first is waiting on the model.
        tokio::time::sleep(Duration::from_millis(500)).await;
        second.call(keyed_turn("c1", "Hola", Some("dup"))).await
    };
    let (one, two) = tokio::join!(run_first, run_second);
    let (one, two) = (status_and_body(&one), status_and_body(&two));
    assert_eq!(one.0, 200, "{one:?}");
    assert_eq!((two.0, two.1["error"]["code"].as_str()), (409, Some("turn_in_progress")), "{two:?}");
    // Once the first is committed, the key replays.
    let (status, body) = status_and_body(&second.call(keyed_turn("c1", "Hola", Some("dup"))).await);
    assert_eq!((status, &body), (200, &one.1));
    assert_eq!(stack.model.requests().len(), 1);
    assert_eq!(history_len(&session(&first, "c1").await), 2);
}

#[tokio::test]
async fn a_failed_turn_gives_its_key_back_so_the_retry_runs() {
    let stack = Stack::new().await;
    stack.model.push([Reply::Status(500), Reply::Status(500), Reply::text("Ahora sí.")]);
    let http = stack.http(&[]).await;
    let (status, body) = status_and_body(&http.call(keyed_turn("f1", "Hola", Some("retry-me"))).await);
    assert_eq!((status, body["error"]["code"].as_str()), (502, Some("model_provider_failed")), "{body}");
    let (status, body) = status_and_body(&http.call(keyed_turn("f1", "Hola", Some("retry-me"))).await);
    assert_eq!((status, body["reply"].as_str()), (200, Some("Ahora sí.")), "{body}");
    assert_eq!(history_len(&session(&http, "f1").await), 2);
}

#[tokio::test]
async fn routing_follows_the_raw_path_and_the_message_limit_counts_decoded_bytes() {
    let stack = Stack::new().await;
    stack.model.push([Reply::text("Recibido.")]);
    // A model with a context that holds a message at the limit, so this test is about the limit.
    let http = stack.http(&[("LLM_CONTEXT_TOKENS", "2000000")]).await;
    // `pathParameters` say a valid route, the raw path does not: nothing runs.
    for path in ["/admin/sessions/s/turns", "/sessions/s/turns/extra/more", "//sessions/s/turns", "/sessions//turns"] {
        let mut event = turn_event(Some(USER), "s", json!({"message": "hola"}));
        event["rawPath"] = json!(path);
        let (status, body) = status_and_body(&http.call(event).await);
        assert_eq!((status, body["error"]["code"].as_str()), (404, Some("not_found")), "{path}: {body}");
    }
    assert!(stack.model.requests().is_empty());
    // A message of exactly 256 KiB of newlines is 1.5 times that once JSON-escaped, and accepted.
    let newlines = "\n".repeat(256 * 1024 - 1) + "x";
    let (status, body) = status_and_body(&http.call(turn_event(Some(USER), "s", json!({ "message": newlines }))).await);
    assert_eq!(status, 200, "{body}");
    let over = "\n".repeat(256 * 1024) + "x";
    let (status, body) = status_and_body(&http.call(turn_event(Some(USER), "s", json!({ "message": over }))).await);
    assert_eq!((status, body["error"]["code"].as_str()), (413, Some("payload_too_large")), "{body}");
}
