//! Background turns through the compiled functions and a FIFO queue on moto: `Prefer:
//! respond-async` answers 202 with a turn id, the record waits in the queue (group = session), the
//! queue function runs it, and the owner (only) polls it as pending, completed or failed.

use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, status_and_body, turn_event, Stack};
use serde_json::{json, Value};

const USER: &str = "user-bg";

struct Background {
    stack: Stack,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    http: Function,
    worker: Function,
}

impl Background {
    async fn start() -> Background {
        Self::start_with(&[]).await
    }

    async fn start_with(extra: &[(&str, &str)]) -> Background {
        let stack = Stack::new().await;
        let sqs = aws_sdk_sqs::Client::new(&local_stack::moto::sdk_config(&stack.endpoint).await);
        let queue_url = local_stack::moto::create_fifo_queue(&sqs).await;
        let mut http_env = vec![("TURN_QUEUE_URL", queue_url.as_str())];
        http_env.extend_from_slice(extra);
        let http = stack.http(&http_env).await;
        let mut worker_env = vec![("TURN_QUEUE_URL", queue_url.as_str()), ("TURN_MAX_RECEIVE_COUNT", "3")];
        worker_env.extend_from_slice(extra);
        let worker = stack.queue(&worker_env).await;
        Background { stack, sqs, queue_url, http, worker }
    }

    async fn post_async(&self, session: &str, message: &str, key: Option<&str>) -> (u16, Value, Value) {
        self.post_body_async(session, json!({ "message": message }), key).await
    }

    async fn post_body_async(&self, session: &str, body: Value, key: Option<&str>) -> (u16, Value, Value) {
        let mut event = turn_event(Some(USER), session, body);
        event["headers"]["prefer"] = json!("respond-async");
        if let Some(key) = key {
            event["headers"]["idempotency-key"] = json!(key);
        }
        let response = self.http.call(event).await;
        let (status, body) = status_and_body(&response);
        (status, body, response["headers"].clone())
    }

    async fn poll(&self, user: &str, session: &str, turn_id: &str) -> (u16, Value) {
        let mut event = get_event(Some(user), session);
        let path = format!("/sessions/{session}/turns/{turn_id}");
        event["rawPath"] = json!(path);
        event["requestContext"]["http"]["path"] = json!(path);
        status_and_body(&self.http.call(event).await)
    }

    /// The messages waiting in the queue, as SQS event records delivered for the `delivery`-th time.
    async fn receive(&self, delivery: u32) -> Vec<Value> {
        let mut records = local_stack::moto::take_queue_records(&self.sqs, &self.queue_url).await;
        for record in &mut records {
            record["attributes"]["ApproximateReceiveCount"] = json!(delivery.to_string());
        }
        records
    }

    async fn deliver(&self, records: Vec<Value>) -> Vec<Value> {
        let response = self.worker.call(json!({ "Records": records })).await;
        response["batchItemFailures"].as_array().expect("batchItemFailures").clone()
    }
}

#[tokio::test]
async fn a_background_turn_runs_from_the_queue_and_only_its_owner_can_poll_it() {
    let bg = Background::start().await;
    bg.stack.model.push([Reply::text("Hecho en segundo plano.")]);
    let (status, accepted, headers) = bg.post_async("b1", "Prepara el informe", None).await;
    assert_eq!(status, 202, "{accepted}");
    let turn_id = accepted["turn_id"].as_str().expect("turn_id").to_owned();
    assert_eq!(accepted["status"], "pending");
    assert_eq!(accepted["poll"], format!("/sessions/b1/turns/{turn_id}"));
    assert_eq!(headers["location"], accepted["poll"]);
    assert_eq!(headers["preference-applied"], "respond-async");
    assert!(bg.stack.model.requests().is_empty(), "the HTTP function ran no turn");

    assert_eq!(bg.poll(USER, "b1", &turn_id).await, (200, json!({"turn_id": turn_id, "status": "pending"})));
    let records = bg.receive(1).await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["attributes"]["MessageGroupId"], "b1");
    assert!(bg.deliver(records).await.is_empty());

    let (status, polled) = bg.poll(USER, "b1", &turn_id).await;
    assert_eq!(status, 200, "{polled}");
    assert_eq!(polled["status"], "completed");
    assert_eq!(polled["reply"], "Hecho en segundo plano.");
    assert_eq!(polled["version"], 1);
    assert_eq!(polled["session_id"], "b1");
    let (_, session) = status_and_body(&bg.http.call(get_event(Some(USER), "b1")).await);
    assert_eq!(session["history"].as_array().unwrap().last().unwrap()["content"], polled["reply"]);

    // Another tenant cannot see the turn, nor can a malformed id reach storage.
    assert_eq!(bg.poll("user-other", "b1", &turn_id).await.0, 404);
    assert_eq!(bg.poll(USER, "b1", "not-a-turn").await.0, 404);
    assert_eq!(bg.poll(USER, "b1", &"0".repeat(64)).await.0, 404);
}

