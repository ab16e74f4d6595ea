//! The agent's virtual filesystem: what the seven file tools (`ls`, `read_file`, `write_file`, `delete`,
//! `edit_file`, `glob`, `grep`) see. Pure logic; every byte goes through an [`ObjectStore`].
//!
//! # Roots
//!
//! - `/workspace` — read-write, private to (user, session). Content-addressed: a written file's
//!   bytes go to [`keys::workspace_blob_key`] under their SHA-256 and the in-memory manifest
//!   (path relative to `/workspace` → [`WorkspaceFile`]) is committed with the session by the
//!   caller ([`Vfs::into_workspace`]). Directories are implied by file paths.
//! - `/ticket` — read-only, only when the turn has a ticket: the objects under
//!   [`keys::ticket_prefix`], listed once per turn.
//! - `/skills` — read-only, absent until a skill is mounted ([`Vfs::mount_skill`]); a mounted
//!   skill `category/name` appears as `/skills/{name}` and maps to [`keys::skill_prefix`].
//!
//! # Decisions
//!
//! - The tools behave as LangChain deepagents 0.7's file tools over their default state backend
//!   (arguments, defaults, result formats, messages), so skills written for deepagents work here;
//!   the README lists the differences kept on purpose, and `tests/deepagents_parity.rs` runs the
//!   same calls through both.
//! - Paths must be absolute; a relative path is an "Invalid path" error that says so (no
//!   guessing). See [`path::parse`] for the rejected forms (`..`, `//`, `%2e`, backslashes,
//!   control chars): those are errors in every tool, while a well-formed path that names nothing
//!   is an empty result for `ls`, `glob` and `grep`, as in deepagents.
//! - `write_file` creates or replaces a whole file, as in deepagents 0.7.
//! - Two mounted skills with the same short name (different categories): the first mounted owns
//!   `/skills/{name}`; the later one is still recorded in [`Vfs::loaded_skills`] but not visible.
//! - Object keys are never built from a model path: a skill or ticket file is found by looking
//!   its validated relative path up in the listing of the root's prefix, and only listed keys
//!   are fetched. Listed keys that are not clean relative paths are invisible.
//! - Errors are returned as [`VfsError`], whose `Display` is exactly what the model sees; it never
//!   contains an object key, a bucket, a user id or a storage backend's message.
//! - Every result is at most [`MAX_OUTPUT_BYTES`], under the loop's cut of a tool result, so what
//!   a result says about itself (a read's next offset) is never cut away.

mod glob;
mod path;
mod render;
mod tools;

#[cfg(test)]
mod tests;

pub use glob::{MAX_GLOB_EXPANSIONS, MAX_GLOB_NESTING, MAX_GLOB_PATTERN_BYTES};
pub use render::EMPTY_FILE_NOTE;
pub use tools::{file_tool_specs, run_file_tool, FILE_TOOL_NAMES};

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::stream::{self, StreamExt};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::ids::{SessionId, SkillPath, TicketId, UserId};
use crate::keys;
use crate::store::{ObjectMeta, ObjectStore, StoreError, WorkspaceFile};
use glob::Glob;

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
const LOAD_CONCURRENCY: usize = 8;
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
    #[error("Error: File is a binary file and cannot be read as text")]
    Binary,
    #[error("Error: Path is read-only: {0} (only /workspace is writable)")]
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

/// The agent's filesystem for one turn. See the module documentation.
pub struct Vfs<'a> {
    objects: &'a dyn ObjectStore,
    user: UserId,
    session: SessionId,
    ticket: Option<TicketId>,
    workspace: BTreeMap<String, WorkspaceFile>,
    mounts: Vec<SkillPath>,
    /// Hashes of the blobs put during this turn.
    written: HashSet<String>,
    ticket_listing: Mutex<Option<Arc<Vec<Entry>>>>,
    skill_listings: Mutex<HashMap<SkillPath, Arc<Vec<Entry>>>>,
    contents: Mutex<ContentCache>,
    shared_blobs: Option<&'a BlobCache>,
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
    /// A listed object's key.
    Object(String),
}

