//! Commits: native attributes, stale versions, concurrent commits and reservations with exactly
//! one winner or exactly the budget.

use std::collections::BTreeMap;

use agent_core::store::{
    HistorySummary, ModelUsage, PausedSubagent, PendingApproval, PendingCall, Reservation, SessionState, SessionStore,
    StoreError, TodoItem, TodoStatus, TurnCommit, TurnUsage, WorkspaceFile,
};
use agent_core::{Message, ToolCall};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_store::META_SORT_KEY;
use serde_json::json;

use super::{ids, n, now, s, skill, turn, world, Item, World, TTL_DAYS};

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
    first_turn.push(Message::tool("c1", "read", "a/b"));
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
                    skill_versions: Default::default(),
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

/// What `tasks` concurrent tasks were granted in all, each asking `tries` times for `want` of
/// `unit` against `budget`; no grant may pass the budget, and a refusal sees it whole.
async fn concurrent_grants(
    world: &World,
    user: &agent_core::UserId,
    day: &'static str,
    unit: agent_core::store::BudgetUnit,
    (tasks, tries, want): (usize, usize, u64),
    budget: u64,
) -> u64 {
    let tasks = (0..tasks).map(|_| {
        let (sessions, user) = (world.stores.sessions.clone(), user.clone());
        tokio::spawn(async move {
            let mut granted = 0;
            for _ in 0..tries {
                // A stale `seen` of 0 makes every call try the write, as concurrent turns do.
                match sessions.reserve(&user, day, unit, want, budget, 0).await.expect("reserve") {
                    Reservation::Granted { tokens, claimed } => {
                        assert!(claimed <= budget, "granted past the budget: {claimed}");
                        granted += tokens;
                    }
                    Reservation::Refused { claimed } => assert_eq!(claimed, budget),
                }
            }
            granted
        })
    });
    let mut granted = 0;
    for task in tasks {
        granted += task.await.unwrap();
    }
    granted
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
    let granted =
        concurrent_grants(&world, &user, day, agent_core::store::BudgetUnit::Tokens, (16, 25, 1), BUDGET).await;
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
                        ModelUsage { input_tokens: 1, output_tokens: 0, model_calls: 1, ..ModelUsage::default() },
                    )]),
                    reserved: 1,
                    reserved_cost: 0,
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

/// Money has counters of its own on the same day item: reservations of billionths of a dollar
/// against a money budget grant exactly the budget under concurrency, leave the token counters
/// alone, and a spend adds its cost and cache split and releases what it reserved; the operator's
/// `daily_usd` is read as the money budget, beside (or without) `daily_tokens`.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn money_reservations_and_spends_have_their_own_counters_and_daily_usd_is_read() {
    use agent_core::store::{BudgetOverride, BudgetUnit};
    const BUDGET: u64 = 2_500_000; // $0.0025
    let world = world().await;
    let (user, _) = ids("carol", "s1");
    let day = "2026-11-29";
    let granted = concurrent_grants(&world, &user, day, BudgetUnit::Cost, (8, 10, 40_000), BUDGET).await;
    assert_eq!(granted, BUDGET);
    let number = |item: &Item, name: &str| item.get(name).map(|n| n.as_n().unwrap().clone());
    let item = world.raw_item("carol", "@usage", &format!("DAY#{day}")).await.expect("the day item");
    assert_eq!(
        ["claimed_cost", "reserved_cost", "claimed", "reserved"].map(|name| number(&item, name)),
        [Some("2500000".to_owned()), Some("2500000".to_owned()), None, None],
        "{item:?}"
    );

    // A committed turn that reserved it all and spent $0.0021 with a cache split.
    let spent = ModelUsage {
        input_tokens: 13_000,
        output_tokens: 500,
        cache_read_tokens: 10_000,
        cache_write_tokens: 2_000,
        model_calls: 1,
        cost_nanos: 2_100_000,
        unpriced_calls: 0,
    };
    let mine =
        ModelUsage { input_tokens: 7, output_tokens: 3, model_calls: 1, unpriced_calls: 1, ..ModelUsage::default() };
    let usage = TurnUsage {
        day: day.to_owned(),
        models: BTreeMap::from([("claude-sonnet-4".to_owned(), spent), ("mine".to_owned(), mine)]),
        reserved_cost: BUDGET,
        ..TurnUsage::default()
    };
    world.stores.sessions.record_usage(&user, &usage, "money-spend-1").await.expect("record the spend");
    let item = world.raw_item("carol", "@usage", &format!("DAY#{day}")).await.expect("the day item");
    assert_eq!(
        ["cost_nanos", "claimed_cost", "reserved_cost", "cache_read_tokens", "cache_write_tokens", "unpriced_calls"]
            .map(|name| number(&item, name)),
        ["2100000", "2100000", "0", "10000", "2000", "1"].map(|n| Some(n.to_owned())),
        "{item:?}"
    );
    let days = world.stores.sessions.usage(&user, day, day).await.unwrap();
    assert_eq!((days[0].totals.cost_nanos, days[0].totals.unpriced_calls), (2_100_000, 1));
    assert_eq!(days[0].models["claude-sonnet-4"], spent);
    assert_eq!(days[0].models["mine"], mine);
    let state = world.stores.sessions.budget_state(&user, day).await.unwrap();
    assert_eq!((state.used_cost, state.claimed_cost, state.used_tokens), (2_100_000, 2_100_000, 13_510));

    // The operator's item: dollars alone, then with tokens, then unusable.
    let budget_item = |attrs: Vec<(&str, AttributeValue)>| -> Item {
        let mut item: Item = attrs.into_iter().map(|(name, value)| (name.to_owned(), value)).collect();
        item.insert("pk".to_owned(), s("carol#@usage"));
        item.insert("sk".to_owned(), s("TOKEN_BUDGET"));
        item
    };
    world.put_raw(budget_item(vec![("daily_usd", AttributeValue::N("2.50".to_owned()))])).await;
    let state = world.stores.sessions.budget_state(&user, day).await.unwrap();
    assert_eq!(
        (state.cost_budget, state.budget, state.misconfigured.clone()),
        (Some(BudgetOverride::Limit(2_500_000_000)), None, None)
    );
    world
        .put_raw(budget_item(vec![("daily_usd", AttributeValue::N("0.01".to_owned())), ("daily_tokens", n(900))]))
        .await;
    let state = world.stores.sessions.budget_state(&user, day).await.unwrap();
    assert_eq!(
        (state.cost_budget, state.budget),
        (Some(BudgetOverride::Limit(10_000_000)), Some(BudgetOverride::Limit(900)))
    );
    world.put_raw(budget_item(vec![("daily_usd", AttributeValue::S("lots".to_owned()))])).await;
    let state = world.stores.sessions.budget_state(&user, day).await.unwrap();
    assert!(state.misconfigured.as_deref().is_some_and(|problem| problem.contains("daily_usd")), "{state:?}");
}
