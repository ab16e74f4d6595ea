//! The tenant's catalog as a turn sees it: one version of the stored index's head, with the parts
//! it names read when a turn first needs them (a skill looked up, a search, the whole catalog).
//! A cold turn reads the head and at most the part of the skill it loads, whatever the library's
//! size; the listing comes from the head as rendered. [`SkillLibrary`] keeps snapshots warm.

mod library;
mod pinned;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use futures::stream::{self, StreamExt, TryStreamExt};
use tokio::sync::OnceCell;

pub use library::SkillLibrary;

use super::agents::AgentEntry;
use super::index::stored::{self, IndexHead, IndexPart, StoredListing, MAX_STORED_LISTINGS};
#[cfg(doc)]
use super::index::MAX_SKIPPED_AGENTS;
use super::index::{
    hidden_skills, inside_a_skill, BasePromptEntry, CatalogIndex, IndexedFile, SkillEntry, SkippedEntry,
};
use super::listing::{self, Listing};
use super::search::SkillSearch;
use super::settings::SettingsEntry;
use crate::ids::{SkillPath, UserId};
use crate::keys;
use crate::permissions::ApprovalPolicy;
use crate::store::{ObjectStore, StoreError, WriteCondition};

/// One part as a turn uses it: the usable skills it holds, with their lookups.
#[derive(Debug, Default)]
struct PartView {
    entries: HashMap<SkillPath, Arc<SkillEntry>>,
    /// Lower-cased folder names → usable skills.
    by_folder: HashMap<String, Vec<SkillPath>>,
    /// Lower-cased frontmatter names that differ from the folder's → skills (usable or not).
    by_name: HashMap<String, Vec<SkillPath>>,
    files: HashMap<SkillPath, Arc<[IndexedFile]>>,
    skipped: Vec<SkippedEntry>,
}

impl PartView {
    fn new(part: IndexPart) -> Self {
        let mut view = PartView::default();
        for (path, entry) in part.skills {
            let Ok(skill) = SkillPath::parse(&path) else { continue };
            if let Some(files) = part.files.get(&path) {
                view.files.insert(skill.clone(), Arc::from(files.as_slice()));
            }
            if part.hidden.contains(&path) {
                continue;
            }
            view.by_folder.entry(skill.name().to_lowercase()).or_default().push(skill.clone());
            view.entries.insert(skill, Arc::new(entry));
        }
        for (name, paths) in part.names {
            view.by_name.insert(name, paths.iter().filter_map(|path| SkillPath::parse(path).ok()).collect());
        }
        view.skipped = part.skipped.into_values().collect();
        view
    }
}

/// The whole catalog, read from every part: for search, suggestions and `GET /skills`.
pub struct CatalogView {
    /// Usable skills in path order.
    pub entries: Vec<Arc<SkillEntry>>,
    /// Unusable SKILL.md files in file order (those inside a usable skill's folder are its files).
    pub skipped: Vec<SkippedEntry>,
    search: OnceLock<SkillSearch>,
}

impl std::fmt::Debug for CatalogView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogView").field("skills", &self.entries.len()).finish_non_exhaustive()
    }
}

impl CatalogView {
    /// The best matches for `query`, best first; the search index is built on first use.
    pub fn find(&self, query: &str, limit: usize) -> Vec<Arc<SkillEntry>> {
        let search = self.search.get_or_init(|| {
            let refs: Vec<&SkillEntry> = self.entries.iter().map(Arc::as_ref).collect();
            SkillSearch::new(&refs)
        });
        search.search(query, limit).into_iter().filter_map(|i| self.entries.get(i).cloned()).collect()
    }
}

/// What a skill name or path resolves to.
#[derive(Debug)]
pub enum Resolved {
    Found(Arc<SkillEntry>),
    /// A bare name that several categories share.
    Ambiguous(Vec<Arc<SkillEntry>>),
    NotFound,
}

