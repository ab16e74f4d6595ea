//! Fault injection: the compiled functions behind a proxy that fails, throttles, refuses or
//! drops storage and model requests. Each test checks that nothing is lost, nothing is
//! duplicated, and the documented status comes back.

use aws_sdk_dynamodb::types::AttributeValue;
use local_stack::faults::{Action, FaultProxy, Match, Rule};
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, status_and_body, tool_results, turn_event, Stack};
use serde_json::{json, Value};

const USER: &str = "user-f";
const SESSION: &str = "s1";

/// A stack whose functions reach moto and the model only through fault proxies.
struct World {
    stack: Stack,
    storage: FaultProxy,
    model: FaultProxy,
}

impl World {
    async fn new() -> World {
        let stack = Stack::new().await;
        let storage = FaultProxy::start(&stack.endpoint).await;
        let model = FaultProxy::start(stack.model.base_url.trim_end_matches("/v1")).await;
        World { stack, storage, model }
    }

    /// The proxies' endpoints, and two SDK attempts (one retry) to keep the tests fast;
    /// `extra` comes last, so it can override them.
    fn env<'a>(&'a self, model_url: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        let mut env = vec![
            ("AWS_ENDPOINT_URL", self.storage.endpoint.as_str()),
            ("LLM_BASE_URL", model_url),
            ("AWS_MAX_ATTEMPTS", "2"),
        ];
        env.extend_from_slice(extra);
        env
    }

    async fn http(&self, extra: &[(&str, &str)]) -> Function {
        let model_url = format!("{}/v1", self.model.endpoint);
        self.stack.http(&self.env(&model_url, extra)).await
    }

    async fn queue(&self, extra: &[(&str, &str)]) -> Function {
        let model_url = format!("{}/v1", self.model.endpoint);
        self.stack.queue(&self.env(&model_url, extra)).await
    }

    /// The stored version of the session, read from moto directly.
    async fn version(&self) -> Option<u64> {
        let item = self.stack.session_item(USER, SESSION).await?;
        Some(item["version"].as_n().expect("numeric version").parse().expect("version"))
    }

    /// The sort keys of the session's turn items, read from moto directly.
    async fn turn_items(&self) -> Vec<String> {
        let items = self
            .stack
            .dynamodb
            .query()
            .table_name(&self.stack.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(format!("{USER}#{SESSION}")))
            .consistent_read(true)
            .send()
            .await
            .expect("query the session");
        items
            .items()
            .iter()
            .filter_map(|item| item.get("sk").and_then(|sk| sk.as_s().ok()).cloned())
            .filter(|sk| sk.starts_with(aws_store::TURN_SORT_KEY_PREFIX) && sk != aws_store::META_SORT_KEY)
            .collect()
    }
}

async fn turn(function: &Function, message: &str) -> (u16, Value) {
    status_and_body(&function.call(turn_event(Some(USER), SESSION, json!({ "message": message }))).await)
}

/// How many times `message` appears in the session's history, as `GET /sessions/{id}` shows it.
async fn copies_in_history(function: &Function, message: &str) -> usize {
    let (status, session) = status_and_body(&function.call(get_event(Some(USER), SESSION)).await);
    assert_eq!(status, 200, "{session}");
    session["history"].as_array().expect("history").iter().filter(|m| m["content"] == message).count()
}

/// A first turn that succeeds, so the faults below hit an existing session (version 1).
async fn first_turn(world: &World, function: &Function) {
    world.stack.model.push([Reply::text("Primera.")]);
    let (status, body) = turn(function, "Uno").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(world.version().await, Some(1));
}

fn assert_error(status: u16, body: &Value, expected_status: u16, code: &str) {
    assert_eq!((status, body["error"]["code"].as_str()), (expected_status, Some(code)), "{body}");
}

/// The session read fails on every attempt: 503 after the SDK's own retries (its default of
/// three attempts, as deployed), no model call, and the session as it was.
async fn session_read_fails(action: Action) {
    let world = World::new().await;
    let http = world.http(&[("AWS_MAX_ATTEMPTS", "3")]).await;
    first_turn(&world, &http).await;
    let query = Match::dynamodb("Query");
    let before = world.storage.count(&query);
    world.storage.add(Rule::always(query.clone(), action.clone()));

    let (status, body) = turn(&http, "Dos").await;
    assert_error(status, &body, 503, "storage_unavailable");
    assert_eq!(world.storage.count(&query) - before, 3, "{action:?}: three attempts of the Query");
    assert_eq!(world.stack.model.requests().len(), 1, "no model call for the failed turn");
    assert_eq!(world.version().await, Some(1));
    assert_eq!(world.turn_items().await, ["TURN#0000000001"]);
}

