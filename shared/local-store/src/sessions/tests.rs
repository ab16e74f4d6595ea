//! Tests of the session store: versioned commits and a user's sessions listed in pages.

use agent_ports::store::SessionCursor;
use agent_ports::{Message, SessionId, SessionState, SessionStore, StoreError, TurnCommit, UserId};

use super::MemorySessionStore;

#[tokio::test]
async fn commits_are_versioned() {
    let store = MemorySessionStore::new();
    let user = UserId::parse("u1").unwrap();
    let session = SessionId::parse("s1").unwrap();
    let commit = TurnCommit {
        expected_version: 0,
        new_messages: vec![Message::user("hi")],
        history_len: 0,
        state: SessionState::default(),
        now: 1,
        commit_token: "t1".to_owned(),
        idempotency: None,
        usage: None,
        skill_versions: Default::default(),
    };
    store.commit(&user, &session, &commit).await.unwrap();
    assert!(matches!(store.commit(&user, &session, &commit).await, Err(StoreError::Conflict)));
    let loaded = store.load(&user, &session).await.unwrap().unwrap();
    assert_eq!((loaded.version, loaded.history.len()), (1, 1));
    let other = UserId::parse("u2").unwrap();
    assert!(store.load(&other, &session).await.unwrap().is_none());
}

fn first_commit(now: i64) -> TurnCommit {
    TurnCommit {
        expected_version: 0,
        new_messages: vec![Message::user("hi")],
        history_len: 0,
        state: SessionState::default(),
        now,
        commit_token: format!("t{now}"),
        idempotency: None,
        usage: None,
        skill_versions: Default::default(),
    }
}

#[tokio::test]
async fn lists_a_users_own_sessions_newest_first_in_pages() {
    let store = MemorySessionStore::new();
    let (ana, bob) = (UserId::parse("ana").unwrap(), UserId::parse("bob").unwrap());
    // s3 and s4 are updated in the same second: the session id orders them.
    for (name, now) in [("s1", 10), ("s2", 20), ("s3", 30), ("s4", 30), ("s5", 5)] {
        store.commit(&ana, &SessionId::parse(name).unwrap(), &first_commit(now)).await.unwrap();
    }
    store.commit(&bob, &SessionId::parse("b1").unwrap(), &first_commit(40)).await.unwrap();
    // A second turn moves s1 to the top and keeps its creation time.
    let mut second = first_commit(50);
    second.expected_version = 1;
    second.history_len = 1;
    store.commit(&ana, &SessionId::parse("s1").unwrap(), &second).await.unwrap();

    let mut seen = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let page = store.list_sessions(&ana, after.as_ref(), 2).await.unwrap();
        pages += 1;
        assert!(page.sessions.len() <= 2);
        seen.extend(page.sessions.iter().map(|s| (s.session_id.to_string(), s.created_at, s.updated_at, s.version)));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 3, "five sessions in pages of two, the last page without a cursor");
    let expected = [("s1", 10, 50, 2), ("s4", 30, 30, 1), ("s3", 30, 30, 1), ("s2", 20, 20, 1), ("s5", 5, 5, 1)];
    let expected: Vec<_> = expected.iter().map(|(s, c, u, v)| (s.to_string(), *c, *u, *v)).collect();
    assert_eq!(seen, expected);

    // A cursor names no user: used by another, it lists that user's own sessions only.
    let ana_cursor = SessionCursor { updated_at: 60, session_id: SessionId::parse("s1").unwrap() };
    let bobs = store.list_sessions(&bob, Some(&ana_cursor), 100).await.unwrap();
    let ids: Vec<String> = bobs.sessions.iter().map(|s| s.session_id.to_string()).collect();
    assert_eq!(ids, ["b1"]);
    assert!(bobs.next.is_none());
    let nobody = store.list_sessions(&UserId::parse("carol").unwrap(), None, 20).await.unwrap();
    assert!(nobody.sessions.is_empty() && nobody.next.is_none());
}
