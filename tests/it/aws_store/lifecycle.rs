//! A session's life in the table: turns spilled to S3, turns past the TTL, expiry, tenants kept
//! apart, corrupt items.

use std::collections::HashMap;

use agent_core::store::{ObjectStore, SessionState, SessionStore, StoreError};
use agent_core::{keys, Message};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_store::{CallCounts, META_SORT_KEY, SPILL_THRESHOLD_BYTES};

use super::{ids, n, now, s, skill, turn, world};

#[tokio::test]
async fn a_turn_over_300_kb_spills_to_s3_and_loads_back_identically() {
    let world = world().await;
    let (user, session) = ids("alice", "big");
    let t = now();
    // Just under the threshold stays inline.
    let small = turn("small", &"s".repeat(SPILL_THRESHOLD_BYTES - 200));
    world.commit(&user, &session, 0, small.clone(), SessionState::default(), t).await.unwrap();
    let inline = world.raw_item("alice", "big", "TURN#0000000001").await.unwrap();
    assert!(inline.contains_key("messages") && !inline.contains_key("messages_ref"));

    let big_text: String = (0..40_000).map(|i| format!("línea {i}\n")).collect();
    assert!(big_text.len() > 400_000);
    let big = vec![Message::user("summarise"), Message::tool("c1", "read", big_text), Message::assistant("done")];
    world.counter.reset();
    world.commit(&user, &session, 1, big.clone(), SessionState::default(), t + 1).await.unwrap();
    assert_eq!(world.counter.snapshot(), CallCounts { s3: 1, dynamodb: 1 }, "one PutObject, one transaction");

    let spilled = world.raw_item("alice", "big", "TURN#0000000002").await.unwrap();
    let checksum = spilled["messages_sha256"].as_s().unwrap().clone();
    let key = keys::turn_spill_key(&user, &session, 2, &checksum);
    assert_eq!(spilled.get("messages_ref"), Some(&s(&key)));
    assert!(!spilled.contains_key("messages"));
    let object = world.stores.objects.get(&key).await.unwrap().expect("spilled object");
    assert_eq!(serde_json::from_slice::<Vec<Message>>(&object.bytes).unwrap(), big);

    let loaded = world.stores.sessions.load(&user, &session).await.unwrap().expect("session");
    assert_eq!(loaded.version, 2);
    assert_eq!(loaded.history, [small, big].concat());
}

#[tokio::test]
async fn turns_older_than_the_ttl_drop_from_the_front_and_the_summary_stays_aligned() {
    let world = world().await;
    for (session, summary) in [("summarised", Some(2)), ("plain", None)] {
        let (user, session_id) = ids("alice", session);
        let t = now();
        for version in 0..3 {
            let state = SessionState {
                summary: summary.map(|covers| agent_core::HistorySummary {
                    text: "turn 1".into(),
                    covers,
                    from_turn: None,
                }),
                ..Default::default()
            };
            let messages = turn(&format!("q{version}"), &format!("a{version}"));
            world.commit(&user, &session_id, version, messages, state, t).await.unwrap();
        }
        // Turn 1 reached its TTL while the session stayed active (moto never sweeps, so mark it by hand).
        let mut first = world.raw_item("alice", session, "TURN#0000000001").await.unwrap();
        first.insert("expires_at".into(), n(t - 1));
        world.put_raw(first).await;

        let loaded = world.stores.sessions.load(&user, &session_id).await.unwrap().expect("session");
        assert_eq!(loaded.history, [turn("q1", "a1"), turn("q2", "a2")].concat(), "{session}");
        // Message indices count the whole history, so the summary's boundary needs no shifting.
        assert_eq!(loaded.history_offset, 2, "{session}");
        assert_eq!(loaded.state.summary.map(|summary| summary.covers), summary, "{session}");
    }
}

#[tokio::test]
async fn an_expired_session_loads_as_none_and_starts_afresh() {
    let world = world().await;
    let (user, session) = ids("alice", "old");
    let long_ago = now() - 40 * 86_400;
    let expired = long_ago + 30 * 86_400;
    // Written by hand, as DynamoDB would still hold it before its TTL sweep (moto never sweeps).
    world
        .put_raw(HashMap::from([
            ("pk".into(), s("alice#old")),
            ("sk".into(), s("META")),
            ("user_id".into(), s("alice")),
            ("session_id".into(), s("old")),
            ("version".into(), n(3)),
            ("current_skill".into(), s("old/skill")),
            ("loaded_skills".into(), AttributeValue::L(vec![s("old/skill")])),
            ("plan".into(), AttributeValue::Null(true)),
            ("workspace".into(), AttributeValue::M(HashMap::new())),
            ("created_at".into(), n(long_ago)),
            ("updated_at".into(), n(long_ago)),
            ("expires_at".into(), n(expired)),
        ]))
        .await;
    for turn_number in 1..=3 {
        let messages = serde_json::to_string(&turn(&format!("old {turn_number}"), "old answer")).unwrap();
        world
            .put_raw(HashMap::from([
                ("pk".into(), s("alice#old")),
                ("sk".into(), s(&format!("TURN#{turn_number:010}"))),
                ("messages".into(), s(&messages)),
                ("created_at".into(), n(long_ago)),
                ("expires_at".into(), n(expired)),
            ]))
            .await;
    }

    assert_eq!(world.stores.sessions.load(&user, &session).await.unwrap(), None);

    let t = now();
    world.commit(&user, &session, 0, turn("new", "fresh"), SessionState::default(), t).await.unwrap();
    let loaded = world.stores.sessions.load(&user, &session).await.unwrap().expect("session");
    assert_eq!(loaded.version, 1);
    assert_eq!(loaded.history, turn("new", "fresh"), "the old turns 2 and 3 are not part of the new session");
    assert_eq!(loaded.state, SessionState::default());
    let meta = world.raw_item("alice", "old", META_SORT_KEY).await.unwrap();
    assert_eq!(meta["created_at"], n(t));

    world.commit(&user, &session, 1, turn("again", "still fresh"), SessionState::default(), t + 1).await.unwrap();
    let loaded = world.stores.sessions.load(&user, &session).await.unwrap().expect("session");
    assert_eq!(loaded.history, [turn("new", "fresh"), turn("again", "still fresh")].concat());
}

