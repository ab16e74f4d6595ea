//! The tidy checks over the repository as it is, and each one catching a drift planted in a small
//! tree of its own.

use super::files::Tree;
use super::*;

/// A tree of these files, each with its text.
fn tree(files: &[(&str, &str)]) -> Tree {
    Tree::from_files(files.iter().map(|(path, text)| (path.to_string(), Some(text.to_string()))))
}

#[test]
fn the_repository_is_tidy() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask is inside the workspace");
    let problems = check(root).expect("the repository can be listed");
    assert!(
        problems.is_empty(),
        "`cargo xtask tidy` finds {} problem(s):\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

#[test]
fn a_doc_naming_a_missing_path_or_link_is_caught() {
    let tree = tree(&[
        ("docs/sandbox.md", "The image is built from `functions/sandbox/image/list`; see [skills](skills.md#needs),\n[the map](../ARCHITECTURE.md), `shared/gone/src/lib.rs:12` and [gone](gone.md).\n```sh\ncargo lambda invoke http-turn --data-file events/missing.json\n```\n"),
        ("docs/skills.md", "# Skills\n"),
        ("ARCHITECTURE.md", "`target/debug/xtask` is built, `functions/*` are the functions.\n"),
        ("functions/sandbox/image/list", ""),
        ("events/http-turn.json", "{}"),
        ("shared/agent-core/src/lib.rs", ""),
    ]);
    let problems = paths::check(&tree, &["docs/sandbox.md".to_owned(), "ARCHITECTURE.md".to_owned()]);
    assert_eq!(
        problems,
        vec![
            "docs/sandbox.md:2: names `shared/gone/src/lib.rs`, which does not exist",
            "docs/sandbox.md:2: names `docs/gone.md`, which does not exist",
            "docs/sandbox.md:4: names `events/missing.json`, which does not exist",
        ]
    );
}

#[test]
fn an_undocumented_variable_and_a_stale_one_are_caught() {
    let tree = tree(&[
        ("docs/configuration.md", "| `LLM_MODEL` | the model |\n| `OLD_SETTING` | gone |\n| `SANDBOX=local` | |\n"),
        (
            "shared/llm/src/config.rs",
            "const API_KEY_ENV: &str = \"LLM_API_KEY\";\nfn f() { lookup(\"LLM_MODEL\"); std::env::var(\"SANDBOX\"); value.get(\"Records\"); }\n",
        ),
        ("console/demo.mjs", "const port = process.env.MODEL_PORT;\n"),
    ]);
    let problems = env::check(&tree, "docs/configuration.md");
    assert_eq!(
        problems,
        vec![
            "console/demo.mjs: reads `MODEL_PORT`, which docs/configuration.md does not list",
            "shared/llm/src/config.rs: reads `LLM_API_KEY`, which docs/configuration.md does not list",
            "docs/configuration.md: lists `OLD_SETTING`, which no code, script or template names",
        ]
    );
}

#[test]
fn an_undocumented_metric_is_caught() {
    let tree = tree(&[
        ("docs/operating.md", "`Turns` and `ModelCalls` are counted.\n"),
        (
            "shared/agent-app/src/metrics/lines.rs",
            "let m = vec![(\"Turns\", \"Count\"), (\"NewLatency\", \"Milliseconds\")];\nlet b = match s { \"failed\" => Some(\"BackgroundTurnsFailed\"), _ => None };\n",
        ),
        ("functions/skills-index/src/main.rs", "agent_app::metrics::put_count(\"CatalogIndexRebuilds\", 1);\n"),
        ("shared/agent-app/src/metrics/tests.rs", "(\"OnlyInATest\", \"Count\")\n"),
    ]);
    let mut problems = metrics::check(&tree, "docs/operating.md");
    problems.sort();
    assert_eq!(
        problems,
        vec![
            "functions/skills-index/src/main.rs: emits the metric `CatalogIndexRebuilds`, which docs/operating.md does not name",
            "shared/agent-app/src/metrics/lines.rs: emits the metric `BackgroundTurnsFailed`, which docs/operating.md does not name",
            "shared/agent-app/src/metrics/lines.rs: emits the metric `NewLatency`, which docs/operating.md does not name",
        ]
    );
}

#[test]
fn a_help_text_naming_a_missing_file_is_caught() {
    let tree = tree(&[("examples/demo/replay.jsonl", ""), ("functions/sandbox/image/list", "")]);
    let texts = vec![
        ("cargo xtask demo --help".to_owned(), "replayed from examples/local/replay.jsonl; writes target/demo/"),
        ("cargo xtask sandbox image --help".to_owned(), "from functions/sandbox/image/ (reused)"),
    ];
    assert_eq!(
        help::check(&tree, &texts),
        vec!["`cargo xtask demo --help` names `examples/local/replay.jsonl`, which does not exist"]
    );
}

#[test]
fn every_help_text_is_checked() {
    let commands: Vec<String> = help::texts().into_iter().map(|(command, _)| command).collect();
    for task in
        ["demo", "test", "bench", "lint", "tidy", "local", "console", "skills sync", "skills validate", "sandbox image"]
    {
        assert!(commands.contains(&format!("cargo xtask {task} --help")), "{task}'s help is not checked: {commands:?}");
    }
}

#[test]
fn a_long_file_and_a_long_readme_are_caught() {
    let long = "line\n".repeat(files::MAX_LINES + 1);
    let readme = "line\n".repeat(files::MAX_README_LINES + 1);
    let tree = tree(&[
        ("shared/agent-core/src/big.rs", &long),
        ("README.md", &readme),
        ("template.yaml", &long),
        ("docs/short.md", "# Short\n"),
    ]);
    assert_eq!(
        files::check_sizes(&tree),
        vec![
            format!(
                "README.md: {} lines, over the bound of 200; split it along its steps",
                files::MAX_README_LINES + 1
            ),
            format!(
                "shared/agent-core/src/big.rs: {} lines, over the bound of 500; split it along its steps",
                files::MAX_LINES + 1
            ),
        ]
    );
}
