//! Every path a doc names exists: the repository paths in its code spans and the targets of its
//! relative links.

use super::files::Tree;

/// Problems of the documents at these paths: a named path that is not in the tree.
pub fn check(tree: &Tree, documents: &[String]) -> Vec<String> {
    let top_level = tree.top_level();
    let mut problems = Vec::new();
    for document in documents {
        let Some(text) = tree.text(document) else {
            problems.push(format!("{document}: missing"));
            continue;
        };
        let folder = document.rsplit_once('/').map_or("", |(folder, _)| folder);
        for (line, path) in named_paths(text, folder, &top_level) {
            if !tree.exists(&path) {
                problems.push(format!("{document}:{line}: names `{path}`, which does not exist"));
            }
        }
    }
    problems
}

/// The repository paths a text names, with their line numbers: words of code spans that start
/// with a top-level entry (a build output under `target/` aside), and relative link targets
/// resolved from the document's folder.
pub fn named_paths(text: &str, folder: &str, top_level: &std::collections::BTreeSet<&str>) -> Vec<(usize, String)> {
    let mut named = Vec::new();
    let mut in_fence = false;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        let spans: Vec<&str> = if in_fence { vec![line] } else { code_spans(line) };
        for span in spans {
            for word in
                span.split(|c: char| c.is_whitespace() || matches!(c, '`' | '"' | '\'' | '(' | ')' | ',' | '=' | ';'))
            {
                if let Some(path) = repository_path(word, top_level) {
                    named.push((number, path));
                }
            }
        }
        if !in_fence {
            for target in link_targets(line) {
                if let Some(path) = resolve_link(target, folder) {
                    named.push((number, path));
                }
            }
        }
    }
    named
}

/// The contents of a line's `code spans`.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// The targets of a line's Markdown links, `[text](target)`.
fn link_targets(line: &str) -> Vec<&str> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find("](") {
        let after = &rest[start + 2..];
        let Some(end) = after.find(')') else { break };
        targets.push(&after[..end]);
        rest = &after[end..];
    }
    targets
}

/// A word as a repository path, if it is one: it starts with a top-level entry and holds nothing
/// that makes it a pattern, a placeholder or a variable.
pub(super) fn repository_path(word: &str, top_level: &std::collections::BTreeSet<&str>) -> Option<String> {
    let word = word.trim_end_matches(['.', ':', ';', ',']);
    let word = word.split('#').next().unwrap_or(word);
    // `file.rs::item` names an item in a file.
    let word = word.split("::").next().unwrap_or(word);
    let word = strip_line_number(word);
    let first = word.split('/').next()?;
    if first == "target" || !top_level.contains(first) || (!word.contains('/') && !first.contains('.')) {
        return None;
    }
    if word.contains(['*', '{', '}', '<', '>', '$', '…', '[', '|']) || word.contains("..") {
        return None;
    }
    Some(word.to_owned())
}

/// `path:12` or `path:12-30` as `path`.
fn strip_line_number(word: &str) -> &str {
    match word.rsplit_once(':') {
        Some((path, line)) if !line.is_empty() && line.chars().all(|c| c.is_ascii_digit() || c == '-') => path,
        _ => word,
    }
}

/// A relative link's target as a path from the repository root; `None` for URLs and anchors.
fn resolve_link(target: &str, folder: &str) -> Option<String> {
    let target = target.split_whitespace().next()?;
    let target = target.split('#').next()?;
    if target.is_empty() || target.contains("://") || target.starts_with("mailto:") || target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = if folder.is_empty() { Vec::new() } else { folder.split('/').collect() };
    for part in target.split('/') {
        match part {
            "." | "" => {}
            ".." => {
                // A link that climbs out of the repository names nothing in it: kept whole, it fails.
                if parts.pop().is_none() {
                    return Some(target.to_owned());
                }
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}
