//! The process-wide [`SkillLibrary`]: catalog snapshots revalidated with one conditional GET of the
//! index's head per turn, and SKILL.md bodies and agents' files kept by ETag. Every cache is
//! bounded in bytes.

use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::Weighter;

use super::Catalog;
use crate::ids::{AgentName, UserId};
use crate::keys;
use crate::skills::agents::{parse_agent_file, AgentDoc, AgentEntry, MAX_AGENT_FILE_BYTES};
use crate::skills::frontmatter::{Frontmatter, MAX_SKILL_MD_BYTES};
use crate::skills::index::stored;
use crate::skills::index::{build_index, decode_index, IndexRead, SkillEntry};
use crate::skills::SkillDoc;
use crate::store::{Fetched, ObjectStore, StoreError, WriteCondition};

/// Bytes of catalogs kept per process (a 10,000-skill catalog with every part read weighs a few
/// MB), so that with the other caches a warm process stays well inside a 128 MB function.
const CATALOG_CACHE_BYTES: u64 = 32 << 20;
/// Bytes of SKILL.md bodies kept per process.
const BODY_CACHE_BYTES: u64 = 8 << 20;
/// Bytes of loaded agents kept per process: a tenant's 50 agents of at most 64 KiB each fit.
const AGENT_CACHE_BYTES: u64 = 4 << 20;

#[derive(Clone)]
struct CatalogWeight;

impl Weighter<UserId, Arc<Catalog>> for CatalogWeight {
    fn weight(&self, _user: &UserId, catalog: &Arc<Catalog>) -> u64 {
        catalog.weight()
    }
}

#[derive(Clone)]
struct TextWeight;

impl Weighter<(String, String), Arc<str>> for TextWeight {
    fn weight(&self, key: &(String, String), text: &Arc<str>) -> u64 {
        (key.0.len() + key.1.len() + text.len()) as u64 + 64
    }
}

#[derive(Clone)]
struct AgentWeight;

impl Weighter<(String, String), Arc<AgentDoc>> for AgentWeight {
    fn weight(&self, key: &(String, String), doc: &Arc<AgentDoc>) -> u64 {
        let entry = &doc.entry;
        (key.0.len() + key.1.len() + doc.prompt.len() + entry.description.len()) as u64 + 256
    }
}

