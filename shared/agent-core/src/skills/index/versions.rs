//! Published skills in the index: each skill in the tenant's `defaults.json` is served by its
//! default version's entry and files, in place of any folder written at the same path under
//! `{user}/skills/` (which serves again once the skill is no longer published). The published
//! state's stored forms (the defaults, a version's record) are defined and read here, below
//! [`crate::skills::versions`], which writes them.

use futures::stream::{self, StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use super::examine::examine;
use super::*;

/// Version records read at once.
const CONCURRENCY: usize = 16;

impl CatalogIndex {
    /// Whether the skill at `path` is served by a published version.
    pub(super) fn is_published(&self, path: &str) -> bool {
        self.skills.get(path).is_some_and(|entry| entry.version.is_some())
    }

    /// Brings the published entries up to the tenant's defaults: one GET of the defaults, and for
    /// each skill whose default changed, a GET of its record and a listing of its files.
    pub(super) async fn reconcile_versions(
        &mut self,
        objects: &dyn ObjectStore,
        user: &UserId,
    ) -> Result<(), StoreError> {
        let (defaults, _) = read_defaults(objects, user).await?;
        let gone: Vec<String> = self
            .skills
            .iter()
            .filter(|(path, entry)| entry.version.is_some() && !defaults.skills.contains_key(*path))
            .map(|(path, _)| path.clone())
            .collect();
        for path in gone {
            self.skills.remove(&path);
            self.files.remove(&path);
            // A folder at the same path serves again, if there is one.
            let rel = format!("{path}/SKILL.md");
            let outcome = examine(objects, user, &rel, None).await?;
            self.apply(&rel, outcome);
        }
        let changed: Vec<(SkillPath, u32)> = defaults
            .skills
            .iter()
            .filter(|(path, chosen)| {
                let served = self.skills.get(*path).and_then(|entry| entry.version.as_ref());
                served.is_none_or(|tag| tag.number() != chosen.version || tag.sha256() != chosen.sha256)
            })
            .filter_map(|(path, chosen)| Some((SkillPath::parse(path).ok()?, chosen.version)))
            .collect();
        for (path, record) in default_records(objects, user, changed).await? {
            let files = version_files(objects, user, &record).await?;
            self.skipped.remove(&format!("{path}/SKILL.md"));
            self.skills.insert(path.clone(), record.entry);
            self.files.insert(path, files);
        }
        Ok(())
    }

    /// Reads the files of a published skill again when they are the version it serves (the
    /// runtime wrote its bundle).
    pub(super) async fn refresh_version_files(
        &mut self,
        objects: &dyn ObjectStore,
        user: &UserId,
        skill: &SkillPath,
        sha256: &str,
    ) -> Result<(), StoreError> {
        let path = skill.to_string();
        let Some(entry) = self.skills.get(&path) else { return Ok(()) };
        if entry.version.as_ref().is_none_or(|tag| tag.sha256() != sha256) {
            return Ok(());
        }
        let prefix = entry.folder_key(user);
        let listed = objects.list(&prefix).await?;
        let files = listed_files(&prefix, &listed);
        self.files.insert(path, files);
        Ok(())
    }
}

/// Which version a catalog entry serves: its number and its content's hash (which names its files).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VersionTag(pub u32, pub String);

impl VersionTag {
    pub fn number(&self) -> u32 {
        self.0
    }

    pub fn sha256(&self) -> &str {
        &self.1
    }
}

/// One file of a version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionFile {
    pub path: String,
    pub size: u64,
    pub sha256: String,
}

/// One version of a skill, as stored (written once, never changed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionRecord {
    pub skill: SkillPath,
    pub version: u32,
    /// SHA-256 over the sorted list of each file's path and SHA-256: the same files zipped twice
    /// (other timestamps, another order) are the same content.
    pub sha256: String,
    /// The files' bytes, in all.
    pub size: u64,
    /// In path order, SKILL.md among them.
    pub files: Vec<VersionFile>,
    pub uploaded_by: String,
    /// Unix seconds.
    pub uploaded_at: i64,
    /// The catalog entry this version makes (its `version` set).
    pub entry: SkillEntry,
    /// What the frontmatter check repaired.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Python distributions its `requirements.txt` declares; a bundle provides those the image lacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
    /// Modules its scripts import only inside `try: … except ImportError`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub optional_needs: Vec<String>,
}

impl VersionRecord {
    pub fn tag(&self) -> VersionTag {
        VersionTag(self.version, self.sha256.clone())
    }
}

/// The version a published skill serves, and who set it when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultVersion {
    pub version: u32,
    pub sha256: String,
    pub set_by: String,
    /// Unix seconds.
    pub set_at: i64,
}

/// The tenant's `defaults.json`: each published skill's default version, by skill path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Defaults {
    pub skills: BTreeMap<String, DefaultVersion>,
}

/// Version `number` of `skill`, or `None`.
pub async fn read_record(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    number: u32,
) -> Result<Option<VersionRecord>, StoreError> {
    let Some(object) = objects.get(&keys::skill_version_record_key(user, skill, number)).await? else {
        return Ok(None);
    };
    serde_json::from_slice(&object.bytes)
        .map(Some)
        .map_err(|err| StoreError::Corrupt(format!("version {number} of {skill}: {err}")))
}

/// The tenant's defaults and the ETag to write them back with (`None`: there are none yet).
pub async fn read_defaults(objects: &dyn ObjectStore, user: &UserId) -> Result<(Defaults, Option<String>), StoreError> {
    match objects.get(&keys::skill_defaults_key(user)).await? {
        None => Ok((Defaults::default(), None)),
        Some(object) => {
            let defaults = serde_json::from_slice(&object.bytes)
                .map_err(|err| StoreError::Corrupt(format!("the skills' default versions: {err}")))?;
            Ok((defaults, Some(object.etag)))
        }
    }
}

/// The records `defaults` names, by skill path, for the catalog index.
pub(crate) async fn default_records(
    objects: &dyn ObjectStore,
    user: &UserId,
    wanted: Vec<(SkillPath, u32)>,
) -> Result<BTreeMap<String, VersionRecord>, StoreError> {
    let found: Vec<Option<VersionRecord>> = stream::iter(wanted)
        .map(|(skill, number)| async move { read_record(objects, user, &skill, number).await })
        .buffered(CONCURRENCY)
        .try_collect()
        .await?;
    Ok(found.into_iter().flatten().map(|record| (record.skill.to_string(), record)).collect())
}

/// A version's files besides its SKILL.md, from a listing of its folder (so the runtime's bundle
/// files are among them), in path order.
pub async fn version_files(
    objects: &dyn ObjectStore,
    user: &UserId,
    record: &VersionRecord,
) -> Result<Vec<IndexedFile>, StoreError> {
    let prefix = keys::skill_version_files_prefix(user, &record.skill, &record.sha256);
    Ok(listed_files(&prefix, &objects.list(&prefix).await?))
}

/// The files under `prefix` besides SKILL.md, in path order, within the index's bound.
pub(crate) fn listed_files(prefix: &str, listed: &[crate::store::ObjectMeta]) -> Vec<IndexedFile> {
    let mut files: Vec<IndexedFile> = listed
        .iter()
        .filter_map(|meta| Some(IndexedFile::listed(meta.key.strip_prefix(prefix)?, meta)))
        .filter(|file| file.rel != "SKILL.md")
        .collect();
    files.sort();
    // A version holds at most MAX_SKILL_FILES files; its bundle adds a few.
    files.truncate(MAX_INDEXED_FILES + 8);
    files
}
