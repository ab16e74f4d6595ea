//! The agent's virtual filesystem: what the seven file tools (`ls`, `read_file`, `write_file`, `delete`,
//! `edit_file`, `glob`, `grep`) see. Pure logic; every byte goes through an [`ObjectStore`].
//!
//! # Roots
//!
//! - `/workspace` — read-write, private to (user, session). Content-addressed: a written file's
//!   bytes go to [`keys::workspace_blob_key`] under their SHA-256 and the in-memory manifest
//!   (path relative to `/workspace` → [`WorkspaceFile`]) is committed with the session by the
//!   caller ([`Vfs::into_workspace`]). Directories are implied by file paths. A turn's blobs are
//!   held until the caller saves them ([`Vfs::save_workspace`]) just before the commit, so a file
//!   written then edited is put once, and a failed turn puts nothing.
//! - `/ticket` — read-only, only when the turn has a ticket: the objects under
//!   [`keys::ticket_prefix`], listed once per turn.
//! - `/memories` — read-write, the user's long-term memory: kept across all of the user's sessions
//!   under [`keys::memories_prefix`], never seen by another user (see `memories` for when it is
//!   read and written). The sandbox's `execute` does not see it.
//! - `/skills` — read-only, absent until a skill is mounted ([`Vfs::mount_skill`]); a mounted
//!   skill `category/name` appears as `/skills/{name}` and maps to [`keys::skill_prefix`]. Its
//!   files are those the catalog index lists for it ([`Vfs::with_catalog`]), or, when the index
//!   keeps none, a listing of its prefix, once per turn.
//!
//! # Decisions
//!
//! - The tools behave as LangChain deepagents 0.7's file tools over their default state backend
//!   (arguments, defaults, result formats, messages), so skills written for deepagents work here;
//!   docs/tools.md lists the differences kept on purpose, and agent-core's `deepagents_parity` test
//!   runs the same calls through both.
//! - Paths must be absolute; a relative path is an "Invalid path" error that says so (no
//!   guessing). See [`path::parse`] for the rejected forms (`..`, `//`, `%2e`, backslashes,
//!   control chars): those are errors in every tool, while a well-formed path that names nothing
//!   is an empty result for `ls`, `glob` and `grep`, as in deepagents.
//! - `write_file` creates or replaces a whole file, as in deepagents 0.7.
//! - Two mounted skills with the same short name (different categories): the first mounted owns
//!   `/skills/{name}`; the later one is still recorded in [`Vfs::loaded_skills`] but not visible.
//! - Object keys are never built from a model path: a skill or ticket file is found by looking
//!   its validated relative path up in the listing of the root's prefix (or the index's file list
//!   of the skill, which came from such a listing), and only listed keys are fetched. Listed keys
//!   that are not clean relative paths are invisible. The one exception is a `/memories` file
//!   written or deleted: its key is built from its path, validated as a [`MemoryPath`], under the
//!   turn's own user.
//!
//! [`MemoryPath`]: crate::ids::MemoryPath
//! - Errors are returned as [`VfsError`], whose `Display` is exactly what the model sees; it never
//!   contains an object key, a bucket, a user id or a storage backend's message.
//! - Every result is at most [`MAX_OUTPUT_BYTES`], under the loop's cut of a tool result, so what
//!   a result says about itself (a read's next offset) is never cut away.
//!
//! # Files
//!
//! This file holds the types (a root's listed files, `Entry`, among them), the bounds and the
//! mounts; `read` has the reading tools (`ls`, `read_file`, `glob`, `grep`), `write` the writing
//! ones (`write_file`, `edit_file`, `delete`), `memories` the writing tools on `/memories` and
//! the saving of its changes, `resolve` what a model path names, and `storage` the listings, loads
//! and caches behind them.
//!
//! [`keys::workspace_blob_key`]: crate::keys::workspace_blob_key
//! [`keys::ticket_prefix`]: crate::keys::ticket_prefix
//! [`keys::skill_prefix`]: crate::keys::skill_prefix
//! [`keys::memories_prefix`]: crate::keys::memories_prefix

mod exchange;
mod glob;
mod memories;
mod path;
mod read;
mod render;
mod resolve;
mod storage;
mod tools;
mod write;

#[cfg(test)]
mod memory_tests;
#[cfg(test)]
mod tests;

pub use exchange::SandboxFiles;

