//! Daily token budgets under concurrency, through the compiled functions against moto and the
//! scripted model (100 input and 10 output tokens for every answered call, so a one-call turn
//! spends 110): parallel turns (buffered, streamed, queued) reserve before each model call, so
//! together they pass the budget by at most one reservation, the refused answer `quota_exceeded`
//! and store nothing; an operator's unusable budget item gives the tenant the default budget.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use futures::future::join_all;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{sqs_record, status_and_body, turn_event, Stack};
use serde_json::{json, Value};

/// What one turn of one answered call spends.
const TURN_TOKENS: u64 = 110;
/// How long the scripted model takes to answer, so that every parallel turn is in flight at once.
const MODEL_DELAY: Duration = Duration::from_millis(600);

async fn post(http: &Function, user: &str, session: &str) -> (u16, Value) {
    status_and_body(&http.call(turn_event(Some(user), session, json!({ "message": "Hola" }))).await)
}

/// Today's tokens of `user` as stored (the day item's `tokens`), and its `reserved`.
async fn day_tokens(stack: &Stack, user: &str) -> (u64, u64) {
    let day = agent_core::turn::utc_day(agent_core::turn::OffsetDateTime::now_utc());
    let found = stack
        .dynamodb
        .get_item()
        .table_name(&stack.table)
        .key("pk", AttributeValue::S(format!("{user}#@usage")))
        .key("sk", AttributeValue::S(format!("DAY#{day}")))
        .consistent_read(true)
        .send()
        .await
        .expect("get the day item");
    let item = found.item.unwrap_or_default();
    let number = |name: &str| match item.get(name) {
        Some(AttributeValue::N(value)) => value.parse::<u64>().expect("a count"),
        _ => 0,
    };
    (number("tokens"), number("reserved"))
}

/// Starts `count` instances of `name` (a Lambda function runs one invocation at a time).
async fn instances(name: &str, count: usize, env: &[(String, String)]) -> Vec<Function> {
    join_all((0..count).map(|_| Function::start(name, env))).await
}

fn delayed_replies(count: usize) -> Vec<Reply> {
    (0..count).map(|index| Reply::Delayed(MODEL_DELAY, Box::new(Reply::text(&format!("respuesta {index}"))))).collect()
}

/// `parallel` buffered turns of `user`, each in a session of its own, all at once: the statuses
/// by session, after each refused one was checked to have stored nothing.
async fn parallel_turns(stack: &Stack, functions: &[Function], user: &str, prefix: &str) -> Vec<u16> {
    let sessions: Vec<String> = (0..functions.len()).map(|index| format!("{prefix}{index}")).collect();
    let answers =
        join_all(functions.iter().zip(&sessions).map(|(function, session)| post(function, user, session))).await;
    let mut statuses = Vec::new();
    for ((status, body), session) in answers.into_iter().zip(&sessions) {
        match status {
            200 => assert!(stack.session_item(user, session).await.is_some(), "{session} was stored"),
            429 => {
                assert_eq!(body["error"]["code"], "quota_exceeded", "{body}");
                assert!(stack.session_item(user, session).await.is_none(), "the refused {session} stored nothing");
            }
            other => panic!("{session}: unexpected {other}: {body}"),
        }
        statuses.push(status);
    }
    statuses
}

