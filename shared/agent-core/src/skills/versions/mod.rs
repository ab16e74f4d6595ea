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

use serde::{Deserialize, Serialize};

use super::index::MAX_INDEXED_FILES;
pub use super::index::{read_defaults as defaults, DefaultVersion, Defaults, VersionFile, VersionRecord, VersionTag};
use crate::store::StoreError;

pub use archive::{check_files, check_path, read_zip, write_zip, MAX_PATH_BYTES};
pub use check::{check_skill, declared_needs, optional_needs, Checked, MAX_SCRIPT_BYTES};
pub use store::{
    delete_skill, delete_version, get_version, list_versions, pinned_entry, publish, read_version_file, set_default,
    version_zip, Published,
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
