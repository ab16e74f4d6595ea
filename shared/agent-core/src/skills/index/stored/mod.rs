//! The catalog index as stored (format 5): a small head that a turn reads whole, and for a large
//! catalog, parts that hold the skills by a hash of their folder name, read only when a turn looks
//! a skill up, searches, or needs the whole catalog. What a cold turn reads and decodes is then the
//! same at 10 skills and at 10,000: the head (counts, the base prompt, the tenant's agents, the
//! listing rendered for the budgets turns use, the parts' ids) and at most the one part of a skill
//! it loads.
//!
//! Parts are named by their content, so a part never changes once written: a process keeps the
//! parts it has read across versions of the head, and an update writes only the parts it changed
//! before it swaps the head with a conditional write. A replaced part is kept for
//! [`RETIRED_PART_SECS`] (longer than any turn that may still read the head before it), then
//! deleted by a later update.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use futures::stream::{self, StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{rows, BasePromptEntry, CatalogIndex, IndexedFile, SkillEntry, SkippedEntry, INDEX_FORMAT};
use crate::ids::{SkillPath, UserId};
use crate::keys;
use crate::skills::agents::AgentEntry;
use crate::skills::listing::{self, Listing};
use crate::skills::settings::SettingsEntry;
use crate::store::{ObjectStore, StoreError, WriteCondition};

pub use super::layout::{enclosing_skill, hidden_skills, inside_a_skill};

/// A catalog whose whole index encodes to at most this many bytes is stored in its head alone (a
/// few hundred skills): one object, as cheap to read as the parts' ids would be.
pub const INLINE_BYTES: usize = 64 * 1024;
/// Skills per part, about: a part of 256 skills with their file lists is some 70 KB.
const SKILLS_PER_PART: usize = 256;
/// Listing renderings a head keeps, one per budget that turns asked for, newest first.
pub const MAX_STORED_LISTINGS: usize = 4;
/// How long a replaced part outlives the head that named it: a turn that read that head may
/// still read the part, and no turn lasts 15 minutes.
pub const RETIRED_PART_SECS: i64 = 15 * 60;
/// Parts read at once when the whole catalog is needed.
pub const PART_CONCURRENCY: usize = 16;

/// The head object, `{user}/catalog/index.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexHead {
    /// First in the object, so a reader learns the format from the first bytes.
    pub format: u32,
    /// Usable skills (those inside a plain skill's folder are its files, not skills).
    pub total: usize,
    /// SKILL.md files that cannot be used.
    #[serde(default)]
    pub skipped: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_prompt: Option<BasePromptEntry>,
    /// The tenant's `settings.json`: its approval rules apply to every turn, which reads the head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<SettingsEntry>,
    /// The tenant's agents by name: few and small, so a turn lists them from the head it reads
    /// anyway.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentEntry>,
    /// Agent files that cannot be used, by file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_agents: Vec<SkippedEntry>,
    /// The state-1 listing as rendered for each budget turns asked for (not kept for an inline
    /// catalog, whose listing is rendered from its entries at no cost that grows).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listings: Vec<StoredListing>,
    /// The parts, in part order: part `i` holds the skills whose folder name hashes to `i`
    /// ([`part_of`]). Empty when the catalog is [`IndexHead::inline`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartRef>,
    /// The whole catalog, when it is small enough to need no parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<IndexPart>,
    /// Parts replaced by this head or a recent one, deleted by an update once they are old enough.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired: Vec<RetiredPart>,
}

/// One part as the head names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartRef {
    /// The first 16 hex digits of the SHA-256 of the part's bytes; its key is [`part_key`].
    pub id: String,
    pub bytes: u64,
}

/// A part the head no longer names, and since when (Unix seconds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredPart {
    pub id: String,
    pub since: i64,
}

/// A listing rendered for one budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredListing {
    pub budget: usize,
    pub listing: Listing,
}

