//! The `queue-turn` function, compiled, fed SQS batches: partial failures and per-session order.

use serde_json::{json, Value};
use tests::model_server::Reply;
use tests::stack::{sample_event, Stack};

fn failures(response: &Value) -> Vec<String> {
    response["batchItemFailures"]
        .as_array()
        .expect("batchItemFailures")
        .iter()
        .map(|f| f["itemIdentifier"].as_str().unwrap().to_owned())
        .collect()
}

fn record(id: &str, group: &str, body: Value) -> Value {
    let mut record = sample_event("sqs-batch.json")["Records"][0].clone();
    record["messageId"] = json!(id);
    record["attributes"]["MessageGroupId"] = json!(group);
    record["body"] = Value::String(body.to_string());
    record
}

#[tokio::test]
async fn the_sample_batch_reports_exactly_the_malformed_record() {
    let stack = Stack::new().await;
    stack.model.push([Reply::text("Primera."), Reply::text("Segunda.")]);
    let queue = stack.queue(&[]).await;
    let event = sample_event("sqs-batch.json");
    let records = event["Records"].as_array().unwrap().clone();
    let response = queue.call(event).await;
    let malformed: Vec<String> = records
        .iter()
        .filter(|r| serde_json::from_str::<Value>(r["body"].as_str().unwrap()).unwrap().get("message").is_none())
        .map(|r| r["messageId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(malformed.len(), 1);
    assert_eq!(failures(&response), malformed);

    // The two good records were turns of one session, stored in order.
    let first: Value = serde_json::from_str(records[0]["body"].as_str().unwrap()).unwrap();
    let item = stack
        .session_item(first["user_id"].as_str().unwrap(), first["session_id"].as_str().unwrap())
        .await
        .expect("session stored");
    assert_eq!(item["version"].as_n().unwrap(), "2");
    let requests = stack.model.requests();
    let second_turn = requests[1]["messages"].as_array().unwrap();
    assert_eq!(second_turn[1]["content"], first["message"]);
    assert_eq!(second_turn[2]["content"], "Primera.");
}

#[tokio::test]
async fn a_failed_record_holds_back_its_sessions_later_records_but_not_other_sessions() {
    let stack = Stack::new().await;
    stack.model.push([Reply::Status(500), Reply::Status(500), Reply::text("g2 ok")]);
    let queue = stack.queue(&[]).await;
    let body = |session: &str, message: &str| json!({"user_id": "user-q", "session_id": session, "message": message});
    let event = json!({"Records": [
        record("m1", "g1", body("g1", "first")),
        record("m2", "g1", body("g1", "second")),
        record("m3", "g2", body("g2", "other session")),
        record("m4", "g3", json!({"user_id": "user-q", "session_id": "../g3", "message": "bad id"})),
        record("m5", "g4", json!({"user_id": "user-q", "session_id": "g4", "message": "x", "extra": 1})),
    ]});
    let response = queue.call(event).await;
    assert_eq!(failures(&response), ["m1", "m2", "m4", "m5"]);
    let requests = stack.model.requests();
    assert_eq!(requests.len(), 3, "m1 was tried (two attempts), m2 was held back, m3 ran");
    assert_eq!(requests[2]["messages"][1]["content"], "other session");
    assert!(stack.session_item("user-q", "g1").await.is_none(), "the failed turn left no trace");
    assert!(stack.session_item("user-q", "g2").await.is_some());
}