/// Process-wide caches of catalog snapshots (revalidated every turn), SKILL.md bodies and loaded
/// agents (keyed by ETag, so they never go stale).
pub struct SkillLibrary {
    catalogs: Cache<UserId, Arc<Catalog>, CatalogWeight>,
    bodies: Cache<(String, String), Arc<str>, TextWeight>,
    agents: Cache<(String, String), Arc<AgentDoc>, AgentWeight>,
    /// The listing budget of this process's turns, kept rendered in an index it writes.
    listing_budget: Option<usize>,
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
            agents: Cache::with_weighter(256, AGENT_CACHE_BYTES, AgentWeight),
            listing_budget: None,
        }
    }

    /// The listing budget (`SKILL_LISTING_TOKENS`) of the turns this library serves: an index it
    /// builds keeps the listing rendered for it.
    pub fn with_listing_budget(mut self, budget: usize) -> Self {
        self.listing_budget = Some(budget);
        self
    }

    /// The tenant's catalog: one conditional GET of the index's head when a snapshot is cached
    /// (nothing parsed when it is unchanged), one GET otherwise; parts are read later, when a turn
    /// needs them. A tenant without an index (or with one of an older format, or a corrupt one)
    /// gets it built from a listing, once, and stored with a conditional write that never
    /// overwrites one written meanwhile.
    pub async fn catalog(&self, objects: &dyn ObjectStore, user: &UserId) -> Result<Arc<Catalog>, StoreError> {
        let key = keys::catalog_index_key(user);
        let cached = self.catalogs.get(user);
        let stored_etag = cached.as_ref().map(|c| c.etag()).filter(|etag| !etag.is_empty());
        let fetched = objects.get_if_changed(&key, stored_etag).await?;
        let condition = match fetched {
            Fetched::NotModified => match cached {
                Some(catalog) => return Ok(catalog),
                None => WriteCondition::Absent,
            },
            Fetched::Changed(object) => match decode_index(&object.bytes) {
                Ok(IndexRead::Usable(head)) => {
                    drop(object.bytes);
                    let catalog = Arc::new(Catalog::from_head(user.clone(), *head, object.etag, cached.as_deref()));
                    self.catalogs.insert(user.clone(), catalog.clone());
                    return Ok(catalog);
                }
                Ok(IndexRead::NewerUnreadable) => {
                    // Written by a newer deployment: use a listing for now and leave it alone.
                    tracing::warn!("the catalog index has a newer format; building one in memory");
                    let index = build_index(objects, user).await?;
                    let encoded = stored::encode(&index, &[], Vec::new());
                    return Ok(Arc::new(Catalog::from_index(user.clone(), &index, encoded.head, String::new())));
                }
                Ok(IndexRead::Older) => WriteCondition::Matches(object.etag),
                Err(err) => {
                    tracing::warn!(error = %err, "the catalog index does not decode; rebuilding it");
                    WriteCondition::Matches(object.etag)
                }
            },
            Fetched::Missing => WriteCondition::Absent,
        };
        let index = build_index(objects, user).await?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        match stored::write_index(objects, user, &index, condition, None, self.listing_budget, now).await {
            Ok((head, etag)) => {
                let catalog = Arc::new(Catalog::from_index(user.clone(), &index, head, etag));
                self.catalogs.insert(user.clone(), catalog.clone());
                Ok(catalog)
            }
            Err(err) => {
                // Another writer stored an index first (theirs wins), or the write failed: this
                // turn still has a complete catalog, and the next one reads the stored index.
                tracing::info!(error = %err, "kept the catalog index built from a listing in memory only");
                let encoded = stored::encode(&index, &[], Vec::new());
                Ok(Arc::new(Catalog::from_index(user.clone(), &index, encoded.head, String::new())))
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
        let key = format!("{}SKILL.md", entry.folder_key(user));
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
                // A published version's file never changes: its entry's tag (the file's hash) is
                // its cache key. A folder's file is cached by the ETag it was read with.
                let etag = if entry.version.is_some() { entry.etag.clone() } else { object.etag };
                self.bodies.insert((key, etag), content.clone());
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
        let version = entry.version.as_ref().map(|tag| tag.number());
        Ok(Some(Arc::new(SkillDoc { path: entry.path.clone(), frontmatter, content, version })))
    }

    /// The loaded form of `entry`, one of the catalog's agents: its file read with one GET, once per
    /// ETag. The entry is as the file reads now (it may be newer than the catalog's), and the
    /// prompt is its body. `None` when the file is gone or no longer usable.
    pub async fn agent_doc(
        &self,
        objects: &dyn ObjectStore,
        user: &UserId,
        entry: &AgentEntry,
    ) -> Result<Option<Arc<AgentDoc>>, StoreError> {
        // The name came from the index, but it becomes a key: it is checked again.
        let Ok(name) = AgentName::parse(entry.name.as_str()) else { return Ok(None) };
        let key = keys::agent_key(user, &name);
        if let Some(doc) = self.agents.get(&(key.clone(), entry.etag.clone())) {
            return Ok(Some(doc));
        }
        if entry.size > MAX_AGENT_FILE_BYTES {
            return Ok(None);
        }
        let Some(object) = objects.get(&key).await? else { return Ok(None) };
        let etag = object.etag.clone();
        match parse_agent_file(object.bytes, &name, object.etag) {
            Ok(doc) => {
                let doc = Arc::new(doc);
                self.agents.insert((key, etag), doc.clone());
                Ok(Some(doc))
            }
            Err(reason) => {
                tracing::warn!(file = %format!("agents/{name}.md"), %reason, "the agent's file is no longer usable");
                Ok(None)
            }
        }
    }
}
