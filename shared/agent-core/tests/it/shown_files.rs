//! Files shown to the model over the embedded store: an upload attached to a message and an image
//! read with `read_file` reach the model's requests with their bytes, the session keeps only their
//! references, a later turn reads each shown file once, and a model that cannot see gets a note.

use std::sync::Arc;

use agent_core::message::MediaType;
use agent_core::model::{FileInput, ImageTokens};
use agent_core::turn::{AgentConfig, Attachment, OffsetDateTime, TurnError, TurnRequest, TurnService};
use agent_core::{ChatRequest, Message, SessionId, SessionStore, UserId};
use agent_ports::testing::ScriptedModel;
use local_store::{MemoryObjectStore, MemorySessionStore};
use serde_json::json;

/// A valid 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4, 0x89, 0x00, 0x00, 0x00, 0x0D, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0xF8, 0xCF, 0xC0, 0xF0, 0x1F, 0x00, 0x05, 0x00, 0x01, 0xFF, 0x89, 0x99, 0x3D,
    0x1D, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
];

fn ids() -> (UserId, SessionId) {
    (UserId::parse("u1").unwrap(), SessionId::parse("s1").unwrap())
}

fn request(message: &str, attachments: Vec<Attachment>) -> TurnRequest {
    let (user, session) = ids();
    TurnRequest { attachments, ..TurnRequest::new(user, session, message, OffsetDateTime::now_utc()) }
}

fn seeing() -> FileInput {
    FileInput::all(ImageTokens::PixelsOver750)
}

fn shown_in(request: &ChatRequest) -> Vec<(String, Vec<u8>)> {
    request
        .messages
        .iter()
        .flat_map(Message::files)
        .map(|file| {
            (file.path.clone(), request.files.get(&file.sha256).map(|bytes| bytes.to_vec()).unwrap_or_default())
        })
        .collect()
}

#[tokio::test]
async fn an_attached_image_and_one_read_reach_the_model_and_the_session_keeps_references() {
    let sessions = Arc::new(MemorySessionStore::new());
    let objects = Arc::new(MemoryObjectStore::new());
    let model = Arc::new(
        ScriptedModel::default()
            .tool("read_file", json!({"file_path": "/workspace/dot.png"}))
            .text("I see one dot")
            .seeing(seeing()),
    );
    let service = TurnService::new(sessions.clone(), objects.clone(), model.clone(), AgentConfig::default());
    let (user, session) = ids();
    let upload = service.upload(&user, &session, "dot.png", PNG.to_vec()).await.unwrap();
    assert_eq!((upload.media_type.as_str(), upload.size), ("image/png", PNG.len() as u64));
    let again = service.upload(&user, &session, "dot.png", PNG.to_vec()).await.unwrap();
    assert_eq!(again, upload, "the same bytes make the same upload");

    let attachment = Attachment::new(&upload.upload, "dot.png").unwrap();
    let reply = service.run_turn(request("what is this?", vec![attachment])).await.unwrap();
    assert_eq!(reply.reply, "I see one dot");

    let requests = model.requests();
    let Message::User { content, files } = requests[0].messages.last().unwrap() else { panic!() };
    assert!(
        content.starts_with("what is this?\n\nAttached files:\n- Showing the image /workspace/dot.png"),
        "{content}"
    );
    assert_eq!(files[0].media_type, MediaType::Png);
    assert_eq!(shown_in(&requests[0]), vec![("/workspace/dot.png".to_owned(), PNG.to_vec())]);
    // The second request shows the attachment and the tool's image, the same bytes held once.
    let Message::Tool { content, files, .. } = requests[1].messages.last().unwrap() else { panic!() };
    assert!(content.starts_with("Showing the image /workspace/dot.png (image/png, 1×1"), "{content}");
    assert_eq!(files.len(), 1);
    assert_eq!(shown_in(&requests[1]).len(), 2);
    assert_eq!(requests[1].files.len(), 1);

    let stored = sessions.load(&user, &session).await.unwrap().unwrap();
    assert_eq!(stored.state.workspace["dot.png"].size, PNG.len() as u64, "the attachment is in /workspace");
    let history = serde_json::to_string(&stored.history).unwrap();
    assert!(history.contains(&upload.upload), "the history names the file by its hash");
    use base64::Engine as _;
    assert!(!history.contains(&base64::engine::general_purpose::STANDARD.encode(PNG)), "never its bytes");
}

