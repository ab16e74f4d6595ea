//! Versions in the object store: [`publish`] (files first, then a record claimed with
//! `If-None-Match`), the reads, [`set_default`] (the tenant's `defaults.json` written with
//! `If-Match`, then the catalog index brought up to it) and the deletes.

use futures::stream::{self, StreamExt, TryStreamExt};
use sha2::{Digest, Sha256};

use super::{
    check_skill, Checked, DefaultVersion, Defaults, SkillFileBytes, VersionError, VersionFile, VersionRecord,
    VersionTag, MAX_PUBLISHED_SKILLS, MAX_VERSIONS_PER_SKILL,
};
use crate::ids::{SkillPath, UserId};
use crate::keys;
use crate::skills::index::{read_defaults, read_record, update_index, version_files, TenantFile};
use crate::store::{ObjectStore, StoreError, WriteCondition};

/// Objects written or read at once.
const CONCURRENCY: usize = 16;
/// Conditional writes tried before giving up (each loser re-reads).
const MAX_ATTEMPTS: u32 = 24;

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// What [`publish`] did: the version, and whether this upload made it (the same content uploaded
/// before makes no new version).
#[derive(Debug, Clone)]
pub struct Published {
    pub record: VersionRecord,
    pub created: bool,
    /// Whether it is now the skill's default.
    pub is_default: bool,
}

/// The content hash of a version: over each file's path and SHA-256, in path order.
fn content_hash(files: &[VersionFile]) -> String {
    let mut hasher = Sha256::new();
    for file in files {
        hasher.update(file.path.as_bytes());
        hasher.update([0]);
        hasher.update(file.sha256.as_bytes());
        hasher.update([b'\n']);
    }
    hex::encode(hasher.finalize())
}

/// The version numbers a skill has, ascending, from a listing of its records.
async fn numbers(objects: &dyn ObjectStore, user: &UserId, skill: &SkillPath) -> Result<Vec<u32>, StoreError> {
    let prefix = keys::skill_version_records_prefix(user, skill);
    let mut numbers: Vec<u32> = objects
        .list(&prefix)
        .await?
        .iter()
        .filter_map(|meta| meta.key.strip_prefix(&prefix)?.strip_suffix(".json")?.parse().ok())
        .collect();
    numbers.sort_unstable();
    Ok(numbers)
}