/// Some of the skills (or all, inline), with what belongs to them; stored as a [`StoredPart`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StoredPart", into = "StoredPart")]
pub struct IndexPart {
    /// Skills by path, stored as rows.
    #[serde(with = "rows")]
    pub skills: BTreeMap<String, SkillEntry>,
    /// Those of [`IndexPart::skills`] that are not usable on their own: `category/name` where
    /// `category` is a plain skill, whose folder holds them as its files.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub hidden: BTreeSet<String>,
    /// Each skill's other files (see [`CatalogIndex::files`]).
    pub files: BTreeMap<String, Vec<IndexedFile>>,
    /// Unusable SKILL.md files by file; a file is in the part its path hashes to.
    pub skipped: BTreeMap<String, SkippedEntry>,
    /// Frontmatter names (lower-cased) that differ from their folder's, with the skills that have
    /// them; a name is in the part it hashes to, as folder names are.
    pub names: BTreeMap<String, Vec<String>>,
}

/// An [`IndexPart`] as stored: each skill's files as `[path, size]` pairs, and their ETags apart
/// (`etags`, in the same order). A build that predates the ETags ignores them and reads the rest,
/// and an index written by one reads here with no ETags (its skills' files are then read every
/// turn, as that build did), so neither a deploy nor a rollback has to rebuild an index.
#[derive(Serialize, Deserialize)]
struct StoredPart {
    #[serde(with = "rows")]
    skills: BTreeMap<String, SkillEntry>,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    hidden: BTreeSet<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    files: BTreeMap<String, Vec<(String, u64)>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    etags: BTreeMap<String, Vec<String>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    skipped: BTreeMap<String, SkippedEntry>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    names: BTreeMap<String, Vec<String>>,
}

impl From<StoredPart> for IndexPart {
    fn from(stored: StoredPart) -> Self {
        let StoredPart { skills, hidden, files, mut etags, skipped, names } = stored;
        let files = files
            .into_iter()
            .map(|(skill, pairs)| {
                // ETags that do not match the list one for one are not trusted: none is used.
                let tags = etags.remove(&skill).filter(|tags| tags.len() == pairs.len()).unwrap_or_default();
                let tags = tags.into_iter().map(Some).chain(std::iter::repeat(None));
                let list = pairs
                    .into_iter()
                    .zip(tags)
                    .map(|((rel, size), etag)| IndexedFile { rel, size, etag: etag.unwrap_or_default() })
                    .collect();
                (skill, list)
            })
            .collect();
        IndexPart { skills, hidden, files, skipped, names }
    }
}

impl From<IndexPart> for StoredPart {
    fn from(part: IndexPart) -> Self {
        let IndexPart { skills, hidden, files, skipped, names } = part;
        let mut etags = BTreeMap::new();
        let files = files
            .into_iter()
            .map(|(skill, list)| {
                if list.iter().any(|file| !file.etag.is_empty()) {
                    etags.insert(skill.clone(), list.iter().map(|file| file.etag.clone()).collect());
                }
                (skill, list.into_iter().map(|file| (file.rel, file.size)).collect())
            })
            .collect();
        StoredPart { skills, hidden, files, etags, skipped, names }
    }
}

/// The part of `parts` a lower-cased folder name, frontmatter name or file belongs to: FNV-1a, so
/// every build and every process agrees.
pub fn part_of(name: &str, parts: usize) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash ^= u64::from(byte.to_ascii_lowercase());
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash % parts.max(1) as u64) as usize
}

/// The key of a part: `{user}/catalog/parts/{id}.json`.
pub fn part_key(user: &UserId, id: &str) -> String {
    format!("{}parts/{id}.json", keys::catalog_prefix(user))
}

/// The usable skills of `index` in path order.
pub fn usable_entries<'i>(index: &'i CatalogIndex, hidden: &BTreeSet<String>) -> Vec<&'i SkillEntry> {
    index.skills.iter().filter(|(path, _)| !hidden.contains(*path)).map(|(_, entry)| entry).collect()
}

