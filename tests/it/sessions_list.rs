//! `GET /sessions` (the caller's own sessions, newest first, paged with an opaque cursor) and
//! `GET /skills?q=` (the catalog searched as `find_skills` searches it), through the compiled
//! `http-turn` against moto and the scripted model; and the DynamoDB store's listing of sessions
//! written before its index existed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agent_core::store::{SessionStore, TurnCommit};
use agent_core::{Message, SessionId, SessionState, UserId};

use aws_sdk_dynamodb::types::AttributeValue;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, status_and_body, turn_event, Stack};
use serde_json::{json, Value};

const ANA: &str = "user-list-ana";
const BOB: &str = "user-list-bob";

/// An HTTP API event for `GET {path}` with a query string, by `user` (no authorizer when `None`).
fn get(user: Option<&str>, path: &str, query: &[(&str, &str)]) -> Value {
    let mut event = get_event(user, "unused");
    event["rawPath"] = json!(path);
    event["requestContext"]["http"]["path"] = json!(path);
    event["pathParameters"] = json!({});
    let params: serde_json::Map<String, Value> = query.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    event["queryStringParameters"] = Value::Object(params);
    event["rawQueryString"] = json!(query.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&"));
    event
}

async fn list(http: &Function, user: &str, query: &[(&str, &str)]) -> (u16, Value) {
    status_and_body(&http.call(get(Some(user), "/sessions", query)).await)
}

async fn turn(http: &Function, user: &str, session: &str, message: &str) {
    let event = turn_event(Some(user), session, json!({ "message": message }));
    let (status, body) = status_and_body(&http.call(event).await);
    assert_eq!(status, 200, "{body}");
}

fn ids(body: &Value) -> Vec<String> {
    body["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| s["session_id"].as_str().unwrap().to_owned())
        .collect()
}

/// Every page of `user`'s sessions, `limit` at a time, following `next_cursor` to the end.
async fn all_pages(http: &Function, user: &str, limit: usize) -> Vec<Value> {
    let limit = limit.to_string();
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![("limit", limit.as_str())];
        if let Some(cursor) = &cursor {
            query.push(("cursor", cursor.as_str()));
        }
        let (status, body) = list(http, user, &query).await;
        assert_eq!(status, 200, "{body}");
        cursor = body["next_cursor"].as_str().map(str::to_owned);
        pages.push(body);
        if cursor.is_none() || pages.len() > 10 {
            return pages;
        }
    }
}

#[tokio::test]
async fn sessions_are_the_callers_own_newest_first_and_paged_with_a_cursor_no_one_else_can_use() {
    let stack = Stack::new().await;
    stack.model.push((0..6).map(|_| Reply::text("Hecho.")));
    let http = stack.http(&[]).await;
    for (user, session) in [(ANA, "a1"), (ANA, "a2"), (ANA, "a3"), (BOB, "b1"), (BOB, "b2")] {
        turn(&http, user, session, &format!("Hola,\n  ¿qué tal {session}?")).await;
    }
    // A later second: a1's second turn makes it the most recently updated of Ana's sessions.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    turn(&http, ANA, "a1", "Otra cosa").await;
    let meta = stack.session_item(ANA, "a1").await.expect("the meta item");
    assert_eq!(meta.get("owner"), Some(&AttributeValue::S(ANA.to_owned())), "the index's key is on the meta item");

    let (status, whole) = list(&http, ANA, &[]).await;
    assert_eq!(status, 200, "{whole}");
    let mut listed = ids(&whole);
    assert_eq!(listed[0], "a1", "the most recently updated first: {whole}");
    listed.sort();
    assert_eq!(listed, ["a1", "a2", "a3"], "only Ana's own sessions: {whole}");
    assert_eq!(whole["next_cursor"], Value::Null, "{whole}");
    let sessions = whole["sessions"].as_array().unwrap();
    let first = &sessions[0];
    assert_eq!(first["turns"], 2, "{first}");
    // A session is titled by its first message, on one line; a later turn does not rename it.
    for session in sessions {
        let id = session["session_id"].as_str().unwrap();
        assert_eq!(session["title"], json!(format!("Hola, ¿qué tal {id}?")), "{session}");
    }
    assert!(first["updated_at"].as_i64().unwrap() > first["created_at"].as_i64().unwrap(), "{first}");
    for session in &sessions[1..] {
        assert_eq!(session["turns"], 1, "{session}");
        assert_eq!(session["created_at"], session["updated_at"], "{session}");
    }
    let order: Vec<(i64, String)> =
        sessions.iter().map(|s| (s["updated_at"].as_i64().unwrap(), s["session_id"].to_string())).collect();
    assert!(order.windows(2).all(|pair| pair[0] >= pair[1]), "newest first, then by id: {order:?}");

    // Pages of two: the same sessions in the same order, the last page without a cursor.
    let pages = all_pages(&http, ANA, 2).await;
    assert_eq!(pages.len(), 2, "{pages:?}");
    assert_eq!(ids(&pages[0]).len(), 2);
    let paged: Vec<String> = pages.iter().flat_map(ids).collect();
    assert_eq!(paged, ids(&whole));
    let pages = all_pages(&http, ANA, 1).await;
    assert_eq!(pages.iter().flat_map(ids).collect::<Vec<_>>(), ids(&whole), "pages of one");

    // A cursor is signed for its user: Ana's in Bob's hands is refused, as are forged ones
    // (unsigned, signed with a made-up tag, an altered content under Ana's real tag) and a
    // truncated one.
    let (_, first_page) = list(&http, ANA, &[("limit", "1")]).await;
    let ana_cursor = first_page["next_cursor"].as_str().expect("a cursor").to_owned();
    let (status, body) = list(&http, ANA, &[("limit", "1"), ("cursor", &ana_cursor)]).await;
    assert_eq!((status, ids(&body).len()), (200, 1), "the genuine cursor pages: {body}");
    let (content, tag) = ana_cursor.split_once('.').expect("content.tag");
    let forged = base64_url("v1:99999999999:../a1");
    let other_tenant = base64_url(&format!("v1:1:{ANA}#a1"));
    let made_up_tag = format!("{}.{}", base64_url("v2:99999999999:a1"), base64_url(&"x".repeat(32)));
    let altered = format!("{}.{tag}", base64_url("v2:99999999999:a1"));
    let truncated = ana_cursor[..ana_cursor.len() - 4].to_owned();
    let untagged = content.to_owned();
    let (status, body) = list(&http, BOB, &[("cursor", &ana_cursor)]).await;
    assert_eq!((status, &body["error"]["code"]), (400, &json!("bad_request")), "another user's cursor: {body}");
    for query in [
        vec![("cursor", "not a cursor!")],
        vec![("cursor", forged.as_str())],
        vec![("cursor", other_tenant.as_str())],
        vec![("cursor", made_up_tag.as_str())],
        vec![("cursor", altered.as_str())],
        vec![("cursor", truncated.as_str())],
        vec![("cursor", untagged.as_str())],
        vec![("limit", "0")],
        vec![("limit", "101")],
        vec![("limit", "ten")],
    ] {
        let (status, body) = list(&http, ANA, &query).await;
        assert_eq!(status, 400, "{query:?}: {body}");
        assert_eq!(body["error"]["code"], "bad_request", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("`cursor`") || message.contains("`limit`"), "{message}");
    }

    // A user without sessions gets an empty page; nobody at all gets a 401; only GET is allowed.
    let (status, none) = list(&http, "user-list-nobody", &[]).await;
    assert_eq!((status, none), (200, json!({"sessions": [], "next_cursor": null})));
    let (status, _) = status_and_body(&http.call(get(None, "/sessions", &[])).await);
    assert_eq!(status, 401);
    let mut post = get(Some(ANA), "/sessions", &[]);
    post["requestContext"]["http"]["method"] = json!("POST");
    let (status, _) = status_and_body(&http.call(post).await);
    assert_eq!(status, 405);
}

fn base64_url(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

#[tokio::test]
async fn a_skills_search_answers_the_best_matches_first_in_the_listings_shape() {
    let stack = Stack::new().await;
    stack.upload_example_skills(ANA).await;
    let http = stack.http(&[]).await;
    let search = |user: &'static str, query: Vec<(&'static str, String)>| {
        let http = &http;
        async move {
            let query: Vec<(&str, &str)> = query.iter().map(|(k, v)| (*k, v.as_str())).collect();
            status_and_body(&http.call(get(Some(user), "/skills", &query)).await)
        }
    };

    for (words, expected) in [
        ("préstamo hipotecario", "escrituras/hipoteca"),
        ("contrato de arrendamiento de vivienda", "contratos/arrendamiento"),
        ("compraventa de un local", "escrituras/compraventa"),
    ] {
        let (status, body) = search(ANA, vec![("q", words.to_owned())]).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["skills"][0]["path"], expected, "{words}: {body}");
        assert_eq!(body["query"], words);
        assert_eq!(body["next_cursor"], Value::Null);
        assert_eq!(body["count"], 3, "the catalog's size, as in the listing");
        // The listing's rendering of an entry, field for field.
        let skill = &body["skills"][0];
        for field in ["name", "description", "category", "tools", "declared_tools", "warnings"] {
            assert!(skill.get(field).is_some(), "{field} in {skill}");
        }
        assert!(body.get("skipped").is_some() && body.get("base_prompt").is_some(), "{body}");
    }
    let (status, one) = search(ANA, vec![("q", "escritura".to_owned()), ("limit", "1".to_owned())]).await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["skills"].as_array().unwrap().len(), 1, "{one}");

    // The same entry in the listing and in a search.
    let (_, listing) = status_and_body(&http.call(get(Some(ANA), "/skills", &[])).await);
    let listed = listing["skills"].as_array().unwrap().iter().find(|s| s["path"] == "escrituras/hipoteca").cloned();
    let (_, found) = search(ANA, vec![("q", "hipoteca".to_owned())]).await;
    assert_eq!(listed.as_ref(), Some(&found["skills"][0]));

    // Another tenant's search reads its own (empty) catalog.
    let (status, bobs) = search(BOB, vec![("q", "hipoteca".to_owned())]).await;
    assert_eq!(status, 200, "{bobs}");
    assert_eq!(bobs["skills"], json!([]), "{bobs}");

    for query in [
        vec![("q", String::new())],
        vec![("q", "   ".to_owned())],
        vec![("q", "x".repeat(257))],
        vec![("q", "hipoteca".to_owned()), ("cursor", "escrituras/compraventa".to_owned())],
        vec![("q", "hipoteca".to_owned()), ("limit", "0".to_owned())],
    ] {
        let (status, body) = search(ANA, query.clone()).await;
        assert_eq!(status, 400, "{query:?}: {body}");
        assert_eq!(body["error"]["code"], "bad_request", "{body}");
    }
    let (status, body) = search(ANA, vec![("q", "é".repeat(256))]).await;
    assert_eq!(status, 200, "256 characters are accepted, whatever their bytes: {body}");
}

