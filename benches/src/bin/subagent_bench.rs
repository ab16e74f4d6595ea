//! The cost of the `task` machinery per subagent, over the embedded store with a zero-latency
//! model, for tenants of 10 and 10,000 skills (and one tenant agent): handler CPU and storage
//! requests per warm turn for a turn that starts no subagent, one general-purpose subagent, three
//! at once, and one of the tenant's agents. The differences are what a subagent costs the runtime;
//! the first row is what a turn without subagents costs, to compare with `turn-bench`.
//!
//! Progress goes to stderr; the table goes to stdout. Run with
//! `cargo run --release -p benches --bin subagent-bench`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::turn::{AgentConfig, TurnService};
use agent_core::{ChatResponse, Message, ToolCall, UserId};
use agent_ports::testing::FnModel;
use benches::{cpu_time, request};
use local_store::{MemoryObjectStore, MemorySessionStore};
use serde_json::json;

const SIZES: [usize; 2] = [10, 10_000];
/// Warm turns per figure, unless the wall cap comes first.
const WARM_TURNS: u32 = 300;
const WALL_CAP: Duration = Duration::from_secs(20);

/// What the turn's own agent is asked to do; the model reads it from the user's message.
#[derive(Clone, Copy)]
enum Scenario {
    NoSubagent,
    OneSubagent,
    ThreeSubagents,
    TenantAgent,
}

impl Scenario {
    const ALL: [Scenario; 4] =
        [Scenario::NoSubagent, Scenario::OneSubagent, Scenario::ThreeSubagents, Scenario::TenantAgent];

    fn message(self) -> &'static str {
        match self {
            Scenario::NoSubagent => "answer: none",
            Scenario::OneSubagent => "answer: one",
            Scenario::ThreeSubagents => "answer: three",
            Scenario::TenantAgent => "answer: agent",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Scenario::NoSubagent => "no subagent",
            Scenario::OneSubagent => "1 general-purpose subagent",
            Scenario::ThreeSubagents => "3 subagents at once",
            Scenario::TenantAgent => "1 tenant agent",
        }
    }

    fn subagents(self) -> u32 {
        match self {
            Scenario::NoSubagent => 0,
            Scenario::OneSubagent | Scenario::TenantAgent => 1,
            Scenario::ThreeSubagents => 3,
        }
    }
}

/// Answers at once: a subagent (its prompt ends with the subagent note) answers its task; the
/// turn's own agent starts the subagents its message asks for, then answers.
fn instant_model() -> FnModel {
    FnModel::new(|request| {
        if request.system.contains("<subagent>") {
            return Ok(ChatResponse::text("The task is done."));
        }
        if let Some(Message::Tool { name, content, .. }) = request.messages.last() {
            assert!(!content.starts_with("Error"), "the benchmark's {name} call failed: {content}");
            return Ok(ChatResponse::text("done"));
        }
        let asked = request.messages.iter().rev().find_map(|message| match message {
            Message::User { content, .. } => Some(content.as_str()),
            _ => None,
        });
        let task = |index: usize, agent: &str| {
            ToolCall::new(format!("t{index}"), "task", json!({"description": "Do the part.", "subagent_type": agent}))
        };
        Ok(match asked.unwrap_or_default() {
            "answer: one" => ChatResponse::calling(vec![task(0, "general-purpose")]),
            "answer: three" => ChatResponse::calling((0..3).map(|i| task(i, "general-purpose")).collect()),
            "answer: agent" => ChatResponse::calling(vec![task(0, "revisor")]),
            _ => ChatResponse::text("done"),
        })
    })
    .keeping_no_requests()
}

fn skill_md(index: usize) -> String {
    format!(
        "---\nname: skill-{index:05}\ndescription: Synthetic skill number {index} for the benchmark.\n\
         category: cat{}\n---\n\n# Skill {index}\n\nInstructions.\n",
        index % 10
    )
}

struct Figure {
    cpu_per_turn: Duration,
    requests_per_turn: f64,
    turns: u32,
}

async fn measure(skills: usize, scenario: Scenario) -> Figure {
    let objects = Arc::new(MemoryObjectStore::new());
    let user = UserId::parse(format!("bench-{skills}")).unwrap();
    for index in 0..skills {
        objects.insert(&format!("{user}/skills/cat{}/skill-{index:05}/SKILL.md", index % 10), skill_md(index));
    }
    objects.insert(
        &format!("{user}/agents/revisor.md"),
        "---\nname: revisor\ndescription: Reviews a document.\ntools: Read, Grep\n---\nYou review documents.\n",
    );
    let sessions = Arc::new(MemorySessionStore::new());
    let service =
        TurnService::new(sessions.clone(), objects.clone(), Arc::new(instant_model()), AgentConfig::default());
    // The first turn builds the index and fills the process-wide caches: not counted.
    service.run_turn(request(&user, "warmup", scenario.message())).await.unwrap();
    let calls_before = objects.calls.total() + sessions.calls.total();
    let (before, wall) = (cpu_time(), Instant::now());
    let mut turns = 0;
    while turns < WARM_TURNS && wall.elapsed() < WALL_CAP {
        let reply = service.run_turn(request(&user, &format!("s{turns}"), scenario.message())).await.unwrap();
        assert_eq!(reply.reply, "done");
        turns += 1;
    }
    let cpu_per_turn = (cpu_time() - before) / turns;
    let calls = objects.calls.total() + sessions.calls.total() - calls_before;
    Figure { cpu_per_turn, requests_per_turn: calls as f64 / f64::from(turns), turns }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    println!("| skills | turn | handler CPU per turn | per subagent | storage requests per turn | turns |");
    println!("|---:|---|---:|---:|---:|---:|");
    for skills in SIZES {
        let mut base: Option<Figure> = None;
        for scenario in Scenario::ALL {
            eprintln!("measuring {skills} skills, {}", scenario.label());
            let figure = measure(skills, scenario).await;
            let per_subagent = match (&base, scenario.subagents()) {
                (Some(base), n) if n > 0 => {
                    let extra = figure.cpu_per_turn.saturating_sub(base.cpu_per_turn) / n;
                    format!("{:.0} µs", extra.as_secs_f64() * 1e6)
                }
                _ => "–".to_owned(),
            };
            println!(
                "| {skills} | {} | {:.0} µs | {per_subagent} | {:.1} | {} |",
                scenario.label(),
                figure.cpu_per_turn.as_secs_f64() * 1e6,
                figure.requests_per_turn,
                figure.turns
            );
            if base.is_none() {
                base = Some(figure);
            }
        }
    }
}
