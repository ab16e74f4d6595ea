//! The S3 and DynamoDB adapters against moto: pagination, conditional commits,
//! spilling, expiry and tenant isolation, checked through the traits and the raw items.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_core::keys;
use agent_core::store::{
    HistorySummary, ModelUsage, ObjectStore, PausedSubagent, PendingApproval, PendingCall, Reservation, SessionState,
    SessionStore, StoreError, TodoItem, TodoStatus, TurnCommit, TurnUsage, WorkspaceFile,
};
use agent_core::{Message, SessionId, SkillPath, ToolCall, UserId};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_store::{AwsStores, CallCounter, CallCounts, StoreSettings, META_SORT_KEY, SPILL_THRESHOLD_BYTES};
use serde_json::json;
use local_stack::moto;

type Item = HashMap<String, AttributeValue>;

const TTL_DAYS: u32 = 30;

/// A bucket and a sessions table of this test's own in the shared moto_server.
struct World {
    stores: AwsStores,
    counter: CallCounter,
    table: String,
}

async fn world() -> World {
    world_at(&moto::moto().endpoint).await
}

async fn world_at(endpoint: &str) -> World {
    let config = moto::sdk_config(endpoint).await;
    let settings = StoreSettings {
        sessions_table: moto::unique_name("sessions"),
        skills_bucket: moto::unique_name("skills"),
        session_ttl_days: TTL_DAYS,
        s3_force_path_style: true,
    };
    let counter = CallCounter::new();
    let stores = AwsStores::from_sdk_config(&config, &settings, Some(counter.clone()));
    moto::create_bucket(stores.objects.client(), &settings.skills_bucket).await;
    moto::create_sessions_table(stores.sessions.client(), &settings.sessions_table).await;
    counter.reset();
    World { stores, counter, table: settings.sessions_table }
}

impl World {
    fn dynamodb(&self) -> &aws_sdk_dynamodb::Client {
        self.stores.sessions.client()
    }

    /// Every item of a session's partition, in sort-key order, as an operator would see them.
    async fn raw_items(&self, user: &str, session: &str) -> Vec<Item> {
        let mut items = self
            .dynamodb()
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(format!("{user}#{session}")))
            .consistent_read(true)
            .send()
            .await
            .expect("query")
            .items
            .unwrap_or_default();
        items.sort_by_key(|item| item["sk"].as_s().unwrap().clone());
        items
    }

    async fn raw_item(&self, user: &str, session: &str, sk: &str) -> Option<Item> {
        self.dynamodb()
            .get_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(format!("{user}#{session}")))
            .key("sk", AttributeValue::S(sk.to_string()))
            .consistent_read(true)
            .send()
            .await
            .expect("get item")
            .item
    }

    async fn put_raw(&self, item: Item) {
        self.dynamodb().put_item().table_name(&self.table).set_item(Some(item)).send().await.expect("put item");
    }

    async fn commit(
        &self,
        user: &UserId,
        session: &SessionId,
        expected_version: u64,
        new_messages: Vec<Message>,
        state: SessionState,
        now: i64,
    ) -> Result<(), StoreError> {
        let history_len = 2 * expected_version as usize;
        let commit_token = format!("test-{expected_version}-{now}");
        let commit = TurnCommit {
            expected_version,
            new_messages,
            history_len,
            state,
            now,
            commit_token,
            idempotency: None,
            usage: None,
        };
        self.stores.sessions.commit(user, session, &commit).await
    }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

fn ids(user: &str, session: &str) -> (UserId, SessionId) {
    (UserId::parse(user).unwrap(), SessionId::parse(session).unwrap())
}

fn turn(question: &str, answer: &str) -> Vec<Message> {
    vec![Message::user(question), Message::assistant(answer)]
}

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_string())
}

fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn skill(path: &str) -> SkillPath {
    SkillPath::parse(path).unwrap()
}

