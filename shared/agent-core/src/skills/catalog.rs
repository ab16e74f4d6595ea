//! The tenant's catalog as a turn sees it: a parsed index snapshot with its lookups, listing and
//! search, and the process-wide [`SkillLibrary`] that keeps snapshots and SKILL.md bodies warm.
//! A warm turn revalidates the index with one conditional GET and parses nothing when it is
//! unchanged; a SKILL.md body is fetched only for a skill that is loaded or forced.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use quick_cache::sync::Cache;
use quick_cache::Weighter;

use super::frontmatter::{Frontmatter, MAX_SKILL_MD_BYTES};
use super::index::{build_index, decode_index, CatalogIndex, IndexRead, SkillEntry};
use super::listing::{self, Listing};
use super::search::SkillSearch;
use super::SkillDoc;
use crate::ids::{SkillPath, UserId};
use crate::keys;
use crate::store::{Fetched, ObjectStore, StoreError, WriteCondition};

/// Bytes of parsed catalogs kept per process (a 10,000-skill catalog weighs a few MB), so that with
/// the other caches a warm process stays well inside a 128 MB function.
const CATALOG_CACHE_BYTES: u64 = 32 << 20;
/// Bytes of SKILL.md bodies kept per process.
const BODY_CACHE_BYTES: u64 = 8 << 20;

/// One version of a tenant's catalog.
pub struct Catalog {
    index: CatalogIndex,
    /// The index object's ETag; empty when this snapshot was not stored.
    etag: String,
    /// Usable skills in path order (skills nested inside a plain skill's folder are its files).
    entries: Vec<SkillEntry>,
    by_path: HashMap<SkillPath, usize>,
    /// Lower-cased folder names and frontmatter names → positions.
    by_name: HashMap<String, Vec<usize>>,
    listing: Mutex<Option<(usize, Arc<Listing>)>>,
    search: OnceLock<SkillSearch>,
    weight: u64,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").field("skills", &self.entries.len()).field("etag", &self.etag).finish_non_exhaustive()
    }
}

/// Whether `file` (relative to `{user}/skills/`) lies below the folder of one of `skills`, other
/// than as that skill's own SKILL.md.
fn inside_a_skill(file: &str, skills: &HashMap<SkillPath, usize>) -> bool {
    let known = |path: Result<SkillPath, _>| path.is_ok_and(|path| skills.contains_key(&path));
    let parts: Vec<&str> = file.split('/').collect();
    match parts.as_slice() {
        [name, _, _, ..] if known(SkillPath::plain(name)) => true,
        [category, name, _, _, ..] => known(SkillPath::new(category, name)),
        _ => false,
    }
}

