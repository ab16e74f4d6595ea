//! Section 1: the handler's CPU per warm turn over the embedded store, and a cold process's CPU
//! for the catalog.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::turn::{AgentConfig, TurnService};
use agent_core::UserId;
use benches::{cpu_time, request};
use local_store::{MemoryObjectStore, MemorySessionStore};

use crate::{instant_model, tenant_skills, CPU_WALL_CAP, MESSAGE, WARM_TURNS};

pub(crate) struct CpuFigure {
    pub(crate) per_turn: Duration,
    pub(crate) turns: u32,
    /// Embedded-store calls per warm turn (object lists/gets/puts, session loads/commits).
    pub(crate) calls_per_turn: f64,
    pub(crate) warmup: Duration,
    /// What a cold process does with the index once it has it: decode it, build the catalog's
    /// lookups and render the state-1 listing (median of 5, CPU).
    pub(crate) catalog_load: Duration,
}

/// The CPU a cold process spends turning the stored index into a catalog and its listing, and
/// looking up the skill a turn loads (its part read and decoded), over the embedded store.
pub(crate) async fn catalog_load_cpu(objects: &MemoryObjectStore, user: &UserId) -> Duration {
    use agent_core::skills::SkillLibrary;
    let budget = AgentConfig::default().listing_tokens();
    let skill = agent_core::SkillPath::parse("cat0/skill-0000").unwrap();
    let mut runs = Vec::new();
    for _ in 0..5 {
        let before = cpu_time();
        let catalog = SkillLibrary::new().catalog(objects, user).await.unwrap();
        std::hint::black_box(catalog.listing(objects, budget).await.unwrap());
        std::hint::black_box(catalog.get(objects, &skill).await.unwrap().expect("the loaded skill"));
        runs.push(cpu_time() - before);
    }
    runs.sort();
    runs[runs.len() / 2]
}

pub(crate) async fn cpu_per_turn(skills: usize) -> CpuFigure {
    let objects = Arc::new(MemoryObjectStore::new());
    let user = UserId::parse(format!("mem-{skills}")).unwrap();
    for (key, bytes) in tenant_skills(skills) {
        objects.insert(&format!("{user}/{key}"), bytes);
    }
    let sessions = Arc::new(MemorySessionStore::new());
    let service =
        TurnService::new(sessions.clone(), objects.clone(), Arc::new(instant_model()), AgentConfig::default());
    // Warm the process with one turn, as a warm Lambda would be: it builds the tenant's index.
    let started = Instant::now();
    service.run_turn(request(&user, "warmup", MESSAGE)).await.unwrap();
    let warmup = started.elapsed();
    let calls_before = objects.calls.total() + sessions.calls.total();
    let (before, wall) = (cpu_time(), Instant::now());
    let mut turns = 0;
    while turns < WARM_TURNS && wall.elapsed() < CPU_WALL_CAP {
        // A fresh session per turn keeps history length constant across iterations.
        service.run_turn(request(&user, &format!("s{turns}"), MESSAGE)).await.unwrap();
        turns += 1;
    }
    let per_turn = (cpu_time() - before) / turns;
    let calls = objects.calls.total() + sessions.calls.total() - calls_before;
    let catalog_load = catalog_load_cpu(&objects, &user).await;
    CpuFigure { per_turn, turns, calls_per_turn: calls as f64 / f64::from(turns), warmup, catalog_load }
}