#[tokio::test]
async fn s3_list_follows_pagination_past_1000_keys() {
    let world = world().await;
    let objects = world.stores.objects.clone();
    const KEYS: usize = 1003;

    // Uploaded concurrently in bounded batches: moto handles a few dozen requests at once well.
    let mut pending = tokio::task::JoinSet::new();
    for i in 0..KEYS {
        let objects = objects.clone();
        pending.spawn(async move { objects.put(&format!("u1/skills/cat/k{i:04}.md"), vec![b'x'; i % 7]).await });
        if pending.len() >= 32 {
            pending.join_next().await.unwrap().unwrap().unwrap();
        }
    }
    while let Some(result) = pending.join_next().await {
        result.unwrap().unwrap();
    }
    objects.put("u1/tickets/t1/a.txt", b"other prefix".to_vec()).await.unwrap();
    objects.put("u2/skills/cat/k0000.md", b"other tenant".to_vec()).await.unwrap();

    world.counter.reset();
    let listed = objects.list("u1/skills/").await.unwrap();
    // The default page is 1000 keys, so 1003 keys take exactly two ListObjectsV2 calls.
    assert_eq!(world.counter.operations().get("S3.ListObjectsV2"), Some(&2), "{:?}", world.counter.operations());
    assert_eq!(listed.len(), KEYS);
    for (i, meta) in listed.iter().enumerate() {
        assert_eq!(meta.key, format!("u1/skills/cat/k{i:04}.md"));
        assert_eq!(meta.size, (i % 7) as u64);
        assert!(!meta.etag.is_empty() && !meta.etag.contains('"'), "{:?}", meta.etag);
    }
    assert_eq!(objects.list("u2/").await.unwrap().len(), 1);
    assert!(objects.list("nobody/").await.unwrap().is_empty());
}

#[tokio::test]
async fn s3_get_of_a_missing_key_is_none_and_etags_are_stable() {
    let world = world().await;
    let objects = &world.stores.objects;
    assert_eq!(objects.get("u1/skills/none/SKILL.md").await.unwrap(), None);

    objects.put("u1/skills/a/SKILL.md", b"# A".to_vec()).await.unwrap();
    let first = objects.get("u1/skills/a/SKILL.md").await.unwrap().expect("object");
    assert_eq!(first.bytes, b"# A");
    assert!(!first.etag.is_empty() && !first.etag.contains('"'), "{:?}", first.etag);
    let listed = objects.list("u1/skills/a/").await.unwrap();
    assert_eq!(listed[0].etag, first.etag, "list and get agree on the ETag");
    assert_eq!(objects.get("u1/skills/a/SKILL.md").await.unwrap().unwrap().etag, first.etag);

    // Same bytes, same ETag; new bytes, new ETag: what the skill cache keys on.
    objects.put("u1/skills/a/SKILL.md", b"# A".to_vec()).await.unwrap();
    assert_eq!(objects.get("u1/skills/a/SKILL.md").await.unwrap().unwrap().etag, first.etag);
    objects.put("u1/skills/a/SKILL.md", b"# A, edited".to_vec()).await.unwrap();
    let edited = objects.get("u1/skills/a/SKILL.md").await.unwrap().unwrap();
    assert_ne!(edited.etag, first.etag);
    assert_eq!(edited.bytes, b"# A, edited");
}

#[tokio::test]
async fn s3_presigned_links_read_the_object_without_credentials_and_send_no_request() {
    let world = world().await;
    let objects = &world.stores.objects;
    let key = "auth0|alice/workspaces/s1/blobs/abc";
    objects.put(key, b"contenido binario \x00\xff".to_vec()).await.unwrap();
    world.counter.reset();

    let url =
        objects.presign_get(key, Duration::from_secs(300), &Default::default()).await.unwrap().expect("S3 makes links");
    assert_eq!(world.counter.total(), 0, "signing is local: {:?}", world.counter.operations());
    assert!(url.starts_with(&moto::moto().endpoint), "the configured endpoint, path-style: {url}");
    assert!(url.contains("X-Amz-Expires=300") && url.contains("X-Amz-Signature="), "{url}");
    let fetched = reqwest::get(&url).await.expect("follow the link");
    assert_eq!(fetched.status(), 200);
    assert_eq!(fetched.bytes().await.unwrap().as_ref(), b"contenido binario \x00\xff");

    let missing = objects
        .presign_get("auth0|alice/none", Duration::from_secs(60), &Default::default())
        .await
        .unwrap()
        .expect("a link");
    assert_eq!(reqwest::get(&missing).await.unwrap().status(), 404, "a link to nothing reads nothing");
    // Past S3's one-week maximum the SDK refuses; that is a backend error, never a panic.
    let too_long = objects.presign_get(key, Duration::from_secs(8 * 86_400), &Default::default()).await;
    assert!(matches!(too_long, Err(StoreError::Backend(_))), "{too_long:?}");
}

