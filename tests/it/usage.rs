//! Per-tenant usage, cost and daily budgets through the compiled functions against moto and the
//! scripted model (which reports 100 input and 10 output tokens for every answered call, the input
//! split by its emulated prompt cache): a turn counts once however often its request comes, a
//! failed turn counts what it spent, `GET /usage` answers only the caller's own with the cost at
//! the price table's prices, and a tenant at its budget of tokens or money is refused before any
//! model call.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, sqs_record, status_and_body, turn_event, Stack};
use serde_json::{json, Value};

const ALICE: &str = "user-usage-alice";
const BOB: &str = "user-usage-bob";
const MODEL: &str = "scripted-model";

/// `POST /sessions/{session}/turns` by `user`, with an `Idempotency-Key` when given: the status,
/// body and headers.
async fn post(http: &Function, user: &str, session: &str, message: &str, key: Option<&str>) -> (u16, Value, Value) {
    let mut event = turn_event(Some(user), session, json!({ "message": message }));
    if let Some(key) = key {
        event["headers"]["idempotency-key"] = json!(key);
    }
    let response = http.call(event).await;
    let (status, body) = status_and_body(&response);
    (status, body, response["headers"].clone())
}

/// `GET /usage` with `query` (`from=...&to=...`) by `user`.
fn usage_event(user: Option<&str>, query: &[(&str, &str)]) -> Value {
    let mut event = get_event(user, "unused");
    let raw_query: Vec<String> = query.iter().map(|(name, value)| format!("{name}={value}")).collect();
    event["rawPath"] = json!("/usage");
    event["requestContext"]["http"]["path"] = json!("/usage");
    event["rawQueryString"] = json!(raw_query.join("&"));
    event["pathParameters"] = json!({});
    event["queryStringParameters"] =
        json!(query.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>());
    event
}

async fn usage(http: &Function, user: &str) -> Value {
    let (status, body) = status_and_body(&http.call(usage_event(Some(user), &[])).await);
    assert_eq!(status, 200, "{body}");
    body
}

/// Today's totals and the scripted model's share, from a `GET /usage` body.
fn today(body: &Value) -> (Value, Value) {
    let days = body["days"].as_array().expect("days");
    assert_eq!(days.len(), 1, "only today has usage: {body}");
    let day = &days[0];
    assert_eq!(day["date"], body["to"], "{body}");
    let models = day["models"].as_array().expect("models");
    assert_eq!(models.len(), 1, "{body}");
    assert_eq!(models[0]["model"], MODEL);
    (day.clone(), models[0].clone())
}

fn turn_record(id: &str, user: &str, session: &str, message: &str) -> Value {
    sqs_record(id, session, &json!({"user_id": user, "session_id": session, "message": message}).to_string())
}

#[tokio::test]
async fn a_turn_counts_once_across_a_retried_post_a_redelivered_record_and_a_replay() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;

    // The first attempt fails at the model (both attempts answer 500, nothing was paid): it counts nothing.
    stack.model.push([Reply::Status(500), Reply::Status(500)]);
    let (status, body, _) = post(&http, ALICE, "s1", "Hola", Some("key-1")).await;
    assert_eq!(status, 502, "{body}");
    let body = usage(&http, ALICE).await;
    assert_eq!(body["days"], json!([]), "an unpaid failure counts nothing: {body}");

    // The client retries with the same key: the turn runs (a tool call, then the answer) and counts
    // its two calls; the same request again replays the committed reply and counts nothing more.
    stack.model.push([Reply::tool("todoread", json!({})), Reply::text("Hecho.")]);
    let (status, body, _) = post(&http, ALICE, "s1", "Hola", Some("key-1")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((&body["usage"]["input_tokens"], &body["usage"]["output_tokens"]), (&json!(200), &json!(20)), "{body}");
    let (status, replayed, headers) = post(&http, ALICE, "s1", "Hola", Some("key-1")).await;
    assert_eq!((status, &headers["idempotent-replayed"]), (200, &json!("true")), "{replayed}");
    assert_eq!(stack.model.requests().len(), 4, "the replay called no model");

    // A record delivered twice by SQS (the same message id) runs once and counts once.
    let queue = stack.queue(&[]).await;
    stack.model.push([Reply::text("En cola.")]);
    for delivery in 1..=2 {
        let mut record = turn_record("m-usage-1", ALICE, "q1", "Desde la cola");
        record["attributes"]["ApproximateReceiveCount"] = json!(delivery.to_string());
        let response = queue.call(json!({ "Records": [record] })).await;
        assert_eq!(response["batchItemFailures"], json!([]), "delivery {delivery}");
    }
    assert_eq!(stack.model.requests().len(), 5, "the redelivery replayed");

    let body = usage(&http, ALICE).await;
    let (day, model) = today(&body);
    assert_eq!(
        (&day["input_tokens"], &day["output_tokens"], &day["tokens"], &day["model_calls"], &day["turns"]),
        (&json!(300), &json!(30), &json!(330), &json!(3), &json!(2)),
        "{body}"
    );
    assert_eq!(day["failed_turns"], 0, "{body}");
    assert_eq!(
        (&model["input_tokens"], &model["output_tokens"], &model["model_calls"]),
        (&json!(300), &json!(30), &json!(3)),
        "{model}"
    );
    // The scripted model has no price: its tokens count, its cost is unknown.
    assert_eq!((&model["cost_usd"], &model["unpriced_calls"]), (&Value::Null, &json!(3)), "{model}");
    assert_eq!(body["totals"]["tokens"], 330, "{body}");

    // A turn that fails after a paid call (a tool call answered, then the model fails) spent those
    // tokens: they count, as a failed turn, and its session is unchanged.
    stack.model.push([Reply::tool("todoread", json!({})), Reply::Status(500), Reply::Status(500)]);
    let (status, body, _) = post(&http, ALICE, "s2", "Otra", Some("key-2")).await;
    assert_eq!(status, 502, "{body}");
    assert!(stack.session_item(ALICE, "s2").await.is_none());
    let body = usage(&http, ALICE).await;
    let (day, model) = today(&body);
    assert_eq!(
        (&day["tokens"], &day["model_calls"], &day["turns"], &day["failed_turns"]),
        (&json!(440), &json!(4), &json!(2), &json!(1))
    );
    assert_eq!(model["model_calls"], 4);
}

