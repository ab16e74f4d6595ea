//! The tenant's catalog index: what a turn needs to list and load skills (each SKILL.md's path,
//! parsed frontmatter, ETag and size; each skill's other files; the base prompt), so a turn reads
//! no SKILL.md it does not load and lists no skill's folder. Built from a listing once, then kept
//! current entry by entry with conditional writes. [`CatalogIndex`] is the whole index in memory;
//! [`stored`] is how it is kept: a small head, and parts read only when needed.
//! `update`: decoding a stored head and [`update_index`], the conditional update file by file;
//! `examine`: reading one file (a skill's SKILL.md, the base prompt, the settings) for the index;
//! `layout`: where a key sits in the layouts a tenant's skills may have; `agents`: the tenant's
//! agents (`{user}/agents/*.md`), read again from a listing of their folder when one changes.

use std::collections::BTreeMap;

use futures::stream::{self, StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use super::agents::AgentEntry;
#[cfg(doc)]
use super::agents::MAX_AGENTS;
use super::bundle::SkillBundle;
use super::settings::SettingsEntry;
use crate::ids::{SkillPath, UserId};
use crate::keys;
use crate::store::{Fetched, ObjectMeta, ObjectStore, StoreError, WriteCondition};

mod agents;
mod examine;
mod layout;
pub mod stored;
mod update;
mod versions;

pub use agents::{agent_file, MAX_SKIPPED_AGENTS};
use examine::{examine, Outcome};
use layout::owners;
pub use layout::{classify, hidden_skills, inside_a_skill, tenant_file, SkillFile, TenantFile, BASE_PROMPT_FILE};
pub use stored::IndexHead;
pub use update::{decode_index, update_index, IndexRead, UpdateOutcome};
pub use versions::{
    read_defaults, read_record, version_files, DefaultVersion, Defaults, VersionFile, VersionRecord, VersionTag,
};

/// The index format this build writes. An index of an older format is rebuilt from a listing.
/// Format 2: `Bash` and `Bash(...)` in `allowed-tools` map to `execute`. Format 3: each skill's
/// files (`files`), and skills stored as arrays ([`SkillRow`]) rather than objects keyed by path.
/// Format 4: a head and content-named parts ([`stored`]). Format 5: the tenant's agents, in the head.
/// Format 6: the tenant's `settings.json`, in the head. Format 7: published skills' versions; its
/// parts may also keep each skill file's ETag, which older readers of format 7 ignore
/// ([`stored::IndexPart`]).
pub const INDEX_FORMAT: u32 = 7;
/// Most files of one skill kept in the index; a skill with more is listed when it is first used.
pub const MAX_INDEXED_FILES: usize = 256;
/// Largest `BASE_PROMPT.md` kept in the index.
pub const MAX_BASE_PROMPT_BYTES: u64 = 64 * 1024;
/// SKILL.md files fetched at once while building.
const FETCH_CONCURRENCY: usize = 16;
/// Conditional writes tried before an update gives up (each loser re-reads and re-applies).
const MAX_WRITE_ATTEMPTS: u32 = 12;

/// One usable skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillEntry {
    pub path: SkillPath,
    pub etag: String,
    pub size: u64,
    pub name: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Python packages its scripts need that the image lacks and no bundle provides, from the
    /// markers under its `.bundle/` ([`super::bundle`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmet_needs: Vec<String>,
    /// The published version this entry serves ([`crate::skills::versions`]); `None` for a skill
    /// written straight under `{user}/skills/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<VersionTag>,
}

impl SkillEntry {
    /// The prefix of this entry's files: its published version's (immutable), or its folder's.
    pub fn folder_key(&self, user: &UserId) -> String {
        match &self.version {
            Some(tag) => keys::skill_version_files_prefix(user, &self.path, tag.sha256()),
            None => keys::skill_prefix(user, &self.path),
        }
    }
}

/// A SKILL.md or agent file that cannot be used, and why; kept so the operator can see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedEntry {
    /// The file: a SKILL.md relative to `{user}/skills/`, an agent's as `agents/{file}`.
    pub file: String,
    pub reason: String,
}

/// The tenant's `BASE_PROMPT.md`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BasePromptEntry {
    pub etag: String,
    pub size: u64,
    /// The text, when it is usable; otherwise `problem` says why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// One file of a skill besides its SKILL.md, as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct IndexedFile {
    /// The path inside the skill's folder.
    pub rel: String,
    pub size: u64,
    /// The object's ETag when it was listed (empty in an index written before ETags were kept):
    /// a warm process keeps the bytes it read for the file under it.
    pub etag: String,
}

impl IndexedFile {
    fn listed(rel: &str, meta: &ObjectMeta) -> Self {
        Self { rel: rel.to_owned(), size: meta.size, etag: meta.etag.clone() }
    }
}

