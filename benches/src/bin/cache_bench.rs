//! What prompt caching saves, per provider: the real adapters (Anthropic Messages, OpenAI Chat
//! Completions, Bedrock Converse) against the scripted model server, which counts a request's
//! tokens from its bytes and emulates each provider's prompt cache from the markers it is sent.
//!
//! Two workloads, each with caching on and off:
//! - the turn benchmark's: 20 turns of one session, each `load_skill`, `read_file`, answer, over a
//!   tenant of 10 skills;
//! - one long turn of 40 model calls (39 tool calls writing and reading workspace files, then the
//!   answer).
//!
//! For each it reports the input tokens, the share in a cached prefix (read from or written to the
//! cache), the share read, the cost at the shipped price table's published prices with and
//! without caching, and the CPU per model call of the turn's own thread (the server runs on
//! another), so marking's CPU shows next to not marking.
//!
//! Run with `cargo run --release -p benches --bin cache-bench`.

use std::sync::Arc;
use std::time::Duration;

use agent_core::turn::{AgentConfig, TurnReply, TurnService};
use agent_core::{ObjectStore, UserId};
use benches::{request, thousands};
use local_stack::model_server::{ModelServer, Reply};
use local_store::{MemoryObjectStore, MemorySessionStore};
use serde_json::json;

const TURNS: usize = 20;
const LONG_TURN_CALLS: usize = 40;
const SKILLS: usize = 10;
const SKILL: &str = "cat2/skill-0002";
const SKILL_FILE: &str = "/skills/skill-0002/reference.md";

/// A provider as the bench configures it: its `LLM_*` settings and a model the price table knows.
struct Provider {
    name: &'static str,
    kind: &'static str,
    model: &'static str,
}

const PROVIDERS: [Provider; 3] = [
    Provider { name: "Anthropic", kind: "anthropic", model: "claude-sonnet-4-5" },
    Provider { name: "OpenAI", kind: "openai", model: "gpt-4.1" },
    Provider { name: "Bedrock", kind: "bedrock", model: "us.anthropic.claude-sonnet-4-20250514-v1:0" },
];

/// What one workload spent.
#[derive(Default)]
struct Spent {
    calls: u64,
    input: u64,
    cache_read: u64,
    cache_write: u64,
    output: u64,
    usd: f64,
    cpu: Duration,
}

impl Spent {
    fn add(&mut self, reply: &TurnReply) {
        self.input += reply.usage.input_tokens;
        self.cache_read += reply.usage.cache_read_tokens;
        self.cache_write += reply.usage.cache_write_tokens;
        self.output += reply.usage.output_tokens;
        self.calls += u64::from(reply.steps);
        self.usd += reply.cost.usd.unwrap_or(0.0);
    }

    fn share(&self, part: u64) -> f64 {
        if self.input == 0 {
            0.0
        } else {
            part as f64 * 100.0 / self.input as f64
        }
    }
}

/// The CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes into the struct we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// The scripted server on a thread and runtime of its own, so its work is not the turn's CPU.
fn start_server() -> ModelServer {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let server = ModelServer::start().await;
            server.count_tokens(true);
            sender.send(server).unwrap();
            std::future::pending::<()>().await;
        });
    });
    receiver.recv().unwrap()
}

fn skill_md(index: usize) -> String {
    format!(
        "---\nname: skill-{index:04}\ndescription: Synthetic skill number {index} for the benchmark, with a \
         description of ordinary length.\ncategory: cat{}\n---\n\n# Skill {index}\n\n{}",
        index % 10,
        "Instructions line for the benchmark skill.\n".repeat(60)
    )
}

async fn service(server: &ModelServer, provider: &Provider, cache: bool) -> (TurnService, UserId) {
    let endpoint = match provider.kind {
        "openai" => server.base_url.clone(),
        _ => server.endpoint(),
    };
    let settings = [
        ("LLM_PROVIDER", provider.kind.to_owned()),
        ("LLM_MODEL", provider.model.to_owned()),
        ("LLM_BASE_URL", if provider.kind == "anthropic" { server.base_url.clone() } else { endpoint }),
        ("LLM_API_KEY", "bench".to_owned()),
        ("PROMPT_CACHE", if cache { "on" } else { "off" }.to_owned()),
    ];
    let config = llm::LlmConfig::from_lookup(|name| {
        settings.iter().find(|(key, _)| *key == name).map(|(_, value)| value.clone())
    })
    .expect("the bench's model configuration");
    let model = llm::build(&config).await.expect("the model");
    let objects = Arc::new(MemoryObjectStore::new());
    let user = UserId::parse("bench-cache").unwrap();
    for index in 0..SKILLS {
        let folder = format!("{user}/skills/cat{}/skill-{index:04}", index % 10);
        objects.put(&format!("{folder}/SKILL.md"), skill_md(index).into_bytes()).await.unwrap();
        objects.put(&format!("{folder}/reference.md"), b"Reference material.\n".repeat(20)).await.unwrap();
    }
    let agent = AgentConfig { model_id: provider.model.to_owned(), max_steps: 50, ..AgentConfig::default() };
    (TurnService::new(Arc::new(MemorySessionStore::new()), objects, model, agent), user)
}

