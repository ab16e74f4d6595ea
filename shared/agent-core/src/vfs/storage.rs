//! Where a file's bytes live: the listings of the roots (a mounted skill's from the catalog
//! index when it keeps them), and loads through the turn's and the process's caches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use sha2::{Digest, Sha256};

use super::resolve::{Node, RootRef};
use super::{path, Entry, Source, Vfs, VfsError, CACHE_MAX_BYTES, MAX_READ_BYTES};
use crate::ids::SkillPath;
use crate::keys;
use crate::skills::bundle::{is_bundle_file, BundleRef, SkillBundle};
use crate::store::ObjectMeta;

/// Files kept across the turns of a warm process: workspace blobs, which are content-addressed and
/// never change, and listed objects (a skill's files, a ticket's) under the ETag they were read at,
/// which the listing or the catalog index names. A kept file is therefore always the bytes its
/// entry names; every key includes the tenant (and a blob's the session).
pub struct FileCache {
    files: quick_cache::sync::Cache<String, Arc<Vec<u8>>, FileWeight>,
}

#[derive(Clone)]
struct FileWeight;

impl quick_cache::Weighter<String, Arc<Vec<u8>>> for FileWeight {
    fn weight(&self, key: &String, bytes: &Arc<Vec<u8>>) -> u64 {
        (key.len() + bytes.len()) as u64 + 64
    }
}

impl FileCache {
    /// A cache of at most `max_bytes` of files.
    pub fn new(max_bytes: u64) -> Self {
        Self { files: quick_cache::sync::Cache::with_weighter(256, max_bytes, FileWeight) }
    }

    fn get(&self, key: &str) -> Option<Arc<Vec<u8>>> {
        self.files.get(key)
    }

    pub(super) fn insert(&self, key: String, bytes: Arc<Vec<u8>>) {
        self.files.insert(key, bytes);
    }
}

impl Default for FileCache {
    /// 8 MiB: a few sessions' and skills' worth of files, well inside a 128 MB function.
    fn default() -> Self {
        Self::new(8 << 20)
    }
}

/// Bytes fetched or written during the turn, by object key, up to [`CACHE_MAX_BYTES`].
#[derive(Default)]
pub(super) struct ContentCache {
    bytes: usize,
    map: HashMap<String, Arc<Vec<u8>>>,
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl Vfs<'_> {
    /// The files of a root, sorted by relative path; object listings are cached for the turn.
    pub(super) async fn entries(&self, root: RootRef<'_>) -> Result<Arc<Vec<Entry>>, VfsError> {
        match root {
            RootRef::Workspace => Ok(Arc::new(
                self.workspace
                    .iter()
                    .map(|(rel, file)| Entry {
                        rel: rel.clone(),
                        size: file.size,
                        source: Source::Blob(file.sha256.clone()),
                    })
                    .collect(),
            )),
            RootRef::Memories => self.memory_entries().await,
            RootRef::Ticket(ticket) => {
                let cached = lock(&self.ticket_listing).clone();
                if let Some(listing) = cached {
                    return Ok(listing);
                }
                let listing = self.list_objects(&keys::ticket_prefix(&self.user, ticket)).await?;
                *lock(&self.ticket_listing) = Some(listing.clone());
                Ok(listing)
            }
            RootRef::Skill(skill) => {
                let cached = lock(&self.skill_listings).get(skill).cloned();
                if let Some(listing) = cached {
                    return Ok(listing);
                }
                let indexed = match self.catalog {
                    Some(catalog) => catalog.skill_files(self.objects, skill).await.map_err(VfsError::storage)?,
                    None => None,
                };
                // A published skill's files are its version's; a folder's are under its path.
                let prefix = match (&indexed, self.catalog) {
                    (Some((entry, _)), _) => entry.folder_key(&self.user),
                    (None, Some(catalog)) => match catalog.get(self.objects, skill).await.map_err(VfsError::storage)? {
                        Some(entry) => entry.folder_key(&self.user),
                        None => keys::skill_prefix(&self.user, skill),
                    },
                    (None, None) => keys::skill_prefix(&self.user, skill),
                };
                let listing = match indexed {
                    // The index's file list and the SKILL.md it describes: nothing to list.
                    Some((entry, files)) => {
                        let skill_md = std::iter::once(("SKILL.md", entry.size, entry.etag.as_str()));
                        let listed: Vec<ObjectMeta> = skill_md
                            .chain(files.iter().map(|file| (file.rel.as_str(), file.size, file.etag.as_str())))
                            .map(|(rel, size, etag)| ObjectMeta {
                                key: format!("{prefix}{rel}"),
                                etag: etag.to_owned(),
                                size,
                                last_modified: None,
                            })
                            .collect();
                        entries_from(&prefix, &listed)
                    }
                    None => self.list_objects(&prefix).await?,
                };
                // The bundle folder is the runtime's, not the skill's: kept aside for `execute`.
                let found = SkillBundle::from_files(listing.iter().map(|entry| (entry.rel.as_str(), entry.size)));
                let bundle = found.bundle.map(|file| file.under(&prefix));
                let listing: Arc<Vec<Entry>> =
                    Arc::new(listing.iter().filter(|entry| !is_bundle_file(&entry.rel)).cloned().collect());
                lock(&self.skill_bundles).insert(skill.clone(), bundle);
                lock(&self.skill_listings).insert(skill.clone(), listing.clone());
                Ok(listing)
            }
        }
    }

    /// The bundle of a mounted skill, once its files have been listed ([`Self::entries`]).
    pub(super) fn skill_bundle(&self, skill: &SkillPath) -> Option<BundleRef> {
        lock(&self.skill_bundles).get(skill).cloned().flatten()
    }

