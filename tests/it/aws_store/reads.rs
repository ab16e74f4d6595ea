//! What each call costs and reads: one query per load and one transaction per commit, repeated
//! commit requests, bounded history reads and pages, the older layout.

use agent_core::store::{HistorySummary, SessionState, SessionStore, StoreError, TurnCommit};
use agent_core::{Message, SessionId, UserId};
use aws_store::{CallCounts, META_SORT_KEY};
use serde_json::json;

use super::{ids, n, now, s, turn, world};

#[tokio::test]
async fn a_load_is_one_query_and_a_commit_one_transaction() {
    let world = world().await;
    let (user, session) = ids("alice", "count");
    world.counter.reset();
    world.stores.sessions.load(&user, &session).await.unwrap();
    world.commit(&user, &session, 0, turn("q", "a"), SessionState::default(), now()).await.unwrap();
    world.stores.sessions.load(&user, &session).await.unwrap().unwrap();
    // A missing session is one Query; an existing one too: its meta item and its recent turns.
    assert_eq!(world.counter.snapshot(), CallCounts { s3: 0, dynamodb: 3 });
    let operations = world.counter.operations();
    assert_eq!(operations.get("DynamoDB.GetItem"), None, "{operations:?}");
    assert_eq!(operations.get("DynamoDB.Query"), Some(&2), "{operations:?}");
    assert_eq!(operations.get("DynamoDB.TransactWriteItems"), Some(&1), "{operations:?}");
}

#[tokio::test]
async fn a_repeated_commit_request_is_recognised_as_applied_and_idempotency_keys_are_atomic() {
    use agent_core::store::{Claim, CommitKey, IdempotencyKey};
    let world = world().await;
    let sessions = &world.stores.sessions;
    let (user, session) = (UserId::parse("u-idem").unwrap(), SessionId::parse("s-idem").unwrap());
    let key = IdempotencyKey::new("request-1", &["hola"]).unwrap();
    let now = now();

    let Claim::Claimed { owner } = sessions.claim(&user, &session, &key, now, now + 60).await.unwrap() else {
        panic!("a new key is claimed")
    };
    assert_eq!(sessions.claim(&user, &session, &key, now, now + 60).await.unwrap(), Claim::Running);
    let other = IdempotencyKey::new("request-1", &["adiós"]).unwrap();
    assert_eq!(sessions.claim(&user, &session, &other, now, now + 60).await.unwrap(), Claim::Mismatch);

    let reply = json!({"reply": "hecho", "version": 1});
    let commit = TurnCommit {
        expected_version: 0,
        new_messages: vec![Message::user("hola"), Message::assistant("hecho")],
        history_len: 0,
        state: SessionState::default(),
        now,
        commit_token: "token-of-this-attempt".to_owned(),
        idempotency: Some(CommitKey { key: key.clone(), owner: owner.clone(), reply: reply.clone() }),
        usage: None,
        skill_versions: Default::default(),
    };
    sessions.commit(&user, &session, &commit).await.unwrap();
    // The same request again (an SDK retry whose first answer was lost) is acknowledged, not a conflict,
    // and changes nothing.
    sessions.commit(&user, &session, &commit).await.unwrap();
    let loaded = sessions.load(&user, &session).await.unwrap().unwrap();
    assert_eq!((loaded.version, loaded.history.len()), (1, 2));
    // A different commit at the same version is still a conflict.
    let rival = TurnCommit { commit_token: "another-turn".to_owned(), idempotency: None, ..commit.clone() };
    assert!(matches!(sessions.commit(&user, &session, &rival).await, Err(StoreError::Conflict)));

    assert_eq!(sessions.claim(&user, &session, &key, now, now + 60).await.unwrap(), Claim::Committed { reply });
    // Releasing a committed key is a no-op.
    sessions.release(&user, &session, &key, &owner).await.unwrap();
    assert!(matches!(sessions.claim(&user, &session, &key, now, now + 60).await.unwrap(), Claim::Committed { .. }));
    let record = world.raw_item("u-idem", "s-idem", &aws_store::idempotency_sort_key(&key)).await.unwrap();
    assert!(record["expires_at"].as_n().unwrap().parse::<i64>().unwrap() > now, "the record expires with a TTL");

    // A claim whose holder was killed is taken over once its lease has run out, and a released one at once.
    let lapsed = IdempotencyKey::new("request-2", &["x"]).unwrap();
    let Claim::Claimed { owner: dead } = sessions.claim(&user, &session, &lapsed, now, now + 5).await.unwrap() else {
        panic!()
    };
    assert_eq!(sessions.claim(&user, &session, &lapsed, now + 1, now + 60).await.unwrap(), Claim::Running);
    let Claim::Claimed { owner: heir } = sessions.claim(&user, &session, &lapsed, now + 10, now + 70).await.unwrap()
    else {
        panic!("a lapsed lease is taken over")
    };
    assert_ne!(dead, heir);
    sessions.release(&user, &session, &lapsed, &dead).await.unwrap();
    assert_eq!(sessions.claim(&user, &session, &lapsed, now + 11, now + 70).await.unwrap(), Claim::Running);
    sessions.release(&user, &session, &lapsed, &heir).await.unwrap();
    assert!(matches!(
        sessions.claim(&user, &session, &lapsed, now + 12, now + 70).await.unwrap(),
        Claim::Claimed { .. }
    ));
}

