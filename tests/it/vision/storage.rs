//! What shown files cost in storage: the session's DynamoDB items hold references, never bytes
//! (the bytes are one S3 object per file, under their hash), and a turn whose history shows images
//! reads each one once, however many model calls it makes.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use local_stack::faults::{FaultProxy, Match};
use local_stack::model_server::Reply;
use local_stack::stack::Stack;
use serde_json::json;

use super::fixtures;
use super::{http, sent_files, sha256, turn, upload, Provider};

/// The most bytes one item of the session may take: a few turns of text and file references.
const ITEM_BYTES: usize = 4 * 1024;

/// An item's size as DynamoDB counts it, near enough: its attribute names and values.
fn item_size(item: &HashMap<String, AttributeValue>) -> usize {
    fn size(value: &AttributeValue) -> usize {
        match value {
            AttributeValue::S(text) | AttributeValue::N(text) => text.len(),
            AttributeValue::B(blob) => blob.as_ref().len(),
            AttributeValue::L(items) => items.iter().map(size).sum(),
            AttributeValue::M(fields) => fields.iter().map(|(name, value)| name.len() + size(value)).sum(),
            AttributeValue::Ss(texts) | AttributeValue::Ns(texts) => texts.iter().map(String::len).sum(),
            AttributeValue::Bs(blobs) => blobs.iter().map(|blob| blob.as_ref().len()).sum(),
            _ => 1,
        }
    }
    item.iter().map(|(name, value)| name.len() + size(value)).sum()
}

/// Whether any text of `value` contains one of `texts`, or any of its binary values one of `raw`.
fn holds(value: &AttributeValue, texts: &[String], raw: &[&[u8]]) -> bool {
    match value {
        AttributeValue::S(text) => texts.iter().any(|needle| text.contains(needle.as_str())),
        AttributeValue::B(blob) => raw.iter().any(|needle| blob.as_ref().windows(needle.len()).any(|w| w == *needle)),
        AttributeValue::L(items) => items.iter().any(|item| holds(item, texts, raw)),
        AttributeValue::M(fields) => fields.values().any(|item| holds(item, texts, raw)),
        AttributeValue::Ss(items) => items.iter().any(|text| texts.iter().any(|needle| text.contains(needle.as_str()))),
        _ => false,
    }
}

/// Pieces of `bytes` as an item could hold them: windows of their base64 and hex, and raw.
fn pieces(bytes: &[u8]) -> (Vec<String>, Vec<&[u8]>) {
    let base64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    let hex = hex::encode(&bytes[..bytes.len().min(4096)]);
    let window = |text: &str, at: usize| text[at..(at + 48).min(text.len())].to_owned();
    let texts = vec![window(&base64, 0), window(&base64, base64.len() / 2), window(&hex, 64)];
    let middle = bytes.len() / 2;
    (texts, vec![&bytes[middle..(middle + 32).min(bytes.len())]])
}

