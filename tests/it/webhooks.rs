//! Background turns' webhooks through the compiled http-turn and queue-turn, a FIFO turn queue and a
//! standard webhook queue on moto, and a receiver on loopback (`tests/clients/webhook_receiver.py`)
//! that verifies every delivery with the Standard Webhooks library and the tenant's key from
//! `GET /webhooks/secret`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, repo_root, sqs_record, status_and_body, turn_event, Stack};
use serde_json::{json, Value};

const USER: &str = "user-wh";
const OTHER: &str = "user-wh-other";

/// The receiver script, its port, and its control routes; killed on drop.
struct Receiver {
    child: Child,
    port: u16,
    http: reqwest::Client,
}

impl Receiver {
    /// Listens on 127.0.0.1 and, to show nothing is ever sent there, 127.0.0.2 (same port).
    fn start() -> Receiver {
        let script = repo_root().join("tests/clients/webhook_receiver.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args(["--bind", "127.0.0.1", "--bind", "127.0.0.2"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start python3 tests/clients/webhook_receiver.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("the receiver's first line");
        let port = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("the receiver did not start (it needs standardwebhooks): {line:?}"));
        Receiver { child, port, http: reqwest::Client::new() }
    }

    fn url(&self, host: &str, path: &str) -> String {
        format!("http://{host}:{}{path}", self.port)
    }

    async fn control(&self, route: &str, body: Value) {
        let url = self.url("127.0.0.1", &format!("/_control/{route}"));
        assert!(self.http.post(url).json(&body).send().await.unwrap().status().is_success());
    }

