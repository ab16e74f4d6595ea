//! The repository as the checks see it: the files git tracks or would track (ignored ones left
//! out), the text of those the checks read, and the bound on a file's length.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// The longest a file of ours may be; past it a file becomes a module folder split along its steps.
pub const MAX_LINES: usize = 500;

/// The README is the front door: a newcomer reads it in one sitting.
pub const MAX_README_LINES: usize = 200;

/// The kinds of file whose length is bounded: code, styles, pages and docs. A CloudFormation
/// template (one document SAM deploys), lock files and recorded data are not code we write.
const BOUNDED: &[&str] = &["rs", "py", "mjs", "js", "ts", "tsx", "sh", "css", "html", "md"];

/// The kinds of file the checks read as text.
const READ: &[&str] = &["rs", "py", "mjs", "js", "ts", "tsx", "sh", "css", "html", "md", "yaml", "toml"];

/// The files of the repository, by their path from its root with `/` separators.
pub struct Tree {
    files: BTreeSet<String>,
    folders: BTreeSet<String>,
    texts: BTreeMap<String, String>,
}

impl Tree {
    /// The files git lists in `root`, tracked or new, without what `.gitignore` leaves out.
    pub fn read(root: &Path) -> Result<Tree, String> {
        let output = Command::new("git")
            .args(["ls-files", "--cached", "--others", "--exclude-standard", "-z"])
            .current_dir(root)
            .output()
            .map_err(|err| format!("could not run git ls-files: {err}"))?;
        if !output.status.success() {
            return Err(format!("git ls-files failed: {}", String::from_utf8_lossy(&output.stderr).trim()));
        }
        let mut files = Vec::new();
        for path in output.stdout.split(|byte| *byte == 0).filter(|path| !path.is_empty()) {
            let path = String::from_utf8_lossy(path).into_owned();
            // A file deleted but not yet staged is still listed as cached.
            if !root.join(&path).is_file() {
                continue;
            }
            let text =
                if READ.contains(&extension(&path)) { std::fs::read_to_string(root.join(&path)).ok() } else { None };
            files.push((path, text));
        }
        Ok(Tree::from_files(files))
    }

    /// A tree of these files, with the text of those given one (the checks' own tests build these).
    pub fn from_files(files: impl IntoIterator<Item = (String, Option<String>)>) -> Tree {
        let mut tree = Tree { files: BTreeSet::new(), folders: BTreeSet::new(), texts: BTreeMap::new() };
        for (path, text) in files {
            let mut folder = path.as_str();
            while let Some((parent, _)) = folder.rsplit_once('/') {
                tree.folders.insert(parent.to_owned());
                folder = parent;
            }
            if let Some(text) = text {
                tree.texts.insert(path.clone(), text);
            }
            tree.files.insert(path);
        }
        tree
    }

    /// Every file's path.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.iter().map(String::as_str)
    }

    /// Whether a file or a folder of files is at this path (a trailing `/` allowed).
    pub fn exists(&self, path: &str) -> bool {
        let path = path.trim_end_matches('/');
        path.is_empty() || self.files.contains(path) || self.folders.contains(path)
    }

    /// The text of a file the checks read, if it is one.
    pub fn text(&self, path: &str) -> Option<&str> {
        self.texts.get(path).map(String::as_str)
    }

    /// The files read as text whose path passes `keep`, with their text.
    pub fn texts(&self, keep: impl Fn(&str) -> bool) -> impl Iterator<Item = (&str, &str)> {
        self.texts.iter().filter(move |(path, _)| keep(path)).map(|(path, text)| (path.as_str(), text.as_str()))
    }

    /// The top-level entries: a path that starts with one of them is a path into the repository.
    pub fn top_level(&self) -> BTreeSet<&str> {
        self.files.iter().chain(&self.folders).filter(|path| !path.contains('/')).map(String::as_str).collect()
    }
}

/// A path's extension, or "" when it has none.
pub fn extension(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.rsplit_once('.').map_or("", |(_, extension)| extension)
}

/// Files of ours past their bound: every code file and doc at 500 lines, the README at 200.
pub fn check_sizes(tree: &Tree) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, text) in tree.texts(|path| BOUNDED.contains(&extension(path))) {
        let lines = text.lines().count();
        let bound = if path == "README.md" { MAX_README_LINES } else { MAX_LINES };
        if lines > bound {
            problems.push(format!("{path}: {lines} lines, over the bound of {bound}; split it along its steps"));
        }
    }
    problems
}