/// What a skill name or path resolves to.
#[derive(Debug)]
pub enum Resolved<'c> {
    Found(&'c SkillEntry),
    /// A bare name that several categories share.
    Ambiguous(Vec<&'c SkillEntry>),
    NotFound,
}

impl Catalog {
    pub fn new(mut index: CatalogIndex, etag: impl Into<String>) -> Self {
        // The entries move out of the index, so a snapshot holds each skill once.
        let skills = std::mem::take(&mut index.skills);
        let plain: HashSet<String> =
            skills.values().filter(|e| e.path.category().is_none()).map(|e| e.path.name().to_owned()).collect();
        let entries: Vec<SkillEntry> = skills
            .into_values()
            .filter(|e| e.path.category().is_none_or(|category| !plain.contains(category)))
            .collect();
        let by_path: HashMap<SkillPath, usize> = entries.iter().enumerate().map(|(i, e)| (e.path.clone(), i)).collect();
        // A SKILL.md that could not be a skill (too deep, say) inside a usable skill's folder is one
        // of that skill's files, as one two deep in a plain skill is, not a skipped skill.
        index.skipped.retain(|file, _| !inside_a_skill(file, &by_path));
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, entry) in entries.iter().enumerate() {
            let folder = entry.path.name().to_lowercase();
            let name = entry.name.to_lowercase();
            by_name.entry(folder.clone()).or_default().push(i);
            if name != folder {
                by_name.entry(name).or_default().push(i);
            }
        }
        // The entries, their lookups, the rendered listing tiers and the search index each hold
        // about one more copy of the text.
        let weight = 1024
            + entries
                .iter()
                .map(|e| 512 + 4 * (e.name.len() + e.description.len() + e.path.name().len()) as u64)
                .sum::<u64>()
            + index.files.values().flatten().map(|(file, _)| 32 + file.len() as u64).sum::<u64>();
        Self {
            index,
            etag: etag.into(),
            entries,
            by_path,
            by_name,
            listing: Mutex::new(None),
            search: OnceLock::new(),
            weight,
        }
    }

    /// A catalog of ready-made entries, for tests and tools.
    pub fn from_entries(entries: impl IntoIterator<Item = SkillEntry>) -> Self {
        let mut index = CatalogIndex::default();
        for entry in entries {
            index.skills.insert(entry.path.to_string(), entry);
        }
        Self::new(index, "")
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Usable skills in path order.
    pub fn entries(&self) -> &[SkillEntry] {
        &self.entries
    }

    /// The stored index behind this snapshot: skipped files and the base prompt (its usable
    /// skills are [`Catalog::entries`]).
    pub fn index(&self) -> &CatalogIndex {
        &self.index
    }

    pub fn etag(&self) -> &str {
        &self.etag
    }

    /// The files of a skill besides its SKILL.md (path inside its folder, size), in path order, as
    /// the index keeps them; `None` when it does not (more files than it keeps, or a catalog not
    /// read from an index), and the skill's folder is to be listed.
    pub fn files(&self, path: &SkillPath) -> Option<&[(String, u64)]> {
        self.get(path)?;
        self.index.files.get(&path.to_string()).map(Vec::as_slice)
    }

    pub fn get(&self, path: &SkillPath) -> Option<&SkillEntry> {
        self.by_path.get(path).map(|&i| &self.entries[i])
    }

    /// The tenant's `BASE_PROMPT.md`, when it has a usable one.
    pub fn base_prompt(&self) -> Option<&str> {
        self.index.base_prompt.as_ref().and_then(|base| base.text.as_deref())
    }

    /// A path (`category/name`, `name`) or a bare name that only one skill has.
    pub fn resolve(&self, wanted: &str) -> Resolved<'_> {
        let wanted = wanted.trim().trim_matches('/');
        if let Some(entry) = SkillPath::parse(wanted).ok().and_then(|path| self.get(&path)) {
            return Resolved::Found(entry);
        }
        if wanted.contains('/') {
            return Resolved::NotFound;
        }
        match self.by_name.get(&wanted.to_lowercase()).map(Vec::as_slice) {
            None | Some([]) => Resolved::NotFound,
            Some([only]) => Resolved::Found(&self.entries[*only]),
            Some(many) => Resolved::Ambiguous(many.iter().map(|&i| &self.entries[i]).collect()),
        }
    }

    /// Up to `limit` skill paths closest to `wanted` (by name or full path), best first.
    pub fn closest(&self, wanted: &str, limit: usize) -> Vec<&SkillPath> {
        let wanted = wanted.trim_matches('/').to_lowercase();
        // `/anthropic/pdf` names the skill `pdf` under a category it does not have: its last part
        // is compared with the names too.
        let wanted_name = wanted.rsplit('/').next().unwrap_or(&wanted);
        let mut scored: Vec<(f64, &SkillPath)> = self
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
        scored.into_iter().take(limit).map(|(_, path)| path).collect()
    }

    /// The state-1 listing for `budget_tokens`, rendered once per catalog version and budget.
    pub fn listing(&self, budget_tokens: usize) -> Arc<Listing> {
        let mut cached = self.listing.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((budget, listing)) = cached.as_ref() {
            if *budget == budget_tokens {
                return listing.clone();
            }
        }
        let refs: Vec<&SkillEntry> = self.entries.iter().collect();
        let listing = Arc::new(listing::render(&refs, budget_tokens));
        *cached = Some((budget_tokens, listing.clone()));
        listing
    }

    /// The best matches for `query`, best first; the search index is built on first use.
    pub fn find(&self, query: &str, limit: usize) -> Vec<&SkillEntry> {
        let search = self.search.get_or_init(|| {
            let refs: Vec<&SkillEntry> = self.entries.iter().collect();
            SkillSearch::new(&refs)
        });
        search.search(query, limit).into_iter().filter_map(|i| self.entries.get(i)).collect()
    }
}

#[derive(Clone)]
struct CatalogWeight;

impl Weighter<UserId, Arc<Catalog>> for CatalogWeight {
    fn weight(&self, _user: &UserId, catalog: &Arc<Catalog>) -> u64 {
        catalog.weight
    }
}

#[derive(Clone)]
struct TextWeight;

impl Weighter<(String, String), Arc<str>> for TextWeight {
    fn weight(&self, key: &(String, String), text: &Arc<str>) -> u64 {
        (key.0.len() + key.1.len() + text.len()) as u64 + 64
    }
}

