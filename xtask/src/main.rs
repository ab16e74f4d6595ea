//! `cargo xtask <task>`: the project's tasks in Rust instead of shell scripts.

mod console;
mod demo;
mod image;
mod local;
mod python;
mod skills;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  demo    a demo conversation over the embedded store, the model's text printed as it streams
          (replayed model replies; set LLM_PROVIDER/LLM_MODEL/LLM_API_KEY for a real model)
  test    build the functions, then run every test (sets up .venv with the pinned Python tools first),
          then the console's unit tests and its browser tests (Playwright, Debian's chromium)
  bench   the benchmarks: per turn at 10 to 10,000 skills, a 300-turn session, hostile input,
          time to the first streamed byte and delta, execute in the local sandbox
  lint    cargo fmt --check, cargo clippy -D warnings, cfn-lint template.yaml (from .venv)
  local   moto with the bucket, table and example skills, and target/local.env for
          `cargo lambda watch --env-file target/local.env`; runs until Ctrl-C
  console [--port <n>] [--no-build] [--logs]
          the local stack and a web console on http://127.0.0.1:8765/ (two local users; the page
          is built with npm on first use); runs until Ctrl-C
  skills validate <dir> [--json] [--resolve]
          what the catalog makes of a folder of skills: loaded (name, tools, warnings), skipped
          and why, the base prompt, and what each skill's scripts need that the sandbox image
          lacks (--resolve: whether pip has wheels for it); exits 1 when a SKILL.md would be skipped
  skills sync <dir> --user <id> [--bucket <name> | --console]
          makes the folder the tenant's skills/ (unchanged files left alone, removed files
          deleted) and rebuilds its catalog index; the local stack by default, the console's
          with --console, a real bucket with --bucket and the usual AWS credentials and region
  sandbox image [--oci] [--push <ref>]
          the sandbox image every command runs in, from functions/sandbox/image/ (mmdebstrap; reused
          while the list is unchanged); --oci packs it with the sandbox function for Lambda (umoci),
          --push copies it to a registry (skopeo)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let task = args.get(1);
    let result = match task.map(String::as_str) {
        Some("demo") => demo::run(&root()),
        Some("test") => test(),
        Some("bench") => bench(),
        Some("lint") => lint(),
        Some("local") => local::run(&root()),
        Some("console") => console::run(&root(), &args[2..]),
        Some("skills") => skills::run(&root(), &args[2..]),
        Some("sandbox") => image::run(&root(), &args[2..]),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `count` with the noun that agrees with it: "1 skill", "3 skills".
fn counted(count: u64, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

/// The workspace root: xtask lives one level below it.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask is inside the workspace").to_path_buf()
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("$ {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .current_dir(root())
        .status()
        .map_err(|err| format!("could not start {program}: {err}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{program} {}` failed ({status})", args.join(" ")))
    }
}

fn test() -> Result<(), String> {
    python::activate(&root())?;
    image::activate(&root())?;
    // The integration tests run the compiled functions, so build them first.
    run(
        "cargo",
        &[
            "build",
            "--package",
            "http-turn",
            "--package",
            "queue-turn",
            "--package",
            "skills-index",
            "--package",
            "stream-turn",
            "--package",
            "sandbox-function",
            "--package",
            "xtask",
        ],
    )?;
    run("cargo", &["test", "--workspace"])?;
    console::test(&root())
}

fn bench() -> Result<(), String> {
    python::activate(&root())?;
    image::activate(&root())?;
    run(
        "cargo",
        &[
            "build",
            "--release",
            "--package",
            "http-turn",
            "--package",
            "queue-turn",
            "--package",
            "skills-index",
            "--package",
            "stream-turn",
            "--package",
            "sandbox-function",
        ],
    )?;
    run("cargo", &["run", "--release", "--package", "tests", "--bin", "turn-bench"])?;
    run("cargo", &["run", "--release", "--package", "tests", "--bin", "session-bench"])?;
    run("cargo", &["run", "--release", "--package", "tests", "--bin", "input-bench"])?;
    run("cargo", &["run", "--release", "--package", "tests", "--bin", "stream-bench"])?;
    run("cargo", &["run", "--release", "--package", "tests", "--bin", "sandbox-bench"])
}

fn lint() -> Result<(), String> {
    python::activate(&root())?;
    run("cargo", &["fmt", "--all", "--check"])?;
    run("cargo", &["clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings"])?;
    run("cfn-lint", &["template.yaml"])
}