#[tokio::test]
async fn get_usage_answers_only_the_callers_own_and_refuses_bad_dates() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    stack.model.push([Reply::text("uno"), Reply::tool("todoread", json!({})), Reply::text("dos")]);
    assert_eq!(post(&http, ALICE, "a", "Hola", None).await.0, 200);
    assert_eq!(post(&http, BOB, "b", "Hola", None).await.0, 200);

    let (alice, _) = today(&usage(&http, ALICE).await);
    let (bob, _) = today(&usage(&http, BOB).await);
    assert_eq!((&alice["model_calls"], &alice["tokens"]), (&json!(1), &json!(110)));
    assert_eq!((&bob["model_calls"], &bob["tokens"]), (&json!(2), &json!(220)));
    // A query parameter naming another user changes nothing: the JWT's `sub` is the user.
    let (status, body) =
        status_and_body(&http.call(usage_event(Some(ALICE), &[("user_id", BOB), ("user", BOB)])).await);
    assert_eq!(status, 200);
    assert_eq!(today(&body).0["tokens"], 110, "{body}");
    let (status, _) = status_and_body(&http.call(usage_event(None, &[])).await);
    assert_eq!(status, 401);

    // An explicit range around today, and one in the past that holds nothing.
    let day = alice["date"].as_str().unwrap().to_owned();
    let (status, body) = status_and_body(&http.call(usage_event(Some(ALICE), &[("from", &day), ("to", &day)])).await);
    assert_eq!((status, &body["from"], &body["to"]), (200, &json!(day), &json!(day)), "{body}");
    assert_eq!(today(&body).0["tokens"], 110);
    let (status, body) =
        status_and_body(&http.call(usage_event(Some(ALICE), &[("from", "2020-01-01"), ("to", "2020-01-31")])).await);
    assert_eq!((status, &body["days"]), (200, &json!([])), "{body}");

    for query in [
        &[("from", "2026-02-30")][..],
        &[("from", "yesterday")],
        &[("to", "2026-1-05")],
        &[("from", "2026-03-02"), ("to", "2026-03-01")],
        &[("from", "2024-01-01"), ("to", "2025-01-01")],
    ] {
        let (status, body) = status_and_body(&http.call(usage_event(Some(ALICE), query)).await);
        assert_eq!((status, &body["error"]["code"]), (400, &json!("bad_request")), "{query:?}: {body}");
    }
    let mut post_usage = usage_event(Some(ALICE), &[]);
    post_usage["requestContext"]["http"]["method"] = json!("POST");
    assert_eq!(status_and_body(&http.call(post_usage).await).0, 405);
}

