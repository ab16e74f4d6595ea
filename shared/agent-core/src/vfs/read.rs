//! The reading tools: `ls`, `read_file`, `glob` and `grep`.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use futures::stream::{self, StreamExt};

use super::glob::Glob;
use super::resolve::{stat, Node, Stat};
use super::{
    render, Entry, GrepOutput, Vfs, VfsError, BINARY_SNIFF_BYTES, GREP_REGEX_HINT, GREP_TRUNCATION_NOTE,
    LOAD_CONCURRENCY, MAX_GREP_MATCHES, MAX_GREP_PATTERN_BYTES, MAX_OUTPUT_BYTES, MAX_READ_BYTES,
};

/// What a read found: a window of text, or a binary file's bytes.
#[derive(Debug)]
pub enum Read {
    Text(String),
    Binary { path: String, bytes: Vec<u8> },
}

impl Vfs<'_> {
    /// Lists a directory as deepagents does: the Python list of its entries' absolute paths, sorted,
    /// directories with a trailing `/`; "No files found" for an empty or missing directory. A file's
    /// path lists the file itself.
    /// Files with a binary format's extension (a script's .pdf or .xlsx) are named again after the
    /// list with their sizes, since `read_file` cannot show them.
    pub async fn ls(&self, path: &str) -> Result<String, VfsError> {
        let (node, shown) = self.resolve(path).map_err(VfsError::for_listing)?;
        let mut sizes: Vec<(String, u64)> = Vec::new();
        let mut paths: Vec<String> = match node {
            None => Vec::new(),
            Some(Node::Root) => {
                // `/memories` is named without being listed: `ls /` makes no request.
                let mut roots = vec!["/workspace/".to_owned(), "/memories/".to_owned()];
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
                    Stat::File(entry) => {
                        if is_binary_name(&shown) {
                            sizes.push((shown.clone(), entry.size));
                        }
                        vec![shown]
                    }
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
                                None => {
                                    let path = format!("{shown}/{rest}");
                                    if is_binary_name(rest) {
                                        sizes.push((path.clone(), entry.size));
                                    }
                                    paths.push(path)
                                }
                            }
                        }
                        paths.extend(dirs.into_iter().map(|dir| format!("{shown}/{dir}/")));
                        paths
                    }
                }
            }
        };
        paths.sort();
        let mut listed = render::path_list(&paths, MAX_OUTPUT_BYTES);
        if !sizes.is_empty() {
            sizes.sort();
            let shown: Vec<String> =
                sizes.iter().take(50).map(|(path, size)| format!("{path} ({size} bytes)")).collect();
            let _ = write!(
                listed,
                "\nBinary files (read_file shows images and PDFs; other kinds need a command): {}",
                shown.join(", ")
            );
        }
        Ok(listed)
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
    ///
    /// [`EMPTY_FILE_NOTE`]: super::EMPTY_FILE_NOTE
    pub async fn read_window(&self, path: &str, offset: i64, limit: i64) -> Result<String, VfsError> {
        match self.read_or_bytes(path, offset, limit).await? {
            Read::Text(text) => Ok(text),
            Read::Binary { path, bytes } => Err(VfsError::Binary { path, size: bytes.len() as u64 }),
        }
    }

    /// [`Vfs::read_window`], but a binary file's bytes come back whole (an image or a PDF may be
    /// shown to the model).
    pub async fn read_or_bytes(&self, path: &str, offset: i64, limit: i64) -> Result<Read, VfsError> {
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
        match as_text(&bytes) {
            Some(text) => render::read_window(text, offset, limit, MAX_OUTPUT_BYTES).map(Read::Text),
            None => Ok(Read::Binary { path: shown, bytes: bytes.to_vec() }),
        }
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
}

/// The text of a file, or `None` for a binary one (a NUL in the first 8 KiB, or invalid UTF-8).
pub(super) fn as_text(bytes: &[u8]) -> Option<&str> {
    if bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0) {
        return None;
    }
    // An image or a PDF is never text, even one written in ASCII only: it is shown, not read.
    if matches!(media::sniff(bytes), media::Sniffed::Media(_)) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
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

/// Extensions of formats that are never text: their files get their sizes shown by `ls`.
const BINARY_EXTENSIONS: [&str; 28] = [
    "pdf", "docx", "doc", "xlsx", "xls", "xlsm", "pptx", "ppt", "odt", "ods", "png", "jpg", "jpeg", "gif", "webp",
    "bmp", "tif", "tiff", "zip", "gz", "tgz", "tar", "bz2", "xz", "7z", "sqlite", "parquet", "npy",
];

fn is_binary_name(name: &str) -> bool {
    name.rsplit_once('.').is_some_and(|(_, ext)| BINARY_EXTENSIONS.iter().any(|known| ext.eq_ignore_ascii_case(known)))
}
