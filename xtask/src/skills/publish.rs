//! `skills sync`'s skills: each skill of the folder published as a version of that skill through the
//! path the API takes (`agent_core::skills::versions::publish`, promoted to its default), so the
//! same files make no new version; its bundle written beside the version's files; and the skills an
//! earlier sync published that the folder no longer has deleted.

use agent_core::skills::bundle::BUNDLE_DIR;
use agent_core::skills::versions::{self, SkillFileBytes, VersionError, MAX_SKILL_BYTES, MAX_SKILL_FILES};
use sandbox::bundles::build::SkillBundleFiles;

use super::*;

/// Who a sync's versions and defaults are set by, before the local user's name: what tells the
/// skills a sync published from those published through the API.
const SYNC_UPLOADER: &str = "cargo xtask skills sync";
/// Longest `$USER` kept in the uploader's name.
const MAX_USER_CHARS: usize = 64;

/// The uploader a sync's versions name: [`SYNC_UPLOADER`], and `$USER` when it is set.
fn uploader(user: Option<String>) -> String {
    let user: Option<String> = user
        .map(|name| name.trim().chars().filter(|c| !c.is_control()).take(MAX_USER_CHARS).collect())
        .filter(|name: &String| !name.is_empty());
    match user {
        Some(name) => format!("{SYNC_UPLOADER} ({name})"),
        None => SYNC_UPLOADER.to_owned(),
    }
}

/// The skills of the folder a sync publishes, by their paths: each usable SKILL.md's folder but
/// those inside a plain skill's folder, which are files of that skill (as the catalog reads them).
pub(super) fn publishable(folder: &Folder) -> Vec<SkillPath> {
    let skills: Vec<SkillPath> = folder
        .files
        .iter()
        .filter_map(|file| match classify(&file.rel) {
            SkillFile::Skill(path) => Some(path),
            _ => None,
        })
        .collect();
    let plain: BTreeSet<&str> =
        skills.iter().filter(|path| path.category().is_none()).map(|path| path.name()).collect();
    skills.iter().filter(|path| !path.top_folder().is_some_and(|top| plain.contains(top))).cloned().collect()
}

/// Whether `rel`, a file of the folder, lies in one of `skills`' folders (so it is published with
/// that skill, not written under the tenant's `skills/`).
pub(super) fn in_a_skill(rel: &str, skills: &[SkillPath]) -> bool {
    skills.iter().any(|skill| rel.strip_prefix(&skill.to_string()).is_some_and(|rest| rest.starts_with('/')))
}

/// What publishing did to the folder's skills.
#[derive(Debug, Default)]
pub(super) struct Published {
    pub created: usize,
    pub unchanged: usize,
    /// The skills not published, because their files are not a valid skill (each said above).
    pub refused: Vec<String>,
    pub bundle_files: usize,
}

/// Publishes each of `skills` from `folder` as a version, made its default; with `built` (bundles
/// were made), each version's `.bundle/` is made what was built for it. Prints a line per skill.
pub(super) async fn publish_all(
    objects: &S3ObjectStore,
    user: &UserId,
    folder: &Folder,
    skills: &[SkillPath],
    built: Option<&BTreeMap<String, SkillBundleFiles>>,
) -> Result<Published, String> {
    let by = uploader(std::env::var("USER").ok());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let (defaults, _) = versions::defaults(objects, user).await.map_err(|err| err.to_string())?;
    let mut done = Published::default();
    for skill in skills {
        let path = skill.to_string();
        let files = match read_skill(folder, &path).await? {
            Ok(files) => files,
            Err(problem) => {
                refuse(&mut done, &path, &[problem], defaults.skills.get(&path).map(|d| d.version))?;
                continue;
            }
        };
        let published = match versions::publish(objects, user, skill, files, &by, now, Some(true), None).await {
            Ok(published) => published,
            Err(VersionError::Storage(err)) => return Err(format!("publishing {path}: {err}")),
            Err(VersionError::Invalid(problems)) => {
                let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
                refuse(&mut done, &path, &problems, defaults.skills.get(&path).map(|d| d.version))?;
                continue;
            }
            Err(other) => {
                refuse(&mut done, &path, &[other.to_string()], defaults.skills.get(&path).map(|d| d.version))?;
                continue;
            }
        };
        let record = &published.record;
        let state = if published.created { "new" } else { "unchanged" };
        let default = if published.is_default { ", default" } else { "" };
        emit(&format!("{path}: version {} ({state}){default}\n", record.version))?;
        if published.created {
            done.created += 1;
            for warning in &record.warnings {
                eprintln!("  {path}: warning: {warning}");
            }
        } else {
            done.unchanged += 1;
        }
        if let Some(built) = built {
            done.bundle_files += send_bundle(objects, user, record, built.get(&path)).await?;
        }
    }
    Ok(done)
}

/// Says why `path` was not published, and which version it still serves.
fn refuse(done: &mut Published, path: &str, problems: &[String], serving: Option<u32>) -> Result<(), String> {
    let serving = match serving {
        Some(version) => format!("; version {version} stays its default"),
        None => String::new(),
    };
    emit(&format!("{path}: not published{serving}\n"))?;
    for problem in problems {
        eprintln!("  {path}: {problem}");
    }
    done.refused.push(path.to_owned());
    Ok(())
}

