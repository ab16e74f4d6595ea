//! `/memories` through whole turns over the embedded store: a committed turn has saved its memory
//! changes, a failed one saved none, another session of the user reads them, and the owner's
//! listing and deletion see the same files.

use std::sync::Arc;

use agent_core::turn::{AgentConfig, OffsetDateTime, TurnError, TurnRequest, TurnService};
use agent_core::{ChatResponse, MemoryPath, Message, ModelError, SessionId, SessionStore, ToolCall, UserId};
use agent_ports::testing::ScriptedModel;
use local_store::{MemoryObjectStore, MemorySessionStore};
use serde_json::json;

fn call(name: &str, arguments: serde_json::Value) -> ChatResponse {
    ChatResponse::calling(vec![ToolCall::new(format!("call-{name}"), name, arguments)])
}

fn request(user: &str, session: &str, message: &str) -> TurnRequest {
    TurnRequest::new(
        UserId::parse(user).unwrap(),
        SessionId::parse(session).unwrap(),
        message,
        OffsetDateTime::now_utc(),
    )
}

struct World {
    service: TurnService,
    objects: Arc<MemoryObjectStore>,
    sessions: Arc<MemorySessionStore>,
    model: Arc<ScriptedModel>,
}

fn world() -> World {
    let (objects, sessions, model) = (
        Arc::new(MemoryObjectStore::recording()),
        Arc::new(MemorySessionStore::new()),
        Arc::new(ScriptedModel::default()),
    );
    let service = TurnService::new(sessions.clone(), objects.clone(), model.clone(), AgentConfig::default());
    World { service, objects, sessions, model }
}

/// The last tool result the model was shown.
fn last_result(model: &ScriptedModel) -> String {
    let requests = model.requests();
    let messages = &requests.last().unwrap().messages;
    messages
        .iter()
        .rev()
        .find_map(|message| match message {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_committed_turn_has_saved_its_memories_and_a_failed_one_saved_none() {
    let world = world();
    world
        .model
        .script()
        .push(call("write_file", json!({"file_path": "/memories/prefs.md", "content": "Firma: Ana R.\n"})));
    world.model.script().push(ChatResponse::text("Lo recordaré."));
    world.service.run_turn(request("u1", "s1", "Recuerda mi firma")).await.unwrap();
    assert_eq!(world.objects.bytes("u1/memories/prefs.md").unwrap(), b"Firma: Ana R.\n");
    let system = world.model.requests()[0].system.clone();
    assert!(system.contains("## Memory\n/memories is your long-term memory"), "{system}");

    // A turn whose model fails after a memory write leaves no trace of it.
    world.model.script().push(call("write_file", json!({"file_path": "/memories/perdido.md", "content": "x"})));
    world.model.script().fail(ModelError::Rejected { status: 400, message: "bad".into() });
    let failed = world.service.run_turn(request("u1", "s1", "Otra cosa")).await;
    assert!(matches!(failed, Err(TurnError::Model(_))), "{failed:?}");
    assert!(world.objects.bytes("u1/memories/perdido.md").is_none());
    let session = world.sessions.load(&UserId::parse("u1").unwrap(), &SessionId::parse("s1").unwrap()).await;
    assert_eq!(session.unwrap().unwrap().version, 1, "and nothing of the turn was committed");

    // Another session of the user reads it; another user's turn does not.
    world.model.script().push(call("read_file", json!({"file_path": "/memories/prefs.md"})));
    world.model.script().push(ChatResponse::text("Ana R."));
    world.service.run_turn(request("u1", "s2", "¿Cómo firmo?")).await.unwrap();
    assert!(last_result(&world.model).contains("Firma: Ana R."));
    world.model.script().push(call("read_file", json!({"file_path": "/memories/prefs.md"})));
    world.model.script().push(ChatResponse::text("No lo sé."));
    world.service.run_turn(request("u2", "s1", "¿Cómo firmo?")).await.unwrap();
    assert_eq!(last_result(&world.model), "Error: File '/memories/prefs.md' not found");

    // A turn that never looks in /memories makes no request under anyone's.
    let before = world.objects.recorded().len();
    world.model.script().push(ChatResponse::text("Hola."));
    world.service.run_turn(request("u1", "s3", "Hola")).await.unwrap();
    let made = world.objects.recorded()[before..].to_vec();
    assert!(made.iter().all(|call| !call.contains("/memories/")), "{made:?}");
}

#[tokio::test]
async fn the_owner_lists_and_deletes_their_memories_only() {
    let world = world();
    for (key, bytes) in
        [("u1/memories/prefs.md", "a"), ("u1/memories/clientes/garcia.md", "bb"), ("u1/memories/clientes/ruiz.md", "c")]
    {
        world.objects.insert(key, bytes);
    }
    world.objects.insert("u1/memories/a//b.md", "hidden");
    world.objects.insert("u2/memories/prefs.md", "theirs");
    let u1 = UserId::parse("u1").unwrap();
    let listed = world.service.memories(&u1).await.unwrap();
    let paths: Vec<(&str, u64)> = listed.iter().map(|file| (file.path.as_str(), file.size)).collect();
    assert_eq!(
        paths,
        [("/memories/clientes/garcia.md", 2), ("/memories/clientes/ruiz.md", 1), ("/memories/prefs.md", 1)]
    );
    assert!(listed.iter().all(|file| file.last_modified.is_some_and(|time| time > 1_700_000_000)));

    let folder = MemoryPath::parse("clientes").unwrap();
    let deleted = world.service.delete_memories(&u1, Some(&folder)).await.unwrap();
    assert_eq!(deleted.len(), 2);
    let nothing = world.service.delete_memories(&u1, Some(&MemoryPath::parse("clientes/garcia.md").unwrap())).await;
    assert!(nothing.unwrap().is_empty());
    let all = world.service.delete_memories(&u1, None).await.unwrap();
    assert_eq!(all.iter().map(|file| file.path.as_str()).collect::<Vec<_>>(), ["/memories/prefs.md"]);
    assert!(world.service.memories(&u1).await.unwrap().is_empty());
    assert!(world.objects.bytes("u2/memories/prefs.md").is_some(), "another user's memories stay");
}
