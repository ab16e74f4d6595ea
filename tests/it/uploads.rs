//! Files handed to a session through the compiled `http-turn`: a direct upload attached to a turn
//! lands in `/workspace` and is shown to the model, the session keeps only references to it, and
//! bad, oversized or foreign uploads are refused. Presigned uploads, background and streamed turns
//! are in the submodules.

mod deployed;
mod presigned;
mod queued;

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{file_event, get_event, sample_event, status_and_body, turn_event, Stack};
use serde_json::{json, Value};
use sha2::Digest;

const OWNER: &str = "user-up";
const STRANGER: &str = "user-other";
/// The most bytes a direct upload carries, as docs/http-api.md states.
const DIRECT_UPLOAD_MAX_BYTES: usize = 4 * 1024 * 1024;

/// What the function answered: the status, the headers (lowercase names) and the decoded body.
pub(crate) struct Answered {
    pub(crate) status: u16,
    pub(crate) headers: serde_json::Map<String, Value>,
    pub(crate) bytes: Vec<u8>,
}

impl Answered {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(Value::as_str)
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or_else(|_| panic!("a JSON body: {:?}", self.bytes))
    }

    pub(crate) fn code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap_or_default().to_owned()
    }
}

pub(crate) async fn call(function: &Function, event: Value) -> Answered {
    let response = function.call(event).await;
    let status = response["statusCode"].as_u64().expect("statusCode") as u16;
    let headers = response["headers"].as_object().cloned().unwrap_or_default();
    let body = response["body"].as_str().unwrap_or_default();
    let bytes = if response["isBase64Encoded"].as_bool().unwrap_or(false) {
        base64::engine::general_purpose::STANDARD.decode(body).expect("a base64 body")
    } else {
        body.as_bytes().to_vec()
    };
    Answered { status, headers, bytes }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// A PNG of noise, which compresses poorly: about three bytes a pixel.
pub(crate) fn noise_png(width: u32, height: u32) -> Vec<u8> {
    let mut state = 0x2545_f491_u32;
    let image = image::RgbImage::from_fn(width, height, |_, _| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let [r, g, b, _] = state.to_le_bytes();
        image::Rgb([r, g, b])
    });
    let mut png = std::io::Cursor::new(Vec::new());
    image.write_to(&mut png, image::ImageFormat::Png).expect("encode a PNG");
    png.into_inner()
}

