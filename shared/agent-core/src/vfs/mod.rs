//! The agent's virtual filesystem: what the seven file tools (`ls`, `read_file`, `write_file`, `delete_file`,
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
//! - Paths must be absolute; a relative path is an "Invalid path" error that says so (no
//!   guessing, since `workspace/a.md` would otherwise silently become `/workspace/workspace/a.md`).
//!   See [`path::parse`] for the rejected forms (`..`, `//`, `%2e`, backslashes, control chars).
//! - `write_file` creates files only, as in deepagents: writing over an existing file is an
//!   "already exists" error pointing at `edit_file`.
//! - Two mounted skills with the same short name (different categories): the first mounted owns
//!   `/skills/{name}`; the later one is still recorded in [`Vfs::loaded_skills`] but not visible.
//! - Object keys are never built from a model path: a skill or ticket file is found by looking
//!   its validated relative path up in the listing of the root's prefix, and only listed keys
//!   are fetched. Listed keys that are not clean relative paths are invisible.
//! - Errors are returned as [`VfsError`], whose `Display` is exactly what the model sees; it never
//!   contains an object key, a bucket, a user id or a storage backend's message.

mod path;
mod tools;

#[cfg(test)]
mod tests;

pub use tools::{file_tool_specs, run_file_tool, FILE_TOOL_NAMES};

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::stream::{self, StreamExt};
use globset::{GlobBuilder, GlobMatcher};
use regex::RegexBuilder;
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::ids::{SessionId, SkillPath, TicketId, UserId};
use crate::keys;
use crate::store::{ObjectMeta, ObjectStore, StoreError, WorkspaceFile};

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
/// `read_file`'s default number of lines.
pub const DEFAULT_READ_LIMIT: usize = 2000;
/// Lines longer than this many characters are cut in `read_file`.
pub const MAX_LINE_CHARS: usize = 2000;
/// `grep` stops after this many matching lines.
pub const MAX_GREP_MATCHES: usize = 200;
/// `glob` stops after this many paths.
pub const MAX_GLOB_RESULTS: usize = 500;
/// Longest glob pattern (`glob`'s `pattern`, `grep`'s `glob`) accepted, in bytes.
pub const MAX_GLOB_PATTERN_BYTES: usize = 1024;
/// Deepest nesting of `{a,b}` alternatives in a glob pattern.
pub const MAX_GLOB_NESTING: usize = 8;
/// Longest `grep` regex accepted, in bytes.
pub const MAX_REGEX_PATTERN_BYTES: usize = 4096;

/// What `read_file` answers for a file with no content.
pub const EMPTY_FILE_NOTE: &str = "System reminder: File exists but has empty contents";

const GREP_LINE_CHARS: usize = 500;
const BINARY_SNIFF_BYTES: usize = 8 * 1024;
const CACHE_MAX_BYTES: usize = 64 << 20;
const LOAD_CONCURRENCY: usize = 8;
const REGEX_SIZE_LIMIT: usize = 1 << 20;
const SNIPPET_CHARS: usize = 200;

/// A file tool's failure. `Display` is exactly the text returned to the model.
#[derive(Debug, Error)]
pub enum VfsError {
    #[error("Error: Invalid path: {0}")]
    InvalidPath(String),
    /// A file (or a path given to `read_file`/`edit_file`) that does not exist or is not visible.
    #[error("Error: File not found: {0}")]
    NotFound(String),
    /// A path given to `ls`, `glob` or `grep` that does not exist or is not visible.
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
    #[error("Error: File already exists: {0}. Read it and change it with edit_file, or write to a new path")]
    AlreadyExists(String),
    #[error("Error: String not found in file {path}: {snippet:?}")]
    StringNotFound { path: String, snippet: String },
    #[error(
        "Error: String appears {count} times in {path}. Use replace_all=true to replace every occurrence, \
         or give a longer old_string that occurs only once"
    )]
    AmbiguousEdit { path: String, count: usize },
    #[error("Error: Invalid regex pattern: {0}")]
    InvalidRegex(String),
    #[error("Error: Invalid glob pattern: {0}")]
    InvalidGlob(String),
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

/// `cat -n`: right-aligned 1-based line numbers of width 6, a tab, the line.
fn number_lines(text: &str, offset: usize, limit: usize) -> Result<String, VfsError> {
    if text.is_empty() {
        return Ok(EMPTY_FILE_NOTE.to_owned());
    }
    let lines: Vec<&str> = text.lines().collect();
    if offset >= lines.len() {
        return Err(VfsError::OffsetOutOfRange { offset, lines: lines.len() });
    }
    let end = offset.saturating_add(limit).min(lines.len());
    let mut out = String::new();
    for (i, line) in lines[offset..end].iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let line = truncate_chars(line, MAX_LINE_CHARS, " [... line truncated]");
        let _ = write!(out, "{:>6}\t{line}", offset + i + 1);
    }
    if end < lines.len() {
        let _ = write!(out, "\n\n[{} more lines not shown; continue with offset={end}]", lines.len() - end);
    }
    Ok(out)
}