/// Whether `rel` is a path a workspace file may have (relative to `/workspace`, clean, bounded).
pub fn is_clean_workspace_path(rel: &str) -> bool {
    rel.len() <= MAX_WORKSPACE_PATH_BYTES && path::is_clean_relative(rel)
}
pub use crate::tool_names::FILE_TOOL_NAMES;
pub use glob::{MAX_GLOB_EXPANSIONS, MAX_GLOB_NESTING, MAX_GLOB_PATTERN_BYTES};
pub use memories::SavedMemories;
pub use read::Read;
pub use render::EMPTY_FILE_NOTE;
pub use storage::FileCache;
pub use tools::{file_tool_specs, read_file_or_bytes, run_file_tool};

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use thiserror::Error;

use crate::ids::{SessionId, SkillPath, TicketId, UserId};
use crate::skills::Catalog;
use crate::store::{ObjectStore, StoreError, WorkspaceFile};
use storage::ContentCache;

/// Longest path accepted from the model, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;
/// Largest file `write_file` / `edit_file` may produce.
pub const MAX_FILE_BYTES: usize = 256 * 1024;
/// Most files in a session's `/workspace`.
pub const MAX_WORKSPACE_FILES: usize = 100;
/// Most bytes of all `/workspace` files together.
pub const MAX_WORKSPACE_BYTES: u64 = 10 * 1024 * 1024;
/// Longest path of a `/workspace` file, after `/workspace/`: the manifest of every file is stored
/// with the session in one DynamoDB item (400 KB).
pub const MAX_WORKSPACE_PATH_BYTES: usize = 256;
/// Largest file `write_file` / `edit_file` may produce under `/memories`: memories are notes, and
/// the model reads them into its context.
pub const MAX_MEMORY_FILE_BYTES: usize = 64 * 1024;
/// Most files in a user's `/memories`.
pub const MAX_MEMORY_FILES: usize = 100;
/// Most bytes of all of a user's `/memories` files together.
pub const MAX_MEMORY_BYTES: u64 = 1024 * 1024;
/// Longest path of a `/memories` file, after `/memories/` (it is part of the file's object key).
pub use crate::ids::MAX_MEMORY_PATH_BYTES;
/// Largest file `read_file` / `grep` will fetch.
pub const MAX_READ_BYTES: u64 = 8 << 20;
/// `read_file`'s default number of lines (deepagents' default).
pub const DEFAULT_READ_LIMIT: i64 = 100;
/// The longest result a file tool gives, in bytes; longer ones are cut as deepagents cuts them
/// (deepagents allows 80,000 characters; this stays under the loop's 64 KiB cut of a tool result).
pub const MAX_OUTPUT_BYTES: usize = 60 * 1024;
/// `grep`'s default and largest `max_count`: it stops after this many matching lines.
pub const MAX_GREP_MATCHES: usize = 1000;
/// Longest `grep` pattern accepted, in bytes.
pub const MAX_GREP_PATTERN_BYTES: usize = 4096;

const BINARY_SNIFF_BYTES: usize = 8 * 1024;
const CACHE_MAX_BYTES: usize = 64 << 20;
/// Object requests a file tool (or a save) keeps in flight at once.
pub(crate) const LOAD_CONCURRENCY: usize = 8;
/// Characters of an `old_string` repeated in an `edit_file` error.
const SNIPPET_CHARS: usize = 200;

/// Added to a `grep` result that stopped at `max_count`.
const GREP_TRUNCATION_NOTE: &str = "Note: the search stopped early (it hit its time limit or the maximum match \
    count). The matches above are valid but incomplete. Narrow the search (a more specific pattern or a narrower \
    path), or raise max_count, to see the rest.";
/// Added to a `grep` result with no match when the pattern looks like a regular expression.
const GREP_REGEX_HINT: &str = "Note: grep matches literal text, not regex, so characters like `|`, `.*`, and \
    `\\.` are searched verbatim. Search for the literal text you need instead; for `|` alternation, run a separate \
    search per alternative.";

