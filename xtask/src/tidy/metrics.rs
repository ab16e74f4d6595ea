//! Every metric the code emits is in the operating doc: the EMF metric names of the turn's lines
//! (`("Name", "Unit")` pairs and the names a status maps to), and the counts written outside a
//! turn (`put_count("Name", …)`) or by a configuration alarm (`alarm("Name")`).

use std::collections::BTreeSet;

use super::files::{extension, Tree};

/// The units the metrics are declared with.
const UNITS: &[&str] = &["Count", "Milliseconds", "Seconds", "Bytes", "Percent", "None"];

/// Calls that emit a metric by a literal name.
const EMITTING_CALLS: &[&str] = &["put_count(\"", "alarm(\""];

/// Problems: a metric the code emits that the doc does not name.
pub fn check(tree: &Tree, doc: &str) -> Vec<String> {
    let Some(text) = tree.text(doc) else {
        return vec![format!("{doc}: missing")];
    };
    let documented: BTreeSet<&str> = text.lines().flat_map(|line| line.split('`').skip(1).step_by(2)).collect();
    let mut problems = Vec::new();
    for (name, path) in emitted(tree) {
        if !documented.contains(name.as_str()) {
            problems.push(format!("{path}: emits the metric `{name}`, which {doc} does not name"));
        }
    }
    problems
}

/// The metrics the production code emits, each with the first file that emits it.
pub fn emitted(tree: &Tree) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    let production = |path: &str| {
        extension(path) == "rs"
            && (path.starts_with("shared/") || path.starts_with("functions/"))
            && path.contains("/src/")
            && !path.ends_with("/tests.rs")
            && !path.contains("/tests/")
    };
    for (path, text) in tree.texts(production) {
        let mut names = Vec::new();
        for unit in UNITS {
            let pair = format!("\", \"{unit}\")");
            for (index, _) in text.match_indices(&pair) {
                let before = &text[..index];
                if let Some(start) = before.rfind("(\"") {
                    names.push(before[start + 2..].to_owned());
                }
            }
        }
        for call in EMITTING_CALLS {
            for (index, _) in text.match_indices(call) {
                let after = &text[index + call.len()..];
                if let Some(end) = after.find('"') {
                    names.push(after[..end].to_owned());
                }
            }
        }
        // A status mapped to its metric: `"failed" => Some("BackgroundTurnsFailed")`.
        if path.contains("/metrics/") {
            for (index, _) in text.match_indices("=> Some(\"") {
                let after = &text[index + "=> Some(\"".len()..];
                if let Some(end) = after.find('"') {
                    names.push(after[..end].to_owned());
                }
            }
        }
        for name in names {
            if is_metric(&name) && seen.insert(name.clone()) {
                found.push((name, path.to_owned()));
            }
        }
    }
    found
}

/// Whether a name is shaped like a metric: one PascalCase word or more, nothing else.
fn is_metric(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_uppercase()) && name.chars().all(|c| c.is_ascii_alphanumeric())
}