/// The turn benchmark's 20 turns of one session.
async fn twenty_turns(server: &ModelServer, provider: &Provider, cache: bool) -> Spent {
    let (service, user) = service(server, provider, cache).await;
    let mut spent = Spent::default();
    for turn in 0..TURNS {
        server.push([
            Reply::tool("load_skill", json!({"skill_path": SKILL})),
            Reply::tool("read_file", json!({"file_path": SKILL_FILE, "limit": 20})),
            Reply::text(&format!("Done with request {turn}.")),
        ]);
        let before = thread_cpu();
        let reply = service.run_turn(request(&user, "s1", format!("Please use the skill, request {turn}."))).await;
        spent.cpu += thread_cpu() - before;
        spent.add(&reply.expect("a benchmark turn"));
    }
    spent
}

/// One turn of 40 model calls.
async fn long_turn(server: &ModelServer, provider: &Provider, cache: bool) -> Spent {
    let (service, user) = service(server, provider, cache).await;
    let mut replies = Vec::new();
    for call in 0..LONG_TURN_CALLS - 1 {
        let path = format!("/workspace/part-{}.md", call / 2);
        replies.push(if call % 2 == 0 {
            let content = format!("## Part {call}\n{}", "A paragraph of the report being drafted.\n".repeat(12));
            Reply::tool("write_file", json!({"file_path": path, "content": content}))
        } else {
            Reply::tool("read_file", json!({"file_path": path}))
        });
    }
    replies.push(Reply::text("The report is drafted."));
    server.push(replies);
    let mut spent = Spent::default();
    let before = thread_cpu();
    let reply = service.run_turn(request(&user, "long", "Draft the report in parts.")).await;
    spent.cpu += thread_cpu() - before;
    spent.add(&reply.expect("the long turn"));
    assert_eq!(spent.calls, LONG_TURN_CALLS as u64, "every scripted call was made");
    spent
}

fn main() {
    // The Bedrock client wants credentials and a region; nothing here reaches AWS.
    for (name, value) in
        [("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench"), ("AWS_REGION", "us-east-1")]
    {
        std::env::set_var(name, value);
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let prices = agent_core::pricing::PriceTable::shipped();
        println!("# cache-bench: prompt caching per provider\n");
        println!(
            "Real adapters against the scripted server (tokens = the request's JSON bytes / 4; each \
             provider's cache emulated from the markers sent). Prices: the shipped table of {} ({}).\n",
            prices.date(),
            prices.source().join(", ")
        );
        println!(
            "| provider (model) | workload | calls | input tokens | in a cached prefix | read from cache | \
             cost if nothing were cached | cost with caching | saved | CPU per call, caching off / on |"
        );
        println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for provider in &PROVIDERS {
            for (workload, long) in [("20 turns × 3 calls", false), ("one turn of 40 calls", true)] {
                let mut runs = Vec::new();
                for cache in [false, true] {
                    let server = start_server();
                    let spent = if long {
                        long_turn(&server, provider, cache).await
                    } else {
                        twenty_turns(&server, provider, cache).await
                    };
                    runs.push(spent);
                }
                let (off, on) = (&runs[0], &runs[1]);
                // What the same tokens cost if nothing were read from or written to a cache (OpenAI
                // caches on its own even unmarked, so its unmarked run is not that baseline).
                let price = prices.price(provider.model).expect("the bench's models have prices");
                let uncached = price.cost_nanos(&agent_core::Usage::new(on.input, on.output)) as f64 / 1e9;
                let per_call = |spent: &Spent| spent.cpu.as_secs_f64() * 1e6 / spent.calls.max(1) as f64;
                println!(
                    "| {} (`{}`) | {workload} | {} | {} | {:.1}% | {:.1}% | ${:.4} | ${:.4} | {:.0}% | {:.0} µs / {:.0} µs |",
                    provider.name,
                    provider.model,
                    on.calls,
                    thousands(on.input),
                    on.share(on.cache_read + on.cache_write),
                    on.share(on.cache_read),
                    uncached,
                    on.usd,
                    if uncached > 0.0 { (1.0 - on.usd / uncached) * 100.0 } else { 0.0 },
                    per_call(off),
                    per_call(on),
                );
            }
        }
        println!(
            "\nOpenAI reports cache reads only (its cache is automatic, in 128-token steps past 1,024), so its \
             writes are billed as input. CPU: the turn's own thread, the adapter's request building and \
             parsing included, the server's work not."
        );
    });
}