    pub(super) async fn list_objects(&self, prefix: &str) -> Result<Arc<Vec<Entry>>, VfsError> {
        let listed = self.objects.list(prefix).await.map_err(VfsError::storage)?;
        Ok(entries_from(prefix, &listed))
    }

    /// Every visible file under a node, as (virtual path, entry), sorted by path; none when the
    /// node is a path that does not exist.
    pub(super) async fn files_under(&self, node: &Node<'_>) -> Result<Vec<(String, Entry)>, VfsError> {
        let roots: Vec<(RootRef<'_>, &str)> = match node {
            Node::Root => {
                // A search of every root searches the memories too (deepagents' composite backend
                // does the same), so it lists them.
                let mut roots = vec![(RootRef::Workspace, ""), (RootRef::Memories, "")];
                if let Some(ticket) = &self.ticket {
                    roots.push((RootRef::Ticket(ticket), ""));
                }
                roots.extend(self.visible_skills().into_iter().map(|s| (RootRef::Skill(s), "")));
                roots
            }
            Node::SkillsDir => self.visible_skills().into_iter().map(|s| (RootRef::Skill(s), "")).collect(),
            Node::In { root, rel } => vec![(*root, rel.as_str())],
        };
        let mut files = Vec::new();
        for (root, rel) in roots {
            let entries = self.entries(root).await?;
            let prefix = format!("{rel}/");
            files.extend(
                entries
                    .iter()
                    .filter(|e| rel.is_empty() || e.rel == rel || e.rel.starts_with(&prefix))
                    .map(|e| (root.join(&e.rel), e.clone())),
            );
        }
        files.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(files)
    }

    /// A file's bytes, from the turn's cache or the object store.
    pub(super) async fn load(&self, shown: &str, entry: &Entry) -> Result<Arc<Vec<u8>>, VfsError> {
        if entry.size > MAX_READ_BYTES {
            return Err(VfsError::FileTooLarge { path: shown.to_owned(), size: entry.size });
        }
        let key = match &entry.source {
            Source::Blob(sha) => keys::workspace_blob_key(&self.user, &self.session, sha),
            Source::Object { key, .. } => key.clone(),
            Source::Staged(bytes) => return Ok(bytes.clone()),
        };
        // A blob this turn wrote is held until the turn saves it.
        let unsaved = match &entry.source {
            Source::Blob(sha) => self.unsaved.get(sha).cloned(),
            _ => None,
        };
        let cached = unsaved.or_else(|| lock(&self.contents).map.get(&key).cloned());
        if let Some(bytes) = cached {
            return Ok(bytes);
        }
        let lasting = match &entry.source {
            Source::Blob(_) => Some(key.clone()),
            Source::Object { etag, .. } => lasting_object_key(&key, etag),
            Source::Staged(_) => None,
        };
        let kept = self.shared_files.zip(lasting.as_deref()).and_then(|(files, lasting)| files.get(lasting));
        if let Some(bytes) = kept {
            self.remember(key, bytes.clone());
            return Ok(bytes);
        }
        let object = self.objects.get(&key).await.map_err(VfsError::storage)?;
        let (bytes, lasting) = match (object, &entry.source) {
            (Some(object), Source::Blob(sha)) if sha256_hex(&object.bytes) == *sha => (object.bytes, lasting),
            (_, Source::Blob(_)) => {
                tracing::warn!(path = shown, "virtual filesystem: workspace blob missing or corrupt");
                return Err(VfsError::Unavailable(shown.to_owned()));
            }
            // Kept under the ETag it was read at, which may be newer than the listing's.
            (Some(object), _) => {
                let lasting = lasting_object_key(&key, &object.etag);
                (object.bytes, lasting)
            }
            (None, _) => return Err(VfsError::NotFound(shown.to_owned())),
        };
        if bytes.len() as u64 > MAX_READ_BYTES {
            return Err(VfsError::FileTooLarge { path: shown.to_owned(), size: bytes.len() as u64 });
        }
        let bytes = Arc::new(bytes);
        if let (Some(files), Some(lasting)) = (self.shared_files, lasting) {
            files.insert(lasting, bytes.clone());
        }
        self.remember(key, bytes.clone());
        Ok(bytes)
    }

    pub(super) fn remember(&self, key: String, bytes: Arc<Vec<u8>>) {
        let mut cache = lock(&self.contents);
        if cache.bytes + bytes.len() <= CACHE_MAX_BYTES && !cache.map.contains_key(&key) {
            cache.bytes += bytes.len();
            cache.map.insert(key, bytes);
        }
    }
}

/// Where a listed object's bytes are kept across turns: under its key and ETag (an ETag names one
/// content); not at all when the ETag is unknown.
fn lasting_object_key(key: &str, etag: &str) -> Option<String> {
    // Neither an object key (a clean path) nor an ETag holds a NUL.
    (!etag.is_empty()).then(|| format!("{key}\0{etag}"))
}

/// The files of one root from a listing of objects: keys under `prefix` that are clean relative
/// paths, sorted. Keys outside the prefix are ignored, so a wider listing can be passed.
fn entries_from(prefix: &str, listed: &[ObjectMeta]) -> Arc<Vec<Entry>> {
    let mut entries: Vec<Entry> = listed
        .iter()
        .filter_map(|meta| {
            let rel = meta.key.strip_prefix(prefix)?;
            path::is_clean_relative(rel).then(|| Entry {
                rel: rel.to_owned(),
                size: meta.size,
                source: Source::Object { key: meta.key.clone(), etag: meta.etag.clone() },
            })
        })
        .collect();
    entries.sort_by(|a, b| a.rel.cmp(&b.rel));
    Arc::new(entries)
}