/// A glob pattern, matched against paths relative to the search base or, when it starts
/// with `/`, against absolute virtual paths.
struct Pattern {
    matcher: GlobMatcher,
    absolute: bool,
    has_separator: bool,
}

impl Pattern {
    fn new(pattern: &str) -> Result<Self, VfsError> {
        let pattern = pattern.trim();
        if pattern.is_empty() {
            return Err(VfsError::InvalidGlob("the pattern is empty".into()));
        }
        if pattern.len() > MAX_GLOB_PATTERN_BYTES {
            return Err(VfsError::InvalidGlob(format!("the pattern is longer than {MAX_GLOB_PATTERN_BYTES} bytes")));
        }
        let mut depth = 0usize;
        let mut deepest = 0usize;
        for byte in pattern.bytes() {
            match byte {
                b'{' => depth += 1,
                b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
            deepest = deepest.max(depth);
        }
        if deepest > MAX_GLOB_NESTING {
            return Err(VfsError::InvalidGlob(format!("alternatives nest deeper than {MAX_GLOB_NESTING} levels")));
        }
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| VfsError::InvalidGlob(e.to_string()))?;
        // globset compiles its regex without a size limit and panics when the regex crate refuses
        // it; the length bound keeps ordinary patterns far from that, and this catches the rest.
        let matcher = std::panic::catch_unwind(|| glob.compile_matcher())
            .map_err(|_| VfsError::InvalidGlob("the pattern is too complex".into()))?;
        Ok(Self { matcher, absolute: pattern.starts_with('/'), has_separator: pattern.contains('/') })
    }

    fn matches_path(&self, base: &str, vpath: &str) -> bool {
        if self.absolute {
            self.matcher.is_match(vpath)
        } else {
            self.matcher.is_match(relative_to(base, vpath))
        }
    }

    /// grep's file filter: a pattern without `/` looks at the file name only, like `rg --glob`.
    fn matches_file(&self, base: &str, vpath: &str) -> bool {
        if self.has_separator {
            self.matches_path(base, vpath)
        } else {
            self.matcher.is_match(vpath.rsplit('/').next().unwrap_or(vpath))
        }
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

    /// Lists a directory: one path per line, sorted, directories with a trailing `/`, files with
    /// their size. A file path lists the file itself.
    pub async fn ls(&self, path: &str) -> Result<String, VfsError> {
        let (node, shown) = self.resolve(path).map_err(VfsError::for_listing)?;
        let mut lines: Vec<String> = match node {
            Node::Root => {
                let mut roots = vec!["/workspace/".to_owned()];
                if self.ticket.is_some() {
                    roots.push("/ticket/".to_owned());
                }
                if !self.mounts.is_empty() {
                    roots.push("/skills/".to_owned());
                }
                roots
            }
            Node::SkillsDir => self.visible_skills().iter().map(|s| format!("/skills/{}/", s.name())).collect(),
            Node::In { root, rel } => {
                let entries = self.entries(root).await?;
                match stat(&entries, &rel) {
                    Stat::Missing => return Err(VfsError::PathNotFound(shown)),
                    Stat::File(entry) => vec![format!("{shown} ({} bytes)", entry.size)],
                    Stat::Dir => {
                        let prefix = if rel.is_empty() { String::new() } else { format!("{rel}/") };
                        let mut dirs = BTreeSet::new();
                        let mut lines = Vec::new();
                        for entry in entries.iter() {
                            let Some(rest) = entry.rel.strip_prefix(&prefix) else { continue };
                            match rest.split_once('/') {
                                Some((dir, _)) => {
                                    dirs.insert(dir);
                                }
                                None => lines.push(format!("{}/{rest} ({} bytes)", shown, entry.size)),
                            }
                        }
                        lines.extend(dirs.into_iter().map(|dir| format!("{shown}/{dir}/")));
                        lines
                    }
                }
            }
        };
        if lines.is_empty() {
            return Ok(format!("{shown} is empty"));
        }
        lines.sort();
        Ok(lines.join("\n"))
    }

    /// Reads a text file as `cat -n` from line `offset` (0-based), at most `limit` lines.
    pub async fn read_file(&self, path: &str, offset: usize, limit: usize) -> Result<String, VfsError> {
        if limit == 0 {
            return Err(VfsError::Arguments("argument 'limit' must be at least 1".into()));
        }
        let (node, shown) = self.resolve(path)?;
        let Node::In { root, rel } = node else { return Err(VfsError::IsDirectory(shown)) };
        let entries = self.entries(root).await?;
        let entry = match stat(&entries, &rel) {
            Stat::File(entry) => entry,
            Stat::Dir => return Err(VfsError::IsDirectory(shown)),
            Stat::Missing => return Err(VfsError::NotFound(shown)),
        };
        let bytes = self.load(&shown, &entry).await?;
        let text = as_text(&bytes).ok_or(VfsError::Binary)?;
        number_lines(text, offset, limit)
    }

    /// Creates a file under `/workspace` (parents are implied). An existing file is not
    /// overwritten: the model is told to use `edit_file`.
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
        if self.workspace.contains_key(&rel) {
            return Err(VfsError::AlreadyExists(shown));
        }
        if rel.len() > MAX_WORKSPACE_PATH_BYTES {
            return Err(VfsError::InvalidPath(format!(
                "{shown} (a /workspace path is at most {MAX_WORKSPACE_PATH_BYTES} bytes after /workspace/)"
            )));
        }
        if self.workspace.len() >= MAX_WORKSPACE_FILES {
            return Err(VfsError::Quota(format!(
                "/workspace already holds {MAX_WORKSPACE_FILES} files, its limit; delete files you no longer need \
                 with delete_file, or edit an existing one"
            )));
        }
        self.check_bytes_quota(0, content.len())?;
        let file = self.store_blob(content.as_bytes()).await?;
        self.workspace.insert(rel, file);
        Ok(format!("Updated file {shown}"))
    }