/// The whole index in memory (stored as a head and parts: [`stored`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogIndex {
    pub format: u32,
    /// Skills by path (`category/name` or `name`); those inside a plain skill's folder are that
    /// skill's files ([`hidden_skills`]).
    pub skills: BTreeMap<String, SkillEntry>,
    /// The files of each usable skill besides its SKILL.md (path relative to the skill's folder,
    /// size, ETag), in path order; a skill with more than [`MAX_INDEXED_FILES`] has no entry here.
    pub files: BTreeMap<String, Vec<IndexedFile>>,
    /// Unusable SKILL.md files by file.
    pub skipped: BTreeMap<String, SkippedEntry>,
    pub base_prompt: Option<BasePromptEntry>,
    /// The tenant's `settings.json`.
    pub settings: Option<SettingsEntry>,
    /// The tenant's agents by name, at most [`MAX_AGENTS`].
    pub agents: BTreeMap<String, AgentEntry>,
    /// Unusable agent files by file (`agents/{file}`), at most [`MAX_SKIPPED_AGENTS`].
    pub skipped_agents: BTreeMap<String, SkippedEntry>,
}

impl Default for CatalogIndex {
    fn default() -> Self {
        Self {
            format: INDEX_FORMAT,
            skills: BTreeMap::new(),
            files: BTreeMap::new(),
            skipped: BTreeMap::new(),
            base_prompt: None,
            settings: None,
            agents: BTreeMap::new(),
            skipped_agents: BTreeMap::new(),
        }
    }
}

/// A skill as stored: its fields in a fixed order, with the name left out (`null`) when it is the
/// folder's. Arrays rather than objects keep the index about a third smaller and quicker to decode.
#[derive(Serialize, Deserialize)]
struct SkillRow(
    SkillPath,
    String,
    u64,
    Option<String>,
    String,
    Option<String>,
    Option<Vec<String>>,
    Option<Vec<String>>,
    #[serde(default)] Vec<String>,
    #[serde(default)] Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")] Option<VersionTag>,
);

/// The skills map stored as a list of [`SkillRow`]s (each path once).
mod rows {
    use std::collections::BTreeMap;

    use serde::ser::SerializeSeq;
    use serde::{Deserialize, Deserializer, Serializer};

    use super::{SkillEntry, SkillRow};

    pub fn serialize<S: Serializer>(skills: &BTreeMap<String, SkillEntry>, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(skills.len()))?;
        for e in skills.values() {
            let name = (e.name != e.path.name()).then(|| e.name.clone());
            seq.serialize_element(&SkillRow(
                e.path.clone(),
                e.etag.clone(),
                e.size,
                name,
                e.description.clone(),
                e.category.clone(),
                e.tools.clone(),
                e.declared_tools.clone(),
                e.warnings.clone(),
                e.unmet_needs.clone(),
                e.version.clone(),
            ))?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<BTreeMap<String, SkillEntry>, D::Error> {
        let rows = Vec::<SkillRow>::deserialize(deserializer)?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let SkillRow(
                    path,
                    etag,
                    size,
                    name,
                    description,
                    category,
                    tools,
                    declared_tools,
                    warnings,
                    unmet_needs,
                    version,
                ) = row;
                let name = name.unwrap_or_else(|| path.name().to_owned());
                let entry = SkillEntry {
                    path,
                    etag,
                    size,
                    name,
                    description,
                    category,
                    tools,
                    declared_tools,
                    warnings,
                    unmet_needs,
                    version,
                };
                (entry.path.to_string(), entry)
            })
            .collect())
    }
}

/// The file lists of `skills` from a listing of their folders (keys relative to `{user}/skills/`),
/// each in path order; `None` for a skill with more than [`MAX_INDEXED_FILES`] files. A skill with
/// no other file has no entry.
fn files_of<'a>(
    skills: impl Fn(&SkillPath) -> bool,
    listed: impl IntoIterator<Item = (&'a str, &'a ObjectMeta)>,
) -> BTreeMap<String, Option<Vec<IndexedFile>>> {
    let mut files: BTreeMap<String, Vec<IndexedFile>> = BTreeMap::new();
    for (rel, meta) in listed {
        for (skill, inside) in owners(rel) {
            if skills(&skill) {
                files.entry(skill.to_string()).or_default().push(IndexedFile::listed(inside, meta));
            }
        }
    }
    files
        .into_iter()
        .map(|(skill, mut list)| {
            list.sort();
            (skill, (list.len() <= MAX_INDEXED_FILES).then_some(list))
        })
        .collect()
}

