//! Skills: SKILL.md frontmatter read leniently, the tenant's catalog index kept in one object,
//! the budgeted listing with `find_skills` search, the tenant's agents, and the process-wide caches
//! behind them.
//!
//! - [`frontmatter`]: what a SKILL.md declares; skipped only when unusable, repaired with warnings.
//! - [`agents`]: the tenant's agents (`{user}/agents/{name}.md`, Claude Code's subagent files), read
//!   as leniently; listed from the catalog's head, their prompts read by [`SkillLibrary::agent_doc`].
//! - [`bundle`]: a skill's bundle of wheels under `.bundle/`, and the markers of needs none provides.
//! - [`index`]: the index, built from a listing once and updated entry by entry; stored as a small
//!   head and content-named parts ([`index::stored`]).
//! - [`catalog`]: one version of the index as a turn uses it (parts read when needed), and the
//!   [`SkillLibrary`] caches.
//! - [`listing`]: the state-1 listing under its token budget, in tiers.
//! - [`search`]: BM25 over names, categories and descriptions.
//! - [`found`]: the text of a `find_skills` result, and how the context budget shrinks it.
//! - [`settings`]: the tenant's `settings.json`, whose `permissions` add approval rules.
//! - [`versions`]: published skills: immutable numbered versions, and the default each serves.

pub mod agents;
pub use agent_ports::bundle;
pub mod catalog;
pub mod found;
pub mod frontmatter;
pub mod index;
pub mod listing;
pub mod search;
pub mod settings;
pub mod versions;

use std::sync::Arc;

pub use agents::{AgentDoc, AgentEntry};
pub use catalog::{Catalog, CatalogView, Resolved, SkillLibrary};
pub use frontmatter::{Frontmatter, SkipReason};
pub use index::{CatalogIndex, SkillEntry, SkippedEntry};
pub use listing::Listing;

use crate::ids::SkillPath;

/// A loaded skill: where it lives, its frontmatter and its whole SKILL.md.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillDoc {
    pub path: SkillPath,
    pub frontmatter: Frontmatter,
    pub content: Arc<str>,
    /// The published version loaded; `None` for a skill served from its folder.
    pub version: Option<u32>,
}