/// `PUT /sessions/{session}/uploads/{path}` with `bytes` as the body, base64 as API Gateway hands
/// a binary body over (from `events/http-upload.json`).
pub(crate) fn upload_event(user: Option<&str>, session: &str, path: &str, bytes: &[u8], key: Option<&str>) -> Value {
    let mut event = with_path(sample_event("http-upload.json"), user, &format!("/sessions/{session}/uploads/{path}"));
    event["pathParameters"] = json!({"session_id": session, "proxy": path});
    event["body"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
    event["headers"]["content-length"] = json!(bytes.len().to_string());
    match key {
        Some(key) => event["headers"]["idempotency-key"] = json!(key),
        None => drop(event["headers"].as_object_mut().expect("headers").remove("idempotency-key")),
    }
    event
}

/// `GET /sessions/{session}/shown/{sha256}`.
pub(crate) fn shown_event(user: Option<&str>, session: &str, sha256: &str) -> Value {
    with_path(get_event(user, session), user, &format!("/sessions/{session}/shown/{sha256}"))
}

fn with_path(mut event: Value, user: Option<&str>, path: &str) -> Value {
    event["rawPath"] = json!(path);
    event["requestContext"]["http"]["path"] = json!(path);
    if let Some(user) = user {
        event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = json!(user);
    } else if let Some(context) = event["requestContext"].as_object_mut() {
        context.remove("authorizer");
    }
    event
}

/// A turn's body attaching `(upload, name)` pairs to `message`.
pub(crate) fn attaching(message: &str, files: &[(&str, &str)]) -> Value {
    let attachments: Vec<Value> = files.iter().map(|(upload, name)| json!({"upload": upload, "name": name})).collect();
    json!({"message": message, "attachments": attachments})
}

/// Every item of the table, each as the text of its attributes.
pub(crate) async fn table_items(stack: &Stack) -> Vec<String> {
    let scanned = stack.dynamodb.scan().table_name(&stack.table).send().await.expect("scan");
    scanned.items().iter().map(|item: &HashMap<String, AttributeValue>| format!("{item:?}")).collect()
}

/// The session's version as stored, `None` when there is no session.
pub(crate) async fn version(stack: &Stack, user: &str, session: &str) -> Option<String> {
    let item = stack.session_item(user, session).await?;
    item.get("version").and_then(|version| version.as_n().ok()).cloned()
}

#[tokio::test]
async fn a_direct_upload_attached_to_a_turn_is_shown_and_kept_in_the_workspace_by_reference() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let png = noise_png(600, 400);
    let sha = sha256_hex(&png);

    // The upload answers what it stored; the same request again (a client's retry with its key)
    // stores nothing new and answers the same.
    let first = call(&http, upload_event(Some(OWNER), "s1", "scan.png", &png, Some("up-1"))).await;
    assert_eq!(first.status, 201, "{}", String::from_utf8_lossy(&first.bytes));
    let expected = json!({"upload": sha, "name": "scan.png", "size": png.len(), "media_type": "image/png"});
    assert_eq!(first.json(), expected);
    let again = call(&http, upload_event(Some(OWNER), "s1", "scan.png", &png, Some("up-1"))).await;
    assert_eq!((again.status, again.json()), (201, expected));
    // Held until a turn attaches it, tagged to expire if none does.
    let staged = format!("{OWNER}/uploads/s1/{sha}");
    assert_eq!(stack.object_keys(&format!("{OWNER}/uploads/s1/")).await, vec![staged.clone()]);
    let tags = stack.s3.get_object_tagging().bucket(&stack.bucket).key(&staged).send().await.expect("tags");
    let tags: Vec<(&str, &str)> = tags.tag_set().iter().map(|tag| (tag.key(), tag.value())).collect();
    assert_eq!(tags, vec![aws_store::STAGED_UPLOAD_TAG], "the lifecycle rule's tag");
    assert_eq!(stack.item_count().await, 0, "an upload writes no session");

    stack.model.push([Reply::text("Veo ruido de colores.")]);
    let turn = turn_event(Some(OWNER), "s1", attaching("¿Qué ves?", &[(&sha, "docs/scan.png")]));
    let (status, body) = status_and_body(&http.call(turn).await);
    assert_eq!(status, 200, "{body}");
    // The model was sent the image with the message, and told where the file is.
    let request = stack.model.requests().pop().expect("a model call").to_string();
    assert!(request.contains("data:image/png;base64,"), "the image is in the request");
    assert!(request.contains("/workspace/docs/scan.png"), "{}", &request[..request.len().min(2000)]);
    // Attached, the upload became a workspace blob and its staged copy is gone.
    assert!(stack.object_keys(&format!("{OWNER}/uploads/s1/")).await.is_empty());
    assert_eq!(stack.object_keys(&format!("{OWNER}/workspaces/s1/blobs/")).await.len(), 1);

    // The file is in /workspace, downloadable as uploaded.
    let file = call(&http, file_event(Some(OWNER), "s1", "docs/scan.png")).await;
    assert_eq!(file.status, 200);
    assert!(file.bytes == png, "the attached file comes back byte for byte");

    // The session shows the message's file, and serves what the model was shown by its hash.
    let (status, session) = status_and_body(&http.call(get_event(Some(OWNER), "s1")).await);
    assert_eq!(status, 200, "{session}");
    let message = &session["history"][0];
    assert_eq!(message["role"], "user");
    let shown = &message["files"][0];
    assert_eq!(shown["path"], "/workspace/docs/scan.png", "{message}");
    assert_eq!(
        (shown["media_type"].as_str(), shown["width"].as_u64(), shown["height"].as_u64()),
        (Some("image/png"), Some(600), Some(400))
    );
    let shown_sha = shown["sha256"].as_str().expect("sha256").to_owned();
    let served = call(&http, shown_event(Some(OWNER), "s1", &shown_sha)).await;
    assert_eq!(served.status, 200);
    assert_eq!(sha256_hex(&served.bytes), shown_sha);
    assert_eq!(served.header("content-type"), Some("image/png"));
    assert_eq!(served.header("cache-control"), Some("private, max-age=31536000, immutable"));
    assert_eq!(shown["size"].as_u64(), Some(served.bytes.len() as u64));

    // No item of the table holds the image: the session keeps its hash, S3 its bytes.
    let encoded = base64::engine::general_purpose::STANDARD.encode(&png);
    let sample = &encoded[encoded.len() / 2..encoded.len() / 2 + 64];
    for item in table_items(&stack).await {
        assert!(item.len() < 16 * 1024, "an item of {} bytes", item.len());
        assert!(!item.contains(sample), "an item holds the image's bytes");
    }

    // Another user sees none of it, and cannot attach the upload to a session of its own.
    for event in [shown_event(Some(STRANGER), "s1", &shown_sha), file_event(Some(STRANGER), "s1", "docs/scan.png")] {
        let refused = call(&http, event).await;
        assert_eq!((refused.status, refused.code().as_str()), (404, "not_found"));
    }
    let theft = turn_event(Some(STRANGER), "s1", attaching("mío", &[(&sha, "scan.png")]));
    let (status, body) = status_and_body(&http.call(theft).await);
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("no upload"), "{body}");
    assert_eq!(version(&stack, STRANGER, "s1").await, None, "nothing was saved for the stranger");
    let unknown = call(&http, shown_event(Some(OWNER), "s1", &"0".repeat(64))).await;
    assert_eq!(unknown.status, 404);
    let not_a_hash = call(&http, shown_event(Some(OWNER), "s1", "scan.png")).await;
    assert_eq!(not_a_hash.status, 404);
}

