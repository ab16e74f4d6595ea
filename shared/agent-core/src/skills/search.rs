//! `find_skills`: a BM25 search over every skill's name, category and description, built once per
//! catalog version and kept with it, so a warm turn pays nothing to search.

use bm25::{Language, SearchEngine, SearchEngineBuilder};

use super::index::SkillEntry;
use super::listing::group_of;

/// Longest query accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 500;

/// The search index of one catalog version.
pub struct SkillSearch {
    engine: SearchEngine<u32>,
}

impl std::fmt::Debug for SkillSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillSearch").finish_non_exhaustive()
    }
}

/// The text a skill is found by: its names (hyphens as spaces, so `pdf-forms` matches "forms"),
/// its group and its description.
fn document(entry: &SkillEntry) -> String {
    let spaced = |text: &str| text.replace(['-', '_', '/', '.'], " ");
    format!(
        "{} {} {} {} {}",
        spaced(&entry.name),
        spaced(entry.path.name()),
        spaced(group_of(entry)),
        entry.path,
        entry.description
    )
}

impl SkillSearch {
    /// Indexes `entries`; a result's id is the entry's position in `entries`.
    pub fn new(entries: &[&SkillEntry]) -> Self {
        let documents: Vec<bm25::Document<u32>> =
            entries.iter().enumerate().map(|(i, entry)| bm25::Document::new(i as u32, document(entry))).collect();
        let engine = SearchEngineBuilder::<u32>::with_documents(Language::English, documents).build();
        Self { engine }
    }

    /// The positions of the best matches for `query`, best first.
    pub fn search(&self, query: &str, limit: usize) -> Vec<usize> {
        let query: String = query.chars().take(MAX_QUERY_CHARS).collect();
        self.engine.search(&query, limit).into_iter().map(|result| result.document.id as usize).collect()
    }
}