/// Writes `user`'s own budget as an operator's `aws dynamodb put-item` does.
async fn set_budget(stack: &Stack, user: &str, budget: Option<u64>) {
    let mut item = HashMap::from([
        ("pk".to_owned(), AttributeValue::S(format!("{user}#@usage"))),
        ("sk".to_owned(), AttributeValue::S("TOKEN_BUDGET".to_owned())),
    ]);
    match budget {
        Some(tokens) => item.insert("daily_tokens".to_owned(), AttributeValue::N(tokens.to_string())),
        None => item.insert("unlimited".to_owned(), AttributeValue::Bool(true)),
    };
    stack.dynamodb.put_item().table_name(&stack.table).set_item(Some(item)).send().await.expect("put the budget");
}

fn assert_quota_exceeded(status: u16, body: &Value, headers: &Value) {
    assert_eq!((status, &body["error"]["code"]), (429, &json!("quota_exceeded")), "{body}");
    let retry_after: u64 =
        headers["retry-after"].as_str().expect("a Retry-After header").parse().expect("Retry-After in seconds");
    assert!((1..=86_400).contains(&retry_after), "{retry_after}");
}

#[tokio::test]
async fn a_tenant_at_its_budget_is_refused_before_any_model_call_and_others_are_not() {
    let stack = Stack::new().await;
    // 150 tokens a day: a turn of one call is 110, so the second turn starts under the budget and
    // the third finds it spent.
    let http = stack.http(&[("DAILY_TOKEN_BUDGET", "150")]).await;
    stack.model.push([Reply::text("uno"), Reply::text("dos")]);
    assert_eq!(post(&http, ALICE, "s1", "uno", None).await.0, 200);
    assert_eq!(post(&http, ALICE, "s1", "dos", None).await.0, 200);
    let calls = stack.model.requests().len();

    let (status, body, headers) = post(&http, ALICE, "s1", "tres", Some("key-over")).await;
    assert_quota_exceeded(status, &body, &headers);
    assert_eq!(stack.model.requests().len(), calls, "the model was not called");
    let session = stack.session_item(ALICE, "s1").await.expect("session");
    assert_eq!(session["version"], AttributeValue::N("2".into()), "the refused turn stored nothing");
    // The key was given back: once the budget allows, the same request runs.
    assert_eq!(post(&http, ALICE, "s1", "tres", Some("key-over")).await.0, 429);

    // Another tenant is not affected.
    stack.model.push([Reply::text("Bob")]);
    let (status, body, _) = post(&http, BOB, "b1", "hola", None).await;
    assert_eq!(status, 200, "{body}");

    // A background turn of the tenant over budget fails for good with quota_exceeded, and its
    // record is not reported for a retry.
    let sqs = aws_sdk_sqs::Client::new(&local_stack::moto::sdk_config(&stack.endpoint).await);
    let queue_url = local_stack::moto::create_fifo_queue(&sqs).await;
    let http_async = stack.http(&[("DAILY_TOKEN_BUDGET", "150"), ("TURN_QUEUE_URL", &queue_url)]).await;
    let mut event = turn_event(Some(ALICE), "bg", json!({ "message": "en segundo plano" }));
    event["headers"]["prefer"] = json!("respond-async");
    let (status, accepted) = status_and_body(&http_async.call(event).await);
    assert_eq!(status, 202, "{accepted}");
    let received = sqs
        .receive_message()
        .queue_url(&queue_url)
        .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
        .wait_time_seconds(1)
        .send()
        .await
        .expect("receive");
    let message = &received.messages()[0];
    let mut record = sqs_record(message.message_id().unwrap(), "bg", message.body().unwrap());
    record["attributes"]["ApproximateReceiveCount"] = json!("1");
    let worker = stack.queue(&[("DAILY_TOKEN_BUDGET", "150"), ("TURN_QUEUE_URL", &queue_url)]).await;
    let response = worker.call(json!({ "Records": [record] })).await;
    assert_eq!(response["batchItemFailures"], json!([]), "not retried");
    let turn_id = accepted["turn_id"].as_str().unwrap();
    let mut poll = get_event(Some(ALICE), "bg");
    poll["rawPath"] = json!(format!("/sessions/bg/turns/{turn_id}"));
    poll["requestContext"]["http"]["path"] = poll["rawPath"].clone();
    let (status, polled) = status_and_body(&http_async.call(poll).await);
    assert_eq!((status, &polled["status"]), (200, &json!("failed")), "{polled}");
    assert_eq!(polled["error"]["code"], "quota_exceeded", "{polled}");
    assert_eq!(stack.model.requests().len(), calls + 1, "only Bob's turn reached the model");

    // An operator raises Alice's budget: her turns run again; an unlimited one lifts it.
    set_budget(&stack, ALICE, Some(1_000)).await;
    stack.model.push([Reply::text("tres")]);
    assert_eq!(post(&http, ALICE, "s1", "tres", Some("key-over")).await.0, 200);
    // An override of 0 stops a tenant; `unlimited` frees one.
    set_budget(&stack, BOB, Some(0)).await;
    let (status, body, headers) = post(&http, BOB, "b1", "otra", None).await;
    assert_quota_exceeded(status, &body, &headers);
    set_budget(&stack, BOB, None).await;
    stack.model.push([Reply::text("libre")]);
    assert_eq!(post(&http, BOB, "b1", "otra", None).await.0, 200);
}