#[tokio::test]
async fn bad_oversized_and_missing_uploads_are_refused_and_change_nothing() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let refused = |answer: &Answered| (answer.status, answer.code());

    // A `.png` that is no image at all, an empty file, a traversal, no identity, another method.
    let fake = call(&http, upload_event(Some(OWNER), "s1", "foto.png", b"just some text, no picture", None)).await;
    assert_eq!(refused(&fake), (400, "bad_request".to_owned()));
    assert!(fake.json()["error"]["message"].as_str().unwrap().contains("foto.png"), "{}", fake.json());
    let empty = call(&http, upload_event(Some(OWNER), "s1", "vacío.txt", b"", None)).await;
    assert_eq!(refused(&empty), (400, "bad_request".to_owned()));
    let traversal = call(&http, upload_event(Some(OWNER), "s1", "docs/%2E%2E/x.txt", b"x", None)).await;
    assert_eq!(refused(&traversal), (400, "bad_request".to_owned()));
    let anonymous = call(&http, upload_event(None, "s1", "a.txt", b"x", None)).await;
    assert_eq!(refused(&anonymous), (401, "unauthorized".to_owned()));
    let mut get = upload_event(Some(OWNER), "s1", "a.txt", b"x", None);
    get["requestContext"]["http"]["method"] = json!("GET");
    assert_eq!(refused(&call(&http, get).await), (405, "method_not_allowed".to_owned()));

    // Past the direct bound: 413, pointing to a presigned upload.
    let big = vec![b'a'; DIRECT_UPLOAD_MAX_BYTES + 1];
    let over = call(&http, upload_event(Some(OWNER), "s1", "big.txt", &big, None)).await;
    assert_eq!(refused(&over), (413, "payload_too_large".to_owned()));
    assert!(over.json()["error"]["message"].as_str().unwrap().contains("POST /sessions/"), "{}", over.json());
    assert!(stack.object_keys(&format!("{OWNER}/")).await.is_empty(), "nothing refused was stored");

    // A session with one turn; then attachments that cannot be are refused and change nothing.
    stack.model.push([Reply::text("hola")]);
    let (status, _) = status_and_body(&http.call(turn_event(Some(OWNER), "s1", json!({"message": "hola"}))).await);
    assert_eq!(status, 200);
    let (before, items) = (version(&stack, OWNER, "s1").await, stack.item_count().await);
    let missing = "ab".repeat(32);
    let eleven: Vec<(String, String)> = (0..11).map(|i| (missing.clone(), format!("f{i}.txt"))).collect();
    let eleven: Vec<(&str, &str)> = eleven.iter().map(|(upload, name)| (upload.as_str(), name.as_str())).collect();
    let mut with_decisions = attaching("x", &[(&missing, "a.txt")]);
    with_decisions["message"] = json!("");
    with_decisions["decisions"] = json!([{"call_id": "c", "decision": "approve"}]);
    for (body, says) in [
        (attaching("mira", &[(&missing, "a.txt")]), "no upload"),
        (attaching("mira", &[("not-a-hash", "a.txt")]), "upload id"),
        (attaching("mira", &[(&missing, "../a.txt")]), "clean relative path"),
        (attaching("mira", &[(&missing, "a.txt"), (&missing, "/workspace/a.txt")]), "twice"),
        (attaching("mira", &eleven), "at most 10"),
        (with_decisions, "not with `decisions`"),
    ] {
        let (status, answer) = status_and_body(&http.call(turn_event(Some(OWNER), "s1", body.clone())).await);
        assert_eq!(status, 400, "{body}: {answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains(says), "{says}: {answer}");
    }
    assert_eq!((version(&stack, OWNER, "s1").await, stack.item_count().await), (before, items));
    assert_eq!(stack.model.requests().len(), 1, "no refused turn reached the model");
}