/// A stored index in the form this build writes: the head's bytes and head, and the parts
/// (id, bytes) it names.
pub struct Encoded {
    pub head: IndexHead,
    pub head_bytes: Vec<u8>,
    pub parts: Vec<(String, Vec<u8>)>,
}

/// Encodes `index`, with the listing rendered for each of `budgets` when the catalog needs parts.
pub fn encode(index: &CatalogIndex, budgets: &[usize], retired: Vec<RetiredPart>) -> Encoded {
    let hidden = hidden_skills(&index.skills);
    let usable = usable_entries(index, &hidden);
    let usable_paths: HashSet<&SkillPath> = usable.iter().map(|e| &e.path).collect();
    let skipped = index.skipped.keys().filter(|file| !inside_a_skill(file, |p| usable_paths.contains(p))).count();
    let mut head = IndexHead {
        format: INDEX_FORMAT,
        total: usable.len(),
        skipped,
        base_prompt: index.base_prompt.clone(),
        settings: index.settings.clone(),
        agents: index.agents.values().cloned().collect(),
        skipped_agents: index.skipped_agents.values().cloned().collect(),
        listings: Vec::new(),
        parts: Vec::new(),
        inline: None,
        retired,
    };
    let whole = to_part(index, &hidden, |_| true);
    if serde_json::to_vec(&whole).map_or(0, |bytes| bytes.len()) <= INLINE_BYTES {
        head.inline = Some(whole);
        let head_bytes = serde_json::to_vec(&head).unwrap_or_default();
        return Encoded { head, head_bytes, parts: Vec::new() };
    }
    let count = index.skills.len().div_ceil(SKILLS_PER_PART).next_power_of_two().max(2);
    let mut parts = Vec::with_capacity(count);
    for i in 0..count {
        let part = to_part(index, &hidden, |name| part_of(name, count) == i);
        let bytes = serde_json::to_vec(&part).unwrap_or_default();
        let id = hex::encode(&Sha256::digest(&bytes)[..8]);
        head.parts.push(PartRef { id: id.clone(), bytes: bytes.len() as u64 });
        parts.push((id, bytes));
    }
    for &budget in budgets.iter().take(MAX_STORED_LISTINGS) {
        if !head.listings.iter().any(|stored| stored.budget == budget) {
            head.listings.push(StoredListing { budget, listing: listing::render(&usable, budget) });
        }
    }
    let head_bytes = serde_json::to_vec(&head).unwrap_or_default();
    Encoded { head, head_bytes, parts }
}

/// The part of `index` whose names `belongs` accepts (lower-cased folder names, frontmatter
/// names and skipped files).
fn to_part(index: &CatalogIndex, hidden: &BTreeSet<String>, belongs: impl Fn(&str) -> bool) -> IndexPart {
    let mut part = IndexPart::default();
    for (path, entry) in &index.skills {
        let folder = entry.path.name().to_lowercase();
        if belongs(&folder) {
            part.skills.insert(path.clone(), entry.clone());
            if hidden.contains(path) {
                part.hidden.insert(path.clone());
            }
            if let Some(files) = index.files.get(path) {
                part.files.insert(path.clone(), files.clone());
            }
        }
        let name = entry.name.to_lowercase();
        if name != folder && belongs(&name) {
            part.names.entry(name).or_default().push(path.clone());
        }
    }
    for (file, entry) in &index.skipped {
        if belongs(&file.to_lowercase()) {
            part.skipped.insert(file.clone(), entry.clone());
        }
    }
    part
}

/// The whole index from its head and every part it names, in part order.
pub fn join(head: &IndexHead, parts: impl IntoIterator<Item = IndexPart>) -> CatalogIndex {
    let mut index = CatalogIndex {
        base_prompt: head.base_prompt.clone(),
        settings: head.settings.clone(),
        agents: head.agents.iter().map(|agent| (agent.name.clone(), agent.clone())).collect(),
        skipped_agents: head.skipped_agents.iter().map(|skipped| (skipped.file.clone(), skipped.clone())).collect(),
        ..CatalogIndex::default()
    };
    for part in head.inline.clone().into_iter().chain(parts) {
        index.skills.extend(part.skills);
        index.files.extend(part.files);
        index.skipped.extend(part.skipped);
    }
    index
}