/// Workspace blobs kept across the turns of a warm process. Blobs are content-addressed and never
/// change, so a cached one is always right; keys include the tenant and the session.
pub struct BlobCache {
    blobs: quick_cache::sync::Cache<String, Arc<Vec<u8>>, BlobWeight>,
}

#[derive(Clone)]
struct BlobWeight;

impl quick_cache::Weighter<String, Arc<Vec<u8>>> for BlobWeight {
    fn weight(&self, key: &String, bytes: &Arc<Vec<u8>>) -> u64 {
        (key.len() + bytes.len()) as u64 + 64
    }
}

impl BlobCache {
    /// A cache of at most `max_bytes` of blobs.
    pub fn new(max_bytes: u64) -> Self {
        Self { blobs: quick_cache::sync::Cache::with_weighter(256, max_bytes, BlobWeight) }
    }

    fn get(&self, key: &str) -> Option<Arc<Vec<u8>>> {
        self.blobs.get(key)
    }

    fn insert(&self, key: String, bytes: Arc<Vec<u8>>) {
        self.blobs.insert(key, bytes);
    }
}

impl Default for BlobCache {
    /// 8 MiB: a few sessions' worth of files, well inside a 128 MB function.
    fn default() -> Self {
        Self::new(8 << 20)
    }
}

/// Bytes fetched or written during the turn, by object key, up to [`CACHE_MAX_BYTES`].
#[derive(Default)]
struct ContentCache {
    bytes: usize,
    map: HashMap<String, Arc<Vec<u8>>>,
}

#[derive(Debug, Clone, Copy)]
enum RootRef<'v> {
    Workspace,
    Ticket(&'v TicketId),
    Skill(&'v SkillPath),
}

impl RootRef<'_> {
    fn vpath(self) -> String {
        match self {
            RootRef::Workspace => "/workspace".to_owned(),
            RootRef::Ticket(_) => "/ticket".to_owned(),
            RootRef::Skill(skill) => format!("/skills/{}", skill.name()),
        }
    }

    fn join(self, rel: &str) -> String {
        if rel.is_empty() {
            self.vpath()
        } else {
            format!("{}/{rel}", self.vpath())
        }
    }
}

/// What a valid path names.
enum Node<'v> {
    /// `/`
    Root,
    /// `/skills` (only when a skill is mounted)
    SkillsDir,
    /// A path inside a root; `rel` is empty for the root itself.
    In { root: RootRef<'v>, rel: String },
}

enum Stat {
    File(Entry),
    Dir,
    Missing,
}

fn stat(entries: &[Entry], rel: &str) -> Stat {
    if rel.is_empty() {
        return Stat::Dir;
    }
    if let Some(entry) = entries.iter().find(|e| e.rel == rel) {
        return Stat::File(entry.clone());
    }
    let prefix = format!("{rel}/");
    if entries.iter().any(|e| e.rel.starts_with(&prefix)) {
        Stat::Dir
    } else {
        Stat::Missing
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The text of a file, or `None` for a binary one (a NUL in the first 8 KiB, or invalid UTF-8).
fn as_text(bytes: &[u8]) -> Option<&str> {
    if bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

fn truncate_chars(line: &str, max: usize, marker: &str) -> String {
    match line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}{marker}", &line[..cut]),
        None => line.to_owned(),
    }
}

/// `vpath` relative to `base` (a directory containing it, or the file itself: then its name).
fn relative_to<'p>(base: &str, vpath: &'p str) -> &'p str {
    if base == "/" {
        return vpath.trim_start_matches('/');
    }
    match vpath.strip_prefix(base).and_then(|rest| rest.strip_prefix('/')) {
        Some(rel) => rel,
        None => vpath.rsplit('/').next().unwrap_or(vpath),
    }
}