fn commit(expected_version: u64, now: i64) -> TurnCommit {
    TurnCommit {
        expected_version,
        new_messages: vec![Message::user("q"), Message::assistant("a")],
        history_len: 2 * expected_version as usize,
        state: SessionState::default(),
        now,
        commit_token: format!("list-{expected_version}-{now}"),
        idempotency: None,
        usage: None,
        skill_versions: Default::default(),
    }
}

#[tokio::test]
async fn sessions_written_before_the_index_are_listed_from_their_next_turn_and_expired_ones_never() {
    let stack = Stack::new().await;
    let store = aws_store::DynamoSessionStore::new(
        stack.dynamodb.clone(),
        &stack.table,
        Arc::new(local_store::MemoryObjectStore::new()),
        30,
    );
    let user = UserId::parse("user-old").unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let s = |value: &str| AttributeValue::S(value.to_owned());
    let n = |value: i64| AttributeValue::N(value.to_string());
    // A meta item as the store wrote it before `owner` (at either sort key), and one written with
    // it whose TTL has passed but that DynamoDB has not deleted yet.
    let meta = |session: &str, sk: &str, created: i64, expires: i64| {
        HashMap::from([
            ("pk".to_owned(), s(&format!("user-old#{session}"))),
            ("sk".to_owned(), s(sk)),
            ("user_id".to_owned(), s("user-old")),
            ("session_id".to_owned(), s(session)),
            ("version".to_owned(), n(1)),
            ("workspace".to_owned(), AttributeValue::M(HashMap::new())),
            ("loaded_skills".to_owned(), AttributeValue::L(Vec::new())),
            ("created_at".to_owned(), n(created)),
            ("updated_at".to_owned(), n(created)),
            ("expires_at".to_owned(), n(expires)),
        ])
    };
    let mut expired = meta("gone", aws_store::META_SORT_KEY, now - 40 * 86_400, now - 10 * 86_400);
    expired.insert(aws_store::OWNER_ATTRIBUTE.to_owned(), s("user-old"));
    for item in [
        meta("legacy", aws_store::LEGACY_META_SORT_KEY, now - 100, now + 86_400),
        meta("unindexed", aws_store::META_SORT_KEY, now - 50, now + 86_400),
        expired,
    ] {
        stack.dynamodb.put_item().table_name(&stack.table).set_item(Some(item)).send().await.expect("put item");
    }
    let listed = |list: agent_core::store::SessionList| {
        list.sessions.iter().map(|s| (s.session_id.to_string(), s.created_at, s.version)).collect::<Vec<_>>()
    };
    assert_eq!(listed(store.list_sessions(&user, None, 20).await.unwrap()), []);

    // The next turn writes the attribute: through the meta item's move for the oldest layout, and
    // through the update for the other; the creation time is kept.
    store.commit(&user, &SessionId::parse("legacy").unwrap(), &commit(1, now)).await.unwrap();
    store.commit(&user, &SessionId::parse("unindexed").unwrap(), &commit(1, now + 1)).await.unwrap();
    let page = store.list_sessions(&user, None, 20).await.unwrap();
    assert_eq!(listed(page.clone()), [("unindexed".to_owned(), now - 50, 2), ("legacy".to_owned(), now - 100, 2)]);
    assert_eq!(page.next, None);
    // Their first message is not the one this turn brought: they stay untitled.
    assert!(page.sessions.iter().all(|session| session.title.is_none()), "{page:?}");
    // Pages of one end at the last session, with no empty page after it.
    let first = store.list_sessions(&user, None, 1).await.unwrap();
    let second = store.list_sessions(&user, first.next.as_ref(), 1).await.unwrap();
    assert_eq!(listed(second.clone()), [("legacy".to_owned(), now - 100, 2)]);
    assert_eq!(second.next, None);
}