#[tokio::test]
async fn without_a_budget_a_warm_turn_makes_no_extra_request_and_with_one_a_single_query() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    stack.model.push([Reply::text("uno"), Reply::text("dos")]);
    assert_eq!(post(&http, ALICE, "s1", "uno", None).await.0, 200);
    let mark = http.log_mark();
    assert_eq!(post(&http, ALICE, "s1", "dos", None).await.0, 200);
    let requests = http.storage_requests_since(mark).await;
    assert_eq!((requests.get("DynamoDB.Query"), requests.get("DynamoDB.TransactWriteItems")), (Some(&1), Some(&1)));
    assert_eq!(requests.get("DynamoDB.GetItem"), None, "{requests:?}");

    let http = stack.http(&[("DAILY_TOKEN_BUDGET", "100000")]).await;
    stack.model.push([Reply::text("tres"), Reply::text("cuatro")]);
    assert_eq!(post(&http, ALICE, "s1", "tres", None).await.0, 200);
    let mark = http.log_mark();
    assert_eq!(post(&http, ALICE, "s1", "cuatro", None).await.0, 200);
    let requests = http.storage_requests_since(mark).await;
    assert_eq!(requests.get("DynamoDB.Query"), Some(&2), "the session and the day's usage: {requests:?}");
    assert_eq!(requests.get("DynamoDB.TransactWriteItems"), Some(&1), "{requests:?}");
    // The turn's one model call reserved its tokens first: one conditional update, no other read.
    assert_eq!(requests.get("DynamoDB.UpdateItem"), Some(&1), "{requests:?}");
    assert_eq!(requests.get("DynamoDB.GetItem"), None, "{requests:?}");
}

#[tokio::test]
async fn a_streamed_turn_over_budget_is_a_429_before_its_stream_opens() {
    let stack = Stack::new().await;
    let identity = local_stack::identity::IdentityProvider::start().await;
    let mut env = identity.env();
    env.push(("DAILY_TOKEN_BUDGET", "150"));
    let function = Function::start("stream-turn", &stack.env(&env)).await;
    // An operator stopped Alice (a budget of 0); Bob keeps the default.
    set_budget(&stack, ALICE, Some(0)).await;
    let budget = std::time::Duration::from_secs(60);

    for events in [true, false] {
        let event =
            crate::streaming::stream_event(Some(&identity.token(ALICE)), "s1", json!({"message": "Hola"}), events);
        let mut stream = function.invoke_streaming(event, budget).await;
        let prelude = stream.prelude().await;
        let body: Value = serde_json::from_str(&stream.body_text().await).expect("a JSON error body");
        assert_quota_exceeded(prelude["statusCode"].as_u64().unwrap() as u16, &body, &prelude["headers"]);
    }
    assert!(stack.model.requests().is_empty(), "the model was not called");

    stack.model.push([Reply::text("Hola, Bob.")]);
    let event = crate::streaming::stream_event(Some(&identity.token(BOB)), "b1", json!({"message": "Hola"}), true);
    let mut stream = function.invoke_streaming(event, budget).await;
    assert_eq!(stream.status().await, 200);
    let events = crate::streaming::all_events(&mut stream).await;
    assert_eq!(events.last().unwrap().name, "turn.completed");
}

/// The scripted model's prices for these tests: whole billionths of a dollar per token
/// ($3 / $15 / $3.75 / $0.30 per million), so a turn's cost does not depend on how its tokens
/// split between its calls.
const PRICES: &str =
    r#"{"models": {"scripted-model": {"input": 3, "output": 15, "cache_write": 3.75, "cache_read": 0.3}}}"#;

/// The cost in billionths of a dollar of `usage` (a body's `usage` or a `GET /usage` count) at [`PRICES`].
fn priced(usage: &Value) -> u64 {
    let count = |name: &str| usage[name].as_u64().unwrap_or_else(|| panic!("{name} in {usage}"));
    let uncached = count("input_tokens") - count("cache_read_tokens") - count("cache_write_tokens");
    assert_eq!(usage["uncached_input_tokens"], uncached, "{usage}");
    uncached * 3_000
        + count("cache_write_tokens") * 3_750
        + count("cache_read_tokens") * 300
        + count("output_tokens") * 15_000
}

