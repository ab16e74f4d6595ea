//! What each provider is sent for a file: a 12-megapixel photo attached to a message reaches
//! OpenAI, Anthropic and Bedrock each in its own format, downscaled to the long edge; PDFs attached
//! and read reach Anthropic as `document` blocks; a model that reads text only gets the note and
//! no file.

use agent_core::message::human_size;
use image::ImageFormat;
use local_stack::model_server::Reply;
use local_stack::stack::{tool_results, Stack};
use serde_json::{json, Value};

use super::fixtures;
use super::{http, sent_files, texts, turn, upload, Provider, Sent};

/// The first user message of a request in `provider`'s format, and where its file is: OpenAI's
/// message after the system prompt with an `image_url` part, Anthropic's and Bedrock's first
/// message with an `image` block after the text.
fn first_user_image(provider: Provider, request: &Value) -> (String, Value) {
    let messages = request["messages"].as_array().expect("messages");
    let first = if provider == Provider::OpenAi { &messages[1] } else { &messages[0] };
    assert_eq!(first["role"], "user", "{provider:?}");
    // A Bedrock cache point after the message's blocks is not a part of what the user sent.
    let parts: Vec<Value> = first["content"]
        .as_array()
        .expect("a message of parts")
        .iter()
        .filter(|part| part.get("cachePoint").is_none())
        .cloned()
        .collect();
    assert_eq!(parts.len(), 2, "{provider:?}: the text, then the image");
    let text = match provider {
        Provider::OpenAi => {
            assert_eq!((parts[0]["type"].as_str(), parts[1]["type"].as_str()), (Some("text"), Some("image_url")));
            parts[0]["text"].clone()
        }
        Provider::Anthropic => {
            assert_eq!((parts[0]["type"].as_str(), parts[1]["type"].as_str()), (Some("text"), Some("image")));
            assert_eq!(parts[1]["source"]["media_type"], "image/jpeg");
            parts[0]["text"].clone()
        }
        Provider::Bedrock => {
            assert_eq!(parts[1]["image"]["format"], "jpeg", "{parts:?}");
            parts[0]["text"].clone()
        }
    };
    (text.as_str().expect("text").to_owned(), parts[1].clone())
}

/// The photo is attached in a session of each provider, the three turns at once.
#[tokio::test]
async fn a_photo_attached_reaches_each_provider_in_its_format_downscaled_to_the_long_edge() {
    let photo = fixtures::big_photo_jpeg();
    let stack = Stack::new().await;
    let user = "user-photo";
    let providers = [Provider::OpenAi, Provider::Anthropic, Provider::Bedrock];
    stack.model.push(providers.map(|_| Reply::text("A gradient under noise.")));
    let attach = |provider: Provider| {
        let stack = &stack;
        async move {
            let function = http(stack, provider, &[]).await;
            let session = format!("photo-{provider:?}").to_lowercase();
            let upload = upload(&function, user, &session, "scans/photo.jpg", photo).await;
            let attachments = json!([{"upload": upload, "name": "scans/photo.jpg"}]);
            let body = json!({"message": "What is in this photo?", "attachments": attachments});
            let (status, answer) = turn(&function, user, &session, body).await;
            assert_eq!(status, 200, "{provider:?}: {answer}");
            assert_eq!(answer["reply"], "A gradient under noise.");
        }
    };
    futures::future::join_all(providers.map(attach)).await;

    let received = stack.model.received();
    assert_eq!(received.len(), providers.len());
    let mut shown = Vec::new();
    for provider in providers {
        let request = received.iter().find(|request| provider.serves(&request.path)).expect("a call");
        let files = sent_files(&request.body);
        assert_eq!(files.len(), 1, "{provider:?}: the one photo");
        let Sent { media_type, document, bytes } = &files[0];
        assert_eq!((media_type.as_str(), *document), ("image/jpeg", false), "{provider:?}");
        assert_eq!(fixtures::decoded(bytes), (ImageFormat::Jpeg, 1568, 1176), "{provider:?}: downscaled");
        let (text, _) = first_user_image(provider, &request.body);
        let said = format!(
            "What is in this photo?\n\nAttached files:\n- Showing the image /workspace/scans/photo.jpg (image/jpeg, \
             1568×1176, {}). It was downscaled from 4000×3000 (the file itself, {}, is unchanged).",
            human_size(bytes.len() as u64),
            human_size(photo.len() as u64)
        );
        assert_eq!(text, said, "{provider:?}");
        shown.push(bytes.clone());
    }
    assert!(shown.iter().all(|bytes| *bytes == shown[0]), "every provider is sent the same bytes");
}