#[tokio::test]
async fn a_later_turn_reads_each_shown_file_once_whatever_its_model_calls() {
    let sessions = Arc::new(MemorySessionStore::new());
    let objects = Arc::new(MemoryObjectStore::recording());
    let first = Arc::new(ScriptedModel::default().text("a dot").seeing(seeing()));
    let service = TurnService::new(sessions.clone(), objects.clone(), first, AgentConfig::default());
    let (user, session) = ids();
    let upload = service.upload(&user, &session, "dot.png", PNG.to_vec()).await.unwrap();
    service.run_turn(request("look", vec![Attachment::new(&upload.upload, "dot.png").unwrap()])).await.unwrap();

    // A new process: nothing held in memory.
    let second = Arc::new(
        ScriptedModel::default().tool("ls", json!({"path": "/workspace"})).text("still a dot").seeing(seeing()),
    );
    let service = TurnService::new(sessions.clone(), objects.clone(), second.clone(), AgentConfig::default());
    let before = objects.recorded().len();
    service.run_turn(request("and now?", Vec::new())).await.unwrap();
    let reads: Vec<String> =
        objects.recorded()[before..].iter().filter(|call| call.contains("/files/")).cloned().collect();
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert!(reads[0].starts_with("get u1/sessions/s1/files/"), "{reads:?}");
    for request in second.requests() {
        assert_eq!(shown_in(&request), vec![("/workspace/dot.png".to_owned(), PNG.to_vec())]);
    }
}

#[tokio::test]
async fn a_model_that_cannot_see_gets_notes_and_hostile_files_a_clear_answer() {
    let sessions = Arc::new(MemorySessionStore::new());
    let objects = Arc::new(MemoryObjectStore::new());
    let model = Arc::new(ScriptedModel::default().text("noted"));
    let service = TurnService::new(sessions.clone(), objects.clone(), model.clone(), AgentConfig::default());
    let (user, session) = ids();
    let upload = service.upload(&user, &session, "dot.png", PNG.to_vec()).await.unwrap();
    service.run_turn(request("look", vec![Attachment::new(&upload.upload, "dot.png").unwrap()])).await.unwrap();
    let Message::User { content, files } = model.requests()[0].messages.last().unwrap().clone() else { panic!() };
    assert!(files.is_empty());
    assert!(
        content.ends_with("[image /workspace/dot.png (image/png, 70 bytes, 1×1): this model cannot see images]"),
        "{content}"
    );

    // A `.png` that is text is refused at upload; a missing upload fails the turn and stores nothing.
    let fake = service.upload(&user, &session, "fake.png", b"not an image".to_vec()).await;
    assert!(matches!(fake, Err(TurnError::InvalidInput(ref m)) if m.contains("fake.png")), "{fake:?}");
    let version = sessions.load(&user, &session).await.unwrap().unwrap().version;
    let missing = Attachment::new(&"ab".repeat(32), "gone.png").unwrap();
    let failed = service.run_turn(request("and this?", vec![missing])).await;
    assert!(matches!(failed, Err(TurnError::InvalidInput(ref m)) if m.contains("no upload")), "{failed:?}");
    assert_eq!(sessions.load(&user, &session).await.unwrap().unwrap().version, version);
}

#[tokio::test]
async fn a_planner_turn_refuses_attachments_rather_than_drop_them() {
    let sessions = Arc::new(MemorySessionStore::new());
    let objects = Arc::new(MemoryObjectStore::new());
    let model = Arc::new(ScriptedModel::default().seeing(seeing()));
    let config = AgentConfig { strategy: agent_core::turn::Strategy::Planner, ..AgentConfig::default() };
    let service = TurnService::new(sessions.clone(), objects, model.clone(), config);
    let (user, session) = ids();
    let upload = service.upload(&user, &session, "dot.png", PNG.to_vec()).await.unwrap();
    let refused =
        service.run_turn(request("plan this", vec![Attachment::new(&upload.upload, "dot.png").unwrap()])).await;
    assert!(matches!(refused, Err(TurnError::InvalidInput(ref m)) if m.contains("take no files")), "{refused:?}");
    assert!(model.requests().is_empty() && sessions.load(&user, &session).await.unwrap().is_none());
}
