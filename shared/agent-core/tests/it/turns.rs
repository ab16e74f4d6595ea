//! Whole turns over the embedded store: a panic inside a turn is a clean failure that commits nothing
//! and gives its idempotency key back; a repeated key replays; a key in use answers "in progress".

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use agent_core::turn::{AgentConfig, OffsetDateTime, TurnError, TurnRequest, TurnService};
use agent_core::{ChatResponse, IdempotencyKey, SessionId, SessionStore, UserId};
use agent_ports::testing::FnModel;
use local_store::{MemoryObjectStore, MemorySessionStore};
use tokio::sync::Notify;

/// Answers "ok", and panics on its first `panics` calls.
fn model(panics: u32) -> FnModel {
    let panics = AtomicU32::new(panics);
    FnModel::new(move |_| {
        if panics.load(Ordering::SeqCst) > 0 {
            panics.fetch_sub(1, Ordering::SeqCst);
            panic!("a defect inside the turn");
        }
        Ok(ChatResponse::text("ok"))
    })
}

fn request(message: &str, key: Option<&str>) -> TurnRequest {
    let (user, session) = (UserId::parse("u1").unwrap(), SessionId::parse("s1").unwrap());
    TurnRequest {
        idempotency: key.map(|key| IdempotencyKey::new(key, &[message]).unwrap()),
        ..TurnRequest::new(user, session, message, OffsetDateTime::now_utc())
    }
}

fn service(model: Arc<FnModel>) -> (TurnService, Arc<MemorySessionStore>) {
    let sessions = Arc::new(MemorySessionStore::new());
    let service = TurnService::new(sessions.clone(), Arc::new(MemoryObjectStore::new()), model, AgentConfig::default());
    (service, sessions)
}

#[tokio::test]
async fn a_panicking_turn_commits_nothing_and_gives_its_key_back() {
    let model = Arc::new(model(1));
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
    assert_eq!(model.calls(), 2, "the replay did not call the model");
    assert!(matches!(service.run_turn(request("adiós", Some("k1"))).await, Err(TurnError::IdempotencyMismatch)));
    assert_eq!(sessions.load(&user, &session).await.unwrap().unwrap().history.len(), 2);
}

#[tokio::test]
async fn a_key_in_use_is_in_progress_until_its_turn_commits() {
    let hold = Arc::new(Notify::new());
    let model = Arc::new(model(0).held(hold.clone()));
    let (service, _) = service(model.clone());
    let service = Arc::new(service);
    let first = tokio::spawn({
        let service = service.clone();
        async move { service.run_turn(request("hola", Some("k2"))).await }
    });
    while model.calls() == 0 {
        tokio::task::yield_now().await;
    }
    assert!(matches!(service.run_turn(request("hola", Some("k2"))).await, Err(TurnError::InProgress)));
    hold.notify_one();
    let committed = first.await.unwrap().unwrap();
    let replayed = service.run_turn(request("hola", Some("k2"))).await.unwrap();
    assert!(replayed.replayed && replayed.version == committed.version);
    assert_eq!(model.calls(), 1);
}

#[tokio::test]
async fn a_background_record_goes_queued_running_queued_then_failed_or_committed() {
    use agent_core::{Accepted, Claim, TurnStatus};
    let store = MemorySessionStore::new();
    let (user, session) = (UserId::parse("u1").unwrap(), SessionId::parse("s1").unwrap());
    let key = IdempotencyKey::for_queued_turn("k1", &user, &session, "hola", None, None).unwrap();
    assert_eq!(store.accept(&user, &session, &key, 100).await.unwrap(), Accepted::New);
    assert_eq!(store.accept(&user, &session, &key, 101).await.unwrap(), Accepted::Existing(TurnStatus::Queued));
    let other = IdempotencyKey::for_queued_turn("k1", &user, &session, "adiós", None, None).unwrap();
    assert_eq!(store.accept(&user, &session, &other, 101).await.unwrap(), Accepted::Mismatch);
    let status = || store.turn_status(&user, &session, &key.key_hash, 102);
    assert_eq!(status().await.unwrap(), Some(TurnStatus::Queued));

    // A worker claims it; a failed attempt puts it back in the queue rather than away.
    let Claim::Claimed { owner } = store.claim(&user, &session, &key, 102, 200).await.unwrap() else { panic!() };
    assert_eq!(status().await.unwrap(), Some(TurnStatus::Running));
    assert_eq!(store.claim(&user, &session, &key, 103, 200).await.unwrap(), Claim::Running);
    store.release(&user, &session, &key, &owner).await.unwrap();
    assert_eq!(status().await.unwrap(), Some(TurnStatus::Queued));

    // Only a queued background record can be marked failed; then every later claim sees the error.
    let error = serde_json::json!({"status": 502, "code": "model_provider_failed", "message": "down"});
    assert!(store.fail_queued(&user, &session, &key, &error, 104).await.unwrap());
    assert_eq!(status().await.unwrap(), Some(TurnStatus::Failed { error: error.clone() }));
    assert_eq!(store.claim(&user, &session, &key, 105, 200).await.unwrap(), Claim::Failed { error });
    let plain = IdempotencyKey::new("plain", &["x"]).unwrap();
    let Claim::Claimed { .. } = store.claim(&user, &session, &plain, 105, 200).await.unwrap() else { panic!() };
    assert!(!store.fail_queued(&user, &session, &plain, &serde_json::json!({}), 106).await.unwrap());
    // Nothing is known of a key that never was.
    assert_eq!(store.turn_status(&user, &session, &"0".repeat(64), 106).await.unwrap(), None);
}
