//! The tenant's library built two ways: as folders under `{user}/skills/` (turn-bench's library),
//! and as published versions (`versions::publish`, three per skill, the middle one the default).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agent_core::keys;
use agent_core::skills::index::{decode_index, update_index, IndexRead, TenantFile};
use agent_core::skills::versions::{publish, DefaultVersion, Defaults, SkillFileBytes};
use agent_core::{ObjectStore, SkillPath, UserId};
use local_store::MemoryObjectStore;

use crate::{BenchResult, DEFAULT_VERSION, VERSIONS};

/// How a library was stored, and what building it cost.
pub(crate) struct Built {
    /// Writing the objects: plain inserts for folders, `publish` for versions.
    pub(crate) write: Duration,
    /// Versions published (0 for folders).
    pub(crate) publishes: usize,
    /// The one-time index build over what was written (`update_index` with no index yet).
    pub(crate) index_build: Duration,
    /// The index head's size, and its parts (count, total bytes).
    pub(crate) head_bytes: usize,
    pub(crate) parts: usize,
    pub(crate) parts_bytes: u64,
}

/// The skill at `index`, as turn-bench names it: `cat{index % 10}/skill-{index:04}`.
pub(crate) fn skill_path(index: usize) -> BenchResult<SkillPath> {
    Ok(SkillPath::parse(&format!("cat{}/skill-{index:04}", index % 10))?)
}

/// The line of a SKILL.md that says which version it is (none for a folder's).
pub(crate) fn version_line(index: usize, version: u32) -> String {
    format!("This is version {version} of skill {index}.")
}

/// turn-bench's SKILL.md, with a line naming `version` when there is one.
fn skill_md(index: usize, version: Option<u32>) -> String {
    let marker = version.map(|v| format!("{}\n\n", version_line(index, v))).unwrap_or_default();
    format!(
        "---\nname: skill-{index:04}\ndescription: Synthetic skill number {index} for the benchmark, with a \
         description of ordinary length.\ncategory: cat{}\ntools: [ls, read_file]\n---\n\n# Skill {index}\n\n{marker}{}",
        index % 10,
        "Instructions line for the benchmark skill.\n".repeat(60)
    )
}

/// A skill's three files (SKILL.md, `reference.md`, `examples/example.md`), paths inside its folder.
fn skill_files(index: usize, version: Option<u32>) -> Vec<SkillFileBytes> {
    vec![
        SkillFileBytes { path: "SKILL.md".to_owned(), bytes: skill_md(index, version).into_bytes() },
        SkillFileBytes { path: "reference.md".to_owned(), bytes: b"Reference material.\n".repeat(20) },
        SkillFileBytes {
            path: "examples/example.md".to_owned(),
            bytes: format!("# Example for skill {index}\n\n{}", "An example of the skill at work.\n".repeat(10))
                .into_bytes(),
        },
    ]
}

/// `count` skills written as folders (inserted, not counted as calls), then the index built.
pub(crate) async fn folders(
    objects: &MemoryObjectStore,
    user: &UserId,
    count: usize,
    budget: usize,
) -> BenchResult<Built> {
    let started = Instant::now();
    for index in 0..count {
        let folder = keys::skill_prefix(user, &skill_path(index)?);
        for file in skill_files(index, None) {
            objects.insert(&format!("{folder}{}", file.path), file.bytes);
        }
    }
    let write = started.elapsed();
    finish(objects, user, count, write, 0, budget).await
}

/// `count` skills published through `versions::publish`, [`VERSIONS`] versions each, none promoted
/// on upload; then the tenant's `defaults.json` written once with version [`DEFAULT_VERSION`] of
/// each (what `set_default` writes, in one object rather than one index update per skill), and
/// the index built from it.
pub(crate) async fn published(
    objects: &MemoryObjectStore,
    user: &UserId,
    count: usize,
    budget: usize,
) -> BenchResult<Built> {
    let started = Instant::now();
    let mut defaults = Defaults { skills: BTreeMap::new() };
    for index in 0..count {
        let path = skill_path(index)?;
        for version in 1..=VERSIONS {
            let files = skill_files(index, Some(version));
            let done = publish(objects, user, &path, files, "bench", 0, Some(false), Some(budget)).await?;
            if done.record.version != version || !done.created {
                return Err(format!("{path}: published as version {}, expected {version}", done.record.version).into());
            }
            if version == DEFAULT_VERSION {
                let chosen =
                    DefaultVersion { version, sha256: done.record.sha256, set_by: "bench".to_owned(), set_at: 0 };
                defaults.skills.insert(path.to_string(), chosen);
            }
        }
    }
    // Through the store's port, as `set_default` writes it.
    objects.put(&keys::skill_defaults_key(user), serde_json::to_vec(&defaults)?).await?;
    let write = started.elapsed();
    finish(objects, user, count, write, count * VERSIONS as usize, budget).await
}

/// Builds the index and reads what it came to. None is stored yet, so `update_index` builds it from
/// a listing of the folders and the defaults, whatever file it is told changed.
async fn finish(
    objects: &MemoryObjectStore,
    user: &UserId,
    count: usize,
    write: Duration,
    publishes: usize,
    budget: usize,
) -> BenchResult<Built> {
    let started = Instant::now();
    let outcome = update_index(objects, user, &[TenantFile::Defaults], false, Some(budget)).await?;
    let index_build = started.elapsed();
    if outcome.skills != count || !outcome.rebuilt {
        return Err(format!("the index holds {} skills, expected {count}", outcome.skills).into());
    }
    let head = objects.bytes(&keys::catalog_index_key(user)).ok_or("no index head was written")?;
    let IndexRead::Usable(decoded) = decode_index(&head)? else { return Err("the index head does not read".into()) };
    Ok(Built {
        write,
        publishes,
        index_build,
        head_bytes: head.len(),
        parts: decoded.parts.len(),
        parts_bytes: decoded.parts.iter().map(|part| part.bytes).sum(),
    })
}
