//! Published skills against skills written as folders, over the in-memory store (issue 38):
//!
//! 1. the same library of 10 and 10,000 skills (turn-bench's: each a SKILL.md, `reference.md` and
//!    `examples/example.md`) written as folders, and published through `versions::publish`, three
//!    versions a skill with the middle one the default; then turn-bench's turn (load a skill, read
//!    one of its files, answer; zero-latency model): the storage calls of a cold turn (a new
//!    process's caches, index present, a new session) and of a warm one, counted by
//!    `MemoryObjectStore::recording`, the cold turn's wall time and CPU, a warm turn's CPU, and
//!    what building each library and its index took;
//! 2. from a promote to the first turn that sees it: `set_default`'s own time and calls at each size
//!    (it returns once the index is written), and a warm process's turn started right after, which
//!    must load the new default's SKILL.md (the run stops otherwise); and `publish` with
//!    `promote=true`;
//! 3. an upload's time against its size: zips of 10 KB, 1 MB, 10 MB and 50 MB inflated (half text,
//!    half random bytes) through `versions::read_zip` and `versions::publish`.
//!
//! Progress goes to stderr, the tables to stdout. `cargo run --release -p benches --bin versions-bench`;
//! `VERSIONS_BENCH_SIZES=10,1000` measures other library sizes.

mod library;
mod promote;
mod report;
mod turns;
mod upload;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::turn::AgentConfig;
use agent_core::UserId;
use local_store::{MemoryObjectStore, MemorySessionStore};

use crate::library::{version_line, Built};
use crate::promote::promote_figures;
use crate::report::{print_promotes, print_turns, print_uploads, Variant};
use crate::turns::turn_figures;
use crate::upload::upload_figure;

pub(crate) type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// The library sizes measured, unless `VERSIONS_BENCH_SIZES` (comma-separated) names others.
const SIZES: [usize; 2] = [10, 10_000];
/// Versions published per skill, and the one each skill serves.
pub(crate) const VERSIONS: u32 = 3;
pub(crate) const DEFAULT_VERSION: u32 = 2;
/// The skill every turn loads (it exists at every size) and the file it reads.
pub(crate) const SKILL_INDEX: usize = 2;
pub(crate) const SKILL: &str = "cat2/skill-0002";
pub(crate) const SKILL_FILE: &str = "/skills/skill-0002/reference.md";
pub(crate) const MESSAGE: &str = "Please use the skill.";
/// New processes per cold-turn figure.
pub(crate) const COLD_STARTS: usize = 5;
/// Warm turns per CPU figure, unless the wall cap comes first.
pub(crate) const WARM_TURNS: u32 = 200;
pub(crate) const WARM_WALL_CAP: Duration = Duration::from_secs(5);
/// Promotes (and rollbacks) per size.
pub(crate) const PROMOTES: usize = 10;
/// Upload sizes (inflated bytes) and runs of each.
const UPLOADS: [(usize, usize); 4] = [(10_000, 5), (1_000_000, 5), (10_000_000, 3), (50_000_000, 3)];

/// The middle of `values` (the upper one of an even count); zero when there are none.
pub(crate) fn median(values: &[Duration]) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

fn main() -> BenchResult<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(run())
}

async fn run() -> BenchResult<()> {
    let started = Instant::now();
    let load_before = load_average();
    let budget = AgentConfig::default().listing_tokens();
    let progress = |what: String| eprintln!("[{:>5.1} s] {what}", started.elapsed().as_secs_f64());
    let mut variants = Vec::new();
    let mut promotes = Vec::new();
    for skills in sizes()? {
        for published in [false, true] {
            let kind = if published { "published" } else { "folders" };
            let label = format!("{kind}-{skills}");
            progress(format!("{skills} skills as {kind}: writing the library and its index"));
            // Each library in a store of its own, then copied to a recording store (a new process's
            // view of the same bucket) whose log holds only the calls measured. The builder is
            // dropped only after the measurements: freeing its objects first left the allocator's
            // free lists to be consolidated by the first measured turn (8 ms at 10,000 skills).
            let user = UserId::parse(label.clone())?;
            let builder = MemoryObjectStore::new();
            let built: Built = match published {
                false => library::folders(&builder, &user, skills, budget).await?,
                true => library::published(&builder, &user, skills, budget).await?,
            };
            let objects = Arc::new(MemoryObjectStore::recording());
            for key in builder.keys() {
                let bytes = builder.bytes(&key).ok_or("a listed key has no object")?;
                objects.insert(&key, bytes);
            }
            let sessions = Arc::new(MemorySessionStore::new());
            progress(format!(
                "  written in {:.2} s, index built in {:.2} s; turns",
                built.write.as_secs_f64(),
                built.index_build.as_secs_f64()
            ));
            let turns = turn_figures(&objects, &sessions, &user, &label).await?;
            let expected = published.then(|| version_line(SKILL_INDEX, DEFAULT_VERSION));
            let saw = turns.loaded.lines().find(|line| line.starts_with("This is version")).map(str::to_owned);
            if saw != expected || turns.versions.get(SKILL).copied() != published.then_some(DEFAULT_VERSION) {
                return Err(format!("{label}: the turn loaded {saw:?} ({:?})", turns.versions).into());
            }
            if published {
                progress(format!("  promotes, {skills} skills"));
                promotes.push((skills, promote_figures(&objects, &sessions, &user, &label).await?));
            }
            variants.push(Variant { skills, published, built, turns });
            drop(builder);
        }
    }
    let mut uploads = Vec::new();
    for (size, runs) in UPLOADS {
        progress(format!("upload of {size} bytes, {runs} runs"));
        uploads.push(upload_figure(size, runs).await?);
    }

    println!("# versions-bench: published skills against folders, over the in-memory store\n");
    print_turns(&variants);
    print_promotes(&promotes);
    print_uploads(&uploads);
    println!(
        "\n(run took {:.0} s on {} cores; load average before {load_before}, after {})",
        started.elapsed().as_secs_f64(),
        std::thread::available_parallelism().map_or(1, usize::from),
        load_average()
    );
    Ok(())
}

/// `VERSIONS_BENCH_SIZES`, or [`SIZES`].
fn sizes() -> BenchResult<Vec<usize>> {
    match std::env::var("VERSIONS_BENCH_SIZES") {
        Ok(list) => list
            .split(',')
            .map(|size| {
                size.trim().replace('_', "").parse().map_err(|_| "VERSIONS_BENCH_SIZES: comma-separated numbers".into())
            })
            .collect(),
        Err(_) => Ok(SIZES.to_vec()),
    }
}

/// The 1-minute load average, to judge how quiet the machine was.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}
