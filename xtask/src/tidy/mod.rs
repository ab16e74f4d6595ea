//! `cargo xtask tidy`: the checks that keep the docs true to the code, as rust-analyzer's tidy tests
//! do: paths the docs name exist, every environment variable and metric is documented, every
//! `--help` names files that exist, and no file of ours outgrows 500 lines.

mod env;
mod files;
mod help;
mod metrics;
mod paths;
#[cfg(test)]
mod tests;

use std::path::Path;

/// The docs every path check reads: the front door, the code map and `docs/`.
const DOCUMENTS: &[&str] = &["README.md", "ARCHITECTURE.md"];

/// Where the environment variables are documented.
const CONFIGURATION_DOC: &str = "docs/configuration.md";

/// Where the metrics are documented.
const OPERATING_DOC: &str = "docs/operating.md";

/// Runs every check over the repository at `root` and fails with the list of what drifted.
pub fn run(root: &Path) -> Result<(), String> {
    let problems = check(root)?;
    if problems.is_empty() {
        eprintln!("tidy: the docs, the help texts and the file sizes agree with the code");
        return Ok(());
    }
    Err(format!("tidy: {} problem(s)\n  {}", problems.len(), problems.join("\n  ")))
}

/// Every problem of every check, each one line naming the file it is in.
pub fn check(root: &Path) -> Result<Vec<String>, String> {
    let tree = files::Tree::read(root)?;
    let mut problems = Vec::new();
    problems.extend(paths::check(&tree, &documents(&tree)));
    problems.extend(env::check(&tree, CONFIGURATION_DOC));
    problems.extend(metrics::check(&tree, OPERATING_DOC));
    problems.extend(help::check(&tree, &help::texts()));
    problems.extend(files::check_sizes(&tree));
    Ok(problems)
}

/// The README, ARCHITECTURE.md and every file of `docs/`.
fn documents(tree: &files::Tree) -> Vec<String> {
    let mut documents: Vec<String> = DOCUMENTS.iter().map(|doc| doc.to_string()).collect();
    documents.extend(tree.paths().filter(|path| path.starts_with("docs/") && path.ends_with(".md")).map(str::to_owned));
    documents
}