#[tokio::test]
async fn a_new_session_loads_as_none() {
    let world = world().await;
    let (user, session) = ids("alice", "s1");
    assert_eq!(world.stores.sessions.load(&user, &session).await.unwrap(), None);
}

#[tokio::test]
async fn commits_store_history_and_state_as_native_attributes() {
    let world = world().await;
    let (user, session) = ids("auth0|alice", "s1");
    let first_now = now();
    let plan = json!({"goal": "draft", "steps": [{"title": "read", "done": true, "n": 1}, {"title": "write", "done": false, "weight": 0.5}], "note": null});
    let mut workspace = BTreeMap::new();
    workspace.insert("notes/a.md".to_string(), WorkspaceFile { sha256: "ab".repeat(32), size: 12 });
    let state = SessionState {
        current_skill: None,
        loaded_skills: vec![skill("escrituras/compraventa")],
        plan: Some(plan.clone()),
        workspace,
        todos: vec![TodoItem { content: "read the deed".into(), status: TodoStatus::InProgress }],
        summary: Some(HistorySummary { text: "earlier: greetings".into(), covers: 2, from_turn: Some(2) }),
        summary_retry_at: Some(7),
        sandbox_session: Some("interpreter-session-1".into()),
        pending_approval: Some(PendingApproval {
            calls: vec![
                PendingCall { id: "c2".into(), name: "execute".into(), subagent: None },
                PendingCall { id: "sa-1/t1".into(), name: "write_file".into(), subagent: Some("sa-1".into()) },
            ],
            turn_start: 0,
            steps: 2,
            forced_skill: Some(skill("escrituras/compraventa")),
            ticket: None,
            // A paused subagent's conversation, kept natively typed with the rest of the state.
            subagents: vec![PausedSubagent {
                id: "sa-1".into(),
                parent: None,
                task_call_id: "c3".into(),
                conversation: vec![
                    Message::user("Escribe el borrador"),
                    Message::Assistant {
                        content: "Lo escribo.".into(),
                        tool_calls: vec![ToolCall {
                            id: "t1".into(),
                            name: "write_file".into(),
                            arguments: json!({"file_path": "/workspace/b.md", "content": "x", "n": 1.5}),
                        }],
                    },
                ],
                steps: 1,
                loaded_skills: vec![skill("escrituras/compraventa")],
            }],
            subagents_started: 1,
        }),
    };
    let mut first_turn = turn("hola", "¿en qué puedo ayudar?");
    first_turn.push(Message::Assistant {
        content: String::new(),
        tool_calls: vec![ToolCall { id: "c1".into(), name: "read".into(), arguments: json!({"path": "/skills"}) }],
    });
    first_turn.push(Message::Tool { tool_call_id: "c1".into(), name: "read".into(), content: "a/b".into() });
    world.commit(&user, &session, 0, first_turn.clone(), state.clone(), first_now).await.unwrap();

    let loaded = world.stores.sessions.load(&user, &session).await.unwrap().expect("session");
    assert_eq!(loaded.version, 1);
    assert_eq!(loaded.history, first_turn);
    assert_eq!(loaded.state, state);
    assert_eq!(loaded.updated_at, first_now);
    assert_eq!((loaded.user_id, loaded.session_id), (user.clone(), session.clone()));

    // What an operator sees: top-level, natively typed attributes.
    let meta = world.raw_item("auth0|alice", "s1", META_SORT_KEY).await.expect("meta item");
    assert_eq!(meta["current_skill"], AttributeValue::Null(true));
    assert_eq!(meta["user_id"], s("auth0|alice"));
    assert_eq!(meta["session_id"], s("s1"));
    assert_eq!(meta["version"], n(1));
    assert_eq!(meta["loaded_skills"], AttributeValue::L(vec![s("escrituras/compraventa")]));
    let pending = meta["pending_approval"].as_m().expect("the pending approval is a native map");
    assert_eq!(pending["steps"], n(2));
    let plan_attr = meta["plan"].as_m().expect("plan is a native map");
    assert_eq!(plan_attr["goal"], s("draft"));
    let steps = plan_attr["steps"].as_l().expect("steps is a native list");
    assert_eq!(steps[0].as_m().unwrap()["done"], AttributeValue::Bool(true));
    assert_eq!(steps[0].as_m().unwrap()["n"], n(1));
    assert_eq!(plan_attr["note"], AttributeValue::Null(true));
    let file = meta["workspace"].as_m().unwrap()["notes/a.md"].as_m().expect("workspace entry is a map");
    assert_eq!(file["sha256"], s(&"ab".repeat(32)));
    assert_eq!(file["size"], n(12));
    assert_eq!(meta["created_at"], n(first_now));
    assert_eq!(meta["updated_at"], n(first_now));
    assert_eq!(meta["expires_at"], n(first_now + i64::from(TTL_DAYS) * 86_400));
    assert!(matches!(&meta["todos"], AttributeValue::L(todos) if todos.len() == 1), "{:?}", meta["todos"]);
    assert!(matches!(&meta["summary"], AttributeValue::M(_)), "{:?}", meta["summary"]);
    let turn_item = world.raw_item("auth0|alice", "s1", "TURN#0000000001").await.expect("turn item");
    let stored: Vec<Message> = serde_json::from_str(turn_item["messages"].as_s().unwrap()).unwrap();
    assert_eq!(stored, first_turn);
    assert_eq!(turn_item["expires_at"], meta["expires_at"]);

    // A second turn appends to the history and rewrites the state; created_at stays.
    let second_now = first_now + 60;
    let second_state = SessionState { current_skill: Some(skill("escrituras/compraventa")), ..SessionState::default() };
    world.commit(&user, &session, 1, turn("y ahora", "hecho"), second_state.clone(), second_now).await.unwrap();
    let loaded = world.stores.sessions.load(&user, &session).await.unwrap().expect("session");
    assert_eq!(loaded.version, 2);
    assert_eq!(loaded.history, [first_turn, turn("y ahora", "hecho")].concat());
    assert_eq!(loaded.state, second_state);
    assert_eq!(loaded.updated_at, second_now);
    let meta = world.raw_item("auth0|alice", "s1", META_SORT_KEY).await.unwrap();
    assert_eq!(meta["current_skill"], s("escrituras/compraventa"));
    assert_eq!(meta["plan"], AttributeValue::Null(true));
    assert_eq!(meta["summary"], AttributeValue::Null(true));
    assert_eq!(meta["created_at"], n(first_now));
    assert_eq!(meta["updated_at"], n(second_now));
    assert_eq!(meta["expires_at"], n(second_now + i64::from(TTL_DAYS) * 86_400));
}