/// Process-wide caches of catalog snapshots (revalidated every turn) and SKILL.md bodies (keyed by
/// ETag, so they never go stale). Both are bounded in bytes.
pub struct SkillLibrary {
    catalogs: Cache<UserId, Arc<Catalog>, CatalogWeight>,
    bodies: Cache<(String, String), Arc<str>, TextWeight>,
}

impl Default for SkillLibrary {
    fn default() -> Self {
        Self::new()
    }
}

impl SkillLibrary {
    pub fn new() -> Self {
        Self {
            catalogs: Cache::with_weighter(64, CATALOG_CACHE_BYTES, CatalogWeight),
            bodies: Cache::with_weighter(1024, BODY_CACHE_BYTES, TextWeight),
        }
    }

    /// The tenant's catalog: one conditional GET of the index when a snapshot is cached (nothing
    /// parsed when it is unchanged), one GET otherwise. A tenant without an index (or with one of an
    /// older format, or a corrupt one) gets it built from a listing, once, and stored with a
    /// conditional write that never overwrites one written meanwhile.
    pub async fn catalog(&self, objects: &dyn ObjectStore, user: &UserId) -> Result<Arc<Catalog>, StoreError> {
        let key = keys::catalog_index_key(user);
        let cached = self.catalogs.get(user).filter(|catalog| !catalog.etag.is_empty());
        let fetched = objects.get_if_changed(&key, cached.as_ref().map(|c| c.etag.as_str())).await?;
        let condition = match fetched {
            Fetched::NotModified => match cached {
                Some(catalog) => return Ok(catalog),
                None => WriteCondition::Absent,
            },
            Fetched::Changed(object) => match decode_index(&object.bytes) {
                Ok(IndexRead::Usable(index)) => {
                    // The stored bytes go before the snapshot's lookups are built, so a large index
                    // is not in memory twice over.
                    let etag = object.etag;
                    drop(object.bytes);
                    let catalog = Arc::new(Catalog::new(index, etag));
                    self.catalogs.insert(user.clone(), catalog.clone());
                    return Ok(catalog);
                }
                Ok(IndexRead::NewerUnreadable) => {
                    // Written by a newer deployment: use a listing for now and leave it alone.
                    tracing::warn!(%user, "the catalog index has a newer format; building one in memory");
                    return Ok(Arc::new(Catalog::new(build_index(objects, user).await?, "")));
                }
                Ok(IndexRead::Older) => WriteCondition::Matches(object.etag),
                Err(err) => {
                    tracing::warn!(%user, error = %err, "the catalog index does not decode; rebuilding it");
                    WriteCondition::Matches(object.etag)
                }
            },
            Fetched::Missing => WriteCondition::Absent,
        };
        let index = build_index(objects, user).await?;
        match objects.put_if(&key, index.to_bytes(), condition).await {
            Ok(etag) => {
                let catalog = Arc::new(Catalog::new(index, etag));
                self.catalogs.insert(user.clone(), catalog.clone());
                Ok(catalog)
            }
            Err(err) => {
                // Another writer stored an index first (theirs wins), or the write failed: this
                // turn still has a complete catalog, and the next one reads the stored index.
                tracing::info!(%user, error = %err, "kept the catalog index built from a listing in memory only");
                Ok(Arc::new(Catalog::new(index, "")))
            }
        }
    }

    /// The loaded form of `entry`: its frontmatter from the index and its whole SKILL.md, fetched
    /// once per ETag. `None` when the file is gone or no longer usable.
    pub async fn skill_doc(
        &self,
        objects: &dyn ObjectStore,
        user: &UserId,
        entry: &SkillEntry,
    ) -> Result<Option<Arc<SkillDoc>>, StoreError> {
        let key = keys::skill_md_key(user, &entry.path);
        let cache_key = (key.clone(), entry.etag.clone());
        let content = match self.bodies.get(&cache_key) {
            Some(content) => content,
            None => {
                if entry.size > MAX_SKILL_MD_BYTES {
                    return Ok(None);
                }
                let Some(object) = objects.get(&key).await? else { return Ok(None) };
                if object.bytes.len() as u64 > MAX_SKILL_MD_BYTES {
                    return Ok(None);
                }
                let Ok(text) = String::from_utf8(object.bytes) else { return Ok(None) };
                let content: Arc<str> = Arc::from(text);
                self.bodies.insert((key, object.etag), content.clone());
                content
            }
        };
        let frontmatter = Frontmatter {
            name: entry.name.clone(),
            description: entry.description.clone(),
            category: entry.category.clone(),
            tools: entry.tools.clone(),
            declared_tools: entry.declared_tools.clone(),
        };
        Ok(Some(Arc::new(SkillDoc { path: entry.path.clone(), frontmatter, content })))
    }
}