#[tokio::test]
async fn the_sessions_items_hold_references_and_never_the_bytes_of_a_file() {
    let stack = Stack::new().await;
    let (user, session) = ("user-items", "s1");
    let attached = fixtures::png(600, 400, 21);
    // Wider than the long edge: what is shown is a smaller copy, other bytes than the file's.
    let wide = fixtures::png(1_700, 120, 22);
    stack.put(&format!("{user}/tickets/T-3/wide.png"), wide.clone()).await;
    let function = http(&stack, Provider::Anthropic, &[]).await;
    let id = upload(&function, user, session, "plan.png", &attached).await;
    stack.model.push([Reply::text("A plan."), Reply::tool("read_file", json!({"file_path": "/ticket/wide.png"}))]);
    stack.model.push([Reply::text("A wide strip.")]);
    let first = json!({"message": "Look", "attachments": [{"upload": id, "name": "plan.png"}]});
    assert_eq!(turn(&function, user, session, first).await.0, 200);
    let second = json!({"message": "And this one", "ticket_id": "T-3"});
    assert_eq!(turn(&function, user, session, second).await.0, 200);

    // The last request showed both files; the strip as a smaller copy.
    let last = stack.model.requests().pop().expect("a model call");
    let shown: Vec<Vec<u8>> = sent_files(&last).into_iter().map(|file| file.bytes).collect();
    assert_eq!(shown.len(), 2);
    assert_eq!(shown[0], attached, "sent as it is");
    assert_eq!(fixtures::decoded(&shown[1]).1, 1568, "downscaled");

    let scanned = stack.dynamodb.scan().table_name(&stack.table).send().await.expect("scan");
    let items = scanned.items();
    assert!(items.len() >= 3, "the meta item and two turns: {}", items.len());
    let mut needles = (Vec::new(), Vec::new());
    for bytes in [&attached, &wide, &shown[1]] {
        let (texts, raw) = pieces(bytes);
        needles.0.extend(texts);
        needles.1.extend(raw);
    }
    for item in items {
        let key = format!("{:?} {:?}", item.get("pk"), item.get("sk"));
        assert!(item_size(item) < ITEM_BYTES, "{key}: {} bytes", item_size(item));
        assert!(!item.values().any(|value| holds(value, &needles.0, &needles.1)), "{key} holds a file's bytes");
    }
    // A turn item names each file by its hash.
    let turns: String = items.iter().map(|item| format!("{item:?}")).collect();
    for bytes in &shown {
        assert!(turns.contains(&sha256(bytes)), "the session refers to the file by its hash");
    }

    // In S3 the session holds the two shown files under their hashes, and no turn spilled over.
    let mut stored = stack.object_keys(&format!("{user}/sessions/{session}/")).await;
    stored.sort();
    let mut expected: Vec<String> =
        shown.iter().map(|bytes| format!("{user}/sessions/{session}/files/{}", sha256(bytes))).collect();
    expected.sort();
    assert_eq!(stored, expected);
}

/// Two images attached in one turn; the next turn makes four model calls, each showing both, and
/// reads each image's bytes from S3 once.
#[tokio::test]
async fn a_turn_reads_each_shown_file_once_however_many_model_calls_it_makes() {
    let stack = Stack::new().await;
    let proxy = FaultProxy::start(&stack.endpoint).await;
    let (user, session) = ("user-reads", "s1");
    let images = [fixtures::png(320, 240, 31), fixtures::png(200, 100, 32)];
    let function = http(&stack, Provider::OpenAi, &[("AWS_ENDPOINT_URL", proxy.endpoint.as_str())]).await;
    let mut attachments = Vec::new();
    for (n, png) in images.iter().enumerate() {
        let id = upload(&function, user, session, &format!("page{n}.png"), png).await;
        attachments.push(json!({"upload": id, "name": format!("page{n}.png")}));
    }
    let gets = |sha: &str| proxy.count(&Match::s3("GET", &format!("/{user}/sessions/{session}/files/{sha}")));
    let shas: Vec<String> = images.iter().map(|png| sha256(png)).collect();

    stack.model.push([Reply::text("Two pages.")]);
    let body = json!({"message": "Two pages", "attachments": attachments});
    assert_eq!(turn(&function, user, session, body).await.0, 200);
    assert_eq!(shas.iter().map(|sha| gets(sha)).collect::<Vec<_>>(), [0, 0], "the turn that made them holds them");

    stack.model.push([
        Reply::tool("ls", json!({"path": "/workspace"})),
        Reply::tool("write_file", json!({"file_path": "/workspace/notes.md", "content": "two pages\n"})),
        Reply::tool("read_file", json!({"file_path": "/workspace/notes.md"})),
        Reply::text("Noted."),
    ]);
    let before = stack.model.requests().len();
    assert_eq!(turn(&function, user, session, json!({"message": "Take notes"})).await.0, 200);
    let requests = stack.model.requests().split_off(before);
    assert_eq!(requests.len(), 4);
    for request in &requests {
        let sent: Vec<Vec<u8>> = sent_files(request).into_iter().map(|file| file.bytes).collect();
        assert_eq!(sent, images, "every call shows both");
    }
    assert_eq!(shas.iter().map(|sha| gets(sha)).collect::<Vec<_>>(), [1, 1], "one GET each for four calls");
}
