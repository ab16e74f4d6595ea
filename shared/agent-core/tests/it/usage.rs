//! Usage and budgets over the embedded store, with the DynamoDB adapter's semantics: usage counts
//! with the commit (a lost commit counts nothing), a failed turn's spend counts once per token, each
//! tenant reads only its own, and a tenant at its budget is refused before the model is called.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use agent_core::store::{BudgetOverride, ModelUsage, TurnCommit, TurnUsage};
use agent_core::turn::{AgentConfig, OffsetDateTime, TurnError, TurnRequest, TurnService, UserProfile};
use agent_core::{ChatResponse, Message, ModelError, SessionId, SessionState, SessionStore, ToolCall, Usage, UserId};
use agent_ports::testing::FnModel;
use local_store::{MemoryObjectStore, MemorySessionStore};

fn user(id: &str) -> UserId {
    UserId::parse(id).unwrap()
}

fn spent(day: &str, tokens: (u64, u64), committed: bool) -> TurnUsage {
    let usage = ModelUsage { input_tokens: tokens.0, output_tokens: tokens.1, model_calls: 1, ..ModelUsage::default() };
    TurnUsage {
        day: day.into(),
        models: BTreeMap::from([("m".to_owned(), usage)]),
        executions: 0,
        sandbox_ms: 0,
        committed,
        reserved: 0,
        reserved_cost: 0,
        grading: false,
    }
}

#[tokio::test]
async fn usage_counts_with_the_commit_and_a_spend_once_per_token() {
    let store = MemorySessionStore::new();
    let (alice, bob) = (user("alice"), user("bob"));
    let session = SessionId::parse("s1").unwrap();
    let commit = TurnCommit {
        expected_version: 0,
        new_messages: vec![Message::user("hi")],
        history_len: 0,
        state: SessionState::default(),
        now: 1,
        commit_token: "t1".to_owned(),
        idempotency: None,
        usage: Some(spent("2026-11-25", (100, 10), true)),
        skill_versions: Default::default(),
    };
    store.commit(&alice, &session, &commit).await.unwrap();
    // The same commit again loses (the version moved on) and counts nothing.
    assert!(store.commit(&alice, &session, &commit).await.is_err());
    // A failed turn's spend: twice under one token is counted once, another token counts again.
    store.record_usage(&alice, &spent("2026-11-25", (50, 5), false), "spend-1").await.unwrap();
    store.record_usage(&alice, &spent("2026-11-25", (50, 5), false), "spend-1").await.unwrap();
    store.record_usage(&alice, &spent("2026-11-26", (7, 1), false), "spend-2").await.unwrap();
    store.record_usage(&bob, &spent("2026-11-25", (1, 1), false), "spend-3").await.unwrap();

    let days = store.usage(&alice, "2026-11-25", "2026-11-25").await.unwrap();
    assert_eq!(days.len(), 1);
    let day = &days[0];
    assert_eq!(
        (day.totals.tokens(), day.totals.model_calls, day.totals.turns, day.totals.failed_turns),
        (165, 2, 1, 1)
    );
    assert_eq!(
        day.models["m"],
        ModelUsage { input_tokens: 150, output_tokens: 15, model_calls: 2, ..ModelUsage::default() }
    );
    let both = store.usage(&alice, "2026-11-01", "2026-11-30").await.unwrap();
    assert_eq!(both.iter().map(|day| day.day.as_str()).collect::<Vec<_>>(), ["2026-11-25", "2026-11-26"]);
    assert_eq!(store.usage(&bob, "2026-11-01", "2026-11-30").await.unwrap()[0].totals.tokens(), 2, "Bob's own only");

    let state = store.budget_state(&alice, "2026-11-25").await.unwrap();
    assert_eq!((state.used_tokens, state.budget), (165, None));
    store.set_budget(&alice, Some(BudgetOverride::Unlimited));
    assert_eq!(store.budget_state(&alice, "2026-11-27").await.unwrap().budget, Some(BudgetOverride::Unlimited));
    assert_eq!(store.budget_state(&bob, "2026-11-25").await.unwrap().budget, None);
}