#[tokio::test]
async fn attachments_are_part_of_a_turns_idempotency_fingerprint() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let notes = b"Notas del piso: 80 m2, calle Mayor.".to_vec();
    let other = b"Otra nota.".to_vec();
    for (name, bytes) in [("notas.txt", &notes), ("otra.txt", &other)] {
        assert_eq!(call(&http, upload_event(Some(OWNER), "s1", name, bytes, None)).await.status, 201);
    }
    let keyed = |body: Value| {
        let mut event = turn_event(Some(OWNER), "s1", body);
        event["headers"]["idempotency-key"] = json!("turn-1");
        event
    };
    let body = attaching("Resume las notas", &[(&sha256_hex(&notes), "notas.txt")]);
    stack.model.push([Reply::text("Resumen.")]);
    let first = http.call(keyed(body.clone())).await;
    assert_eq!(status_and_body(&first).0, 200);
    let replay = http.call(keyed(body)).await;
    assert_eq!(status_and_body(&replay), status_and_body(&first));
    assert_eq!(replay["headers"]["idempotent-replayed"], "true");
    // The same key with other attachments, or none, is another request.
    for body in [
        attaching("Resume las notas", &[(&sha256_hex(&other), "notas.txt")]),
        attaching("Resume las notas", &[(&sha256_hex(&notes), "renombrado.txt")]),
        json!({"message": "Resume las notas"}),
    ] {
        let (status, answer) = status_and_body(&http.call(keyed(body)).await);
        assert_eq!((status, answer["error"]["code"].as_str()), (422, Some("idempotency_key_reused")), "{answer}");
    }
    assert_eq!(stack.model.requests().len(), 1);
}

#[tokio::test]
async fn the_sample_upload_and_attachment_events_answer() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let upload = call(&http, sample_event("http-upload.json")).await;
    assert_eq!(upload.status, 201, "{}", String::from_utf8_lossy(&upload.bytes));
    let turn = sample_event("http-turn-attachment.json");
    let body: Value = serde_json::from_str(turn["body"].as_str().unwrap()).unwrap();
    assert_eq!(upload.json()["upload"], body["attachments"][0]["upload"], "the turn attaches the sample upload");
    stack.model.push([Reply::text("Un degradado de colores.")]);
    let (status, answer) = status_and_body(&http.call(turn).await);
    assert_eq!(status, 200, "{answer}");
    let file = call(&http, file_event(Some("user-demo"), "demo-session", "scan.png")).await;
    assert_eq!(
        (file.status, sha256_hex(&file.bytes)),
        (200, body["attachments"][0]["upload"].as_str().unwrap().to_owned())
    );
}