#[tokio::test]
async fn a_failing_session_read_answers_503_after_the_sdk_retries() {
    session_read_fails(Action::Status(500)).await;
}

#[tokio::test]
async fn a_throttled_session_read_answers_503_after_the_sdk_retries() {
    session_read_fails(Action::Throttle).await;
}

#[tokio::test]
async fn a_refused_session_read_answers_503_after_the_sdk_retries() {
    session_read_fails(Action::Refuse).await;
}

#[tokio::test]
async fn a_failing_commit_stores_nothing_and_the_same_post_then_succeeds_once() {
    let world = World::new().await;
    let http = world.http(&[]).await;
    first_turn(&world, &http).await;
    let commit = Match::dynamodb("TransactWriteItems");
    world.storage.add(Rule::always(commit.clone(), Action::Status(500)));
    world.stack.model.push([Reply::text("Segunda.")]);

    let (status, body) = turn(&http, "Dos").await;
    assert_error(status, &body, 503, "storage_unavailable");
    assert_eq!(world.storage.faulted(&commit), 2, "the SDK retried the transaction once");
    assert_eq!(world.version().await, Some(1));
    assert_eq!(world.turn_items().await, ["TURN#0000000001"]);

    world.storage.clear();
    world.stack.model.push([Reply::text("Segunda, otra vez.")]);
    let (status, body) = turn(&http, "Dos").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(world.version().await, Some(2));
    assert_eq!(world.turn_items().await, ["TURN#0000000001", "TURN#0000000002"]);
    assert_eq!(copies_in_history(&http, "Dos").await, 1);
}

#[tokio::test]
async fn a_commit_applied_but_unanswered_is_retried_and_stored_once() {
    let world = World::new().await;
    let http = world.http(&[]).await;
    first_turn(&world, &http).await;
    let commit = Match::dynamodb("TransactWriteItems");
    world.storage.add(Rule::nth(commit.clone(), 1, Action::DropAfterApplied));
    world.stack.model.push([Reply::text("Segunda.")]);

    let (status, body) = turn(&http, "Dos").await;
    let attempts = world.storage.count(&commit);
    let items = world.turn_items().await;
    let version = world.version().await;
    assert_eq!(
        (status, attempts, version, items.len()),
        (200, 3, Some(2), 2),
        "status, commit attempts (first turn included), version and turn items; body {body}"
    );
    assert_eq!(copies_in_history(&http, "Dos").await, 1);
}

/// The same with an idempotency key: the claim's put and the commit (which completes the claim)
/// are both applied and unanswered once, and both retries are recognised as our own writes.
#[tokio::test]
async fn a_keyed_turn_whose_claim_and_commit_answers_are_dropped_runs_and_is_stored_once() {
    let world = World::new().await;
    let http = world.http(&[]).await;
    let claim = Match::dynamodb("PutItem");
    let commit = Match::dynamodb("TransactWriteItems");
    world.storage.add(Rule::nth(claim.clone(), 1, Action::DropAfterApplied));
    world.storage.add(Rule::nth(commit.clone(), 1, Action::DropAfterApplied));
    world.stack.model.push([Reply::text("Una vez."), Reply::text("never sent")]);
    let mut event = turn_event(Some(USER), SESSION, json!({"message": "Uno"}));
    event["headers"]["idempotency-key"] = json!("dropped-answers");

    let (status, body) = status_and_body(&http.call(event.clone()).await);
    assert_eq!(status, 200, "{body}");
    assert_eq!((world.storage.count(&claim), world.storage.count(&commit)), (2, 2), "each retried once");
    assert_eq!((world.version().await, world.turn_items().await.len()), (Some(1), 1));
    // And the key now replays.
    let replay = http.call(event).await;
    assert_eq!(replay["headers"]["idempotent-replayed"], "true", "{replay}");
    assert_eq!(world.stack.model.requests().len(), 1);
}

#[tokio::test]
async fn a_slow_commit_is_waited_for_and_stored_once() {
    let world = World::new().await;
    let http = world.http(&[]).await;
    let commit = Match::dynamodb("TransactWriteItems");
    world.storage.add(Rule::always(commit.clone(), Action::Delay(std::time::Duration::from_millis(300))));
    world.stack.model.push([Reply::text("Despacio.")]);

    let (status, body) = turn(&http, "Uno").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(world.storage.count(&commit), 1, "a slow answer is not retried");
    assert_eq!(world.version().await, Some(1));
    assert_eq!(world.turn_items().await, ["TURN#0000000001"]);
}