/// One version of a tenant's catalog.
pub struct Catalog {
    user: UserId,
    /// The head, without its inline part (which is [`Catalog::parts`]' only part).
    head: IndexHead,
    /// The head object's ETag; empty when this snapshot was not stored.
    etag: String,
    /// One cell per part, filled when a turn first needs that part (all of them for an inline
    /// catalog or one just built).
    parts: Vec<OnceCell<Arc<PartView>>>,
    view: OnceCell<Arc<CatalogView>>,
    listing: Mutex<Option<(usize, Arc<Listing>)>>,
    /// The tenant's approval rules from its `settings.json`, parsed once per snapshot.
    approvals: ApprovalPolicy,
    weight: u64,
    /// Published versions one turn pinned (an A/B test, an eval): served in place of the index's
    /// entries at their paths, listed with their own descriptions.
    pins: HashMap<SkillPath, Pinned>,
}

/// A pinned version's entry and files ([`Catalog::with_pins`]).
type Pinned = (Arc<SkillEntry>, Arc<[IndexedFile]>);

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").field("skills", &self.head.total).field("etag", &self.etag).finish_non_exhaustive()
    }
}

impl Catalog {
    /// The snapshot of a stored head; its parts are read when needed. `previous` is an earlier
    /// snapshot of the same tenant: the parts both name (by content) are taken from it.
    fn from_head(user: UserId, mut head: IndexHead, etag: String, previous: Option<&Catalog>) -> Self {
        let inline = head.inline.take();
        let weight = Self::weight_of(&head, inline.as_ref());
        let parts: Vec<OnceCell<Arc<PartView>>> = match inline {
            Some(part) => vec![OnceCell::new_with(Some(Arc::new(PartView::new(part))))],
            None => {
                let known: HashMap<&str, &Arc<PartView>> = previous
                    .into_iter()
                    .flat_map(|old| old.head.parts.iter().zip(&old.parts))
                    .filter_map(|(part, cell)| Some((part.id.as_str(), cell.get()?)))
                    .collect();
                head.parts
                    .iter()
                    .map(|part| OnceCell::new_with(known.get(part.id.as_str()).map(|v| (*v).clone())))
                    .collect()
            }
        };
        let approvals = head.settings.as_ref().map(SettingsEntry::policy).unwrap_or_default();
        let pins = HashMap::new();
        Self { user, head, etag, parts, view: OnceCell::new(), listing: Mutex::new(None), approvals, weight, pins }
    }

    /// The snapshot of an index this process holds whole (just built): every part is at hand.
    fn from_index(user: UserId, index: &CatalogIndex, head: IndexHead, etag: String) -> Self {
        let mut catalog = Self::from_head(user, IndexHead { inline: None, parts: Vec::new(), ..head }, etag, None);
        let hidden = hidden_skills(&index.skills);
        let whole = IndexPart {
            skills: index.skills.clone(),
            hidden,
            files: index.files.clone(),
            skipped: index.skipped.clone(),
            names: BTreeMap::new(),
        };
        // One part holding everything: lookups hash to it whatever the stored parts were.
        catalog.parts = vec![OnceCell::new_with(Some(Arc::new(PartView::new(whole))))];
        catalog.weight = Self::weight_of(&catalog.head, None) + Self::estimate(index.skills.len(), 0);
        catalog
    }

    /// This catalog with `agents` as the tenant's agents (sorted by name), for tests and tools.
    pub fn with_agents(mut self, agents: impl IntoIterator<Item = AgentEntry>) -> Self {
        let mut agents: Vec<AgentEntry> = agents.into_iter().collect();
        agents.sort_by(|a, b| a.name.cmp(&b.name));
        agents.dedup_by(|a, b| a.name == b.name);
        self.weight += Self::agents_weight(&agents);
        self.head.agents = agents;
        self
    }

    /// A catalog of ready-made entries, for tests and tools.
    pub fn from_entries(entries: impl IntoIterator<Item = SkillEntry>) -> Self {
        let mut index = CatalogIndex::default();
        for entry in entries {
            index.skills.insert(entry.path.to_string(), entry);
        }
        let encoded = stored::encode(&index, &[], Vec::new());
        let user = UserId::parse("local").expect("a valid id");
        Self::from_index(user, &index, encoded.head, String::new())
    }

