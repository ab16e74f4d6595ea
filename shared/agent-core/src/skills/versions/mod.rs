//! Published skills: immutable, numbered versions of a skill uploaded through the API (or
//! `cargo xtask skills sync`), and the default version each published skill serves.
//!
//! A version's files live once under their content's hash
//! (`{user}/skill-versions/{skill}/@files/{sha256}/`) and never change, so a turn reading one
//! version sees none of another's files. Its record (`@v/{number}.json`) is written once, with
//! `If-None-Match`, after its files: concurrent uploads each get their own number, and a record
//! only names files that are all there. The tenant's `defaults.json` says which version each
//! published skill serves; the catalog index copies that version's entry, so a turn still reads
//! one index head and a promote is seen by the first turn that starts after it returns.
//!
//! - `archive`: a zip read within the bounds (and a version written as one).
//! - `check`: the validation `skills validate` applies, for one uploaded skill.
//! - `store`: publishing, listing, reading, the default (promote, roll back) and deleting.

mod archive;
mod check;
pub(crate) mod store;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::index::{SkillEntry, MAX_INDEXED_FILES};
use crate::ids::SkillPath;
use crate::store::StoreError;

pub use archive::{check_files, check_path, read_zip, write_zip, MAX_PATH_BYTES};
pub use check::{check_skill, declared_needs, optional_needs, Checked, MAX_SCRIPT_BYTES};
pub use store::{
    defaults, delete_skill, delete_version, get_version, list_versions, pinned_entry, publish, read_version_file,
    set_default, version_zip, Published,
};

/// Most files in one version: as many as the catalog index keeps for a skill.
pub const MAX_SKILL_FILES: usize = MAX_INDEXED_FILES;
/// Most bytes one version's files may hold, inflated.
pub const MAX_SKILL_BYTES: u64 = 64 * 1024 * 1024;
/// Most versions one skill keeps; delete old ones to upload more.
pub const MAX_VERSIONS_PER_SKILL: u32 = 1000;
/// Most skills one turn may pin to a version.
pub const MAX_PINS: usize = 8;
/// Most published skills one tenant may have (the defaults record stays small enough to read whole).
pub const MAX_PUBLISHED_SKILLS: usize = 20_000;

/// One file of an upload: its path inside the skill's folder and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFileBytes {
    pub path: String,
    pub bytes: Vec<u8>,
}

/// One problem that keeps an upload from being stored: the file it is about (none for the upload
/// as a whole) and what is wrong, in words a client can show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub message: String,
}

impl Problem {
    pub fn file(file: &str, message: impl Into<String>) -> Self {
        Self { file: Some(file.to_owned()), message: message.into() }
    }

    pub fn archive(message: impl Into<String>) -> Self {
        Self { file: None, message: message.into() }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{file}: {}", self.message),
            None => f.write_str(&self.message),
        }
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

/// Why a versions operation failed; each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum VersionError {
    /// The upload is not a usable skill (400): each problem names its file.
    #[error("the skill is not valid: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Problem>),
    /// No such skill or version (404).
    #[error("{0}")]
    NotFound(String),
    /// The operation would break a rule about versions (409): the default cannot be deleted while
    /// other versions remain.
    #[error("{0}")]
    Conflict(String),
    /// A bound on versions or published skills was reached (409 too: delete some first).
    #[error("{0}")]
    Full(String),
    #[error(transparent)]
    Storage(#[from] StoreError),
}