/// Checks `files` as `skill` and stores them as its next version, unless a version already has
/// the same content (then that one is returned). The first version of a skill becomes its
/// default unless `promote` is `Some(false)`; a later one only with `promote` `Some(true)`.
#[allow(clippy::too_many_arguments)]
pub async fn publish(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    files: Vec<SkillFileBytes>,
    uploaded_by: &str,
    now: i64,
    promote: Option<bool>,
    listing_budget: Option<usize>,
) -> Result<Published, VersionError> {
    let Checked { entry, warnings, needs, optional_needs } =
        check_skill(skill, &files).map_err(VersionError::Invalid)?;
    let mut files = files;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let listed: Vec<VersionFile> = files
        .iter()
        .map(|file| VersionFile {
            path: file.path.clone(),
            size: file.bytes.len() as u64,
            sha256: sha256_hex(&file.bytes),
        })
        .collect();
    let sha256 = content_hash(&listed);
    let size = listed.iter().map(|file| file.size).sum();
    let hash_key = keys::skill_version_hash_key(user, skill, &sha256);

    // The same content published before is that version.
    if let Some(existing) = same_content(objects, user, skill, &hash_key, &sha256).await? {
        return finish(objects, user, skill, existing, false, promote, uploaded_by, now, listing_budget).await;
    }
    // Files first, under the content's hash: a record never names a file that is not there.
    let prefix = keys::skill_version_files_prefix(user, skill, &sha256);
    stream::iter(files)
        .map(|file| {
            let key = format!("{prefix}{}", file.path);
            async move { objects.put(&key, file.bytes).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;

    let latest = numbers(objects, user, skill).await?.last().copied();
    // An identical upload that finished between the marker's read and this listing holds the
    // newest number (or it is older, and its marker was found above).
    if let Some(latest) = latest {
        if let Some(theirs) = read_record(objects, user, skill, latest).await?.filter(|theirs| theirs.sha256 == sha256)
        {
            return finish(objects, user, skill, theirs, false, promote, uploaded_by, now, listing_budget).await;
        }
    }
    let mut number = latest.unwrap_or(0) + 1;
    for _ in 0..MAX_ATTEMPTS {
        if number > MAX_VERSIONS_PER_SKILL {
            return Err(VersionError::Full(format!(
                "{skill} has reached {MAX_VERSIONS_PER_SKILL} versions; delete old ones to upload more"
            )));
        }
        let mut entry = entry.clone();
        entry.version = Some(VersionTag(number, sha256.clone()));
        let record = VersionRecord {
            skill: skill.clone(),
            version: number,
            sha256: sha256.clone(),
            size,
            files: listed.clone(),
            uploaded_by: uploaded_by.to_owned(),
            uploaded_at: now,
            entry,
            warnings: warnings.clone(),
            needs: needs.clone(),
            optional_needs: optional_needs.clone(),
        };
        let bytes = serde_json::to_vec(&record).map_err(|err| StoreError::Corrupt(err.to_string()))?;
        let key = keys::skill_version_record_key(user, skill, number);
        match objects.put_if(&key, bytes, WriteCondition::Absent).await {
            Ok(_) => {
                objects.put(&hash_key, number.to_string().into_bytes()).await?;
                return finish(objects, user, skill, record, true, promote, uploaded_by, now, listing_budget).await;
            }
            Err(StoreError::Conflict) => {
                // Another upload took this number: if it was the same content, that is this version.
                if let Some(theirs) = self::read_record(objects, user, skill, number).await? {
                    if theirs.sha256 == sha256 {
                        return finish(objects, user, skill, theirs, false, promote, uploaded_by, now, listing_budget)
                            .await;
                    }
                }
                number += 1;
            }
            Err(err) => return Err(err.into()),
        }
    }
    Err(VersionError::Storage(StoreError::Conflict))
}

/// The version already holding `sha256`, found by its hash marker (checked against the record,
/// which a delete may have removed).
async fn same_content(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    hash_key: &str,
    sha256: &str,
) -> Result<Option<VersionRecord>, StoreError> {
    let Some(marker) = objects.get(hash_key).await? else { return Ok(None) };
    let Some(number) = std::str::from_utf8(&marker.bytes).ok().and_then(|text| text.trim().parse::<u32>().ok()) else {
        return Ok(None);
    };
    Ok(read_record(objects, user, skill, number).await?.filter(|record| record.sha256 == sha256))
}

/// Makes `record` the default when asked (by default, when the skill has none), and says whether
/// it is.
#[allow(clippy::too_many_arguments)]
async fn finish(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    record: VersionRecord,
    created: bool,
    promote: Option<bool>,
    by: &str,
    now: i64,
    listing_budget: Option<usize>,
) -> Result<Published, VersionError> {
    let (current, _) = read_defaults(objects, user).await?;
    let served = current.skills.get(&skill.to_string());
    if promote.unwrap_or(served.is_none()) && served.is_none_or(|d| d.version != record.version) {
        set_default(objects, user, skill, record.version, by, now, listing_budget).await?;
        return Ok(Published { record, created, is_default: true });
    }
    let is_default = served.is_some_and(|d| d.version == record.version);
    Ok(Published { record, created, is_default })
}

/// Every version of `skill`, ascending (empty when it has none).
pub async fn list_versions(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
) -> Result<Vec<VersionRecord>, StoreError> {
    let numbers = numbers(objects, user, skill).await?;
    let records: Vec<Option<VersionRecord>> = stream::iter(numbers)
        .map(|number| read_record(objects, user, skill, number))
        .buffered(CONCURRENCY)
        .try_collect()
        .await?;
    Ok(records.into_iter().flatten().collect())
}

/// Version `number` of `skill`.
pub async fn get_version(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    number: u32,
) -> Result<VersionRecord, VersionError> {
    read_record(objects, user, skill, number)
        .await?
        .ok_or_else(|| VersionError::NotFound(format!("{skill} has no version {number}")))
}

/// One file of a version, by its path in the version's file list (no other path becomes a key).
pub async fn read_version_file(
    objects: &dyn ObjectStore,
    user: &UserId,
    record: &VersionRecord,
    path: &str,
) -> Result<Vec<u8>, VersionError> {
    let Some(file) = record.files.iter().find(|file| file.path == path) else {
        return Err(VersionError::NotFound(format!(
            "version {} of {} has no file {path:?}",
            record.version, record.skill
        )));
    };
    let key = format!("{}{}", keys::skill_version_files_prefix(user, &record.skill, &record.sha256), file.path);
    let object = objects.get(&key).await?.ok_or_else(|| {
        StoreError::Corrupt(format!("version {} of {} lost its file {path:?}", record.version, record.skill))
    })?;
    if sha256_hex(&object.bytes) != file.sha256 {
        return Err(
            StoreError::Corrupt(format!("{path:?} of version {} does not match its hash", record.version)).into()
        );
    }
    Ok(object.bytes)
}

/// A version's files as a zip (the layout an upload takes), each checked against its hash.
pub async fn version_zip(
    objects: &dyn ObjectStore,
    user: &UserId,
    record: &VersionRecord,
) -> Result<Vec<u8>, VersionError> {
    let bodies: Vec<(String, Vec<u8>)> = stream::iter(&record.files)
        .map(|file| async move {
            let bytes = read_version_file(objects, user, record, &file.path).await?;
            Ok::<_, VersionError>((file.path.clone(), bytes))
        })
        .buffered(CONCURRENCY)
        .try_collect()
        .await?;
    super::write_zip(bodies.iter().map(|(path, bytes)| (path.as_str(), bytes.as_slice())))
        .map_err(|err| VersionError::Storage(StoreError::Backend(format!("writing the zip: {err}"))))
}

/// Changes the tenant's defaults with `change` (read, changed, written back with `If-Match`,
/// again on a lost race), then brings the catalog index up to them before returning: the first
/// turn that starts afterwards uses them.
async fn change_defaults(
    objects: &dyn ObjectStore,
    user: &UserId,
    listing_budget: Option<usize>,
    mut change: impl FnMut(&mut Defaults) -> Result<(), VersionError>,
) -> Result<(), VersionError> {
    let key = keys::skill_defaults_key(user);
    let mut attempts = 0;
    loop {
        let (mut defaults, etag) = read_defaults(objects, user).await?;
        change(&mut defaults)?;
        let bytes = serde_json::to_vec(&defaults).map_err(|err| StoreError::Corrupt(err.to_string()))?;
        let condition = etag.map_or(WriteCondition::Absent, WriteCondition::Matches);
        match objects.put_if(&key, bytes, condition).await {
            Ok(_) => break,
            Err(StoreError::Conflict) if attempts + 1 < MAX_ATTEMPTS => attempts += 1,
            Err(err) => return Err(err.into()),
        }
    }
    update_index(objects, user, &[TenantFile::Defaults], false, listing_budget).await?;
    Ok(())
}

/// Makes version `number` the default of `skill`: a promote, or a rollback to an older one.
pub async fn set_default(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    number: u32,
    by: &str,
    now: i64,
    listing_budget: Option<usize>,
) -> Result<DefaultVersion, VersionError> {
    let record = get_version(objects, user, skill, number).await?;
    let chosen = DefaultVersion { version: number, sha256: record.sha256, set_by: by.to_owned(), set_at: now };
    let path = skill.to_string();
    change_defaults(objects, user, listing_budget, |defaults| {
        if !defaults.skills.contains_key(&path) && defaults.skills.len() >= MAX_PUBLISHED_SKILLS {
            return Err(VersionError::Full(format!("this account has {MAX_PUBLISHED_SKILLS} published skills")));
        }
        defaults.skills.insert(path.clone(), chosen.clone());
        Ok(())
    })
    .await?;
    Ok(chosen)
}

/// Deletes version `number` of `skill`. The default may be deleted only when it is the last
/// version (the skill is then no longer published).
pub async fn delete_version(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    number: u32,
    listing_budget: Option<usize>,
) -> Result<(), VersionError> {
    let record = get_version(objects, user, skill, number).await?;
    let (current, _) = read_defaults(objects, user).await?;
    if current.skills.get(&skill.to_string()).is_some_and(|d| d.version == number) {
        let others = numbers(objects, user, skill).await?.into_iter().filter(|n| *n != number).count();
        if others > 0 {
            return Err(VersionError::Conflict(format!(
                "version {number} is the default of {skill}; make another version the default first"
            )));
        }
        unpublish(objects, user, skill, listing_budget).await?;
    }
    objects.delete(&keys::skill_version_record_key(user, skill, number)).await?;
    delete_prefix(objects, &keys::skill_version_files_prefix(user, skill, &record.sha256)).await?;
    delete_prefix(objects, &keys::skill_version_evals_prefix(user, skill, number)).await?;
    objects.delete(&keys::skill_version_hash_key(user, skill, &record.sha256)).await?;
    Ok(())
}

/// Deletes every version of `skill` (and its default). A folder written straight under
/// `{user}/skills/` at the same path, if any, is what the catalog serves again.
pub async fn delete_skill(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    listing_budget: Option<usize>,
) -> Result<(), VersionError> {
    let published = read_defaults(objects, user).await?.0.skills.contains_key(&skill.to_string());
    let numbers = numbers(objects, user, skill).await?;
    if !published && numbers.is_empty() {
        return Err(VersionError::NotFound(format!("{skill} has no published versions")));
    }
    if published {
        unpublish(objects, user, skill, listing_budget).await?;
    }
    let base = keys::skill_versions_prefix(user, skill);
    for marker in ["@v/", "@files/", "@sha/", "@evals/"] {
        delete_prefix(objects, &format!("{base}{marker}")).await?;
    }
    Ok(())
}

/// Removes `skill` from the defaults (and so from the catalog, unless a folder serves it).
async fn unpublish(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    listing_budget: Option<usize>,
) -> Result<(), VersionError> {
    let path = skill.to_string();
    change_defaults(objects, user, listing_budget, |defaults| {
        defaults.skills.remove(&path);
        Ok(())
    })
    .await
}

async fn delete_prefix(objects: &dyn ObjectStore, prefix: &str) -> Result<(), StoreError> {
    let listed = objects.list(prefix).await?;
    stream::iter(listed)
        .map(|meta| async move { objects.delete(&meta.key).await })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Version `number` of `skill` as a catalog entry with its files besides SKILL.md (the runtime's
/// bundle among them), for a turn that pins it.
pub async fn pinned_entry(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    number: u32,
) -> Result<(crate::skills::index::SkillEntry, Vec<crate::skills::index::IndexedFile>), VersionError> {
    let record = get_version(objects, user, skill, number).await?;
    let files = version_files(objects, user, &record).await?;
    Ok((record.entry, files))
}
