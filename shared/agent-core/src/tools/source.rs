//! Where a turn's skills come from, and loading one by the name the model or a slash command gave.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::ids::UserId;
use crate::skills::{Catalog, Resolved, SkillDoc, SkillLibrary};
use crate::store::ObjectStore;

/// Where a turn's skills come from: the catalog snapshot, and the library and store that load a
/// skill's SKILL.md when it is loaded or forced.
#[derive(Clone, Copy)]
pub struct SkillSource<'a> {
    pub library: &'a SkillLibrary,
    pub objects: &'a dyn ObjectStore,
    pub user: &'a UserId,
    pub catalog: &'a Catalog,
    /// The published versions this turn's agents loaded, for the turn's record.
    pub loaded: &'a LoadedVersions,
}

/// The published version of each skill a turn loaded (by any of its agents), by skill path.
#[derive(Debug, Default)]
pub struct LoadedVersions(Mutex<BTreeMap<String, u32>>);

impl LoadedVersions {
    fn record(&self, doc: &SkillDoc) {
        if let Some(version) = doc.version {
            self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(doc.path.to_string(), version);
        }
    }

    /// What was loaded so far.
    pub fn loaded(&self) -> BTreeMap<String, u32> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}

/// Why a skill could not be loaded; `Display` is the text the model is told.
#[derive(Debug, thiserror::Error)]
pub enum LoadSkillError {
    /// No such skill, or a name several skills share; the text suggests what exists.
    #[error("{0}")]
    NotFound(String),
    /// The SKILL.md could not be read; the backend's message stays out of the model's sight.
    #[error("Error: The skill could not be read from storage; try again later")]
    Storage(#[source] crate::store::StoreError),
}

impl SkillSource<'_> {
    /// Resolves and loads a skill, with the closest names when there is no such skill.
    pub async fn load(&self, wanted: &str) -> Result<Arc<SkillDoc>, LoadSkillError> {
        let storage = |err: crate::store::StoreError| {
            tracing::warn!(skill = wanted, error = %err, "could not read the skill catalog");
            LoadSkillError::Storage(err)
        };
        let not_found = || async {
            let suggestions = self.catalog.closest(self.objects, wanted, 3).await.map_err(storage)?;
            let suggestions: Vec<String> = suggestions.iter().map(|p| p.to_string()).collect();
            Ok::<_, LoadSkillError>(LoadSkillError::NotFound(if suggestions.is_empty() {
                format!("Error: Skill not found: {wanted}")
            } else {
                format!("Error: Skill not found: {wanted}. Closest skills: {}", suggestions.join(", "))
            }))
        };
        let entry = match self.catalog.resolve(self.objects, wanted).await.map_err(storage)? {
            Resolved::Found(entry) => entry,
            Resolved::NotFound => return Err(not_found().await?),
            Resolved::Ambiguous(many) => {
                let paths: Vec<String> = many.iter().map(|e| e.path.to_string()).collect();
                return Err(LoadSkillError::NotFound(format!(
                    "Error: Several skills are named {wanted}: {}. Load one by its full path.",
                    paths.join(", ")
                )));
            }
        };
        match self.library.skill_doc(self.objects, self.user, &entry).await {
            Ok(Some(doc)) => {
                self.loaded.record(&doc);
                if let Some(version) = doc.version {
                    let span = tracing::Span::current();
                    span.record("skill.path", tracing::field::display(&doc.path));
                    span.record("skill.version", version);
                }
                Ok(doc)
            }
            Ok(None) => Err(not_found().await?),
            Err(err) => {
                tracing::warn!(skill = %entry.path, error = %err, "could not read a SKILL.md");
                Err(LoadSkillError::Storage(err))
            }
        }
    }
}