#[tokio::test]
async fn a_failing_workspace_save_fails_the_turn_and_leaves_no_dangling_manifest_entry() {
    let world = World::new().await;
    let http = world.http(&[]).await;
    let blobs = Match::s3("PUT", &format!("/{USER}/workspaces/{SESSION}/blobs/"));
    world.storage.add(Rule::always(blobs.clone(), Action::Status(500)));
    world.stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/a.md", "content": "perdido"})),
        Reply::text("Guardado."),
    ]);

    // A turn's blobs are put just before its commit: a save that fails fails the turn, which
    // stores nothing, as a failed commit does.
    let (status, body) = turn(&http, "Escribe").await;
    assert_error(status, &body, 503, "storage_unavailable");
    assert_eq!(world.storage.faulted(&blobs), 2, "the SDK retried the PUT once");
    assert_eq!(world.version().await, None);
    // Only the tenant's usage is kept: the model calls were made, and the day counts a failed turn.
    let items = world.stack.dynamodb.scan().table_name(&world.stack.table).send().await.unwrap();
    let usage = format!("{USER}#@usage");
    assert!(items.items().iter().all(|item| item["pk"].as_s().ok() == Some(&usage)), "{:?}", items.items());
    let day = items.items().iter().find(|item| item.contains_key("failed_turns")).expect("the day's usage");
    assert_eq!(day["failed_turns"].as_n().ok().map(String::as_str), Some("1"), "{day:?}");

    // The client's retry runs the turn again; a PUT applied but unanswered is retried, and content
    // addressing makes the retry harmless.
    world.storage.clear();
    world.storage.add(Rule::nth(blobs.clone(), 1, Action::DropAfterApplied));
    world.stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/a.md", "content": "guardado"})),
        Reply::text("Guardado."),
    ]);
    let (status, body) = turn(&http, "Escribe").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(world.storage.count(&blobs), 4, "two failed attempts, then a dropped one and its retry");
    let results = tool_results(world.stack.model.requests().last().expect("a request"));
    assert!(!results.last().expect("a tool result").starts_with("Error"), "{results:?}");
    assert_eq!(world.version().await, Some(1));
    assert_manifest_blobs_exist(&world, 1).await;
}

/// The stored workspace manifest has `expected` entries, and every entry's blob is in S3.
async fn assert_manifest_blobs_exist(world: &World, expected: usize) {
    let item = world.stack.session_item(USER, SESSION).await.expect("session stored");
    let manifest = item["workspace"].as_m().expect("workspace map");
    assert_eq!(manifest.len(), expected, "{manifest:?}");
    for (path, file) in manifest {
        let sha = file.as_m().expect("file")["sha256"].as_s().expect("sha256");
        let key = format!("{USER}/workspaces/{SESSION}/blobs/{sha}");
        assert!(world.stack.get(&key).await.is_some(), "{path} points at a missing blob {key}");
    }
}

#[tokio::test]
async fn a_failing_spill_of_a_large_turn_answers_503_and_stores_nothing() {
    let world = World::new().await;
    // A model with a context that holds the long message, so this test is about storage.
    let http = world.http(&[("LLM_CONTEXT_TOKENS", "2000000")]).await;
    let spill = Match::s3("PUT", &format!("/{USER}/sessions/{SESSION}/turns/"));
    world.storage.add(Rule::always(spill.clone(), Action::Status(500)));
    // Over the 300 KB spill threshold once encoded: a long message and a long reply (each is
    // bounded on its own, at 256 KiB).
    world.stack.model.push([Reply::text(&"x".repeat(200_000))]);

    let (status, body) = turn(&http, &format!("Larga {}", "m".repeat(200_000))).await;
    assert_error(status, &body, 503, "storage_unavailable");
    assert_eq!(world.storage.faulted(&spill), 2, "the SDK retried the PUT once");
    assert_eq!(world.version().await, None);
    assert_eq!(world.stack.item_count().await, 0);
    assert!(world.stack.object_keys(&format!("{USER}/sessions/")).await.is_empty());
}

/// The model fails on every attempt: 502 after `LLM_MAX_ATTEMPTS` (2), and nothing stored.
async fn model_fails(action: Action) {
    let world = World::new().await;
    let http = world.http(&[]).await;
    world.model.add(Rule::always(Match::model(), action.clone()));

    let (status, body) = turn(&http, "Hola").await;
    assert_error(status, &body, 502, "model_provider_failed");
    assert_eq!(world.model.count(&Match::model()), 2, "{action:?}: two attempts");
    assert!(world.stack.model.requests().is_empty());
    assert_eq!(world.version().await, None);
    assert_eq!(world.stack.item_count().await, 0);
}

#[tokio::test]
async fn a_failing_model_answers_502_after_its_retries_and_stores_nothing() {
    model_fails(Action::Status(500)).await;
}