#[tokio::test]
async fn a_load_reads_back_only_to_the_summary_and_pages_walk_the_rest() {
    let world = world().await;
    let (user, session) = ids("pager", "long");
    let t = now();
    let mut state = SessionState::default();
    for version in 0..60u64 {
        if version == 55 {
            // The summary covers turns 1..=54 (two messages each).
            state.summary =
                Some(HistorySummary { text: "the first 54 turns".into(), covers: 108, from_turn: Some(55) });
        }
        let messages = turn(&format!("q{}", version + 1), &format!("a{}", version + 1));
        world.commit(&user, &session, version, messages, state.clone(), t).await.unwrap();
    }
    world.counter.reset();
    let loaded = world.stores.sessions.load(&user, &session).await.unwrap().unwrap();
    assert_eq!(loaded.version, 60);
    assert_eq!(loaded.history_offset, 108, "turn 55 starts at message 108");
    assert_eq!(loaded.history.len(), 12, "turns 55..=60 only");
    assert_eq!(loaded.history[0], Message::user("q55"));
    let requests = world.counter.snapshot();
    assert_eq!(requests.total(), 1, "one Query (the meta item and turns 60..=55), not the partition: {requests:?}");

    // The owner pages back through every turn, newest first.
    let mut before = None;
    let mut seen = Vec::new();
    loop {
        let (_, page) =
            world.stores.sessions.history_page(&user, &session, before, 25, 1 << 20).await.unwrap().unwrap();
        assert!(page.turns.len() <= 25);
        seen.extend(page.turns.iter().map(|(number, _)| *number));
        match page.next_before {
            Some(next) => before = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, (1..=60).rev().collect::<Vec<u64>>());
    // A byte bound ends a page early, never before its first turn.
    let (_, page) = world.stores.sessions.history_page(&user, &session, None, 25, 1).await.unwrap().unwrap();
    assert_eq!((page.turns.len(), page.next_before), (1, Some(60)));
}

#[tokio::test]
async fn a_session_in_the_older_layout_loads_and_its_next_commit_moves_its_meta_item() {
    let world = world().await;
    let (user, session) = ids("mover", "old");
    let t = now() - 100;
    let mut expected = Vec::new();
    for version in 0..40u64 {
        let messages = turn(&format!("q{}", version + 1), &format!("a{}", version + 1));
        expected.extend(messages.clone());
        world.commit(&user, &session, version, messages, SessionState::default(), t).await.unwrap();
    }
    // Put the meta item where the previous release kept it.
    let mut meta = world.raw_item("mover", "old", META_SORT_KEY).await.unwrap();
    meta.insert("sk".into(), s(aws_store::LEGACY_META_SORT_KEY));
    world.put_raw(meta).await;
    world
        .dynamodb()
        .delete_item()
        .table_name(&world.table)
        .key("pk", s("mover#old"))
        .key("sk", s(META_SORT_KEY))
        .send()
        .await
        .unwrap();

    // It loads as it did (40 turns: more than the first page holds).
    let loaded = world.stores.sessions.load(&user, &session).await.unwrap().expect("session");
    assert_eq!((loaded.version, &loaded.history), (40, &expected));
    let (_, page) = world.stores.sessions.history_page(&user, &session, None, 5, 1 << 20).await.unwrap().unwrap();
    assert_eq!(page.turns.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [40, 39, 38, 37, 36]);

    // A stale commit still conflicts and changes nothing.
    let before = world.raw_items("mover", "old").await;
    let stale = world.commit(&user, &session, 39, turn("stale", "x"), SessionState::default(), t + 1).await;
    assert!(matches!(stale, Err(StoreError::Conflict)), "{stale:?}");
    assert_eq!(world.raw_items("mover", "old").await, before);

    // The next commit moves the meta item, keeping its creation time; the same request again is
    // recognised as applied.
    let commit = TurnCommit {
        expected_version: 40,
        new_messages: turn("q41", "a41"),
        history_len: 80,
        state: SessionState::default(),
        now: t + 2,
        commit_token: "move-it".into(),
        idempotency: None,
        usage: None,
        skill_versions: Default::default(),
    };
    world.stores.sessions.commit(&user, &session, &commit).await.unwrap();
    world.stores.sessions.commit(&user, &session, &commit).await.unwrap();
    assert!(world.raw_item("mover", "old", aws_store::LEGACY_META_SORT_KEY).await.is_none());
    let moved = world.raw_item("mover", "old", META_SORT_KEY).await.expect("the meta item at its new key");
    assert_eq!((&moved["version"], &moved["created_at"]), (&n(41), &n(t)));
    let loaded = world.stores.sessions.load(&user, &session).await.unwrap().expect("session");
    expected.extend(turn("q41", "a41"));
    assert_eq!((loaded.version, &loaded.history), (41, &expected));
    world.commit(&user, &session, 41, turn("q42", "a42"), SessionState::default(), t + 3).await.unwrap();
    assert_eq!(world.stores.sessions.load(&user, &session).await.unwrap().unwrap().version, 42);
}
