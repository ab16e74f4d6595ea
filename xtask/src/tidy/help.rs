//! Every `--help` names files that exist: each path in a task's help text is in the repository.

use super::files::Tree;
use super::paths::repository_path;

/// The help text of every task and subcommand, by the command that prints it.
pub fn texts() -> Vec<(String, &'static str)> {
    let mut texts = vec![("cargo xtask --help".to_owned(), crate::USAGE)];
    for task in crate::TASKS_WITH_HELP {
        if let Some(help) = crate::task_help(task) {
            texts.push((format!("cargo xtask {task} --help"), help));
        }
    }
    texts.push(("cargo xtask console --help".to_owned(), crate::console::HELP));
    texts.push(("cargo xtask skills --help".to_owned(), crate::skills::USAGE));
    texts.push(("cargo xtask skills sync --help".to_owned(), crate::skills::SYNC_HELP));
    texts.push(("cargo xtask skills validate --help".to_owned(), crate::skills::VALIDATE_HELP));
    texts.push(("cargo xtask skills eval --help".to_owned(), crate::skills::EVAL_HELP));
    texts.push(("cargo xtask sandbox image --help".to_owned(), crate::image::USAGE));
    texts
}

/// Problems: a help text naming a path that is not in the tree.
pub fn check(tree: &Tree, texts: &[(String, &str)]) -> Vec<String> {
    let top_level = tree.top_level();
    let mut problems = Vec::new();
    for (command, text) in texts {
        for word in text.split(|c: char| c.is_whitespace() || matches!(c, '`' | '(' | ')' | ',' | ';' | '"')) {
            if let Some(path) = repository_path(word, &top_level) {
                if !tree.exists(&path) {
                    problems.push(format!("`{command}` names `{path}`, which does not exist"));
                }
            }
        }
    }
    problems
}