#[tokio::test]
async fn ten_parallel_turns_with_one_token_left_run_one_and_refuse_nine() {
    let stack = Stack::new().await;
    let user = "user-budget-ten";
    // 111 tokens: the first turn spends 110 and leaves 1.
    let env = stack.env(&[("DAILY_TOKEN_BUDGET", "111")]);
    let functions = instances("http-turn", 10, &env).await;
    stack.model.push([Reply::text("primero")]);
    assert_eq!(post(&functions[0], user, "first").await.0, 200);
    assert_eq!(day_tokens(&stack, user).await, (TURN_TOKENS, 0));

    stack.model.push(delayed_replies(10));
    let statuses = parallel_turns(&stack, &functions, user, "p").await;
    let ran = statuses.iter().filter(|status| **status == 200).count();
    // The last token is reserved by one call alone; every other call finds nothing left.
    assert_eq!(ran, 1, "{statuses:?}");
    let (tokens, reserved) = day_tokens(&stack, user).await;
    assert_eq!((tokens, reserved), (2 * TURN_TOKENS, 0), "the spend is counted and every reservation released");
    assert!(tokens <= 111 + TURN_TOKENS, "within the budget and one call's reservation: {tokens}");
    assert_eq!(stack.model.requests().len(), 2, "the refused turns called no model");
}

#[tokio::test]
async fn fifty_parallel_turns_pass_the_budget_by_at_most_one_reservation() {
    let stack = Stack::new().await;
    let user = "user-budget-fifty";
    // A call reserves its estimated input plus 1,000 tokens of output: 2,000 tokens hold at most
    // two calls at a time (the second capped), however many turns start together.
    let budget: u64 = 2_000;
    let max_output: u64 = 1_000;
    let env = stack.env(&[("DAILY_TOKEN_BUDGET", "2000"), ("LLM_MAX_TOKENS", "1000")]);
    let functions = instances("http-turn", 50, &env).await;
    stack.model.push(delayed_replies(50));
    let statuses = parallel_turns(&stack, &functions, user, "f").await;
    let ran = statuses.iter().filter(|status| **status == 200).count() as u64;
    let refused = statuses.iter().filter(|status| **status == 429).count();
    let (tokens, reserved) = day_tokens(&stack, user).await;
    assert_eq!((tokens, reserved), (ran * TURN_TOKENS, 0), "{statuses:?}");
    assert!(ran >= 1 && refused >= 1, "some ran, some were refused: {statuses:?}");
    // Without reservations all fifty would run: 5,500 tokens.
    assert!(tokens <= budget + max_output, "{tokens} tokens for a budget of {budget}");
    assert_eq!(stack.model.requests().len() as u64, ran, "only the turns that ran called the model");
    eprintln!("50 parallel turns, budget {budget}: {ran} ran, {refused} refused, {tokens} tokens used");
}