/// Answers each call with 100 input and 10 output tokens: a `todoread` call first, then text; or, with
/// `fail_second`, fails the second call.
fn two_step_model(fail_second: bool) -> Arc<FnModel> {
    let calls = AtomicU32::new(0);
    Arc::new(FnModel::new(move |_| {
        let call = calls.fetch_add(1, Ordering::SeqCst);
        let usage = Usage::new(100, 10);
        // Even calls are a turn's first (a tool call), odd ones its second (the answer).
        if call.is_multiple_of(2) {
            let todoread = ToolCall::new(format!("c{call}"), "todoread", serde_json::json!({}));
            return Ok(ChatResponse::calling(vec![todoread]).with_usage(usage));
        }
        if fail_second {
            return Err(ModelError::Unavailable { attempts: 1, message: "down".into() });
        }
        Ok(ChatResponse::text("ok").with_usage(usage))
    }))
}

fn request(user_id: &str, message: &str) -> TurnRequest {
    TurnRequest {
        user: user(user_id),
        session: SessionId::parse("s1").unwrap(),
        message: message.into(),
        ticket: None,
        profile: UserProfile::default(),
        deadline: None,
        now: OffsetDateTime::now_utc(),
        idempotency: None,
        decisions: None,
        attachments: Vec::new(),
        pins: Default::default(),
    }
}

fn build(model: Arc<FnModel>, budget: Option<u64>) -> (TurnService, Arc<MemorySessionStore>) {
    let sessions = Arc::new(MemorySessionStore::new());
    let config = AgentConfig { model_id: "main-model".into(), daily_token_budget: budget, ..AgentConfig::default() };
    (TurnService::new(sessions.clone(), Arc::new(MemoryObjectStore::new()), model, config), sessions)
}

#[tokio::test]
async fn a_failed_turn_counts_what_it_paid_for_and_a_spent_budget_stops_the_next_turn() {
    let model = two_step_model(true);
    let (service, sessions) = build(model.clone(), None);
    let failed = service.run_turn(request("alice", "hola")).await;
    assert!(matches!(failed, Err(TurnError::Model(_))), "{failed:?}");
    let today = agent_core::turn::utc_day(OffsetDateTime::now_utc());
    let days = sessions.usage(&user("alice"), &today, &today).await.unwrap();
    let day = &days[0];
    assert_eq!(
        (day.totals.tokens(), day.totals.model_calls, day.totals.turns, day.totals.failed_turns),
        (110, 1, 0, 1)
    );
    assert_eq!(day.models["main-model"].model_calls, 1);

    // 300 tokens a day: a turn of two calls is 220. The second turn starts under the budget; its
    // first call reserves the 80 tokens left and spends 110, so its second call finds nothing left:
    // the turn fails (nothing stored), its paid call counts, and the next turn is refused at once.
    let model = two_step_model(false);
    let (service, sessions) = build(model.clone(), Some(300));
    let reply = service.run_turn(request("alice", "uno")).await.unwrap();
    assert_eq!(reply.usage, Usage::new(200, 20));
    let state = sessions.budget_state(&user("alice"), &today).await.unwrap();
    assert_eq!((state.used_tokens, state.claimed_tokens), (220, 220), "the reservations were released");
    let stopped = service.run_turn(request("alice", "dos")).await;
    assert!(
        matches!(stopped, Err(TurnError::QuotaExceeded { used: 300, budget: 300, retry_after_secs: 1..=86_400 })),
        "{stopped:?}"
    );
    let state = sessions.budget_state(&user("alice"), &today).await.unwrap();
    assert_eq!((state.used_tokens, state.claimed_tokens), (330, 330), "the paid call counts, the rest is released");
    assert_eq!(sessions.load(&user("alice"), &SessionId::parse("s1").unwrap()).await.unwrap().unwrap().version, 1);
    let refused = service.run_turn(request("alice", "tres")).await;
    assert!(
        matches!(refused, Err(TurnError::QuotaExceeded { used: 330, budget: 300, retry_after_secs: 1..=86_400 })),
        "{refused:?}"
    );
    assert_eq!(model.calls(), 3, "the refused calls reached no model");
    assert!(service.run_turn(request("bob", "hola")).await.is_ok(), "another tenant is not affected");
    sessions.set_budget(&user("alice"), Some(BudgetOverride::Limit(10_000)));
    assert!(service.run_turn(request("alice", "tres")).await.is_ok(), "an operator's override raises it");
}
