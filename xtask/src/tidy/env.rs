//! Every environment variable the code reads is in the configuration doc, and every variable the
//! doc lists is one the code or the template still names.

use std::collections::BTreeSet;

use super::files::{extension, Tree};

/// How Rust code reads a variable by a literal name: `env::var("X")`, a lookup closure
/// (`lookup("X")`, `get("X")`, `setting("X")`) or a helper `env("X")`.
const RUST_READS: &[&str] = &["var(\"", "var_os(\"", "lookup(\"", "get(\"", "setting(\"", "env(\""];

/// How Python and JavaScript read one.
const SCRIPT_READS: &[&str] = &["os.environ.get(\"", "os.environ[\"", "os.getenv(\"", "process.env."];

/// Names without an underscore that are still variables the code reads.
const ONE_WORD: &[&str] = &["SANDBOX", "PATH", "HOME", "CARGO", "CHROMIUM"];

/// Problems: a variable read but not in the doc, or in the doc but named nowhere else.
pub fn check(tree: &Tree, doc: &str) -> Vec<String> {
    let Some(documented_text) = tree.text(doc) else {
        return vec![format!("{doc}: missing")];
    };
    let documented = documented(documented_text);
    let mut problems = Vec::new();
    for (name, path) in read(tree) {
        if !documented.contains(&name) {
            problems.push(format!("{path}: reads `{name}`, which {doc} does not list"));
        }
    }
    let named = named_anywhere(tree, doc);
    for name in &documented {
        if !named.contains(name) {
            problems.push(format!("{doc}: lists `{name}`, which no code, script or template names"));
        }
    }
    problems
}

/// Whether a word looks like an environment variable's name.
fn is_variable(name: &str) -> bool {
    let shaped = name.len() > 2
        && name.starts_with(|c: char| c.is_ascii_uppercase())
        && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && !name.ends_with('_');
    shaped && (name.contains('_') || ONE_WORD.contains(&name))
}

/// The variables the doc lists: the names in its code spans.
fn documented(text: &str) -> BTreeSet<String> {
    text.lines()
        .flat_map(|line| line.split('`').skip(1).step_by(2))
        .map(|span| span.split('=').next().unwrap_or(span).trim())
        .filter(|name| is_variable(name))
        .map(str::to_owned)
        .collect()
}

/// The variables the code reads, each with the first file that reads it.
pub fn read(tree: &Tree) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    let mut seen = BTreeSet::new();
    for (path, text) in tree.texts(|path| matches!(extension(path), "rs" | "py" | "mjs" | "js" | "ts")) {
        let mut names = Vec::new();
        let reads = if extension(path) == "rs" { RUST_READS } else { SCRIPT_READS };
        for read in reads {
            for (index, _) in text.match_indices(read) {
                let after = &text[index + read.len()..];
                let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                // A Rust read takes the whole literal, so `get("X_Y.z")` is no variable.
                let closed = !read.ends_with('"') || after[name.len()..].starts_with('"');
                if closed && is_variable(&name) {
                    names.push(name);
                }
            }
        }
        if extension(path) == "rs" {
            names.extend(named_constants(text));
        }
        for name in names {
            if seen.insert(name.clone()) {
                found.push((name, path.to_owned()));
            }
        }
    }
    found
}

/// Variables named by a constant, `const SOME_ENV: &str = "NAME";` (the constant's name ends in
/// `_ENV` or `_VARIABLE`).
fn named_constants(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in text.lines() {
        let line = line.trim_start().trim_start_matches("pub ").trim_start_matches("pub(crate) ");
        let Some(rest) = line.strip_prefix("const ") else { continue };
        let Some((constant, value)) = rest.split_once(": &str = \"") else { continue };
        if !(constant.ends_with("_ENV") || constant.ends_with("_VARIABLE")) {
            continue;
        }
        let name = value.trim_end_matches("\";");
        if is_variable(name) {
            names.push(name.to_owned());
        }
    }
    names
}

/// Every variable-shaped word anywhere but the doc itself: code, scripts, the template, manifests.
fn named_anywhere(tree: &Tree, doc: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for (_, text) in tree.texts(|path| path != doc && extension(path) != "md") {
        for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if is_variable(word) {
                named.insert(word.to_owned());
            }
        }
    }
    named
}