    /// Replaces `old` with `new` in a `/workspace` file: exactly one occurrence, or all of them
    /// with `replace_all`.
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
            return Err(VfsError::Arguments("argument 'old_string' must not be empty".into()));
        }
        let entry = Entry { rel: rel.clone(), size: file.size, source: Source::Blob(file.sha256) };
        let bytes = self.load(&shown, &entry).await?;
        let text = as_text(&bytes).ok_or(VfsError::Binary)?;
        let count = text.matches(old).count();
        if count == 0 {
            let snippet = truncate_chars(old, SNIPPET_CHARS, "...");
            return Err(VfsError::StringNotFound { path: shown, snippet });
        }
        if count > 1 && !replace_all {
            return Err(VfsError::AmbiguousEdit { path: shown, count });
        }
        let updated = if replace_all { text.replace(old, new) } else { text.replacen(old, new, 1) };
        if updated.len() > MAX_FILE_BYTES {
            return Err(VfsError::ContentTooLarge { size: updated.len() });
        }
        let replaced = if replace_all { count } else { 1 };
        self.check_bytes_quota(file.size, updated.len())?;
        let file = self.store_blob(updated.as_bytes()).await?;
        self.workspace.insert(rel, file);
        Ok(format!("Successfully replaced {replaced} instance(s) of the string in '{shown}'"))
    }

    /// Removes a `/workspace` file from the manifest (its content-addressed blob stays, unreferenced).
    pub fn delete_file(&mut self, path: &str) -> Result<String, VfsError> {
        let (rel, shown) = self.writable(path)?;
        if self.workspace.remove(&rel).is_some() {
            return Ok(format!("Deleted {shown}"));
        }
        let prefix = format!("{rel}/");
        Err(if self.workspace.keys().any(|p| p.starts_with(&prefix)) {
            VfsError::IsDirectory(shown)
        } else {
            VfsError::NotFound(shown)
        })
    }

    /// Whether replacing `old` bytes by `new` keeps the workspace within [`MAX_WORKSPACE_BYTES`].
    fn check_bytes_quota(&self, old: u64, new: usize) -> Result<(), VfsError> {
        let total: u64 = self.workspace.values().map(|file| file.size).sum();
        let after = total.saturating_sub(old).saturating_add(new as u64);
        if after > MAX_WORKSPACE_BYTES {
            return Err(VfsError::Quota(format!(
                "/workspace would hold {after} bytes, over its limit of {} MiB; delete files you no longer need \
                 with delete_file",
                MAX_WORKSPACE_BYTES / (1024 * 1024)
            )));
        }
        Ok(())
    }

    /// Files matching a glob pattern (relative to `path`, default `/`; or absolute when it starts
    /// with `/`), one virtual path per line, sorted.
    pub async fn glob(&self, pattern: &str, path: Option<&str>) -> Result<String, VfsError> {
        let pattern = Pattern::new(pattern)?;
        let (node, base) = self.resolve(path.unwrap_or("/")).map_err(VfsError::for_listing)?;
        let files = self.files_under(&node, &base).await?;
        let hits: Vec<&str> =
            files.iter().map(|(vpath, _)| vpath.as_str()).filter(|vpath| pattern.matches_path(&base, vpath)).collect();
        if hits.is_empty() {
            return Ok("No files found matching pattern".to_owned());
        }
        let mut out = hits.iter().take(MAX_GLOB_RESULTS).copied().collect::<Vec<_>>().join("\n");
        if hits.len() > MAX_GLOB_RESULTS {
            let _ = write!(
                out,
                "\n[... {} more files not shown; use a narrower pattern or path]",
                hits.len() - MAX_GLOB_RESULTS
            );
        }
        Ok(out)
    }

    /// Lines matching a regex in the text files under `path` (default `/`), optionally only in
    /// files matching `glob`; `path:line_number:line` per match, at most [`MAX_GREP_MATCHES`].
    /// Binary files are skipped.
    pub async fn grep(&self, pattern: &str, path: Option<&str>, glob: Option<&str>) -> Result<String, VfsError> {
        if pattern.is_empty() {
            return Err(VfsError::Arguments("argument 'pattern' must not be empty".into()));
        }
        if pattern.len() > MAX_REGEX_PATTERN_BYTES {
            return Err(VfsError::InvalidRegex(format!("the pattern is longer than {MAX_REGEX_PATTERN_BYTES} bytes")));
        }
        let regex = RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .nest_limit(64)
            .build()
            .map_err(|e| VfsError::InvalidRegex(e.to_string()))?;
        let filter = glob.map(Pattern::new).transpose()?;
        let (node, base) = self.resolve(path.unwrap_or("/")).map_err(VfsError::for_listing)?;
        let files: Vec<(String, Entry)> = self
            .files_under(&node, &base)
            .await?
            .into_iter()
            .filter(|(vpath, entry)| {
                entry.size <= MAX_READ_BYTES && filter.as_ref().is_none_or(|f| f.matches_file(&base, vpath))
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
        let mut out = Vec::new();
        let mut truncated = false;
        'files: while let Some((vpath, loaded)) = loads.next().await {
            let bytes = match loaded {
                Ok(bytes) => bytes,
                Err(error @ VfsError::Storage(_)) => return Err(error),
                Err(_) => continue,
            };
            let Some(text) = as_text(&bytes) else { continue };
            for (i, line) in text.lines().enumerate() {
                if regex.is_match(line) {
                    if out.len() == MAX_GREP_MATCHES {
                        truncated = true;
                        break 'files;
                    }
                    out.push(format!("{vpath}:{}:{}", i + 1, truncate_chars(line, GREP_LINE_CHARS, "...")));
                }
            }
        }
        if out.is_empty() {
            return Ok(format!("No matches found for pattern: {pattern}"));
        }
        let mut out = out.join("\n");
        if truncated {
            let _ = write!(
                out,
                "\n[... results truncated at {MAX_GREP_MATCHES} matches; narrow the pattern, path or glob]"
            );
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

    /// Validates a model path and says what it names; unknown roots, an absent ticket and
    /// skills that are not mounted are "not found".
    fn resolve(&self, raw: &str) -> Result<(Node<'_>, String), VfsError> {
        let segments = path::parse(raw)?;
        let shown = path::display(&segments);
        let Some((root, rest)) = segments.split_first() else { return Ok((Node::Root, shown)) };
        let node = match (root.as_str(), &self.ticket) {
            ("workspace", _) => Node::In { root: RootRef::Workspace, rel: rest.join("/") },
            ("ticket", Some(ticket)) => Node::In { root: RootRef::Ticket(ticket), rel: rest.join("/") },
            ("skills", _) => match rest.split_first() {
                None if !self.mounts.is_empty() => Node::SkillsDir,
                Some((name, rest)) => match self.skill_by_name(name) {
                    Some(skill) => Node::In { root: RootRef::Skill(skill), rel: rest.join("/") },
                    None => return Err(VfsError::NotFound(shown)),
                },
                None => return Err(VfsError::NotFound(shown)),
            },
            _ => return Err(VfsError::NotFound(shown)),
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

    /// Every visible file under a node, as (virtual path, entry), sorted by path.
    async fn files_under(&self, node: &Node<'_>, shown: &str) -> Result<Vec<(String, Entry)>, VfsError> {
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
            if let Stat::Missing = stat(&entries, rel) {
                return Err(VfsError::PathNotFound(shown.to_owned()));
            }
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
