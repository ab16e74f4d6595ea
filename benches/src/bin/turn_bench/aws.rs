//! Section 2: a cold and a warm turn's storage requests on the real S3 and DynamoDB adapters
//! against moto, by operation, and the one-time index build.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::turn::{AgentConfig, TurnService};
use agent_core::UserId;
use aws_store::{AwsStores, CallCounter, StoreSettings};
use benches::request;
use local_stack::lambda::Invocation;
use local_stack::stack::Stack;
use serde_json::json;

use crate::{instant_model, ms, ops_text, Ops, AWS_WARM_TURNS, MESSAGE};

pub(crate) struct AwsFigures {
    /// The first turn of a tenant without an index: it builds and stores the index.
    pub(crate) build_ops: Ops,
    pub(crate) build_wall: Duration,
    pub(crate) index_bytes: usize,
    /// The parts the head names, and their bytes together (none for a catalog held in its head).
    pub(crate) parts: (usize, u64),
    /// The skills-index function's rebuild of the same tenant (fresh release process).
    pub(crate) rebuild: Result<(Ops, Duration), String>,
    /// A turn on a new `TurnService` (empty process-wide caches) with the index present.
    pub(crate) cold_ops: Ops,
    pub(crate) cold_wall: Duration,
    /// The next turns of the same session on the same service, each counted on its own.
    pub(crate) warm_ops: Vec<Ops>,
    pub(crate) warm_wall: Duration,
    /// Whether a warm revalidation of the index kept the cached catalog (the GET was answered 304).
    pub(crate) catalog_reused: bool,
}

pub(crate) fn aws_service(config: &aws_config::SdkConfig, settings: &StoreSettings) -> (TurnService, CallCounter) {
    let counter = CallCounter::new();
    let stores = AwsStores::from_sdk_config(config, settings, Some(counter.clone()));
    let service = TurnService::new(stores.sessions, stores.objects, Arc::new(instant_model()), AgentConfig::default());
    (service, counter)
}

/// One turn on `service`: its requests by operation and its wall time.
pub(crate) async fn counted_turn(
    service: &TurnService,
    counter: &CallCounter,
    user: &UserId,
    session: &str,
) -> (Ops, Duration) {
    counter.reset();
    let started = Instant::now();
    service.run_turn(request(user, session, MESSAGE)).await.unwrap();
    (counter.operations(), started.elapsed())
}

pub(crate) async fn aws_figures(stack: &Stack, user: &UserId) -> AwsFigures {
    let config = local_stack::moto::sdk_config(&stack.endpoint).await;
    let settings = StoreSettings::from_lookup(|name| match name {
        "SESSIONS_TABLE" => Some(stack.table.clone()),
        "SKILLS_BUCKET" => Some(stack.bucket.clone()),
        "S3_FORCE_PATH_STYLE" => Some("true".into()),
        _ => None,
    })
    .unwrap();
    let index_key = agent_core::keys::catalog_index_key(user);
    assert!(stack.get(&index_key).await.is_none(), "{user} must start without an index");

    // The one-time build, by a throwaway service's first turn.
    let (throwaway, counter) = aws_service(&config, &settings);
    let (build_ops, build_wall) = counted_turn(&throwaway, &counter, user, "build").await;
    drop(throwaway);
    let head_bytes = stack.get(&index_key).await.unwrap_or_default();
    let index_bytes = head_bytes.len();
    let parts = match agent_core::skills::index::decode_index(&head_bytes) {
        Ok(agent_core::skills::index::IndexRead::Usable(head)) => {
            (head.parts.len(), head.parts.iter().map(|part| part.bytes).sum())
        }
        _ => (0, 0),
    };
    eprintln!("  index build (first turn): {} in {:.0} ms", ops_text(&build_ops), ms(build_wall));

    // The same build by the skills-index function, for comparison.
    let indexer = stack.skills_index(&[]).await;
    let mark = indexer.log_mark();
    let started = Instant::now();
    let event = json!({"rebuild": {"user_id": user.to_string()}});
    let rebuild = match indexer.invoke_with_budget(event, Duration::from_secs(600)).await {
        Invocation::Response(_) => {
            let wall = started.elapsed();
            Ok((indexer.storage_requests_since(mark).await, wall))
        }
        Invocation::Error(error) => Err(format!("the rebuild failed: {error}")),
        Invocation::Stream(_) => Err("the rebuild streamed its answer".to_owned()),
    };
    drop(indexer);
    match &rebuild {
        Ok((ops, wall)) => eprintln!("  skills-index rebuild: {} in {:.0} ms", ops_text(ops), ms(*wall)),
        Err(error) => eprintln!("  skills-index rebuild: {error}"),
    }

    // A cold turn (new caches, index present), then warm turns on the same service.
    let (service, counter) = aws_service(&config, &settings);
    let (cold_ops, cold_wall) = counted_turn(&service, &counter, user, "cold").await;
    let mut warm_ops = Vec::new();
    let mut warm_wall = Duration::ZERO;
    for _ in 0..AWS_WARM_TURNS {
        let (ops, wall) = counted_turn(&service, &counter, user, "cold").await;
        warm_ops.push(ops);
        warm_wall += wall;
    }
    // An unchanged index is answered 304 and the cached catalog is used again, not parsed anew.
    let again = service.skill_catalog(user).await.unwrap();
    let catalog_reused = Arc::ptr_eq(&again, &service.skill_catalog(user).await.unwrap());
    eprintln!("  cold turn: {} in {:.0} ms", ops_text(&cold_ops), ms(cold_wall));
    eprintln!("  warm turn: {}", ops_text(&warm_ops[0]));
    AwsFigures {
        catalog_reused,
        build_ops,
        build_wall,
        index_bytes,
        parts,
        rebuild,
        cold_ops,
        cold_wall,
        warm_ops,
        warm_wall: warm_wall / AWS_WARM_TURNS as u32,
    }
}