    async fn deliveries(&self) -> Vec<Value> {
        let url = self.url("127.0.0.1", "/_control/deliveries");
        self.http.get(url).send().await.unwrap().json::<Vec<Value>>().await.unwrap()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct World {
    stack: Stack,
    sqs: aws_sdk_sqs::Client,
    turn_queue: String,
    webhook_queue: String,
    http: Function,
    worker: Function,
    receiver: Receiver,
}

impl World {
    async fn start() -> World {
        let receiver = Receiver::start();
        let stack = Stack::new().await;
        let sqs = aws_sdk_sqs::Client::new(&local_stack::moto::sdk_config(&stack.endpoint).await);
        let turn_queue = local_stack::moto::create_fifo_queue(&sqs).await;
        let name = local_stack::moto::unique_name("webhooks");
        let webhook_queue = sqs.create_queue().queue_name(name).send().await.unwrap().queue_url.unwrap();
        // Internal addresses are on the list for every tenant: the SSRF guard refuses them anyway.
        let allowed = json!({
            USER: [receiver.url("127.0.0.1", "/hooks/")],
            "*": [
                "http://169.254.169.254/latest/",
                receiver.url("127.0.0.2", "/hooks/"),
                receiver.url("localhost", "/hooks/"),
                "http://10.0.0.1/hooks/",
            ],
        })
        .to_string();
        let env = [
            ("TURN_QUEUE_URL", turn_queue.as_str()),
            ("TURN_MAX_RECEIVE_COUNT", "3"),
            ("WEBHOOK_QUEUE_URL", webhook_queue.as_str()),
            ("WEBHOOK_ALLOWED_URLS", allowed.as_str()),
            ("WEBHOOK_ALLOW_PRIVATE_CIDRS", "127.0.0.1/32"),
            ("WEBHOOK_SIGNING_KEY", "the tests' webhook deployment secret, not a secret"),
            ("WEBHOOK_RETRY_DELAY_SECONDS", "0"),
        ];
        let http = stack.http(&env).await;
        let worker = stack.queue(&env).await;
        let world = World { stack, sqs, turn_queue, webhook_queue, http, worker, receiver };
        let (own, other) = (world.secret(USER).await, world.secret(OTHER).await);
        world.receiver.control("secrets", json!({"own": own, "other": other})).await;
        world
    }

    async fn secret(&self, user: &str) -> String {
        let (status, body) = self.get(Some(user), "/webhooks/secret").await;
        assert_eq!(status, 200, "{body}");
        body["secret"].as_str().expect("secret").to_owned()
    }

    async fn get(&self, user: Option<&str>, path: &str) -> (u16, Value) {
        let mut event = get_event(user, "unused");
        event["rawPath"] = json!(path);
        event["requestContext"]["http"]["path"] = json!(path);
        status_and_body(&self.http.call(event).await)
    }

    /// `POST /sessions/{session}/turns` by `user` with `body`, as a background turn when `async_`.
    async fn post(&self, user: &str, session: &str, body: Value, async_: bool) -> (u16, Value) {
        let mut event = turn_event(Some(user), session, body);
        if async_ {
            event["headers"]["prefer"] = json!("respond-async");
        }
        status_and_body(&self.http.call(event).await)
    }

    async fn post_hooked(&self, session: &str, message: &str) -> String {
        let body =
            json!({"message": message, "webhook": {"url": self.receiver.url("127.0.0.1", "/hooks/agent?run=7")}});
        let (status, accepted) = self.post(USER, session, body, true).await;
        assert_eq!(status, 202, "{accepted}");
        accepted["turn_id"].as_str().unwrap().to_owned()
    }

    async fn take(&self, queue: &str) -> Vec<Value> {
        let received = self
            .sqs
            .receive_message()
            .queue_url(queue)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .expect("receive");
        let mut records = Vec::new();
        for message in received.messages() {
            let mut record = sqs_record(message.message_id().unwrap(), "", message.body().unwrap());
            // A standard queue's records have no message group.
            record["attributes"].as_object_mut().unwrap().remove("MessageGroupId");
            if queue == self.turn_queue {
                record["attributes"]["MessageGroupId"] = json!("turns");
            }
            records.push(record);
            let handle = message.receipt_handle().unwrap();
            self.sqs.delete_message().queue_url(queue).receipt_handle(handle).send().await.expect("delete");
        }
        records
    }

    /// Runs `records` through queue-turn; they all succeed.
    async fn run(&self, records: Vec<Value>) {
        assert!(!records.is_empty(), "records to run");
        let response = self.worker.call(json!({ "Records": records })).await;
        assert_eq!(response["batchItemFailures"], json!([]), "{response}");
    }

    async fn poll(&self, session: &str, turn_id: &str) -> Value {
        let (status, body) = self.get(Some(USER), &format!("/sessions/{session}/turns/{turn_id}")).await;
        assert_eq!(status, 200, "{body}");
        body
    }
}

#[tokio::test]
async fn a_background_turns_webhook_carries_what_its_poll_shows_signed_with_its_tenants_key_only() {
    let world = World::start().await;
    let (own, other) = (world.secret(USER).await, world.secret(OTHER).await);
    assert!(own.starts_with("whsec_") && other.starts_with("whsec_") && own != other, "one key per tenant");
    assert_eq!(world.secret(USER).await, own, "the same key every time");
    assert_eq!(world.get(None, "/webhooks/secret").await.0, 401);

    world.stack.model.push([Reply::text("Informe listo.")]);
    let turn_id = world.post_hooked("w1", "Prepara el informe").await;
    assert!(world.receiver.deliveries().await.is_empty(), "nothing before the turn runs");
    world.run(world.take(&world.turn_queue).await).await;

    let deliveries = world.receiver.deliveries().await;
    assert_eq!(deliveries.len(), 1, "{deliveries:?}");
    let delivery = &deliveries[0];
    assert_eq!(delivery["verified"], json!({"own": true, "other": false}), "another tenant's key does not verify");
    assert_eq!(delivery["id"], format!("turn_{turn_id}"));
    assert_eq!(
        (delivery["path"].as_str(), delivery["content_type"].as_str()),
        (Some("/hooks/agent?run=7"), Some("application/json"))
    );
    assert_eq!(delivery["payload"]["type"], "turn.completed");
    assert_eq!(delivery["payload"]["data"]["reply"], "Informe listo.");
    let mut polled = world.poll("w1", &turn_id).await;
    polled["session_id"] = json!("w1");
    assert_eq!(delivery["payload"]["data"], polled, "the payload is the turn as its poll shows it");
    assert!(world.take(&world.webhook_queue).await.is_empty(), "nothing left to retry");
}

#[tokio::test]
async fn a_failed_delivery_comes_again_with_the_same_id_inline_then_from_the_webhook_queue() {
    let world = World::start().await;
    world.stack.model.push([Reply::text("Uno."), Reply::text("Dos."), Reply::text("Tres.")]);

    // One 500: the next inline attempt delivers it.
    world.receiver.control("answers", json!([500])).await;
    let first = world.post_hooked("w2", "Uno").await;
    world.run(world.take(&world.turn_queue).await).await;
    let deliveries = world.receiver.deliveries().await;
    assert_eq!(deliveries.len(), 2, "{deliveries:?}");
    assert_eq!((deliveries[0]["answered"].as_u64(), deliveries[1]["answered"].as_u64()), (Some(500), Some(200)));
    for delivery in &deliveries {
        assert_eq!(delivery["id"], format!("turn_{first}"));
        assert_eq!(delivery["verified"]["own"], true);
    }
    assert_eq!(deliveries[0]["payload"], deliveries[1]["payload"], "the same body again");
    assert!(world.take(&world.webhook_queue).await.is_empty());

    // Every inline attempt fails (408 and 429 are retried too): the webhook queue takes over.
    world.receiver.control("answers", json!([503, 408, 429])).await;
    let second = world.post_hooked("w3", "Dos").await;
    world.run(world.take(&world.turn_queue).await).await;
    assert_eq!(world.receiver.deliveries().await.len(), 5);
    let queued = world.take(&world.webhook_queue).await;
    assert_eq!(queued.len(), 1, "the next attempt waits in the webhook queue");
    let record: Value = serde_json::from_str(queued[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!((record["kind"].as_str(), record["attempt"].as_u64()), (Some("webhook_delivery"), Some(4)));
    world.run(queued).await;
    let deliveries = world.receiver.deliveries().await;
    assert_eq!(deliveries.len(), 6);
    let last = &deliveries[5];
    assert_eq!((last["id"].as_str(), last["answered"].as_u64()), (Some(format!("turn_{second}").as_str()), Some(200)));
    assert_eq!(last["verified"]["own"], true, "signed again, with a fresh timestamp");
    assert_eq!(last["payload"], deliveries[2]["payload"]);
    assert!(world.take(&world.webhook_queue).await.is_empty(), "delivered: no further attempt");

    // 410 Gone stops at once: no retry inline or queued.
    world.receiver.control("answers", json!([410])).await;
    world.post_hooked("w4", "Tres").await;
    world.run(world.take(&world.turn_queue).await).await;
    assert_eq!(world.receiver.deliveries().await.len(), 7);
    assert!(world.take(&world.webhook_queue).await.is_empty(), "a receiver that is gone is not tried again");
}

#[tokio::test]
async fn a_redelivered_turn_record_delivers_again_with_the_same_id_and_runs_the_turn_once() {
    let world = World::start().await;
    world.stack.model.push([Reply::text("Una sola vez."), Reply::text("never sent")]);
    let turn_id = world.post_hooked("w5", "Hazlo una vez").await;
    let records = world.take(&world.turn_queue).await;
    world.run(records.clone()).await;
    world.run(records).await;
    assert_eq!(world.stack.model.requests().len(), 1, "the redelivered record replayed the turn");
    let deliveries = world.receiver.deliveries().await;
    assert_eq!(deliveries.len(), 2, "{deliveries:?}");
    assert_eq!(deliveries[0]["id"], format!("turn_{turn_id}"));
    assert_eq!(deliveries[1]["id"], deliveries[0]["id"], "the receiver can dedupe by the id");
    assert_eq!(deliveries[1]["payload"]["data"], deliveries[0]["payload"]["data"]);

    // A turn that fails for good says so, and again under the same id when its record comes back.
    let failed = world.post_hooked("w6", "/no-such-skill haz algo").await;
    let records = world.take(&world.turn_queue).await;
    world.run(records.clone()).await;
    world.run(records).await;
    let deliveries = world.receiver.deliveries().await;
    assert_eq!(deliveries.len(), 4);
    for delivery in &deliveries[2..] {
        assert_eq!(delivery["id"], format!("turn_{failed}"));
        assert_eq!(delivery["payload"]["type"], "turn.failed");
        assert_eq!(delivery["payload"]["data"]["error"]["code"], "unknown_skill");
        assert_eq!(delivery["verified"]["own"], true);
    }
}

#[tokio::test]
async fn webhooks_off_the_allow_list_or_to_internal_addresses_are_refused_when_the_turn_is_queued() {
    let world = World::start().await;
    let hooked = |url: &str| json!({"message": "Hola", "webhook": {"url": url}});
    let internal = [
        ("http://169.254.169.254/latest/meta-data/".to_owned(), "169.254.169.254 is a link-local address"),
        (world.receiver.url("127.0.0.2", "/hooks/x"), "127.0.0.2 is a loopback address"),
        (world.receiver.url("localhost", "/hooks/x"), "localhost is an internal host name"),
        ("http://10.0.0.1/hooks/x".to_owned(), "10.0.0.1 is a private address"),
    ];
    for (url, reason) in &internal {
        let (status, body) = world.post(USER, "w7", hooked(url), true).await;
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some("webhook_not_allowed")), "{url}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains(reason), "{body}");
    }
    let (status, body) = world.post(USER, "w7", hooked("https://hooks.example.com/agent/"), true).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("webhook_not_allowed")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("allow-list"), "{body}");
    // The receiver is on this tenant's list, not on the other's.
    let own = world.receiver.url("127.0.0.1", "/hooks/x");
    let (status, body) = world.post(OTHER, "w7", hooked(&own), true).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("webhook_not_allowed")), "{body}");
    let with_credentials = own.replace("http://", "http://user:pw@");
    assert_eq!(world.post(USER, "w7", hooked(&with_credentials), true).await.0, 400);
    assert_eq!(world.post(USER, "w7", hooked(&format!("{own}#frag")), true).await.0, 400);
    assert_eq!(world.post(USER, "w7", json!({"message": "Hola", "webhook": {"url": own, "x": 1}}), true).await.0, 400);
    // A webhook is for background turns only.
    let (status, body) = world.post(USER, "w7", hooked(&own), false).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("respond-async"), "{body}");

    assert!(world.take(&world.turn_queue).await.is_empty(), "nothing refused was queued");
    assert!(world.stack.model.requests().is_empty());
}

