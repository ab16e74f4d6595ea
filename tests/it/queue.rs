//! The `queue-turn` function, compiled, fed SQS batches: partial failures and per-session order.

use local_stack::model_server::Reply;
use local_stack::stack::{sample_event, sqs_record, Stack};
use serde_json::{json, Value};

fn failures(response: &Value) -> Vec<String> {
    response["batchItemFailures"]
        .as_array()
        .expect("batchItemFailures")
        .iter()
        .map(|f| f["itemIdentifier"].as_str().unwrap().to_owned())
        .collect()
}

fn record(id: &str, group: &str, body: Value) -> Value {
    sqs_record(id, group, &body.to_string())
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

#[tokio::test]
async fn a_plan_that_does_not_fit_enqueues_its_own_continuation() {
    use aws_sdk_sqs::types::MessageSystemAttributeName;
    use local_stack::experts::ExpertServer;

    let alpha = ExpertServer::start();
    let stack = Stack::new().await;
    let config = local_stack::moto::sdk_config(&stack.endpoint).await;
    let sqs = aws_sdk_sqs::Client::new(&config);
    let queue_url = local_stack::moto::create_fifo_queue(&sqs).await;

    let structured = |value: Value| Reply::Text(value.to_string());
    let assessed = structured(json!({"is_completed": true, "explanation": "ok", "confidence": 0.9}));
    stack.model.push([
        structured(json!({"decision": "replace", "plan": [{"expert": "alpha", "task": "One"}, {"expert": "alpha", "task": "Two"}],
                          "next_task": 0, "clarification": null})),
        structured(json!({"prompts": []})),
        Reply::text("One done."),
        assessed.clone(),
        structured(json!({"prompts": []})),
    ]);
    let experts = json!({"mcpServers": {"alpha": {"url": alpha.url, "description": "Alpha"}}}).to_string();
    let queue = stack
        .queue(&[
            ("AGENT_STRATEGY", "planner"),
            ("EXPERTS_CONFIG", &experts),
            ("MAX_STEPS", "5"),
            ("TURN_QUEUE_URL", &queue_url),
        ])
        .await;
    let first =
        record("m1", "q-long", json!({"user_id": "user-q", "session_id": "q-long", "message": "Do one and two"}));
    assert_eq!(failures(&queue.call(json!({"Records": [first]})).await), Vec::<String>::new());

    let received = sqs
        .receive_message()
        .queue_url(&queue_url)
        .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
        .wait_time_seconds(1)
        .send()
        .await
        .expect("receive");
    let messages = received.messages();
    assert_eq!(messages.len(), 1, "one continuation enqueued");
    let body: Value = serde_json::from_str(messages[0].body().unwrap()).unwrap();
    assert_eq!(body["message"], "continue");
    assert_eq!((body["user_id"].as_str(), body["session_id"].as_str()), (Some("user-q"), Some("q-long")));
    let group = messages[0].attributes().and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId)).cloned();
    assert_eq!(group.as_deref(), Some("q-long"));

    // Delivered back to the function, the continuation finishes the plan.
    stack.model.push([
        structured(json!({"decision": "continue", "plan": [], "next_task": 0, "clarification": null})),
        Reply::text("Two done."),
        assessed,
        Reply::text("Both done."),
    ]);
    let second = record("m2", "q-long", body);
    assert_eq!(failures(&queue.call(json!({"Records": [second]})).await), Vec::<String>::new());
    let item = stack.session_item("user-q", "q-long").await.unwrap();
    assert_eq!(item["version"].as_n().unwrap(), "2");
    assert!(matches!(item["plan"], aws_sdk_dynamodb::types::AttributeValue::Null(true)), "the plan finished");
}