#[tokio::test]
async fn a_configured_key_makes_cursors_hold_across_instances_and_without_one_only_within_a_process() {
    let stack = Stack::new().await;
    stack.model.push((0..2).map(|_| Reply::text("Hecho.")));
    let key = "a cursor signing key of 32 bytes+";
    let first = stack.http(&[("CURSOR_SIGNING_KEY", key)]).await;
    for session in ["k1", "k2"] {
        turn(&first, ANA, session, "Hola").await;
    }
    let (_, page) = list(&first, ANA, &[("limit", "1")]).await;
    let cursor = page["next_cursor"].as_str().expect("a cursor").to_owned();

    // Another instance with the same key pages on from it.
    let second = stack.http(&[("CURSOR_SIGNING_KEY", key)]).await;
    let (status, body) = list(&second, ANA, &[("limit", "1"), ("cursor", &cursor)]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(ids(&body).len(), 1, "{body}");
    assert_ne!(ids(&body), ids(&page), "the next page: {body}");

    // Without a key each process draws its own: another process's cursor is a 400.
    let keyless = stack.http(&[]).await;
    let (status, body) = list(&keyless, ANA, &[("cursor", &cursor)]).await;
    assert_eq!((status, &body["error"]["code"]), (400, &json!("bad_request")), "{body}");
}