/// A file tool's failure. `Display` is exactly the text returned to the model.
#[derive(Debug, Error)]
pub enum VfsError {
    #[error("Error: Invalid path: {0}")]
    InvalidPath(String),
    /// A file that does not exist or is not visible (deepagents' wording).
    #[error("Error: File '{0}' not found")]
    NotFound(String),
    /// A path given to `ls`, `glob` or `grep` in a form that is refused (`..`, `//`, `%2e`).
    #[error("Error: Path not found: {0}")]
    PathNotFound(String),
    #[error("Error: Is a directory: {0} (use ls to list it)")]
    IsDirectory(String),
    #[error("Error: Not a directory: {0} is a file")]
    NotADirectory(String),
    #[error("Error: File '{path}' is a binary file ({size} bytes) and cannot be read as text")]
    Binary { path: String, size: u64 },
    #[error("Error: Path is read-only: {0} (only /workspace and /memories are writable)")]
    ReadOnly(String),
    #[error("Error: old_string cannot be empty. Provide the exact text to replace.")]
    EmptyOldString,
    #[error("Error: String not found in file: '{0}'")]
    StringNotFound(String),
    #[error(
        "Error: old_string ends with a newline, but the file does not end with a newline. Retry with the trailing \
         newline removed from old_string (and from new_string if it also ends with a newline)."
    )]
    TrailingNewline,
    #[error(
        "Error: old_string ends with a newline, but the file does not end with a newline. With the trailing \
         newline removed, old_string would appear {0} times in the file. Retry with the trailing newline removed \
         and add surrounding context so the match is unique."
    )]
    TrailingNewlineAmbiguous(usize),
    #[error(
        "Error: String '{snippet}' appears {count} times in file. Use replace_all=True to replace all instances, \
         or provide a more specific string with surrounding context."
    )]
    AmbiguousEdit { snippet: String, count: usize },
    #[error("Error: Invalid glob pattern: {0}")]
    InvalidGlob(String),
    /// A glob pattern with a `..` segment; the text is the pattern's Python repr, as deepagents shows it.
    #[error("Error: Path traversal not allowed in glob pattern {0}")]
    GlobTraversal(String),
    #[error("Error: Line offset {offset} exceeds file length ({lines} lines)")]
    OffsetOutOfRange { offset: usize, lines: usize },
    #[error("Error: Content too large: {size} bytes (a file holds at most {max} bytes)", max = MAX_FILE_BYTES)]
    ContentTooLarge { size: usize },
    #[error(
        "Error: Content too large: {size} bytes (a /memories file holds at most {max} bytes; keep each memory \
         short, one topic a file)",
        max = MAX_MEMORY_FILE_BYTES
    )]
    MemoryTooLarge { size: usize },
    #[error("Error: File is too large to read: {path} ({size} bytes, at most {max})", max = MAX_READ_BYTES)]
    FileTooLarge { path: String, size: u64 },
    /// A write that would take the workspace past a quota; the text names it.
    #[error("Error: {0}")]
    Quota(String),
    /// Bad tool arguments; the text names the argument.
    #[error("Error: {0}")]
    Arguments(String),
    /// A workspace blob that is missing or does not match its hash.
    #[error("Error: The content of {0} could not be read from storage")]
    Unavailable(String),
    /// The object store failed; the backend's message stays in the source, out of the model's sight.
    #[error("Error: File storage is temporarily unavailable; try again later")]
    Storage(#[source] StoreError),
}

impl VfsError {
    fn storage(error: StoreError) -> Self {
        tracing::warn!(error = %error, "virtual filesystem: object store failed");
        VfsError::Storage(error)
    }

    /// `ls`, `glob` and `grep` speak of paths, not files.
    fn for_listing(self) -> Self {
        match self {
            VfsError::NotFound(path) => VfsError::PathNotFound(path),
            other => other,
        }
    }
}

/// What `grep` answers, as deepagents' `output_mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GrepOutput {
    /// The paths of the files with a match, one per line (the default).
    #[default]
    FilesWithMatches,
    /// The matching lines grouped by file: `path:` then `  n: line` per match.
    Content,
    /// `path: n` per file.
    Count,
}

impl GrepOutput {
    /// The mode named by deepagents' `output_mode` value.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "files_with_matches" => Some(Self::FilesWithMatches),
            "content" => Some(Self::Content),
            "count" => Some(Self::Count),
            _ => None,
        }
    }
}

/// A file of one root: its path relative to the root and where its bytes live.
#[derive(Debug, Clone)]
struct Entry {
    rel: String,
    size: u64,
    source: Source,
}

#[derive(Debug, Clone)]
enum Source {
    /// A workspace file, by SHA-256.
    Blob(String),
    /// A listed object's key, and its ETag when the listing (or the index) gave one.
    Object { key: String, etag: String },
    /// A `/memories` file written during this turn and not saved yet: its bytes.
    Staged(Arc<Vec<u8>>),
}

/// The agent's filesystem for one turn. See the module documentation.
pub struct Vfs<'a> {
    objects: &'a dyn ObjectStore,
    user: UserId,
    session: SessionId,
    ticket: Option<TicketId>,
    workspace: BTreeMap<String, WorkspaceFile>,
    mounts: Vec<SkillPath>,
    /// Blobs written during this turn and not saved yet, by SHA-256 ([`Vfs::save_workspace`]).
    unsaved: HashMap<String, Arc<Vec<u8>>>,
    /// Bytes of `unsaved` together.
    unsaved_bytes: u64,
    /// Workspace files written since the loop last asked ([`Vfs::take_written`]).
    pending_events: Vec<(String, u64)>,
    /// Workspace paths written during this turn.
    turn_written: BTreeSet<String>,
    ticket_listing: Mutex<Option<Arc<Vec<Entry>>>>,
    skill_listings: Mutex<HashMap<SkillPath, Arc<Vec<Entry>>>>,
    /// Each listed skill's bundle, kept out of its listing.
    skill_bundles: Mutex<HashMap<SkillPath, Option<crate::skills::bundle::BundleRef>>>,
    contents: Mutex<ContentCache>,
    /// The user's `/memories`: listed on first use, the turn's changes held until saved.
    memories: memories::Memories,
    shared_files: Option<&'a FileCache>,
    /// The turn's catalog, whose index keeps each skill's files: a mounted skill is listed only
    /// when it has none there.
    catalog: Option<&'a Catalog>,
}

