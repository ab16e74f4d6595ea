//! Usage and budgets over the embedded store, with the DynamoDB adapter's semantics: usage counts
//! with the commit (a lost commit counts nothing), a failed turn's spend counts once per token, each
//! tenant reads only its own, and a tenant at its budget (of tokens or of money) is refused before
//! the model is called. A turn's cost is its calls' tokens at the price table's prices.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use agent_core::pricing::PriceTable;
use agent_core::store::{BudgetOverride, BudgetUnit, ModelUsage, TurnCommit, TurnUsage};
use agent_core::turn::{AgentConfig, OffsetDateTime, TurnError, TurnRequest, TurnService};
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
    two_step_model_using(fail_second, Usage::new(100, 10))
}

/// [`two_step_model`], each call using `usage`.
fn two_step_model_using(fail_second: bool, usage: Usage) -> Arc<FnModel> {
    let calls = AtomicU32::new(0);
    Arc::new(FnModel::new(move |_| {
        let call = calls.fetch_add(1, Ordering::SeqCst);
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
    TurnRequest::new(user(user_id), SessionId::parse("s1").unwrap(), message, OffsetDateTime::now_utc())
}

fn build(model: Arc<FnModel>, budget: Option<u64>) -> (TurnService, Arc<MemorySessionStore>) {
    let config = AgentConfig { model_id: "main-model".into(), daily_token_budget: budget, ..AgentConfig::default() };
    build_with(model, config)
}

fn build_with(model: Arc<dyn agent_core::ChatModel>, config: AgentConfig) -> (TurnService, Arc<MemorySessionStore>) {
    let sessions = Arc::new(MemorySessionStore::new());
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
        matches!(
            stopped,
            Err(TurnError::QuotaExceeded {
                unit: BudgetUnit::Tokens,
                used: 300,
                budget: 300,
                retry_after_secs: 1..=86_400
            })
        ),
        "{stopped:?}"
    );
    let state = sessions.budget_state(&user("alice"), &today).await.unwrap();
    assert_eq!((state.used_tokens, state.claimed_tokens), (330, 330), "the paid call counts, the rest is released");
    assert_eq!(sessions.load(&user("alice"), &SessionId::parse("s1").unwrap()).await.unwrap().unwrap().version, 1);
    let refused = service.run_turn(request("alice", "tres")).await;
    assert!(
        matches!(
            refused,
            Err(TurnError::QuotaExceeded {
                unit: BudgetUnit::Tokens,
                used: 330,
                budget: 300,
                retry_after_secs: 1..=86_400
            })
        ),
        "{refused:?}"
    );
    assert_eq!(model.calls(), 3, "the refused calls reached no model");
    assert!(service.run_turn(request("bob", "hola")).await.is_ok(), "another tenant is not affected");
    sessions.set_budget(&user("alice"), Some(BudgetOverride::Limit(10_000)));
    assert!(service.run_turn(request("alice", "tres")).await.is_ok(), "an operator's override raises it");
}

/// A call that read 10,000 tokens from the cache, wrote 2,000 and sent 1,000 uncached, and
/// answered with 500: at Claude Sonnet 4's $3 / $3.75 / $0.30 / $15 per million, $0.021.
fn cached_call() -> Usage {
    Usage { input_tokens: 13_000, output_tokens: 500, cache_read_tokens: 10_000, cache_write_tokens: 2_000 }
}
const CACHED_CALL_NANOS: u64 = 21_000_000;

#[tokio::test]
async fn a_turn_costs_its_calls_at_the_price_table_and_an_unpriced_model_counts_in_tokens_only() {
    let config =
        AgentConfig { model_id: "us.anthropic.claude-sonnet-4-20250514-v1:0".into(), ..AgentConfig::default() };
    let (service, sessions) = build_with(two_step_model_using(false, cached_call()), config);
    let reply = service.run_turn(request("alice", "hola")).await.unwrap();
    assert_eq!(reply.usage.cache_read_tokens, 20_000);
    assert_eq!(reply.cost.usd, Some(0.042), "two calls of $0.021");
    assert!(reply.cost.unpriced_models.is_empty());
    let body = serde_json::to_value(&reply).unwrap();
    assert_eq!(body["cost"], serde_json::json!({"usd": 0.042}));
    let today = agent_core::turn::utc_day(OffsetDateTime::now_utc());
    let day = &sessions.usage(&user("alice"), &today, &today).await.unwrap()[0];
    let model = day.models["us.anthropic.claude-sonnet-4-20250514-v1:0"];
    assert_eq!(
        model,
        ModelUsage {
            input_tokens: 26_000,
            output_tokens: 1_000,
            cache_read_tokens: 20_000,
            cache_write_tokens: 4_000,
            model_calls: 2,
            cost_nanos: 2 * CACHED_CALL_NANOS,
            unpriced_calls: 0,
        }
    );
    assert_eq!((day.totals.cost_nanos, day.totals.unpriced_calls), (2 * CACHED_CALL_NANOS, 0));

    // A model the table has no price for: its tokens count, its cost is unknown and it is named.
    let config = AgentConfig { model_id: "my-own-llm".into(), ..AgentConfig::default() };
    let (service, sessions) = build_with(two_step_model_using(false, cached_call()), config);
    let reply = service.run_turn(request("alice", "hola")).await.unwrap();
    assert_eq!((reply.cost.usd, reply.cost.unpriced_models.clone()), (None, vec!["my-own-llm".to_owned()]));
    let day = &sessions.usage(&user("alice"), &today, &today).await.unwrap()[0];
    assert_eq!((day.totals.tokens(), day.totals.cost_nanos, day.totals.unpriced_calls), (27_000, 0, 2));

    // The deployment's price for it (MODEL_PRICES) makes it priced.
    let prices = PriceTable::shipped()
        .with_overrides(r#"{"models": {"my-own-llm": {"input": 1, "output": 2, "cache_write": 1, "cache_read": 0.1}}}"#)
        .unwrap();
    let config = AgentConfig { model_id: "my-own-llm".into(), prices: Arc::new(prices), ..AgentConfig::default() };
    let (service, _) = build_with(two_step_model_using(false, cached_call()), config);
    let reply = service.run_turn(request("alice", "hola")).await.unwrap();
    // Per call: 1,000 × $1 + 2,000 × $1 + 10,000 × $0.10 + 500 × $2, per million: $0.005.
    assert_eq!(reply.cost.usd, Some(0.01));
}

#[tokio::test]
async fn a_money_budget_stops_a_tenant_and_an_operator_may_raise_it() {
    // $0.05 a day; a turn of two calls costs $0.042.
    let config = AgentConfig {
        model_id: "claude-sonnet-4".into(),
        daily_cost_budget: Some(50_000_000),
        ..AgentConfig::default()
    };
    let model = two_step_model_using(false, cached_call());
    let (service, sessions) = build_with(model.clone(), config);
    let today = agent_core::turn::utc_day(OffsetDateTime::now_utc());
    assert_eq!(service.run_turn(request("alice", "uno")).await.unwrap().cost.usd, Some(0.042));
    let state = sessions.budget_state(&user("alice"), &today).await.unwrap();
    assert_eq!((state.used_cost, state.claimed_cost), (42_000_000, 42_000_000), "the reservations were released");
    // The second turn starts under the budget; its first call reserves the $0.008 left and spends
    // $0.021, so its second call finds nothing left: the turn fails and its paid call counts.
    let stopped = service.run_turn(request("alice", "dos")).await;
    assert!(
        matches!(
            stopped,
            Err(TurnError::QuotaExceeded { unit: BudgetUnit::Cost, used: 50_000_000, budget: 50_000_000, .. })
        ),
        "{stopped:?}"
    );
    let refused = service.run_turn(request("alice", "tres")).await.unwrap_err();
    assert!(
        matches!(refused, TurnError::QuotaExceeded { unit: BudgetUnit::Cost, used: 63_000_000, .. }),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("money budget is spent ($0.063 of $0.05)"), "{refused}");
    assert_eq!(model.calls(), 3, "the refused calls reached no model");
    let state = sessions.budget_state(&user("alice"), &today).await.unwrap();
    assert_eq!((state.used_cost, state.claimed_cost, state.used_tokens), (63_000_000, 63_000_000, 40_500));
    assert!(service.run_turn(request("bob", "hola")).await.is_ok(), "another tenant is not affected");
    sessions.set_cost_budget(&user("alice"), Some(BudgetOverride::Limit(1_000_000_000)));
    assert!(service.run_turn(request("alice", "tres")).await.is_ok(), "an operator's override raises it");
    sessions.set_cost_budget(&user("alice"), Some(BudgetOverride::Limit(0)));
    assert!(service.run_turn(request("alice", "cuatro")).await.is_err(), "and lowers it");
}

#[tokio::test]
async fn parallel_turns_pass_a_money_budget_by_at_most_one_calls_reservation() {
    // Each turn is one call of $0.0085 (200 input and 800 output tokens of gpt-4o at $2.50 and $10
    // per million); each call reserves its estimated input and 1,000 output tokens, over $0.01. A
    // budget of $0.02 holds two reservations at a time, however many turns start together.
    let budget: u64 = 20_000_000;
    let gate = Arc::new(tokio::sync::Notify::new());
    let model =
        Arc::new(FnModel::new(|_| Ok(ChatResponse::text("ok").with_usage(Usage::new(200, 800)))).held(gate.clone()));
    let config = AgentConfig {
        model_id: "gpt-4o".into(),
        daily_cost_budget: Some(budget),
        output_tokens: 1_000,
        ..AgentConfig::default()
    };
    let (service, sessions) = build_with(model.clone(), config);
    let service = Arc::new(service);
    let release = tokio::spawn({
        let gate = gate.clone();
        async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                gate.notify_waiters();
            }
        }
    });
    let turns = (0..30).map(|index| {
        let service = service.clone();
        tokio::spawn(async move {
            let mut turn = request("alice", "hola");
            turn.session = SessionId::parse(format!("p{index}")).unwrap();
            service.run_turn(turn).await
        })
    });
    let outcomes: Vec<_> = futures::future::join_all(turns).await.into_iter().map(Result::unwrap).collect();
    release.abort();
    let ran = outcomes.iter().filter(|outcome| outcome.is_ok()).count() as u64;
    let refused = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, Err(TurnError::QuotaExceeded { unit: BudgetUnit::Cost, .. })))
        .count() as u64;
    assert_eq!(ran + refused, 30, "{outcomes:?}");
    assert!(ran >= 1 && refused >= 1, "some ran, some were refused: {ran} ran");
    let today = agent_core::turn::utc_day(OffsetDateTime::now_utc());
    let state = sessions.budget_state(&user("alice"), &today).await.unwrap();
    assert_eq!((state.used_cost, state.claimed_cost), (ran * 8_500_000, ran * 8_500_000), "every reservation released");
    // Without reservations all thirty would run: $0.255.
    let most_output = 10_000_000;
    assert!(state.used_cost <= budget + most_output, "{} billionths for a budget of $0.02", state.used_cost);
    assert_eq!(model.calls() as u64, ran, "only the turns that ran called the model");
}