#[tokio::test]
async fn a_record_that_names_an_internal_address_is_never_sent_there() {
    let world = World::start().await;
    // Records made as if the enqueue check had been bypassed: the delivery checks again.
    let queued = |url: String| {
        json!({"kind": "webhook_delivery", "user_id": USER, "url": url, "webhook_id": format!("turn_{}", "d".repeat(64)),
               "payload": {"type": "turn.completed", "data": {}}, "attempt": 5})
    };
    let record = |id: &str, body: Value| {
        let mut record = sqs_record(id, "", &body.to_string());
        record["attributes"].as_object_mut().unwrap().remove("MessageGroupId");
        record
    };
    world.run(vec![record("q1", queued(world.receiver.url("127.0.0.2", "/hooks/x")))]).await;
    world.stack.model.push([Reply::text("Hecho.")]);
    let turn = json!({"user_id": USER, "session_id": "w8", "message": "Hola",
                      "webhook": {"url": world.receiver.url("127.0.0.2", "/hooks/x")}});
    world.run(vec![sqs_record("t1", "w8", &turn.to_string())]).await;
    assert_eq!(world.stack.model.requests().len(), 1, "the turn ran; only its webhook was refused");
    assert!(world.receiver.deliveries().await.is_empty(), "127.0.0.2 was never connected to");
    assert!(world.take(&world.webhook_queue).await.is_empty(), "a refusal is not retried");

    // The same record to the opened address is delivered: the refusal above was the guard's.
    world.run(vec![record("q2", queued(world.receiver.url("127.0.0.1", "/hooks/x")))]).await;
    let deliveries = world.receiver.deliveries().await;
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0]["local_address"], "127.0.0.1");
}
