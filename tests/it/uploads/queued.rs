//! Attachments on the other two ways a turn runs: a background turn's queue record carries them
//! (fingerprinted as the HTTP function fingerprinted them), and a streamed turn says what it showed
//! the model with `file.shown`.

use std::time::Duration;

use local_stack::identity::IdentityProvider;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{file_event, get_event, status_and_body, turn_event, Stack};
use serde_json::{json, Value};

use super::{attaching, call, noise_png, sha256_hex, upload_event, OWNER};

#[tokio::test]
async fn a_background_turn_carries_its_attachments_through_the_queue() {
    let stack = Stack::new().await;
    let sqs = aws_sdk_sqs::Client::new(&local_stack::moto::sdk_config(&stack.endpoint).await);
    let queue_url = local_stack::moto::create_fifo_queue(&sqs).await;
    let http = stack.http(&[("TURN_QUEUE_URL", queue_url.as_str())]).await;
    let worker = stack.queue(&[("TURN_QUEUE_URL", queue_url.as_str())]).await;
    let notes = b"Referencia catastral: 1234567AB1234C0001XY".to_vec();
    let sha = sha256_hex(&notes);
    assert_eq!(call(&http, upload_event(Some(OWNER), "bg", "catastro.txt", &notes, None)).await.status, 201);

    let post = |session: &str, body: Value, key: &str| {
        let mut event = turn_event(Some(OWNER), session, body);
        event["headers"]["prefer"] = json!("respond-async");
        event["headers"]["idempotency-key"] = json!(key);
        event
    };
    let (status, accepted) =
        status_and_body(&http.call(post("bg", attaching("Léelo", &[(&sha, "catastro.txt")]), "bg-1")).await);
    assert_eq!(status, 202, "{accepted}");
    let records = local_stack::moto::take_queue_records(&sqs, &queue_url).await;
    assert_eq!(records.len(), 1);
    let record: Value = serde_json::from_str(records[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(record["attachments"], json!([{"upload": sha, "name": "catastro.txt"}]));

    stack.model.push([Reply::text("La referencia catastral es 1234567AB1234C0001XY.")]);
    let batch = worker.call(json!({"Records": records})).await;
    assert_eq!(batch, json!({"batchItemFailures": []}), "the worker's fingerprint matches the HTTP one");
    let poll = format!("/sessions/bg/turns/{}", accepted["turn_id"].as_str().unwrap());
    let mut event = get_event(Some(OWNER), "bg");
    event["rawPath"] = json!(poll);
    let (status, polled) = status_and_body(&http.call(event).await);
    assert_eq!((status, polled["status"].as_str()), (200, Some("completed")), "{polled}");
    let file = call(&http, file_event(Some(OWNER), "bg", "catastro.txt")).await;
    assert_eq!((file.status, file.bytes), (200, notes));

    // A background turn without attachments sends the record it always did. (Another session: the
    // first record, never deleted here, still holds its FIFO group.)
    let (status, _) = status_and_body(&http.call(post("bg-other", json!({"message": "gracias"}), "bg-2")).await);
    assert_eq!(status, 202);
    let records = local_stack::moto::take_queue_records(&sqs, &queue_url).await;
    let record: Value = serde_json::from_str(records[0]["body"].as_str().unwrap()).unwrap();
    assert!(record.get("attachments").is_none(), "{record}");
}

#[tokio::test]
async fn a_streamed_turn_says_which_attached_file_it_showed_the_model() {
    let stack = Stack::new().await;
    let identity = IdentityProvider::start().await;
    let streaming = Function::start("stream-turn", &stack.env(&identity.env())).await;
    let http = stack.http(&[]).await;
    let png = noise_png(64, 48);
    let sha = sha256_hex(&png);
    assert_eq!(call(&http, upload_event(Some(OWNER), "st", "plano.png", &png, None)).await.status, 201);

    stack.model.push([Reply::text("Un plano.")]);
    let body = attaching("¿Qué es?", &[(&sha, "plano.png")]);
    let event = crate::streaming::stream_event(Some(&identity.token(OWNER)), "st", body, true);
    let mut stream = streaming.invoke_streaming(event, Duration::from_secs(120)).await;
    assert_eq!(stream.status().await, 200);
    let mut events = Vec::new();
    while let Some(event) = stream.next_event().await {
        events.push(event);
    }
    let names: Vec<&str> = events.iter().map(|event| event.name.as_str()).collect();
    let shown = events.iter().find(|event| event.name == "file.shown").unwrap_or_else(|| panic!("{names:?}"));
    assert_eq!(shown.data["path"], "/workspace/plano.png");
    assert_eq!((shown.data["media_type"].as_str(), shown.data["attached"].as_bool()), (Some("image/png"), Some(true)));
    assert_eq!(shown.data["sha256"], sha, "a small PNG is shown as it is");
    assert_eq!(shown.data["size"].as_u64(), Some(png.len() as u64));
    let position = |name: &str| names.iter().position(|n| *n == name).unwrap();
    assert!(position("file.shown") < position("model.call"), "shown before the model is called: {names:?}");
    assert_eq!(names.last(), Some(&"turn.completed"), "{names:?}");
}