#[tokio::test]
async fn a_stale_commit_conflicts_and_changes_nothing() {
    let world = world().await;
    let (user, session) = ids("alice", "s1");
    let t = now();
    world.commit(&user, &session, 0, turn("1", "one"), SessionState::default(), t).await.unwrap();
    world.commit(&user, &session, 1, turn("2", "two"), SessionState::default(), t + 1).await.unwrap();
    let before_items = world.raw_items("alice", "s1").await;
    let before = world.stores.sessions.load(&user, &session).await.unwrap();

    let stale_state = SessionState { current_skill: Some(skill("a/b")), ..SessionState::default() };
    for expected in [1, 0, 5] {
        let result = world.commit(&user, &session, expected, turn("stale", "x"), stale_state.clone(), t + 2).await;
        assert!(matches!(result, Err(StoreError::Conflict)), "expected_version {expected}: {result:?}");
    }

    assert_eq!(world.raw_items("alice", "s1").await, before_items, "a failed commit writes nothing");
    assert_eq!(world.stores.sessions.load(&user, &session).await.unwrap(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_commits_from_one_version_have_exactly_one_winner() {
    let world = world().await;
    let (user, session) = ids("alice", "race");
    let sessions = world.stores.sessions.clone();
    let mut expected_history = Vec::new();
    for version in 0..8u64 {
        let attempt = |who: &'static str| {
            let (sessions, user, session) = (sessions.clone(), user.clone(), session.clone());
            tokio::spawn(async move {
                let commit = TurnCommit {
                    expected_version: version,
                    new_messages: turn(who, &format!("{who} at {version}")),
                    history_len: 2 * version as usize,
                    state: SessionState::default(),
                    now: now(),
                    commit_token: format!("{who}-{version}"),
                    idempotency: None,
                    usage: None,
                };
                (who, sessions.commit(&user, &session, &commit).await)
            })
        };
        let (a, b) = (attempt("a"), attempt("b"));
        let results = [a.await.unwrap(), b.await.unwrap()];
        let winners: Vec<&str> = results.iter().filter(|(_, r)| r.is_ok()).map(|(who, _)| *who).collect();
        assert_eq!(winners.len(), 1, "version {version}: {results:?}");
        assert!(
            results.iter().all(|(_, r)| matches!(r, Ok(()) | Err(StoreError::Conflict))),
            "version {version}: {results:?}"
        );
        expected_history.extend(turn(winners[0], &format!("{} at {version}", winners[0])));
        let loaded = sessions.load(&user, &session).await.unwrap().expect("session");
        assert_eq!(loaded.version, version + 1);
        assert_eq!(loaded.history, expected_history);
    }
}

/// Reservations are `ADD`s under a condition on the day's `claimed`, spends are transactions of
/// `ADD`s on the same item. Made 16 at a time, 400 reservations against a budget of 300 grant
/// exactly 300, none past the budget, and the day's item counts each grant and each spend.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn concurrent_reservations_grant_exactly_the_budget_and_each_is_counted() {
    const BUDGET: u64 = 300;
    let world = world().await;
    let (user, _) = ids("alice", "s1");
    let day = "2026-11-28";
    let tasks = (0..16).map(|_| {
        let (sessions, user) = (world.stores.sessions.clone(), user.clone());
        tokio::spawn(async move {
            let mut granted = 0;
            for _ in 0..25 {
                // A stale `seen` of 0 makes every call try the write, as concurrent turns do.
                match sessions.reserve_tokens(&user, day, 1, BUDGET, 0).await.expect("reserve") {
                    Reservation::Granted { tokens, claimed } => {
                        assert!(claimed <= BUDGET, "granted past the budget: {claimed}");
                        granted += tokens;
                    }
                    Reservation::Refused { claimed } => assert_eq!(claimed, BUDGET),
                }
            }
            granted
        })
    });
    let mut granted = 0;
    for task in tasks {
        granted += task.await.unwrap();
    }
    assert_eq!(granted, BUDGET);
    let counts =
        |item: &Item| ["tokens", "claimed", "reserved"].map(|name| item.get(name).map(|n| n.as_n().unwrap().clone()));
    let item = world.raw_item("alice", "@usage", &format!("DAY#{day}")).await.expect("the day item");
    assert_eq!(counts(&item), [None, Some("300".to_owned()), Some("300".to_owned())], "{item:?}");

    // 160 failed turns that each spent the one token they reserved, written at once.
    let tasks = (0..16).map(|task| {
        let (sessions, user) = (world.stores.sessions.clone(), user.clone());
        tokio::spawn(async move {
            for spend in 0..10 {
                let usage = TurnUsage {
                    day: day.to_owned(),
                    models: BTreeMap::from([(
                        "m".to_owned(),
                        ModelUsage { input_tokens: 1, output_tokens: 0, model_calls: 1 },
                    )]),
                    reserved: 1,
                    ..TurnUsage::default()
                };
                sessions.record_usage(&user, &usage, &format!("spend-{task}-{spend}")).await.expect("record the spend");
            }
        })
    });
    for task in tasks {
        task.await.unwrap();
    }
    let item = world.raw_item("alice", "@usage", &format!("DAY#{day}")).await.expect("the day item");
    assert_eq!(counts(&item), ["160", "300", "140"].map(|n| Some(n.to_owned())), "{item:?}");
}

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
    let big = vec![
        Message::user("summarise"),
        Message::Tool { tool_call_id: "c1".into(), name: "read".into(), content: big_text },
        Message::assistant("done"),
    ];
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