#[tokio::test]
async fn parallel_streamed_and_background_turns_reserve_the_same_way() {
    let stack = Stack::new().await;
    let identity = local_stack::identity::IdentityProvider::start().await;
    let user = "user-budget-stream";
    let mut env = identity.env();
    env.push(("DAILY_TOKEN_BUDGET", "111"));
    let streams = instances("stream-turn", 5, &stack.env(&env)).await;
    let http = stack.http(&[("DAILY_TOKEN_BUDGET", "111")]).await;
    stack.model.push([Reply::text("primero")]);
    assert_eq!(post(&http, user, "first").await.0, 200);

    // Five streamed turns with 1 token left: one runs; the others are refused, before the stream
    // opens (429) or, once a reservation beat them to the last token, as the stream's error event.
    stack.model.push(delayed_replies(5));
    let budget = Duration::from_secs(60);
    let outcomes = join_all(streams.iter().enumerate().map(|(index, function)| {
        let token = identity.token(user);
        async move {
            let event =
                crate::streaming::stream_event(Some(&token), &format!("s{index}"), json!({"message": "Hola"}), true);
            let mut stream = function.invoke_streaming(event, budget).await;
            let status = stream.status().await;
            if status != 200 {
                let body: Value = serde_json::from_str(&stream.body_text().await).expect("a JSON error body");
                return (status, body["error"]["code"].as_str().unwrap_or_default().to_owned());
            }
            let events = crate::streaming::all_events(&mut stream).await;
            let last = events.last().expect("events");
            let code = last.data["error"]["code"].as_str().unwrap_or_default().to_owned();
            (status, if last.name == "turn.completed" { "completed".to_owned() } else { code })
        }
    }))
    .await;
    let completed = outcomes.iter().filter(|(_, code)| code == "completed").count();
    assert_eq!(completed, 1, "{outcomes:?}");
    assert!(outcomes.iter().all(|(_, code)| code == "completed" || code == "quota_exceeded"), "{outcomes:?}");
    for index in 0..5 {
        let stored = stack.session_item(user, &format!("s{index}")).await.is_some();
        assert_eq!(stored, outcomes[index].1 == "completed", "s{index}: {outcomes:?}");
    }
    assert_eq!(day_tokens(&stack, user).await, (2 * TURN_TOKENS, 0), "{outcomes:?}");

    // Ten background turns (`Prefer: respond-async`) of another tenant with 1 token left, run by
    // ten queue workers at once: one completes, nine fail for good with quota_exceeded (not
    // retried), and only the one stores a session.
    let other = "user-budget-queue";
    stack.model.push([Reply::text("primero")]);
    assert_eq!(post(&http, other, "first").await.0, 200);
    let sqs = aws_sdk_sqs::Client::new(&local_stack::moto::sdk_config(&stack.endpoint).await);
    let queue_url = local_stack::moto::create_fifo_queue(&sqs).await;
    let env = [("DAILY_TOKEN_BUDGET", "111"), ("TURN_QUEUE_URL", queue_url.as_str())];
    let http_async = stack.http(&env).await;
    let mut turn_ids = Vec::new();
    for index in 0..10 {
        let mut event = turn_event(Some(other), &format!("q{index}"), json!({ "message": "Hola" }));
        event["headers"]["prefer"] = json!("respond-async");
        let (status, accepted) = status_and_body(&http_async.call(event).await);
        assert_eq!(status, 202, "{accepted}");
        turn_ids.push(accepted["turn_id"].as_str().expect("a turn id").to_owned());
    }
    let mut records = Vec::new();
    while records.len() < 10 {
        let received = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
            .wait_time_seconds(1)
            .send()
            .await
            .expect("receive");
        assert!(!received.messages().is_empty(), "ten messages were queued; {} received", records.len());
        for message in received.messages() {
            let group = message.attributes().and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId)).cloned();
            let mut record =
                sqs_record(message.message_id().unwrap(), &group.expect("a group"), message.body().unwrap());
            record["attributes"]["ApproximateReceiveCount"] = json!("1");
            records.push(record);
        }
    }
    let workers = instances("queue-turn", 10, &stack.env(&env)).await;
    stack.model.push(delayed_replies(10));
    let answers =
        join_all(workers.iter().zip(records).map(|(worker, record)| worker.call(json!({ "Records": [record] })))).await;
    for answer in &answers {
        assert_eq!(answer["batchItemFailures"], json!([]), "a refused background turn is not retried: {answer}");
    }
    let mut outcomes = Vec::new();
    for (index, turn_id) in turn_ids.iter().enumerate() {
        let mut poll = local_stack::stack::get_event(Some(other), &format!("q{index}"));
        poll["rawPath"] = json!(format!("/sessions/q{index}/turns/{turn_id}"));
        poll["requestContext"]["http"]["path"] = poll["rawPath"].clone();
        let (status, polled) = status_and_body(&http_async.call(poll).await);
        assert_eq!(status, 200, "{polled}");
        let outcome = match polled["status"].as_str() {
            Some("completed") => "completed".to_owned(),
            Some("failed") => polled["error"]["code"].as_str().unwrap_or_default().to_owned(),
            other => panic!("q{index} still {other:?}: {polled}"),
        };
        let stored = stack.session_item(other, &format!("q{index}")).await.is_some();
        assert_eq!(stored, outcome == "completed", "q{index}: {polled}");
        outcomes.push(outcome);
    }
    assert_eq!(outcomes.iter().filter(|outcome| *outcome == "completed").count(), 1, "{outcomes:?}");
    assert!(outcomes.iter().all(|outcome| outcome == "completed" || outcome == "quota_exceeded"), "{outcomes:?}");
    assert_eq!(day_tokens(&stack, other).await, (2 * TURN_TOKENS, 0), "{outcomes:?} {answers:?}");
}