/// Reads and decodes one part; a part the head names but the store no longer has means the head
/// was replaced long ago (see [`RETIRED_PART_SECS`]).
pub async fn read_part(objects: &dyn ObjectStore, user: &UserId, id: &str) -> Result<IndexPart, StoreError> {
    let key = part_key(user, id);
    let object = objects
        .get(&key)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("catalog part {key} is gone; the catalog changed meanwhile")))?;
    serde_json::from_slice(&object.bytes).map_err(|err| StoreError::Corrupt(format!("catalog part {key}: {err}")))
}

/// Reads every part `head` names, at most [`PART_CONCURRENCY`] at once, in part order.
pub async fn read_parts(
    objects: &dyn ObjectStore,
    user: &UserId,
    head: &IndexHead,
) -> Result<Vec<IndexPart>, StoreError> {
    stream::iter(head.parts.iter().map(|part| read_part(objects, user, &part.id)))
        .buffered(PART_CONCURRENCY)
        .try_collect()
        .await
}

/// Writes `index` in place of the head `previous` (read with `condition`): first the parts that
/// head does not already name, then the head, conditionally. Returns the new head and its ETag.
/// Parts retired long enough ago are deleted once the head is in place; a failed delete only
/// leaves a file behind. `budget` is the listing budget of the caller, kept with those the
/// previous head had.
pub async fn write_index(
    objects: &dyn ObjectStore,
    user: &UserId,
    index: &CatalogIndex,
    condition: WriteCondition,
    previous: Option<&IndexHead>,
    budget: Option<usize>,
    now: i64,
) -> Result<(IndexHead, String), StoreError> {
    let mut budgets: Vec<usize> = budget.into_iter().collect();
    let mut retired = Vec::new();
    let mut expired = Vec::new();
    if let Some(previous) = previous {
        budgets.extend(previous.listings.iter().map(|stored| stored.budget));
        for part in &previous.retired {
            match now - part.since >= RETIRED_PART_SECS {
                true => expired.push(part.id.clone()),
                false => retired.push(part.clone()),
            }
        }
    }
    let mut seen = HashSet::new();
    budgets.retain(|budget| seen.insert(*budget));
    let mut encoded = encode(index, &budgets, retired);
    let named: HashSet<String> = encoded.head.parts.iter().map(|part| part.id.clone()).collect();
    // A retired part named again (the same content came back) is no longer retired.
    encoded.head.retired.retain(|part| !named.contains(&part.id));
    if let Some(previous) = previous {
        let replaced = previous.parts.iter().filter(|part| !named.contains(&part.id));
        let replaced: Vec<RetiredPart> = replaced.map(|part| RetiredPart { id: part.id.clone(), since: now }).collect();
        if !replaced.is_empty() {
            encoded.head.retired.extend(replaced);
            encoded.head_bytes = serde_json::to_vec(&encoded.head).unwrap_or_default();
        }
    }
    let already: HashSet<&str> =
        previous.map(|p| p.parts.iter().map(|part| part.id.as_str()).collect()).unwrap_or_default();
    let new_parts = encoded.parts.into_iter().filter(|(id, _)| !already.contains(id.as_str()));
    stream::iter(new_parts.map(|(id, bytes)| async move { objects.put(&part_key(user, &id), bytes).await }))
        .buffer_unordered(PART_CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    let etag = objects.put_if(&keys::catalog_index_key(user), encoded.head_bytes, condition).await?;
    // Still named (an identical part written again) parts are never deleted.
    expired.retain(|id| !named.contains(id));
    for id in expired {
        if let Err(err) = objects.delete(&part_key(user, &id)).await {
            tracing::info!(part = %id, error = %err, "could not delete a retired catalog part");
        }
    }
    Ok((encoded.head, etag))
}

#[cfg(test)]
mod tests;