#[tokio::test]
async fn a_throttling_model_answers_502_after_its_retries_and_stores_nothing() {
    model_fails(Action::Throttle).await;
}

#[tokio::test]
async fn a_model_that_drops_the_connection_answers_502_after_its_retries_and_stores_nothing() {
    model_fails(Action::Refuse).await;
}

#[tokio::test]
async fn one_model_failure_then_success_is_one_stored_turn() {
    let world = World::new().await;
    let http = world.http(&[]).await;
    world.model.add(Rule::nth(Match::model(), 1, Action::Status(500)));
    world.stack.model.push([Reply::text("Hola.")]);

    let (status, body) = turn(&http, "Hola").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "Hola.");
    assert_eq!(world.model.count(&Match::model()), 2);
    assert_eq!(world.stack.model.requests().len(), 1);
    assert_eq!(world.version().await, Some(1));
    assert_eq!(world.turn_items().await, ["TURN#0000000001"]);
    assert_eq!(copies_in_history(&http, "Hola").await, 1);
}

/// A planner turn from the queue whose plan does not fit (as in `queue.rs`), so it saves the
/// plan and enqueues a continuation; returns the batch failures and the messages left on the queue.
async fn continued_plan(world: &World) -> (Vec<Value>, usize) {
    use local_stack::experts::ExpertServer;

    let alpha = ExpertServer::start();
    let sqs = aws_sdk_sqs::Client::new(&local_stack::moto::sdk_config(&world.stack.endpoint).await);
    let queue_url = local_stack::moto::create_fifo_queue(&sqs).await;
    let structured = |value: Value| Reply::Text(value.to_string());
    world.stack.model.push([
        structured(json!({"decision": "replace", "plan": [{"expert": "alpha", "task": "One"}, {"expert": "alpha", "task": "Two"}],
                          "next_task": 0, "clarification": null})),
        structured(json!({"prompts": []})),
        Reply::text("One done."),
        structured(json!({"is_completed": true, "explanation": "ok", "confidence": 0.9})),
        structured(json!({"prompts": []})),
    ]);
    let experts = json!({"mcpServers": {"alpha": {"url": alpha.url, "description": "Alpha"}}}).to_string();
    let queue = world
        .queue(&[
            ("AGENT_STRATEGY", "planner"),
            ("EXPERTS_CONFIG", &experts),
            ("MAX_STEPS", "5"),
            ("TURN_QUEUE_URL", &queue_url),
        ])
        .await;
    let record = local_stack::stack::sqs_record(
        "m1",
        SESSION,
        &json!({"user_id": USER, "session_id": SESSION, "message": "Do one and two"}).to_string(),
    );
    let response = queue.call(json!({ "Records": [record] })).await;
    let failures = response["batchItemFailures"].as_array().expect("batchItemFailures").clone();

    let mut messages = 0;
    loop {
        let received =
            sqs.receive_message().queue_url(&queue_url).max_number_of_messages(10).send().await.expect("receive");
        if received.messages().is_empty() {
            return (failures, messages);
        }
        for message in received.messages() {
            messages += 1;
            let handle = message.receipt_handle().expect("receipt handle");
            sqs.delete_message().queue_url(&queue_url).receipt_handle(handle).send().await.expect("delete");
        }
    }
}

#[tokio::test]
async fn a_failing_continuation_enqueue_still_reports_the_committed_record_as_done() {
    let world = World::new().await;
    let send = Match::sqs("SendMessage");
    world.storage.add(Rule::always(send.clone(), Action::Status(500)));
    let (failures, messages) = continued_plan(&world).await;
    assert_eq!(failures, Vec::<Value>::new(), "the turn is committed, so the record is done");
    assert_eq!(world.storage.faulted(&send), 2, "the SDK retried the SendMessage once");
    assert_eq!(messages, 0);
    assert_eq!(world.version().await, Some(1));
    let item = world.stack.session_item(USER, SESSION).await.expect("session stored");
    assert!(!matches!(item["plan"], AttributeValue::Null(true)), "the unfinished plan is saved for a later turn");
    assert_eq!(world.turn_items().await, ["TURN#0000000001"]);
}

#[tokio::test]
async fn a_continuation_enqueued_but_unanswered_is_retried_and_delivered_once() {
    let world = World::new().await;
    let send = Match::sqs("SendMessage");
    world.storage.add(Rule::nth(send.clone(), 1, Action::DropAfterApplied));
    let (failures, messages) = continued_plan(&world).await;
    assert_eq!(failures, Vec::<Value>::new());
    assert_eq!(world.storage.count(&send), 2, "the SDK retried the SendMessage once");
    assert_eq!(messages, 1, "the FIFO queue's deduplication id makes the retry harmless");
    assert_eq!(world.version().await, Some(1));
}