fn usd(nanos: u64) -> Value {
    json!(nanos as f64 / 1e9)
}

#[tokio::test]
async fn a_turns_cost_and_cache_split_come_through_the_body_and_get_usage_and_daily_usd_stops_a_tenant() {
    let stack = Stack::new().await;
    // A money budget of $100 by default: far above these turns, so only an operator's item stops one.
    let http = stack.http(&[("MODEL_PRICES", PRICES), ("DAILY_BUDGET_USD", "100")]).await;
    stack.model.push([Reply::tool("todoread", json!({})), Reply::text("Hecho."), Reply::text("Otra vez.")]);
    let (status, first, _) = post(&http, ALICE, "s1", "Hola", None).await;
    assert_eq!(status, 200, "{first}");
    let (status, second, _) = post(&http, ALICE, "s1", "Otra", None).await;
    assert_eq!(status, 200, "{second}");
    let (first_cost, second_cost) = (priced(&first["usage"]), priced(&second["usage"]));
    assert_eq!(first["cost"], json!({"usd": usd(first_cost)}), "{first}");
    assert_eq!(second["cost"], json!({"usd": usd(second_cost)}), "{second}");
    assert!(
        second["usage"]["cache_read_tokens"].as_u64().unwrap() > 0,
        "the second turn reads the first's prefix from the cache: {second}"
    );

    let body = usage(&http, ALICE).await;
    let (day, model) = today(&body);
    for counts in [&day, &model, &body["totals"]] {
        assert_eq!(priced(counts), first_cost + second_cost, "{counts}");
        assert_eq!((&counts["cost_usd"], &counts["unpriced_calls"]), (&usd(first_cost + second_cost), &json!(0)));
        let cached = ["cache_read_tokens", "cache_write_tokens"]
            .map(|name| first["usage"][name].as_u64().unwrap() + second["usage"][name].as_u64().unwrap());
        assert_eq!([&counts["cache_read_tokens"], &counts["cache_write_tokens"]], cached.map(|n| json!(n)).each_ref());
    }
    assert_eq!(body["prices"]["date"], "2026-11-29", "{body}");
    assert_eq!(body["prices"]["currency"], "USD");
    assert_eq!(body["prices"]["source"][0], "MODEL_PRICES", "the deployment's prices come first: {body}");

    // Without the deployment's prices the scripted model has none: tokens only, and it says so.
    let unpriced = stack.http(&[]).await;
    stack.model.push([Reply::text("Bob")]);
    let (status, body, _) = post(&unpriced, BOB, "b1", "Hola", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cost"], json!({"usd": null, "unpriced_models": [MODEL]}), "{body}");
    let (day, model) = today(&usage(&unpriced, BOB).await);
    assert_eq!((&day["cost_usd"], &day["unpriced_calls"], &day["tokens"]), (&Value::Null, &json!(1), &json!(110)));
    assert_eq!(model["cost_usd"], Value::Null);

    // An operator gives Alice a millionth of a dollar a day: she has spent more, so her next turn
    // is refused before any model call, with a 429 that names the money budget in dollars.
    let mut item = HashMap::from([
        ("pk".to_owned(), AttributeValue::S(format!("{ALICE}#@usage"))),
        ("sk".to_owned(), AttributeValue::S("TOKEN_BUDGET".to_owned())),
        ("daily_usd".to_owned(), AttributeValue::N("0.000001".to_owned())),
    ]);
    stack.dynamodb.put_item().table_name(&stack.table).set_item(Some(item.clone())).send().await.expect("put");
    let calls = stack.model.requests().len();
    let (status, body, headers) = post(&http, ALICE, "s1", "Una más", None).await;
    assert_quota_exceeded(status, &body, &headers);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("money budget is spent ($0.") && message.contains(" of $0.000001)"), "{message}");
    assert_eq!(stack.model.requests().len(), calls, "the model was not called");
    // The operator raises it to $5 (beside a token figure, which this deployment has no budget of).
    item.insert("daily_usd".to_owned(), AttributeValue::N("5".to_owned()));
    item.insert("daily_tokens".to_owned(), AttributeValue::N("10".to_owned()));
    stack.dynamodb.put_item().table_name(&stack.table).set_item(Some(item)).send().await.expect("put");
    stack.model.push([Reply::text("Sí.")]);
    assert_eq!(post(&http, ALICE, "s1", "Una más", None).await.0, 200);
}