impl CatalogIndex {
    /// Puts what `rel` contributes in place of what it contributed before.
    fn apply(&mut self, rel: &str, outcome: Outcome) {
        match classify(rel) {
            SkillFile::BasePrompt => {
                self.base_prompt = match outcome {
                    Outcome::BasePrompt(entry) => Some(entry),
                    _ => None,
                }
            }
            SkillFile::Settings => {
                self.settings = match outcome {
                    Outcome::Settings(entry) => Some(entry),
                    _ => None,
                }
            }
            SkillFile::Skill(path) => {
                let path = path.to_string();
                // A published skill is changed through its versions only.
                if self.is_published(&path) {
                    return;
                }
                self.skills.remove(&path);
                self.skipped.remove(rel);
                match outcome {
                    Outcome::Skill(entry, files) => {
                        self.skills.insert(path.clone(), *entry);
                        match files {
                            Some(Some(files)) => {
                                self.files.insert(path, files);
                            }
                            // More files than the index keeps: listed on first use.
                            Some(None) => {
                                self.files.remove(&path);
                            }
                            None => {}
                        }
                    }
                    Outcome::Skipped(entry) => {
                        self.files.remove(&path);
                        self.skipped.insert(rel.to_owned(), entry);
                    }
                    Outcome::BasePrompt(_) | Outcome::Settings(_) | Outcome::Absent => {
                        self.files.remove(&path);
                    }
                }
            }
            SkillFile::Unusable(_) => {
                self.skipped.remove(rel);
                if let Outcome::Skipped(entry) = outcome {
                    self.skipped.insert(rel.to_owned(), entry);
                }
            }
            SkillFile::Other => {}
        }
    }

    /// Sets each skill's unmet needs from the markers in its file list (a skill whose files the
    /// index does not keep has none here; its bundle is found when it is mounted).
    fn refresh_unmet_needs(&mut self) {
        for (path, entry) in &mut self.skills {
            let files = self.files.get(path).map(Vec::as_slice).unwrap_or_default();
            entry.unmet_needs = SkillBundle::from_files(files.iter().map(|file| (file.rel.as_str(), file.size))).unmet;
        }
    }

    /// Reads the file list of `skill` again from a listing of its folder.
    async fn refresh_files(
        &mut self,
        objects: &dyn ObjectStore,
        user: &UserId,
        skill: &SkillPath,
    ) -> Result<(), StoreError> {
        if self.is_published(&skill.to_string()) {
            return Ok(());
        }
        let prefix = keys::skills_prefix(user);
        let listed = objects.list(&keys::skill_prefix(user, skill)).await?;
        let rels = listed.iter().filter_map(|meta| Some((meta.key.strip_prefix(&prefix)?, meta)));
        match files_of(|owner| owner == skill, rels).remove(&skill.to_string()).unwrap_or(Some(Vec::new())) {
            Some(list) => self.files.insert(skill.to_string(), list),
            None => self.files.remove(&skill.to_string()),
        };
        Ok(())
    }
}

/// Builds the whole index from one listing of `{user}/skills/` and a GET per SKILL.md, and one
/// listing of `{user}/agents/` and a GET per agent.
pub async fn build_index(objects: &dyn ObjectStore, user: &UserId) -> Result<CatalogIndex, StoreError> {
    let prefix = keys::skills_prefix(user);
    let (listing, mut index) = futures::try_join!(objects.list(&prefix), async {
        let mut index = CatalogIndex::default();
        agents::refresh_agents(objects, user, &mut index).await?;
        Ok(index)
    })?;
    let files: Vec<(String, u64)> = listing
        .iter()
        .filter_map(|meta: &ObjectMeta| {
            let rel = meta.key.strip_prefix(&prefix)?;
            (!matches!(classify(rel), SkillFile::Other)).then(|| (rel.to_owned(), meta.size))
        })
        .collect();
    let outcomes: Vec<(String, Outcome)> = stream::iter(files)
        .map(|(rel, size)| async move {
            let outcome = examine(objects, user, &rel, Some(size)).await?;
            Ok::<_, StoreError>((rel, outcome))
        })
        .buffered(FETCH_CONCURRENCY)
        .try_collect()
        .await?;
    for (rel, outcome) in outcomes {
        index.apply(&rel, outcome);
    }
    let rels = listing.iter().filter_map(|meta| Some((meta.key.strip_prefix(&prefix)?, meta)));
    let mut files = files_of(|skill| index.skills.contains_key(&skill.to_string()), rels);
    for skill in index.skills.keys() {
        match files.remove(skill) {
            Some(Some(list)) => index.files.insert(skill.clone(), list),
            Some(None) => None,
            None => index.files.insert(skill.clone(), Vec::new()),
        };
    }
    index.reconcile_versions(objects, user).await?;
    index.refresh_unmet_needs();
    log_skipped(&index, index.skipped.keys());
    tracing::info!(
        skills = index.skills.len(),
        skipped = index.skipped.len(),
        agents = index.agents.len(),
        "built the catalog index from a listing"
    );
    Ok(index)
}

/// Logs a warning naming each of `files` (relative to the tenant's `skills/`) that `index` skips, unless it lies inside a usable skill's
/// folder (then it is one of that skill's files, as `GET /skills` shows it).
fn log_skipped<'f>(index: &CatalogIndex, files: impl Iterator<Item = &'f String>) {
    let hidden = hidden_skills(&index.skills);
    let usable = |path: &SkillPath| {
        let path = path.to_string();
        index.skills.contains_key(&path) && !hidden.contains(&path)
    };
    for file in files {
        if let Some(skipped) = index.skipped.get(file) {
            if !inside_a_skill(file, usable) {
                tracing::warn!(%file, reason = %skipped.reason, "skipping skill");
            }
        }
    }
}

#[cfg(test)]
mod tests;