#[tokio::test]
async fn tenants_with_the_same_session_id_never_see_each_other() {
    let world = world().await;
    let (alice, shared) = ids("alice", "shared");
    let (bob, _) = ids("bob", "shared");
    let t = now();
    let alice_state = SessionState { loaded_skills: vec![skill("alice/only")], ..SessionState::default() };
    world.commit(&alice, &shared, 0, turn("alice asks", "for alice"), alice_state.clone(), t).await.unwrap();

    assert_eq!(world.stores.sessions.load(&bob, &shared).await.unwrap(), None);
    // Bob's first commit is not a conflict with Alice's session of the same id.
    let bob_turn = vec![Message::user("bob asks"), Message::assistant("b".repeat(SPILL_THRESHOLD_BYTES + 1))];
    world.commit(&bob, &shared, 0, bob_turn.clone(), SessionState::default(), t).await.unwrap();

    let alice_session = world.stores.sessions.load(&alice, &shared).await.unwrap().unwrap();
    let bob_session = world.stores.sessions.load(&bob, &shared).await.unwrap().unwrap();
    assert_eq!(alice_session.history, turn("alice asks", "for alice"));
    assert_eq!(alice_session.state, alice_state);
    assert_eq!(bob_session.history, bob_turn);
    assert_eq!(bob_session.state, SessionState::default());
    // Bob's spilled turn lives under Bob's prefix only.
    assert!(world.stores.objects.list("alice/").await.unwrap().is_empty());
    assert_eq!(world.stores.objects.list("bob/").await.unwrap().len(), 1);

    // Alice's conflict checks use her own version, whatever Bob does.
    world.commit(&alice, &shared, 1, turn("alice again", "ok"), SessionState::default(), t + 1).await.unwrap();
    assert_eq!(world.stores.sessions.load(&bob, &shared).await.unwrap().unwrap().version, 1);
    assert!(matches!(
        world.commit(&bob, &shared, 2, turn("bob", "no"), SessionState::default(), t + 2).await,
        Err(StoreError::Conflict)
    ));
}

#[tokio::test]
async fn undecodable_or_incomplete_sessions_are_corrupt() {
    let world = world().await;
    let t = now();
    let meta = |session: &str, version: i64| {
        HashMap::from([
            ("pk".to_string(), s(&format!("alice#{session}"))),
            ("sk".to_string(), s(META_SORT_KEY)),
            ("user_id".to_string(), s("alice")),
            ("session_id".to_string(), s(session)),
            ("version".to_string(), n(version)),
            ("current_skill".to_string(), AttributeValue::Null(true)),
            ("loaded_skills".to_string(), AttributeValue::L(vec![])),
            ("plan".to_string(), AttributeValue::Null(true)),
            ("workspace".to_string(), AttributeValue::M(HashMap::new())),
            ("created_at".to_string(), n(t)),
            ("updated_at".to_string(), n(t)),
            ("expires_at".to_string(), n(t + 86_400)),
        ])
    };
    // A turn whose JSON does not decode.
    world.put_raw(meta("garbled", 1)).await;
    world
        .put_raw(HashMap::from([
            ("pk".into(), s("alice#garbled")),
            ("sk".into(), s("TURN#0000000001")),
            ("messages".into(), s("{not json")),
            ("created_at".into(), n(t)),
            ("expires_at".into(), n(t + 86_400)),
        ]))
        .await;
    // A version whose turn is missing.
    world.put_raw(meta("holey", 1)).await;
    // A state attribute of the wrong type.
    let mut wrong = meta("wrong", 0);
    wrong.insert("loaded_skills".into(), s("a/b"));
    world.put_raw(wrong).await;

    for session in ["garbled", "holey", "wrong"] {
        let (user, session_id) = ids("alice", session);
        let result = world.stores.sessions.load(&user, &session_id).await;
        assert!(matches!(result, Err(StoreError::Corrupt(_))), "{session}: {result:?}");
    }
}