/// Whether a `grep` pattern looks like a regular expression (deepagents' conservative signals:
/// `|`, `.*`, `.+`, or a backslash before a regex metacharacter or class letter).
fn looks_like_regex(pattern: &str) -> bool {
    pattern.contains('|')
        || pattern.contains(".*")
        || pattern.contains(".+")
        || pattern.as_bytes().windows(2).any(|w| w[0] == b'\\' && b".wWdDsSbB(){}[]|+*?^$".contains(&w[1]))
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
            written: HashSet::new(),
            ticket_listing: Mutex::new(None),
            skill_listings: Mutex::new(HashMap::new()),
            contents: Mutex::new(ContentCache::default()),
            shared_blobs: None,
        }
    }

    /// Reads workspace blobs through `cache`, shared by the turns of the process.
    pub fn with_blob_cache(mut self, cache: &'a BlobCache) -> Self {
        self.shared_blobs = Some(cache);
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

    /// The manifest after the turn's writes, to be committed with the session.
    pub fn into_workspace(self) -> BTreeMap<String, WorkspaceFile> {
        self.workspace
    }

    /// Lists a directory as deepagents does: the Python list of its entries' absolute paths, sorted,
    /// directories with a trailing `/`; "No files found" for an empty or missing directory. A file's
    /// path lists the file itself.
    pub async fn ls(&self, path: &str) -> Result<String, VfsError> {
        let (node, shown) = self.resolve(path).map_err(VfsError::for_listing)?;
        let mut paths: Vec<String> = match node {
            None => Vec::new(),
            Some(Node::Root) => {
                let mut roots = vec!["/workspace/".to_owned()];
                if self.ticket.is_some() {
                    roots.push("/ticket/".to_owned());
                }
                if !self.mounts.is_empty() {
                    roots.push("/skills/".to_owned());
                }
                roots
            }
            Some(Node::SkillsDir) => self.visible_skills().iter().map(|s| format!("/skills/{}/", s.name())).collect(),
            Some(Node::In { root, rel }) => {
                let entries = self.entries(root).await?;
                match stat(&entries, &rel) {
                    Stat::Missing => Vec::new(),
                    Stat::File(_) => vec![shown],
                    Stat::Dir => {
                        let prefix = if rel.is_empty() { String::new() } else { format!("{rel}/") };
                        let mut dirs = BTreeSet::new();
                        let mut paths = Vec::new();
                        for entry in entries.iter() {
                            let Some(rest) = entry.rel.strip_prefix(&prefix) else { continue };
                            match rest.split_once('/') {
                                Some((dir, _)) => {
                                    dirs.insert(dir);
                                }
                                None => paths.push(format!("{shown}/{rest}")),
                            }
                        }
                        paths.extend(dirs.into_iter().map(|dir| format!("{shown}/{dir}/")));
                        paths
                    }
                }
            }
        };
        paths.sort();
        Ok(render::path_list(&paths, MAX_OUTPUT_BYTES))
    }

    /// Reads a text file from line `offset` (0-based), at most `limit` lines; see
    /// [`Vfs::read_window`].
    pub async fn read_file(&self, path: &str, offset: usize, limit: usize) -> Result<String, VfsError> {
        let signed = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.read_window(path, signed(offset), signed(limit)).await
    }

    /// Reads a text file as deepagents does: a status header (`@@ lines A-B of T | next offset N @@`)
    /// above the lines `[offset, offset + limit)`, verbatim. A negative offset reads from the start
    /// (with a notice), a limit below 1 reads nothing (with a reminder), an empty file answers
    /// [`EMPTY_FILE_NOTE`]; the result is cut to [`MAX_OUTPUT_BYTES`] at a whole line.
    pub async fn read_window(&self, path: &str, offset: i64, limit: i64) -> Result<String, VfsError> {
        let (node, shown) = self.resolve(path)?;
        let Some(node) = node else { return Err(VfsError::NotFound(shown)) };
        let Node::In { root, rel } = node else { return Err(VfsError::IsDirectory(shown)) };
        let entries = self.entries(root).await?;
        let entry = match stat(&entries, &rel) {
            Stat::File(entry) => entry,
            Stat::Dir => return Err(VfsError::IsDirectory(shown)),
            Stat::Missing => return Err(VfsError::NotFound(shown)),
        };
        let bytes = self.load(&shown, &entry).await?;
        let text = as_text(&bytes).ok_or(VfsError::Binary)?;
        render::read_window(text, offset, limit, MAX_OUTPUT_BYTES)
    }

    /// Writes a whole file under `/workspace` (parents are implied), creating it or replacing it.
    pub async fn write_file(&mut self, path: &str, content: &str) -> Result<String, VfsError> {
        let (rel, shown) = self.writable(path)?;
        if content.len() > MAX_FILE_BYTES {
            return Err(VfsError::ContentTooLarge { size: content.len() });
        }
        let prefix = format!("{rel}/");
        if self.workspace.keys().any(|p| p.starts_with(&prefix)) {
            return Err(VfsError::IsDirectory(shown));
        }
        let segments: Vec<&str> = rel.split('/').collect();
        for depth in 1..segments.len() {
            let ancestor = segments[..depth].join("/");
            if self.workspace.contains_key(&ancestor) {
                return Err(VfsError::NotADirectory(format!("/workspace/{ancestor}")));
            }
        }
        let replaced = self.workspace.get(&rel).map(|file| file.size);
        if replaced.is_none() {
            if rel.len() > MAX_WORKSPACE_PATH_BYTES {
                return Err(VfsError::InvalidPath(format!(
                    "{shown} (a /workspace path is at most {MAX_WORKSPACE_PATH_BYTES} bytes after /workspace/)"
                )));
            }
            if self.workspace.len() >= MAX_WORKSPACE_FILES {
                return Err(VfsError::Quota(format!(
                    "/workspace already holds {MAX_WORKSPACE_FILES} files, its limit; delete files you no longer \
                     need with delete, or write over an existing one"
                )));
            }
        }
        self.check_bytes_quota(replaced.unwrap_or(0), content.len())?;
        let file = self.store_blob(content.as_bytes()).await?;
        self.workspace.insert(rel, file);
        Ok(format!("Updated file {shown}"))
    }

    /// Replaces `old` with `new` in a `/workspace` file: exactly one occurrence, or all of them
    /// with `replace_all`; the errors are deepagents' (with `old` cut to [`SNIPPET_CHARS`]).
    pub async fn edit_file(&mut self, path: &str, old: &str, new: &str, replace_all: bool) -> Result<String, VfsError> {
        let (rel, shown) = self.writable(path)?;
        let Some(file) = self.workspace.get(&rel).cloned() else {
            let prefix = format!("{rel}/");
            return Err(if self.workspace.keys().any(|p| p.starts_with(&prefix)) {
                VfsError::IsDirectory(shown)
            } else {
                VfsError::NotFound(shown)
            });
        };
        if old.is_empty() {
            return Err(VfsError::EmptyOldString);
        }
        let entry = Entry { rel: rel.clone(), size: file.size, source: Source::Blob(file.sha256) };
        let bytes = self.load(&shown, &entry).await?;
        let text = as_text(&bytes).ok_or(VfsError::Binary)?;
        let count = text.matches(old).count();
        if count == 0 {
            // A model often adds a final newline the file does not have; say so precisely.
            if let Some(stripped) = old.strip_suffix('\n').filter(|s| !s.is_empty() && text.ends_with(*s)) {
                return Err(match text.matches(stripped).count() {
                    1 => VfsError::TrailingNewline,
                    n => VfsError::TrailingNewlineAmbiguous(n),
                });
            }
            return Err(VfsError::StringNotFound(truncate_chars(old, SNIPPET_CHARS, "...")));
        }
        if count > 1 && !replace_all {
            return Err(VfsError::AmbiguousEdit { snippet: truncate_chars(old, SNIPPET_CHARS, "..."), count });
        }
        let updated = text.replace(old, new);
        if updated.len() > MAX_FILE_BYTES {
            return Err(VfsError::ContentTooLarge { size: updated.len() });
        }
        self.check_bytes_quota(file.size, updated.len())?;
        let file = self.store_blob(updated.as_bytes()).await?;
        self.workspace.insert(rel, file);
        Ok(format!("Successfully replaced {count} instance(s) of the string in '{shown}'"))
    }

    /// Removes a `/workspace` file, or a directory with everything under it, from the manifest, as
    /// deepagents' `delete` does (the content-addressed blobs stay, unreferenced). The root itself
    /// cannot be deleted.
    pub fn delete(&mut self, path: &str) -> Result<String, VfsError> {
        let (rel, shown) = self.writable(path)?;
        let prefix = format!("{rel}/");
        let before = self.workspace.len();
        self.workspace.retain(|file, _| *file != rel && !file.starts_with(&prefix));
        if self.workspace.len() == before {
            return Err(VfsError::NotFound(shown));
        }
        Ok(format!("Deleted {shown}"))
    }

    /// Whether replacing `old` bytes by `new` keeps the workspace within [`MAX_WORKSPACE_BYTES`].
    fn check_bytes_quota(&self, old: u64, new: usize) -> Result<(), VfsError> {
        let total: u64 = self.workspace.values().map(|file| file.size).sum();
        let after = total.saturating_sub(old).saturating_add(new as u64);
        if after > MAX_WORKSPACE_BYTES {
            return Err(VfsError::Quota(format!(
                "/workspace would hold {after} bytes, over its limit of {} MiB; delete files you no longer need \
                 with delete",
                MAX_WORKSPACE_BYTES / (1024 * 1024)
            )));
        }
        Ok(())
    }

    /// Files under `path` (default `/`, every root) matching a glob pattern (see the `glob` module
    /// for its rules), as the Python list of their absolute paths, sorted by path.
    pub async fn glob(&self, pattern: &str, path: Option<&str>) -> Result<String, VfsError> {
        let (node, base) = self.resolve(path.unwrap_or("/")).map_err(VfsError::for_listing)?;
        let glob = Glob::new(pattern)?;
        let files = match node {
            Some(node) => self.files_under(&node).await?,
            None => Vec::new(),
        };
        let hits: Vec<String> =
            files.into_iter().map(|(vpath, _)| vpath).filter(|vpath| glob.matches(relative_to(&base, vpath))).collect();
        Ok(render::path_list(&hits, MAX_OUTPUT_BYTES))
    }

    /// `grep` with deepagents' defaults: the files under `path` (default `/`) holding `pattern`.
    pub async fn grep(&self, pattern: &str, path: Option<&str>, glob: Option<&str>) -> Result<String, VfsError> {
        self.grep_with(pattern, path, glob, GrepOutput::default(), None).await
    }

    /// Lines holding `pattern` (a literal string, not a regex) in the text files under `path`
    /// (default `/`, every root), optionally only in files matching `glob`; at most `max_count`
    /// (default and at most [`MAX_GREP_MATCHES`]) matching lines, answered as `output` asks.
    /// Binary files are skipped.
    pub async fn grep_with(
        &self,
        pattern: &str,
        path: Option<&str>,
        glob: Option<&str>,
        output: GrepOutput,
        max_count: Option<usize>,
    ) -> Result<String, VfsError> {
        if pattern.len() > MAX_GREP_PATTERN_BYTES {
            return Err(VfsError::Arguments(format!(
                "argument 'pattern' of grep is longer than {MAX_GREP_PATTERN_BYTES} bytes"
            )));
        }
        let max = match max_count {
            Some(0) => return Err(VfsError::Arguments("argument 'max_count' of grep must be greater than 0".into())),
            Some(n) => n.min(MAX_GREP_MATCHES),
            None => MAX_GREP_MATCHES,
        };
        let (node, base) = self.resolve(path.unwrap_or("/")).map_err(VfsError::for_listing)?;
        // deepagents ignores an empty filter.
        let filter = glob.filter(|g| !g.is_empty()).map(Glob::new).transpose()?;
        let files: Vec<(String, Entry)> = match node {
            Some(node) => self.files_under(&node).await?,
            None => Vec::new(),
        }
        .into_iter()
        .filter(|(vpath, entry)| {
            entry.size <= MAX_READ_BYTES && filter.as_ref().is_none_or(|f| f.matches(relative_to(&base, vpath)))
        })
        .collect();

        // Owned items: a closure over borrowed ones trips rustc's higher-ranked `Send` check
        // when the caller's future must be `Send`.
        let mut loads = stream::iter(files)
            .map(|(vpath, entry)| async move {
                let loaded = self.load(&vpath, &entry).await;
                (vpath, loaded)
            })
            .buffered(LOAD_CONCURRENCY);
        let mut hits: Vec<(String, Vec<(usize, String)>)> = Vec::new();
        let (mut found, mut kept_bytes, mut truncated) = (0usize, 0usize, false);
        'files: while let Some((vpath, loaded)) = loads.next().await {
            let bytes = match loaded {
                Ok(bytes) => bytes,
                Err(error @ VfsError::Storage(_)) => return Err(error),
                Err(_) => continue,
            };
            let Some(text) = as_text(&bytes) else { continue };
            let mut lines = Vec::new();
            // deepagents numbers lines split on `\n` only.
            for (index, line) in text.split('\n').enumerate() {
                if !line.contains(pattern) {
                    continue;
                }
                if found == max {
                    truncated = true;
                    if !lines.is_empty() {
                        hits.push((vpath, lines));
                    }
                    break 'files;
                }
                found += 1;
                // Lines past the output bound are never shown: keep their number, not their text.
                let kept = render::prefix_within(line, (MAX_OUTPUT_BYTES + 1).saturating_sub(kept_bytes));
                kept_bytes += kept.len();
                lines.push((index + 1, kept.to_owned()));
            }
            if !lines.is_empty() {
                hits.push((vpath, lines));
            }
        }
        let mut out = if hits.is_empty() {
            "No matches found".to_owned()
        } else {
            let mut out = String::new();
            for (vpath, lines) in &hits {
                if !out.is_empty() {
                    out.push('\n');
                }
                match output {
                    GrepOutput::FilesWithMatches => out.push_str(vpath),
                    GrepOutput::Count => {
                        let _ = write!(out, "{vpath}: {}", lines.len());
                    }
                    GrepOutput::Content => {
                        let _ = write!(out, "{vpath}:");
                        for (number, line) in lines {
                            let _ = write!(out, "\n  {number}: {line}");
                        }
                    }
                }
            }
            render::truncate_text(out, MAX_OUTPUT_BYTES)
        };
        if truncated {
            let _ = write!(out, "\n\n{GREP_TRUNCATION_NOTE}");
        } else if hits.is_empty() && looks_like_regex(pattern) {
            let _ = write!(out, "\n\n{GREP_REGEX_HINT}");
        }
        Ok(out)
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

    /// Validates a model path and says what it names: `None` for a well-formed path that names
    /// nothing visible (an unknown root, an absent ticket, a skill that is not mounted).
    fn resolve(&self, raw: &str) -> Result<(Option<Node<'_>>, String), VfsError> {
        let segments = path::parse(raw)?;
        let shown = path::display(&segments);
        let Some((root, rest)) = segments.split_first() else { return Ok((Some(Node::Root), shown)) };
        let node = match (root.as_str(), &self.ticket) {
            ("workspace", _) => Some(Node::In { root: RootRef::Workspace, rel: rest.join("/") }),
            ("ticket", Some(ticket)) => Some(Node::In { root: RootRef::Ticket(ticket), rel: rest.join("/") }),
            ("skills", _) => match rest.split_first() {
                None => (!self.mounts.is_empty()).then_some(Node::SkillsDir),
                Some((name, rest)) => {
                    self.skill_by_name(name).map(|skill| Node::In { root: RootRef::Skill(skill), rel: rest.join("/") })
                }
            },
            _ => None,
        };
        Ok((node, shown))
    }

    /// A validated path inside `/workspace` naming a possible file; anything else is read-only.
    fn writable(&self, raw: &str) -> Result<(String, String), VfsError> {
        let segments = path::parse(raw)?;
        let shown = path::display(&segments);
        match segments.split_first() {
            Some((root, [])) if root == "workspace" => Err(VfsError::IsDirectory(shown)),
            Some((root, rest)) if root == "workspace" => Ok((rest.join("/"), shown)),
            _ => Err(VfsError::ReadOnly(shown)),
        }
    }

    /// The files of a root, sorted by relative path; object listings are cached for the turn.
    async fn entries(&self, root: RootRef<'_>) -> Result<Arc<Vec<Entry>>, VfsError> {
        match root {
            RootRef::Workspace => Ok(Arc::new(
                self.workspace
                    .iter()
                    .map(|(rel, file)| Entry {
                        rel: rel.clone(),
                        size: file.size,
                        source: Source::Blob(file.sha256.clone()),
                    })
                    .collect(),
            )),
            RootRef::Ticket(ticket) => {
                let cached = lock(&self.ticket_listing).clone();
                if let Some(listing) = cached {
                    return Ok(listing);
                }
                let listing = self.list_objects(&keys::ticket_prefix(&self.user, ticket)).await?;
                *lock(&self.ticket_listing) = Some(listing.clone());
                Ok(listing)
            }
            RootRef::Skill(skill) => {
                let cached = lock(&self.skill_listings).get(skill).cloned();
                if let Some(listing) = cached {
                    return Ok(listing);
                }
                let listing = self.list_objects(&keys::skill_prefix(&self.user, skill)).await?;
                lock(&self.skill_listings).insert(skill.clone(), listing.clone());
                Ok(listing)
            }
        }
    }

    async fn list_objects(&self, prefix: &str) -> Result<Arc<Vec<Entry>>, VfsError> {
        let listed = self.objects.list(prefix).await.map_err(VfsError::storage)?;
        Ok(entries_from(prefix, &listed))
    }

    /// Every visible file under a node, as (virtual path, entry), sorted by path; none when the
    /// node is a path that does not exist.
    async fn files_under(&self, node: &Node<'_>) -> Result<Vec<(String, Entry)>, VfsError> {
        let roots: Vec<(RootRef<'_>, &str)> = match node {
            Node::Root => {
                let mut roots = vec![(RootRef::Workspace, "")];
                if let Some(ticket) = &self.ticket {
                    roots.push((RootRef::Ticket(ticket), ""));
                }
                roots.extend(self.visible_skills().into_iter().map(|s| (RootRef::Skill(s), "")));
                roots
            }
            Node::SkillsDir => self.visible_skills().into_iter().map(|s| (RootRef::Skill(s), "")).collect(),
            Node::In { root, rel } => vec![(*root, rel.as_str())],
        };
        let mut files = Vec::new();
        for (root, rel) in roots {
            let entries = self.entries(root).await?;
            let prefix = format!("{rel}/");
            files.extend(
                entries
                    .iter()
                    .filter(|e| rel.is_empty() || e.rel == rel || e.rel.starts_with(&prefix))
                    .map(|e| (root.join(&e.rel), e.clone())),
            );
        }
        files.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(files)
    }

    /// A file's bytes, from the turn's cache or the object store.
    async fn load(&self, shown: &str, entry: &Entry) -> Result<Arc<Vec<u8>>, VfsError> {
        if entry.size > MAX_READ_BYTES {
            return Err(VfsError::FileTooLarge { path: shown.to_owned(), size: entry.size });
        }
        let key = match &entry.source {
            Source::Blob(sha) => keys::workspace_blob_key(&self.user, &self.session, sha),
            Source::Object(key) => key.clone(),
        };
        let cached = lock(&self.contents).map.get(&key).cloned();
        if let Some(bytes) = cached {
            return Ok(bytes);
        }
        let shared = match (&entry.source, self.shared_blobs) {
            (Source::Blob(_), Some(blobs)) => blobs.get(&key),
            _ => None,
        };
        if let Some(bytes) = shared {
            self.remember(key, bytes.clone());
            return Ok(bytes);
        }
        let object = self.objects.get(&key).await.map_err(VfsError::storage)?;
        let bytes = match (object, &entry.source) {
            (Some(object), Source::Blob(sha)) if sha256_hex(&object.bytes) == *sha => object.bytes,
            (_, Source::Blob(_)) => {
                tracing::warn!(path = shown, "virtual filesystem: workspace blob missing or corrupt");
                return Err(VfsError::Unavailable(shown.to_owned()));
            }
            (Some(object), Source::Object(_)) => object.bytes,
            (None, Source::Object(_)) => return Err(VfsError::NotFound(shown.to_owned())),
        };
        if bytes.len() as u64 > MAX_READ_BYTES {
            return Err(VfsError::FileTooLarge { path: shown.to_owned(), size: bytes.len() as u64 });
        }
        let bytes = Arc::new(bytes);
        if let (Source::Blob(_), Some(blobs)) = (&entry.source, self.shared_blobs) {
            blobs.insert(key.clone(), bytes.clone());
        }
        self.remember(key, bytes.clone());
        Ok(bytes)
    }

    fn remember(&self, key: String, bytes: Arc<Vec<u8>>) {
        let mut cache = lock(&self.contents);
        if cache.bytes + bytes.len() <= CACHE_MAX_BYTES && !cache.map.contains_key(&key) {
            cache.bytes += bytes.len();
            cache.map.insert(key, bytes);
        }
    }

    /// Puts a workspace blob unless a file of the manifest or of this turn already has its hash.
    async fn store_blob(&mut self, bytes: &[u8]) -> Result<WorkspaceFile, VfsError> {
        let sha = sha256_hex(bytes);
        let known = self.written.contains(&sha) || self.workspace.values().any(|f| f.sha256 == sha);
        if !known {
            let key = keys::workspace_blob_key(&self.user, &self.session, &sha);
            self.objects.put(&key, bytes.to_vec()).await.map_err(VfsError::storage)?;
            self.written.insert(sha.clone());
            let bytes = Arc::new(bytes.to_vec());
            if let Some(blobs) = self.shared_blobs {
                blobs.insert(key.clone(), bytes.clone());
            }
            self.remember(key, bytes);
        }
        Ok(WorkspaceFile { sha256: sha, size: bytes.len() as u64 })
    }
}

/// The files of one root from a listing of objects: keys under `prefix` that are clean relative
/// paths, sorted. Keys outside the prefix are ignored, so a wider listing can be passed.
fn entries_from(prefix: &str, listed: &[ObjectMeta]) -> Arc<Vec<Entry>> {
    let mut entries: Vec<Entry> = listed
        .iter()
        .filter_map(|meta| {
            let rel = meta.key.strip_prefix(prefix)?;
            path::is_clean_relative(rel).then(|| Entry {
                rel: rel.to_owned(),
                size: meta.size,
                source: Source::Object(meta.key.clone()),
            })
        })
        .collect();
    entries.sort_by(|a, b| a.rel.cmp(&b.rel));
    Arc::new(entries)
}
