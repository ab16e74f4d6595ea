//! The tenant's agents in the index: read again whole from a listing of `{user}/agents/` whenever
//! any of them changes, since they are few ([`MAX_AGENTS`]) and the bound decides which are kept.
//! An agent whose listed ETag and size are those the index has is not read again.

use std::collections::BTreeMap;

use futures::stream::{self, StreamExt, TryStreamExt};

use super::{CatalogIndex, SkippedEntry, FETCH_CONCURRENCY};
use crate::ids::{AgentName, UserId};
use crate::keys;
use crate::skills::agents::MAX_AGENT_FILE_BYTES;
use crate::skills::agents::{classify_agent, parse_agent_file, AgentEntry, AgentFile, AgentSkip, MAX_AGENTS};
use crate::store::{ObjectMeta, ObjectStore, StoreError};

/// Most skipped agent files the index names; past it, one entry counts the rest, so a folder of
/// thousands of stray files cannot grow the head every turn reads.
pub const MAX_SKIPPED_AGENTS: usize = 100;

/// The file a skipped agent entry names: relative to the tenant's root, `agents/{rel}`.
pub fn agent_file(rel: &str) -> String {
    format!("agents/{rel}")
}

/// What one listed agent file gives.
enum Read {
    Agent(AgentEntry),
    Skipped(String, AgentSkip),
    Gone,
}

/// Replaces the index's agents and skipped agent files with what `{user}/agents/` holds now: one
/// listing, and a GET of each of the first [`MAX_AGENTS`] usable names whose entry changed.
pub(super) async fn refresh_agents(
    objects: &dyn ObjectStore,
    user: &UserId,
    index: &mut CatalogIndex,
) -> Result<(), StoreError> {
    let prefix = keys::agents_prefix(user);
    let listed = objects.list(&prefix).await?;
    let mut skipped: BTreeMap<String, SkippedEntry> = BTreeMap::new();
    let mut skip = |rel: &str, reason: AgentSkip| {
        let file = agent_file(rel);
        skipped.insert(file.clone(), SkippedEntry { file, reason: reason.to_string() });
    };
    // Owned, so that the reads below borrow nothing per item (a future that must be `Send` for every
    // lifetime of a borrowed item cannot be proven so).
    let mut candidates: Vec<(AgentName, ObjectMeta)> = Vec::new();
    for meta in &listed {
        let Some(rel) = meta.key.strip_prefix(&prefix) else { continue };
        match classify_agent(rel) {
            AgentFile::Other => {}
            AgentFile::Unusable(reason) => skip(rel, reason),
            AgentFile::Agent(_) if meta.size > MAX_AGENT_FILE_BYTES => skip(rel, AgentSkip::TooLarge(meta.size)),
            AgentFile::Agent(name) => candidates.push((name, meta.clone())),
        }
    }
    // By name, not by key: `a-b.md` sorts before `a.md`, but `a` is the first agent.
    candidates.sort_by(|a, b| a.0.cmp(&b.0));
    let past_bound = candidates.split_off(candidates.len().min(MAX_AGENTS));
    for (name, _) in &past_bound {
        skip(&format!("{name}.md"), AgentSkip::TooMany);
    }
    let known = &index.agents;
    let reads: Vec<Read> = stream::iter(candidates)
        .map(|(name, meta)| async move {
            if let Some(entry) = known.get(name.as_str()).filter(|e| e.etag == meta.etag && e.size == meta.size) {
                return Ok::<_, StoreError>(Read::Agent(entry.clone()));
            }
            let Some(object) = objects.get(&meta.key).await? else { return Ok(Read::Gone) };
            Ok(match parse_agent_file(object.bytes, &name, object.etag) {
                Ok(doc) => {
                    for warning in &doc.entry.warnings {
                        tracing::warn!(file = %agent_file(&format!("{name}.md")), reason = %warning, "agent loaded with a warning");
                    }
                    Read::Agent(doc.entry)
                }
                Err(reason) => Read::Skipped(format!("{name}.md"), reason),
            })
        })
        .buffered(FETCH_CONCURRENCY)
        .try_collect()
        .await?;
    let mut agents = BTreeMap::new();
    for read in reads {
        match read {
            Read::Agent(entry) => {
                agents.insert(entry.name.clone(), entry);
            }
            Read::Skipped(rel, reason) => skip(&rel, reason),
            Read::Gone => {}
        }
    }
    for entry in skipped.values().take(MAX_SKIPPED_AGENTS) {
        tracing::warn!(file = %entry.file, reason = %entry.reason, "skipping agent");
    }
    index.agents = agents;
    index.skipped_agents = bounded(skipped);
    Ok(())
}

/// At most [`MAX_SKIPPED_AGENTS`] entries: the first by file, and one that counts the others.
fn bounded(mut skipped: BTreeMap<String, SkippedEntry>) -> BTreeMap<String, SkippedEntry> {
    if skipped.len() <= MAX_SKIPPED_AGENTS {
        return skipped;
    }
    let Some(first_dropped) = skipped.keys().nth(MAX_SKIPPED_AGENTS - 1).cloned() else { return skipped };
    let rest = skipped.split_off(&first_dropped).len();
    let file = "agents/".to_owned();
    let reason = format!(
        "{rest} more files under agents/ cannot be used either; only the first {} are named",
        MAX_SKIPPED_AGENTS - 1
    );
    skipped.insert(file.clone(), SkippedEntry { file, reason });
    skipped
}