    /// The memory a snapshot may come to hold once every part is read: the head, and each part
    /// decoded (the entries, their lookups, the listing and the search index each hold about one
    /// more copy of the text), so the cache's bound holds whatever turns go on to read.
    fn weight_of(head: &IndexHead, inline: Option<&IndexPart>) -> u64 {
        let listings: u64 = head.listings.iter().map(|stored| 2 * stored.listing.text.len() as u64).sum();
        let parts: u64 = head.parts.iter().map(|part| 4 * part.bytes).sum();
        let inline =
            inline.map_or(0, |part| Self::estimate(part.skills.len(), part.files.values().map(Vec::len).sum()));
        let settings = head.settings.as_ref().map_or(0, |settings| {
            let rules = settings.ask.iter().chain(&settings.allow).chain(&settings.problems);
            rules.map(|rule| 2 * rule.len() as u64 + 64).sum()
        });
        1024 + listings + parts + inline + settings + Self::agents_weight(&head.agents)
    }

    /// The agents' share of a snapshot: their text and about as much again for the structures.
    fn agents_weight(agents: &[AgentEntry]) -> u64 {
        let text = |agent: &AgentEntry| {
            agent.name.len() + agent.description.len() + agent.warnings.iter().map(String::len).sum::<usize>()
        };
        agents.iter().map(|agent| 2 * text(agent) as u64 + 256).sum()
    }

    fn estimate(skills: usize, files: usize) -> u64 {
        (skills as u64) * 1536 + (files as u64) * 64
    }

    pub(crate) fn weight(&self) -> u64 {
        self.weight
    }

    /// Usable skills.
    pub fn len(&self) -> usize {
        self.head.total
    }

    pub fn is_empty(&self) -> bool {
        self.head.total == 0
    }

    pub fn etag(&self) -> &str {
        &self.etag
    }

    /// How many SKILL.md files cannot be used.
    pub fn skipped_count(&self) -> usize {
        self.head.skipped
    }

    /// The tenant's agents, sorted by name, from the head this snapshot was read from: listing
    /// them costs no request of its own.
    pub fn agents(&self) -> &[AgentEntry] {
        &self.head.agents
    }

    /// The agent called `name` (its file's name), if the tenant has it.
    pub fn agent(&self, name: &str) -> Option<&AgentEntry> {
        let agents = &self.head.agents;
        agents.binary_search_by(|agent| agent.name.as_str().cmp(name)).ok().map(|i| &agents[i])
    }

    /// Agent files that cannot be used, and why (at most [`MAX_SKIPPED_AGENTS`]).
    pub fn skipped_agents(&self) -> &[SkippedEntry] {
        &self.head.skipped_agents
    }

    /// The tenant's `settings.json` entry.
    pub fn settings_entry(&self) -> Option<&SettingsEntry> {
        self.head.settings.as_ref()
    }

    /// The tenant's approval rules (empty without a usable `settings.json`).
    pub fn approvals(&self) -> &ApprovalPolicy {
        &self.approvals
    }

    /// The tenant's `BASE_PROMPT.md` entry.
    pub fn base_prompt_entry(&self) -> Option<&BasePromptEntry> {
        self.head.base_prompt.as_ref()
    }

    /// The tenant's `BASE_PROMPT.md`, when it has a usable one.
    pub fn base_prompt(&self) -> Option<&str> {
        self.head.base_prompt.as_ref().and_then(|base| base.text.as_deref())
    }

    /// Part `i`, read on first use.
    async fn part(&self, objects: &dyn ObjectStore, i: usize) -> Result<Option<Arc<PartView>>, StoreError> {
        let Some(cell) = self.parts.get(i) else { return Ok(None) };
        let id = self.head.parts.get(i).map(|part| part.id.clone());
        let view = cell
            .get_or_try_init(|| async {
                let id = id.ok_or_else(|| StoreError::Corrupt("a catalog part without an id".to_owned()))?;
                let part = stored::read_part(objects, &self.user, &id).await?;
                Ok::<_, StoreError>(Arc::new(PartView::new(part)))
            })
            .await?;
        Ok(Some(view.clone()))
    }

    /// The part that holds a lower-cased folder or frontmatter name.
    async fn part_for(&self, objects: &dyn ObjectStore, name: &str) -> Result<Option<Arc<PartView>>, StoreError> {
        self.part(objects, stored::part_of(name, self.parts.len())).await
    }

