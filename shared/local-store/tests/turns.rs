//! Whole turns over the embedded store: a panic inside a turn is a clean failure that commits nothing
//! and gives its idempotency key back; a repeated key replays; a key in use answers "in progress".

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use agent_core::turn::{AgentConfig, OffsetDateTime, TurnError, TurnRequest, TurnService, UserProfile};
use agent_core::{
    ChatModel, ChatRequest, ChatResponse, IdempotencyKey, ModelError, SessionId, SessionStore, StopReason, Usage,
    UserId,
};
use async_trait::async_trait;
use local_store::{MemoryObjectStore, MemorySessionStore};
use tokio::sync::Notify;

/// Answers "ok", panics while `panics` is above zero, and can be held until released.
#[derive(Default)]
struct Model {
    calls: AtomicU32,
    panics: AtomicU32,
    hold: Option<Arc<Notify>>,
}

#[async_trait]
impl ChatModel for Model {
    async fn complete(&self, _request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.panics.load(Ordering::SeqCst) > 0 {
            self.panics.fetch_sub(1, Ordering::SeqCst);
            panic!("a defect inside the turn");
        }
        if let Some(hold) = &self.hold {
            hold.notified().await;
        }
        Ok(ChatResponse {
            content: "ok".into(),
            tool_calls: vec![],
            usage: Usage::default(),
            stop_reason: StopReason::EndTurn,
        })
    }
}

fn request(message: &str, key: Option<&str>) -> TurnRequest {
    TurnRequest {
        user: UserId::parse("u1").unwrap(),
        session: SessionId::parse("s1").unwrap(),
        message: message.into(),
        ticket: None,
        profile: UserProfile::default(),
        deadline: None,
        now: OffsetDateTime::now_utc(),
        idempotency: key.map(|key| IdempotencyKey::new(key, &[message]).unwrap()),
    }
}

fn service(model: Arc<Model>) -> (TurnService, Arc<MemorySessionStore>) {
    let sessions = Arc::new(MemorySessionStore::new());
    let service = TurnService::new(sessions.clone(), Arc::new(MemoryObjectStore::new()), model, AgentConfig::default());
    (service, sessions)
}

#[tokio::test]
async fn a_panicking_turn_commits_nothing_and_gives_its_key_back() {
    let model = Arc::new(Model { panics: AtomicU32::new(1), ..Model::default() });
    let (service, sessions) = service(model.clone());
    let failed = service.run_turn(request("hola", Some("k1"))).await;
    assert!(matches!(failed, Err(TurnError::Internal(ref message)) if message.contains("defect")), "{failed:?}");
    let (user, session) = (UserId::parse("u1").unwrap(), SessionId::parse("s1").unwrap());
    assert!(sessions.load(&user, &session).await.unwrap().is_none(), "nothing was committed");

    // The same key runs again at once, and from then on replays.
    let reply = service.run_turn(request("hola", Some("k1"))).await.unwrap();
    assert!(!reply.replayed);
    let replayed = service.run_turn(request("hola", Some("k1"))).await.unwrap();
    assert!(replayed.replayed);
    assert_eq!((replayed.reply.as_str(), replayed.version), ("ok", 1));
    assert_eq!(model.calls.load(Ordering::SeqCst), 2, "the replay did not call the model");
    assert!(matches!(service.run_turn(request("adiós", Some("k1"))).await, Err(TurnError::IdempotencyMismatch)));
    assert_eq!(sessions.load(&user, &session).await.unwrap().unwrap().history.len(), 2);
}

#[tokio::test]
async fn a_key_in_use_is_in_progress_until_its_turn_commits() {
    let hold = Arc::new(Notify::new());
    let model = Arc::new(Model { hold: Some(hold.clone()), ..Model::default() });
    let (service, _) = service(model.clone());
    let service = Arc::new(service);
    let first = tokio::spawn({
        let service = service.clone();
        async move { service.run_turn(request("hola", Some("k2"))).await }
    });
    while model.calls.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    assert!(matches!(service.run_turn(request("hola", Some("k2"))).await, Err(TurnError::InProgress)));
    hold.notify_one();
    let committed = first.await.unwrap().unwrap();
    let replayed = service.run_turn(request("hola", Some("k2"))).await.unwrap();
    assert!(replayed.replayed && replayed.version == committed.version);
    assert_eq!(model.calls.load(Ordering::SeqCst), 1);
}