/// The files of the skill at `path` in `folder`, by their paths inside it; a skill over a version's
/// bounds is a problem, found from the sizes before anything is read.
async fn read_skill(folder: &Folder, path: &str) -> Result<Result<Vec<SkillFileBytes>, String>, String> {
    let prefix = format!("{path}/");
    let files: Vec<(String, PathBuf)> = folder
        .files
        .iter()
        .filter_map(|file| Some((file.rel.strip_prefix(&prefix)?.to_owned(), file.path.clone())))
        .collect();
    let total: u64 = folder.files.iter().filter(|file| file.rel.starts_with(&prefix)).map(|file| file.size).sum();
    if files.len() > MAX_SKILL_FILES {
        return Ok(Err(format!("it has {} files; a version holds at most {MAX_SKILL_FILES}", files.len())));
    }
    if total > MAX_SKILL_BYTES {
        return Ok(Err(format!("its files hold {total} bytes; a version holds at most {MAX_SKILL_BYTES}")));
    }
    let read = tokio::task::spawn_blocking(move || {
        let mut read = Vec::with_capacity(files.len());
        for (rel, file) in files {
            match read_bounded(&file, MAX_SKILL_BYTES)? {
                Some(bytes) => read.push(SkillFileBytes { path: rel, bytes }),
                None => return Ok(Err(format!("{rel} grew past {MAX_SKILL_BYTES} bytes while it was read"))),
            }
        }
        Ok(Ok(read))
    });
    read.await.map_err(|err| format!("reading {path}: {err}"))?
}

/// Makes the `.bundle/` of `record`'s files what `built` holds for it (nothing when no bundle was
/// made for it): bundles are named by their hash and markers are empty, so the same key and size is
/// the same object, never sent again. Returns how many files were sent or removed.
async fn send_bundle(
    objects: &S3ObjectStore,
    user: &UserId,
    record: &versions::VersionRecord,
    built: Option<&SkillBundleFiles>,
) -> Result<usize, String> {
    let files = keys::skill_version_files_prefix(user, &record.skill, &record.sha256);
    let stored: BTreeMap<String, u64> = objects
        .list(&format!("{files}{BUNDLE_DIR}"))
        .await
        .map_err(|err| err.to_string())?
        .into_iter()
        .filter_map(|meta| Some((meta.key.strip_prefix(&files)?.to_owned(), meta.size)))
        .collect();
    let wanted: &[(String, Vec<u8>)] = built.map_or(&[], |built| built.files.as_slice());
    let mut changed = 0;
    for (rel, bytes) in wanted {
        if stored.get(rel) != Some(&(bytes.len() as u64)) {
            objects.put(&format!("{files}{rel}"), bytes.clone()).await.map_err(|err| err.to_string())?;
            changed += 1;
        }
    }
    for rel in stored.keys().filter(|rel| !wanted.iter().any(|(want, _)| want == *rel)) {
        objects.delete(&format!("{files}{rel}")).await.map_err(|err| err.to_string())?;
        changed += 1;
    }
    Ok(changed)
}

/// Deletes the published skills that a sync made and `kept` (the folder's skills) no longer has: a
/// skill whose default a sync set and whose every version a sync uploaded. Skills published through
/// the API are left alone. Returns how many were deleted.
pub(super) async fn delete_gone(objects: &S3ObjectStore, user: &UserId, kept: &[SkillPath]) -> Result<usize, String> {
    let kept: BTreeSet<String> = kept.iter().map(ToString::to_string).collect();
    let (defaults, _) = versions::defaults(objects, user).await.map_err(|err| err.to_string())?;
    let (mut deleted, mut theirs) = (0, 0u64);
    for (path, chosen) in &defaults.skills {
        if kept.contains(path) {
            continue;
        }
        let Ok(skill) = SkillPath::parse(path) else { continue };
        let synced = chosen.set_by.starts_with(SYNC_UPLOADER)
            && versions::list_versions(objects, user, &skill)
                .await
                .map_err(|err| err.to_string())?
                .iter()
                .all(|version| version.uploaded_by.starts_with(SYNC_UPLOADER));
        if !synced {
            theirs += 1;
            continue;
        }
        match versions::delete_skill(objects, user, &skill, None).await {
            Ok(()) | Err(VersionError::NotFound(_)) => {}
            Err(err) => return Err(format!("deleting {path}: {err}")),
        }
        emit(&format!("{path}: deleted (no longer in the folder)\n"))?;
        deleted += 1;
    }
    if theirs > 0 {
        let count = crate::counted(theirs, "published skill", "published skills");
        eprintln!("left alone: {count} not in the folder, published otherwise than by a sync");
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uploader_names_the_sync_and_the_local_user() {
        assert_eq!(uploader(None), "cargo xtask skills sync");
        assert_eq!(uploader(Some(" ".into())), "cargo xtask skills sync");
        assert_eq!(uploader(Some("ana\n".into())), "cargo xtask skills sync (ana)");
        assert_eq!(uploader(Some("x".repeat(100))).len(), SYNC_UPLOADER.len() + 3 + MAX_USER_CHARS);
    }

    #[test]
    fn skills_inside_a_plain_skill_are_its_files_and_not_published_alone() {
        let file = |rel: &str| LocalFile { rel: rel.to_owned(), path: PathBuf::from(rel), size: 1 };
        let folder = Folder {
            files: ["docs/SKILL.md", "docs/memo/SKILL.md", "cat/b/SKILL.md", "eng/skills/a/SKILL.md", "a/b/c/SKILL.md"]
                .into_iter()
                .map(file)
                .collect(),
            ignored: Vec::new(),
        };
        let skills = publishable(&folder);
        let paths: Vec<String> = skills.iter().map(ToString::to_string).collect();
        assert_eq!(paths, ["docs", "cat/b", "eng/skills/a"]);
        assert!(in_a_skill("docs/memo/SKILL.md", &skills) && in_a_skill("eng/skills/a/x.py", &skills));
        assert!(!in_a_skill("docsx/y.md", &skills) && !in_a_skill("BASE_PROMPT.md", &skills));
        assert!(!in_a_skill("a/b/c/SKILL.md", &skills), "a SKILL.md too deep is no skill's");
    }
}