/// A PDF attached to a message is a `document` block of the user message; one read from the ticket
/// is a `document` block inside the tool result. Both are sent byte for byte.
#[tokio::test]
async fn pdfs_attached_and_read_reach_anthropic_as_document_blocks() {
    let stack = Stack::new().await;
    let (user, session) = ("user-pdf", "deeds");
    let deed = fixtures::pdf(3);
    let annex = fixtures::pdf(2);
    stack.put(&format!("{user}/tickets/T-1/annex.pdf"), annex.clone()).await;
    let function = http(&stack, Provider::Anthropic, &[]).await;
    let upload = upload(&function, user, session, "deed.pdf", &deed).await;
    stack.model.push([Reply::tool("read_file", json!({"file_path": "/ticket/annex.pdf"})), Reply::text("Two deeds.")]);
    let body = json!({
        "message": "Compare them",
        "ticket_id": "T-1",
        "attachments": [{"upload": upload, "name": "deed.pdf"}],
    });
    let (status, answer) = turn(&function, user, session, body).await;
    assert_eq!(status, 200, "{answer}");

    let requests = stack.model.requests();
    assert_eq!(requests.len(), 2);
    let user_blocks = requests[0]["messages"][0]["content"].as_array().expect("blocks").clone();
    assert_eq!(user_blocks[1]["type"], "document", "{user_blocks:?}");
    let said = format!("Showing the PDF document /workspace/deed.pdf ({}, 3 pages).", human_size(deed.len() as u64));
    assert!(user_blocks[0]["text"].as_str().unwrap().ends_with(&format!("Attached files:\n- {said}")));
    assert_eq!(
        sent_files(&requests[0]),
        [Sent { media_type: "application/pdf".into(), document: true, bytes: deed.clone() }]
    );

    // The second request: the tool result holds the text and the annex's document block.
    let result = requests[1]["messages"][2]["content"][0].clone();
    assert_eq!(result["type"], "tool_result", "{result}");
    let blocks = result["content"].as_array().expect("a tool result of blocks");
    let read = format!("Showing the PDF document /ticket/annex.pdf ({}, 2 pages).", human_size(annex.len() as u64));
    assert_eq!(blocks[0], json!({"type": "text", "text": read}));
    assert_eq!(blocks[1]["type"], "document");
    assert_eq!(blocks[1]["source"]["media_type"], "application/pdf");
    let sent = sent_files(&requests[1]);
    assert_eq!(sent.iter().map(|file| file.bytes.clone()).collect::<Vec<_>>(), [deed, annex]);
}

/// `LLM_FILE_INPUT=none`: the attached image and the one read are each a note naming the file,
/// and no request carries an image.
#[tokio::test]
async fn a_text_only_model_gets_notes_and_no_image() {
    let stack = Stack::new().await;
    let (user, session) = ("user-blind", "notes");
    let scan = fixtures::png(300, 200, 3);
    let chart = fixtures::png(120, 90, 4);
    stack.put(&format!("{user}/tickets/T-2/chart.png"), chart.clone()).await;
    let function = http(&stack, Provider::OpenAi, &[("LLM_FILE_INPUT", "none")]).await;
    let upload = upload(&function, user, session, "scan.png", &scan).await;
    stack
        .model
        .push([Reply::tool("read_file", json!({"file_path": "/ticket/chart.png"})), Reply::text("I cannot see.")]);
    let body = json!({"message": "Look", "ticket_id": "T-2", "attachments": [{"upload": upload, "name": "scan.png"}]});
    let (status, answer) = turn(&function, user, session, body).await;
    assert_eq!(status, 200, "{answer}");

    let requests = stack.model.requests();
    let note = |path: &str, bytes: &[u8], size: &str| {
        format!("[image {path} (image/png, {}, {size}): this model cannot see images]", human_size(bytes.len() as u64))
    };
    assert_eq!(
        requests[0]["messages"][1]["content"],
        format!("Look\n\nAttached files:\n- {}", note("/workspace/scan.png", &scan, "300×200"))
    );
    assert_eq!(tool_results(&requests[1]), [note("/ticket/chart.png", &chart, "120×90")]);
    for request in &requests {
        assert_eq!(sent_files(request), [], "no file is sent");
        assert!(!texts(request).contains("data:image"), "no image in any form");
    }
    // Nothing was shown, so nothing is kept to show.
    assert_eq!(stack.object_keys(&format!("{user}/sessions/{session}/files/")).await, Vec::<String>::new());
}