    /// The usable skill at `path`.
    pub async fn get(
        &self,
        objects: &dyn ObjectStore,
        path: &SkillPath,
    ) -> Result<Option<Arc<SkillEntry>>, StoreError> {
        if let Some((entry, _)) = self.pins.get(path) {
            return Ok(Some(entry.clone()));
        }
        let part = self.part_for(objects, &path.name().to_lowercase()).await?;
        Ok(part.and_then(|part| part.entries.get(path).cloned()))
    }

    /// A usable skill with the files the index keeps for it besides its SKILL.md (path inside its
    /// folder, size, ETag), in path order; `None` when there is no such skill, or the index keeps no
    /// list for it (more files than it keeps) and its folder is to be listed.
    pub async fn skill_files(
        &self,
        objects: &dyn ObjectStore,
        path: &SkillPath,
    ) -> Result<Option<(Arc<SkillEntry>, Arc<[IndexedFile]>)>, StoreError> {
        if let Some(pinned) = self.pins.get(path) {
            return Ok(Some(pinned.clone()));
        }
        let Some(part) = self.part_for(objects, &path.name().to_lowercase()).await? else { return Ok(None) };
        Ok(part.entries.get(path).cloned().zip(part.files.get(path).cloned()))
    }

    /// A path (`category/name`, `name`) or a bare name (folder or frontmatter name, any case) that
    /// only one skill has.
    pub async fn resolve(&self, objects: &dyn ObjectStore, wanted: &str) -> Result<Resolved, StoreError> {
        let wanted = wanted.trim().trim_matches('/');
        if let Ok(path) = SkillPath::parse(wanted) {
            if let Some(entry) = self.get(objects, &path).await? {
                return Ok(Resolved::Found(entry));
            }
        }
        if wanted.contains('/') || wanted.is_empty() {
            return Ok(Resolved::NotFound);
        }
        let lower = wanted.to_lowercase();
        let Some(part) = self.part_for(objects, &lower).await? else { return Ok(Resolved::NotFound) };
        let mut found: BTreeMap<SkillPath, Arc<SkillEntry>> = BTreeMap::new();
        for path in part.by_folder.get(&lower).into_iter().flatten() {
            if let Some(entry) = part.entries.get(path) {
                found.insert(path.clone(), entry.clone());
            }
        }
        for (path, (entry, _)) in &self.pins {
            if path.name().to_lowercase() == lower || entry.name.to_lowercase() == lower {
                found.insert(path.clone(), entry.clone());
            }
        }
        for path in part.by_name.get(&lower).into_iter().flatten() {
            if let Some(entry) = self.get(objects, path).await? {
                found.insert(path.clone(), entry);
            }
        }
        let mut found: Vec<Arc<SkillEntry>> = found.into_values().collect();
        Ok(match found.len() {
            0 => Resolved::NotFound,
            1 => Resolved::Found(found.remove(0)),
            _ => Resolved::Ambiguous(found),
        })
    }

    /// The whole catalog, read from every part once per snapshot (parts already read are not read
    /// again).
    pub async fn view(&self, objects: &dyn ObjectStore) -> Result<Arc<CatalogView>, StoreError> {
        let view = self
            .view
            .get_or_try_init(|| async {
                let parts: Vec<Option<Arc<PartView>>> =
                    stream::iter((0..self.parts.len()).map(|i| self.part(objects, i)))
                        .buffered(stored::PART_CONCURRENCY)
                        .try_collect()
                        .await?;
                let parts: Vec<Arc<PartView>> = parts.into_iter().flatten().collect();
                let mut entries: Vec<Arc<SkillEntry>> =
                    parts.iter().flat_map(|part| part.entries.values().cloned()).collect();
                entries.sort_by_cached_key(|e| e.path.to_string());
                let usable: HashSet<&SkillPath> = entries.iter().map(|e| &e.path).collect();
                let mut skipped: Vec<SkippedEntry> = parts
                    .iter()
                    .flat_map(|part| part.skipped.iter())
                    .filter(|skipped| !inside_a_skill(&skipped.file, |path| usable.contains(path)))
                    .cloned()
                    .collect();
                skipped.sort_by(|a, b| a.file.cmp(&b.file));
                Ok::<_, StoreError>(Arc::new(CatalogView { entries, skipped, search: OnceLock::new() }))
            })
            .await?;
        Ok(view.clone())
    }