/// Writes `user`'s budget item with exactly `attributes`, as an operator's mistaken put-item would.
async fn put_budget_item(stack: &Stack, user: &str, attributes: &[(&str, AttributeValue)]) {
    let mut item = HashMap::from([
        ("pk".to_owned(), AttributeValue::S(format!("{user}#@usage"))),
        ("sk".to_owned(), AttributeValue::S("TOKEN_BUDGET".to_owned())),
    ]);
    for (name, value) in attributes {
        item.insert((*name).to_owned(), value.clone());
    }
    stack.dynamodb.put_item().table_name(&stack.table).set_item(Some(item)).send().await.expect("put the budget");
}

#[tokio::test]
async fn an_unusable_budget_item_gives_the_default_budget_and_is_reported() {
    let stack = Stack::new().await;
    // The default, 150 tokens: a tenant's first turn runs (110), its second starts under the
    // budget and runs, its third is refused.
    let http = stack.http(&[("DAILY_TOKEN_BUDGET", "150")]).await;
    let number = |text: &str| AttributeValue::N(text.to_owned());
    let shapes: Vec<(&str, Vec<(&str, AttributeValue)>)> = vec![
        ("negative", vec![("daily_tokens", number("-5"))]),
        ("text", vec![("daily_tokens", AttributeValue::S("1000".to_owned()))]),
        ("fraction", vec![("daily_tokens", number("2.5"))]),
        ("unlimited-text", vec![("unlimited", AttributeValue::S("yes".to_owned()))]),
        ("empty", vec![]),
    ];
    for (name, attributes) in &shapes {
        let user = format!("user-budget-bad-{name}");
        put_budget_item(&stack, &user, attributes).await;
        let mark = http.log_mark();
        stack.model.push([Reply::text("uno"), Reply::text("dos")]);
        let (status, body) = post(&http, &user, "s").await;
        assert_eq!(status, 200, "{name}: the turn runs under the default budget: {body}");
        let logs = http.logs_since(mark).join("\n");
        assert!(
            logs.contains("ERROR") && logs.contains("TOKEN_BUDGET") && logs.contains(&format!("pk={user}#@usage")),
            "{name}: the item is named at error level: {logs}"
        );
        assert!(logs.contains("\"BudgetConfigErrors\""), "{name}: counted for an alarm: {logs}");
        assert_eq!(post(&http, &user, "s").await.0, 200, "{name}");
        let (status, body) = post(&http, &user, "s").await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (429, &json!("quota_exceeded")),
            "{name}: the default (150) applies"
        );
    }

    // `unlimited: false` is no mistake: with `daily_tokens` those apply, alone the default does.
    let user = "user-budget-false-with-tokens";
    put_budget_item(&stack, user, &[("unlimited", AttributeValue::Bool(false)), ("daily_tokens", number("100"))]).await;
    let mark = http.log_mark();
    stack.model.push([Reply::text("uno")]);
    assert_eq!(post(&http, user, "s").await.0, 200);
    assert_eq!(post(&http, user, "s").await.0, 429, "its own 100 tokens apply");
    assert!(!http.logs_since(mark).join("\n").contains("BudgetConfigErrors"));
    let user = "user-budget-false-alone";
    put_budget_item(&stack, user, &[("unlimited", AttributeValue::Bool(false))]).await;
    stack.model.push([Reply::text("uno"), Reply::text("dos")]);
    assert_eq!(post(&http, user, "s").await.0, 200);
    assert_eq!(post(&http, user, "s").await.0, 200);
    assert_eq!(post(&http, user, "s").await.0, 429, "the default applies");
    assert!(!http.logs_since(mark).join("\n").contains("BudgetConfigErrors"));
}