#[tokio::test]
async fn a_retried_background_post_is_one_turn() {
    let bg = Background::start().await;
    bg.stack.model.push([Reply::text("Una vez."), Reply::text("never sent")]);
    let (_, first, _) = bg.post_async("b2", "Hazlo una vez", Some("k-b2")).await;
    let (status, again, _) = bg.post_async("b2", "Hazlo una vez", Some("k-b2")).await;
    assert_eq!(status, 202);
    assert_eq!(again["turn_id"], first["turn_id"]);
    // The queue deduplicates the second send; even a second copy would only replay.
    let records = bg.receive(1).await;
    assert_eq!(records.len(), 1, "the FIFO queue deduplicated the retry");
    assert!(bg.deliver(vec![records[0].clone(), records[0].clone()]).await.is_empty());
    assert_eq!(bg.stack.model.requests().len(), 1);
    let (status, _, _) = bg.post_async("b2", "Hazlo una vez", Some("k-b2")).await;
    assert_eq!(status, 202, "a completed key still answers with its turn");
    assert!(bg.receive(1).await.is_empty(), "a finished turn is not enqueued again");
    assert_eq!(bg.post_async("b2", "Otra cosa", Some("k-b2")).await.0, 422);
}

#[tokio::test]
async fn background_failures_are_retried_then_reported_to_the_poller() {
    let bg = Background::start().await;
    // A wrong request fails for good at once: recorded, not retried.
    let (_, wrong, _) = bg.post_async("b3", "/no-such-skill haz algo", None).await;
    let records = bg.receive(1).await;
    assert!(bg.deliver(records).await.is_empty(), "a permanent failure is not retried");
    let (_, polled) = bg.poll(USER, "b3", wrong["turn_id"].as_str().unwrap()).await;
    assert_eq!(polled["status"], "failed", "{polled}");
    assert_eq!(polled["error"]["code"], "unknown_skill");
    assert_eq!(polled["error"]["status"], 400);

    // A model outage is retried by the queue while deliveries remain, then reported.
    let (_, outage, _) = bg.post_async("b4", "Hola", None).await;
    let turn_id = outage["turn_id"].as_str().unwrap().to_owned();
    let records = bg.receive(1).await;
    bg.stack.model.push([Reply::Status(500), Reply::Status(500)]);
    assert_eq!(bg.deliver(records.clone()).await.len(), 1, "SQS retries a transient failure");
    assert_eq!(bg.poll(USER, "b4", &turn_id).await.1["status"], "pending");
    let mut last = records[0].clone();
    last["attributes"]["ApproximateReceiveCount"] = json!("3");
    bg.stack.model.push([Reply::Status(500), Reply::Status(500)]);
    assert!(bg.deliver(vec![last]).await.is_empty(), "the last delivery records the failure");
    let (_, polled) = bg.poll(USER, "b4", &turn_id).await;
    assert_eq!(polled["status"], "failed", "{polled}");
    assert_eq!(polled["error"]["code"], "model_provider_failed");
    assert!(bg.stack.session_item(USER, "b4").await.is_none(), "nothing was committed");
}

#[tokio::test]
async fn a_background_turn_pauses_for_approval_and_its_queued_decisions_run_the_call_once() {
    let bg = Background::start_with(&[("APPROVAL_REQUIRED", "write_file")]).await;
    bg.stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/informe.md", "content": "Informe"})),
        Reply::text("Informe escrito."),
    ]);
    let (_, accepted, _) = bg.post_async("b9", "Escribe el informe", None).await;
    assert!(bg.deliver(bg.receive(1).await).await.is_empty());
    let (_, paused) = bg.poll(USER, "b9", accepted["turn_id"].as_str().unwrap()).await;
    assert_eq!((paused["status"].as_str(), paused["ending"].as_str()), (Some("completed"), Some("awaiting_approval")));
    let call_id = paused["pending_approval"][0]["id"].clone();

    let decisions = json!({"decisions": [{"call_id": call_id, "decision": "approve"}]});
    let (status, accepted, _) = bg.post_body_async("b9", decisions, Some("k-b9")).await;
    assert_eq!(status, 202, "{accepted}");
    let records = bg.receive(1).await;
    assert_eq!(records.len(), 1);
    // A redelivered record replays the turn instead of running the call again.
    assert!(bg.deliver(vec![records[0].clone(), records[0].clone()]).await.is_empty());
    let (_, done) = bg.poll(USER, "b9", accepted["turn_id"].as_str().unwrap()).await;
    assert_eq!(
        (done["status"].as_str(), done["reply"].as_str()),
        (Some("completed"), Some("Informe escrito.")),
        "{done}"
    );
    assert_eq!(done["files"], json!([{"path": "/workspace/informe.md", "size": 7}]));
    assert_eq!(bg.stack.model.requests().len(), 2, "each model call made once");
}
