//! Published skills in the index: each skill in the tenant's `defaults.json` is served by its
//! default version's entry and files, in place of any folder written at the same path under
//! `{user}/skills/` (which serves again once the skill is no longer published).

use super::examine::examine;
use super::*;
use crate::skills::versions;
use crate::skills::versions::store::{listed_files, version_files};

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
        let (defaults, _) = versions::defaults(objects, user).await?;
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
        for (path, record) in versions::store::default_records(objects, user, changed).await? {
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