    /// Up to `limit` skill paths closest to `wanted` (by name or full path), best first. Reads the
    /// whole catalog: only an unknown name asks for this.
    pub async fn closest(
        &self,
        objects: &dyn ObjectStore,
        wanted: &str,
        limit: usize,
    ) -> Result<Vec<SkillPath>, StoreError> {
        let view = self.view(objects).await?;
        let wanted = wanted.trim_matches('/').to_lowercase();
        // `/anthropic/pdf` names the skill `pdf` under a category it does not have: its last part
        // is compared with the names too.
        let wanted_name = wanted.rsplit('/').next().unwrap_or(&wanted);
        let mut scored: Vec<(f64, &SkillPath)> = view
            .entries
            .iter()
            .map(|entry| {
                let name = entry.path.name().to_lowercase();
                let by_name = strsim::jaro_winkler(&wanted, &name).max(strsim::jaro_winkler(wanted_name, &name));
                let by_path = strsim::jaro_winkler(&wanted, &entry.path.to_string().to_lowercase());
                (by_name.max(by_path), &entry.path)
            })
            .filter(|(score, _)| *score >= 0.6)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        Ok(scored.into_iter().take(limit).map(|(_, path)| path.clone()).collect())
    }

    /// The best matches for `query`, best first. Reads the whole catalog (once per snapshot).
    pub async fn find(
        &self,
        objects: &dyn ObjectStore,
        query: &str,
        limit: usize,
    ) -> Result<Vec<Arc<SkillEntry>>, StoreError> {
        Ok(self.view(objects).await?.find(query, limit))
    }

    /// The state-1 listing for `budget_tokens`: as the head keeps it rendered, or rendered from the
    /// entries when they are all at hand. Otherwise (a budget the head has no rendering for) it is
    /// rendered from the whole catalog and stored in the head for the turns after this one.
    pub async fn listing(&self, objects: &dyn ObjectStore, budget_tokens: usize) -> Result<Arc<Listing>, StoreError> {
        if let Some((budget, listing)) = self.listing.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            if *budget == budget_tokens {
                return Ok(listing.clone());
            }
        }
        let listing = match self.head.listings.iter().find(|stored| stored.budget == budget_tokens) {
            Some(stored) => Arc::new(stored.listing.clone()),
            None => {
                let view = self.view(objects).await?;
                let refs: Vec<&SkillEntry> = view.entries.iter().map(Arc::as_ref).collect();
                let listing = Arc::new(listing::render(&refs, budget_tokens));
                // A catalog held whole in its head renders its listing at no cost that grows; one
                // in parts keeps it for the next cold process.
                if !self.head.parts.is_empty() {
                    self.store_listing(objects, budget_tokens, &listing).await;
                }
                listing
            }
        };
        // A pinned version is listed as it describes itself.
        let listing = match self.pins.is_empty() {
            true => listing,
            false => {
                Arc::new(self.pins.values().fold((*listing).clone(), |listing, (entry, _)| listing.with_entry(entry)))
            }
        };
        *self.listing.lock().unwrap_or_else(|e| e.into_inner()) = Some((budget_tokens, listing.clone()));
        Ok(listing)
    }

    /// Adds a listing rendered for a new budget to the stored head, if the head is still this
    /// snapshot's; another writer's head wins, and the next turn with this budget renders again.
    async fn store_listing(&self, objects: &dyn ObjectStore, budget: usize, listing: &Listing) {
        if self.etag.is_empty() {
            return;
        }
        let mut head = self.head.clone();
        head.listings.insert(0, StoredListing { budget, listing: listing.clone() });
        head.listings.truncate(MAX_STORED_LISTINGS);
        let Ok(bytes) = serde_json::to_vec(&head) else { return };
        let key = keys::catalog_index_key(&self.user);
        match objects.put_if(&key, bytes, WriteCondition::Matches(self.etag.clone())).await {
            Ok(_) => {
                tracing::info!(budget, "stored the listing for a new budget in the catalog index")
            }
            Err(err) => {
                tracing::info!(budget, error = %err, "did not store the listing for a new budget")
            }
        }
    }
}