impl<'a> Vfs<'a> {
    /// A filesystem for one turn of `session`; `workspace` is the manifest committed by the last turn.
    pub fn new(
        objects: &'a dyn ObjectStore,
        user: UserId,
        session: SessionId,
        ticket: Option<TicketId>,
        workspace: BTreeMap<String, WorkspaceFile>,
    ) -> Self {
        Self {
            objects,
            user,
            session,
            ticket,
            workspace,
            mounts: Vec::new(),
            unsaved: HashMap::new(),
            unsaved_bytes: 0,
            pending_events: Vec::new(),
            turn_written: BTreeSet::new(),
            ticket_listing: Mutex::new(None),
            skill_listings: Mutex::new(HashMap::new()),
            skill_bundles: Mutex::new(HashMap::new()),
            contents: Mutex::new(ContentCache::default()),
            memories: memories::Memories::default(),
            shared_files: None,
            catalog: None,
        }
    }

    /// Takes mounted skills' files from `catalog`'s index instead of a listing of their folders.
    pub fn with_catalog(mut self, catalog: &'a Catalog) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// Reads workspace blobs and listed objects through `cache`, shared by the turns of the process.
    pub fn with_file_cache(mut self, cache: &'a FileCache) -> Self {
        self.shared_files = Some(cache);
        self
    }

    /// Makes a skill visible under `/skills/{name}`. Called by `load_skill` after it checked the
    /// skill exists. Mounting a skill twice is a no-op; if another mounted skill already has the
    /// same short name, that first one keeps `/skills/{name}` (see [`Vfs::skill_dir`]).
    pub fn mount_skill(&mut self, skill: SkillPath) {
        if !self.mounts.contains(&skill) {
            self.mounts.push(skill);
        }
    }

    /// Every mounted skill, in mounting order.
    pub fn loaded_skills(&self) -> &[SkillPath] {
        &self.mounts
    }

    /// Where a mounted skill is visible (`/skills/{name}`), or `None` if it is not mounted or
    /// shadowed by an earlier mounted skill with the same short name.
    pub fn skill_dir(&self, skill: &SkillPath) -> Option<String> {
        (self.skill_by_name(skill.name()) == Some(skill)).then(|| format!("/skills/{}", skill.name()))
    }

    /// The workspace manifest with this turn's writes.
    pub fn workspace(&self) -> &BTreeMap<String, WorkspaceFile> {
        &self.workspace
    }

    /// The session this filesystem belongs to.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// Workspace files (`/workspace` path, size) written since the last call.
    pub fn take_written(&mut self) -> Vec<(String, u64)> {
        std::mem::take(&mut self.pending_events)
    }

    /// The files this turn wrote that are still in the workspace, by path relative to it.
    pub fn written_files(&self) -> Vec<(String, WorkspaceFile)> {
        self.turn_written
            .iter()
            .filter_map(|rel| self.workspace.get(rel).map(|file| (rel.clone(), file.clone())))
            .collect()
    }

    /// Records a workspace write for the turn's events and reply.
    fn note_written(&mut self, rel: &str, size: u64) {
        self.pending_events.push((format!("/workspace/{rel}"), size));
        self.turn_written.insert(rel.to_owned());
    }

    /// The manifest after the turn's writes, to be committed with the session once its blobs are
    /// saved ([`Vfs::save_workspace`]).
    pub fn into_workspace(self) -> BTreeMap<String, WorkspaceFile> {
        self.workspace
    }

    // ---- internals ----

    fn skill_by_name(&self, name: &str) -> Option<&SkillPath> {
        self.mounts.iter().find(|s| s.name() == name)
    }

    /// Mounted skills that own their short name, sorted by it.
    fn visible_skills(&self) -> Vec<&SkillPath> {
        let mut seen = HashSet::new();
        let mut skills: Vec<&SkillPath> = self.mounts.iter().filter(|s| seen.insert(s.name())).collect();
        skills.sort_by(|a, b| a.name().cmp(b.name()));
        skills
    }
}
