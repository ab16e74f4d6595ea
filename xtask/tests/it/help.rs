//! Every `cargo xtask` task and subcommand answers `--help` with its usage and exit 0, and runs
//! nothing: the compiled xtask binary is run as a user runs it, from a folder where any real work
//! would fail at once.

use std::process::Command;

fn help(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        // Nothing here can be built or found: a task that ran instead of answering would fail.
        .env("PATH", "/nonexistent")
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run the xtask binary");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn every_task_answers_help_and_runs_nothing() {
    let cases: &[(&[&str], &str)] = &[
        (&["--help"], "usage: cargo xtask <task>"),
        (&["help"], "usage: cargo xtask <task>"),
        (&["demo", "--help"], "usage: cargo xtask demo"),
        (&["test", "--help"], "usage: cargo xtask test"),
        (&["test", "-h"], "usage: cargo xtask test"),
        (&["bench", "--help"], "usage: cargo xtask bench"),
        (&["lint", "--help"], "usage: cargo xtask lint"),
        (&["local", "--help"], "usage: cargo xtask local"),
        (&["console", "--help"], "usage: cargo xtask console"),
        (&["console", "--port", "1", "--help"], "usage: cargo xtask console"),
        (&["skills", "--help"], "usage: cargo xtask skills validate"),
        (&["skills", "validate", "--help"], "usage: cargo xtask skills validate <dir>"),
        (&["skills", "sync", "--help"], "usage: cargo xtask skills sync <dir>"),
        (&["skills", "eval", "--help"], "usage: cargo xtask skills eval <skill-path>"),
        (&["skills", "eval", "pdf", "--bucket", "b", "--help"], "usage: cargo xtask skills eval <skill-path>"),
        (&["sandbox", "--help"], "sandbox image"),
        (&["sandbox", "image", "--help"], "sandbox image"),
    ];
    for (args, expected) in cases {
        let (ok, stdout, stderr) = help(args);
        assert!(ok, "{args:?} failed: {stderr}");
        assert!(stdout.contains(expected), "{args:?} printed {stdout:?}");
        assert!(!stderr.contains("$ cargo"), "{args:?} ran cargo: {stderr}");
    }
}

#[test]
fn a_stray_argument_is_refused_not_ignored() {
    let (ok, _, stderr) = help(&["test", "--everything"]);
    assert!(!ok);
    assert!(stderr.contains("unexpected argument \"--everything\""), "{stderr}");
    assert!(stderr.contains("usage: cargo xtask test"), "{stderr}");
}
