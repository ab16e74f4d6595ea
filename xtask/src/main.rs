//! `cargo xtask <task>`: the project's tasks in Rust instead of shell scripts.

mod clients;
mod console;
mod demo;
mod image;
mod local;
mod python;
mod skills;
mod tidy;

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
          time to the first streamed byte and delta, subagents, published skills' versions,
          execute in the local sandbox
  lint    cargo fmt --check, cargo clippy -D warnings, cfn-lint template.yaml (from .venv)
  tidy    the docs against the code: paths they name, environment variables, metrics, --help
          texts, files over 500 lines (also run by `test`)
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
          publishes each skill of the folder as a new version and its default (the same files
          make none), deletes skills an earlier sync published that are gone, and writes the
          other files straight; the local stack by default, the console's with --console, a real
          bucket with --bucket and the usual AWS credentials and region
  skills eval <skill-path> --user <id> [--version <n>] [--runs <n>] [--require <rates>] [--promote]
          runs a published version's evals as real turns with the deployment's model, stores the
          report with the version, prints its table; --require gates the exit status, --promote
          makes it the default when the requirement holds (the local stack, --console or --bucket)
  sandbox image [--oci] [--push <ref>]
          the sandbox image every command runs in, from functions/sandbox/image/ (mmdebstrap; reused
          while the list is unchanged); --oci packs it with the sandbox function for Lambda (umoci),
          --push copies it to a registry (skopeo)";

/// The tasks that take no subcommand, each with its own `--help`.
const TASKS_WITH_HELP: &[&str] = &["demo", "test", "bench", "lint", "tidy", "local"];

/// What `cargo xtask <task> --help` prints for the tasks that take no subcommand.
fn task_help(task: &str) -> Option<&'static str> {
    Some(match task {
        "demo" => {
            "\
usage: cargo xtask demo

A demo conversation over the embedded store (no AWS, no Docker), the model's text printed as it
streams. The model's replies are replayed from examples/demo/replay.jsonl; set LLM_PROVIDER,
LLM_MODEL and LLM_API_KEY for a real model."
        }
        "test" => {
            "\
usage: cargo xtask test

Builds the functions the integration tests run, then `cargo test --workspace`, then the console's
unit tests and its browser tests (Playwright in Debian's chromium). Sets up .venv with the pinned
Python tools (moto, mcp, cfn-lint) and the sandbox image (mmdebstrap) first, each only once.
For one test: `cargo test -p tests --test it <name>` after a first `cargo xtask test`."
        }
        "bench" => {
            "\
usage: cargo xtask bench

The benchmarks, on release builds: per turn at 10 to 10,000 skills, a 300-turn session, hostile
input, the time to the first streamed byte and delta, subagents, images and PDFs, published skills'
versions (turns, promotes, uploads), and execute in the local sandbox.
The figures in docs/performance.md come from this; it says how to run one benchmark at a time."
        }
        "lint" => {
            "\
usage: cargo xtask lint

cargo fmt --check, cargo clippy -D warnings on every target, and cfn-lint of template.yaml (from .venv).
Under .ci/run, whose builds compile the workspace with clippy (RUSTC_WORKSPACE_WRAPPER is
.ci/clippy-rustc), clippy is left to those builds."
        }
        "tidy" => {
            "\
usage: cargo xtask tidy

Checks that the docs still say what the code does: every path README.md, ARCHITECTURE.md and docs/
name exists, every environment variable the code reads is in docs/configuration.md (and each one
listed there is still named by the code), every metric is in docs/operating.md, every --help names
files that exist, and no file of ours is over 500 lines (the README over 200)."
        }
        "local" => {
            "\
usage: cargo xtask local

Starts moto on loopback with the bucket, the table and the example skills, a loopback token
issuer, and writes target/local.env for `cargo lambda watch --env-file target/local.env`; runs until
Ctrl-C."
        }
        _ => return None,
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let task = args.get(1);
    let wants_help = args.iter().skip(2).any(|arg| arg == "--help" || arg == "-h");
    if let Some(help) = task.and_then(|task| task_help(task)) {
        if wants_help {
            println!("{help}");
            return ExitCode::SUCCESS;
        }
        // These tasks take no arguments: a stray one is a mistake, not something to ignore.
        if let Some(extra) = args.get(2) {
            eprintln!("xtask: unexpected argument {extra:?}\n{help}");
            return ExitCode::from(2);
        }
    }
    let result = match task.map(String::as_str) {
        Some("demo") => demo::run(&root()),
        Some("test") => test(),
        Some("bench") => bench(),
        Some("lint") => lint(),
        Some("tidy") => tidy::run(&root()),
        Some("local") => local::run(&root()),
        Some("console") => console::run(&root(), &args[2..]),
        Some("skills") => skills::run(&root(), &args[2..]),
        Some("sandbox") => image::run(&root(), &args[2..]),
        Some("help" | "--help" | "-h") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
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

/// A nested `cargo` with what `cargo run` set for xtask itself taken away: the package's
/// `CARGO_PKG_*` and manifest variables and the build folders it put on `LD_LIBRARY_PATH`. Build
/// scripts that watch such variables would otherwise see a change and rebuild their crates (and
/// everything above them) whenever a task runs cargo.
pub fn cargo() -> Command {
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if name.starts_with("CARGO_PKG_")
            || matches!(
                name,
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_MANIFEST_LINKS"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "CARGO_RUSTC_CURRENT_DIR"
            )
        {
            cargo.env_remove(name);
        }
    }
    if let Some(paths) = std::env::var_os("LD_LIBRARY_PATH") {
        let target = root().join("target");
        let kept: Vec<PathBuf> = std::env::split_paths(&paths).filter(|path| !path.starts_with(&target)).collect();
        match std::env::join_paths(&kept) {
            Ok(joined) if !kept.is_empty() => cargo.env("LD_LIBRARY_PATH", joined),
            _ => cargo.env_remove("LD_LIBRARY_PATH"),
        };
    }
    cargo
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("$ {program} {}", args.join(" "));
    let mut command = if program == "cargo" { cargo() } else { Command::new(program) };
    let status =
        command.args(args).current_dir(root()).status().map_err(|err| format!("could not start {program}: {err}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{program} {}` failed ({status})", args.join(" ")))
    }
}

fn test() -> Result<(), String> {
    let started = std::time::Instant::now();
    // Each phase's time on one line, so that a slow run shows where it went.
    let took = |phase: &str, since: std::time::Instant| {
        eprintln!("xtask: phase {phase} took {} s", since.elapsed().as_secs());
        std::time::Instant::now()
    };
    python::activate(&root())?;
    let phase = took("python environment", started);
    clients::install(&root())?;
    let phase = took("protocol clients", phase);
    // A first build of the sandbox image takes minutes of downloads and dpkg, little of it CPU, and
    // only the test run needs it: it is built on a thread while cargo compiles. Its path is known
    // before it is built, and set while xtask is still single-threaded.
    let (rootfs, ready) = image::built(&root())?;
    std::env::set_var("SANDBOX_ROOT", &rootfs.root);
    let image = (!ready).then(|| std::thread::spawn(|| image::ensure(&root()).map(|_| ())));
    // The integration tests run the compiled functions, so build them first.
    let compiled = run(
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
    )
    .and_then(|()| run("cargo", &["test", "--workspace", "--no-run"]));
    let phase = took("compile", phase);
    // Waited for even when the compile failed: a build left running would be removed under its
    // feet by the next run.
    let image = image.map_or(Ok(()), |build| build.join().unwrap_or_else(|_| Err("the image build panicked".into())));
    compiled?;
    image?;
    let phase = took("sandbox image (the wait after the compile)", phase);
    run("cargo", &["test", "--workspace"])?;
    let phase = took("cargo test", phase);
    console::test(&root())?;
    took("console", phase);
    took("test, in all", started);
    Ok(())
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
    run("cargo", &["run", "--release", "--package", "benches", "--bin", "turn-bench"])?;
    run("cargo", &["run", "--release", "--package", "benches", "--bin", "session-bench"])?;
    run("cargo", &["run", "--release", "--package", "benches", "--bin", "input-bench"])?;
    run("cargo", &["run", "--release", "--package", "benches", "--bin", "stream-bench"])?;
    run("cargo", &["run", "--release", "--package", "benches", "--bin", "protocol-bench"])?;
    run("cargo", &["run", "--release", "--package", "benches", "--bin", "process-bench"])?;
    run("cargo", &["run", "--release", "--package", "benches", "--bin", "request-bench"])?;
    run("cargo", &["run", "--release", "--package", "benches", "--bin", "subagent-bench"])?;
    run("cargo", &["run", "--release", "--package", "benches", "--bin", "media-bench"])?;
    run("cargo", &["run", "--release", "--package", "benches", "--bin", "vision-bench"])?;
    run("cargo", &["run", "--release", "--package", "benches", "--bin", "versions-bench"])?;
    run("cargo", &["run", "--release", "--package", "benches", "--bin", "cache-bench"])?;
    run("cargo", &["run", "--release", "--package", "benches", "--bin", "sandbox-bench"])
}

fn lint() -> Result<(), String> {
    python::activate(&root())?;
    run("cargo", &["fmt", "--all", "--check"])?;
    match clippy_in_builds() {
        // `cargo clippy` would set a wrapper of its own, so every crate of the workspace would be
        // compiled again, and every dependency once more in check mode.
        Some(wrapper) => eprintln!(
            "xtask: clippy runs inside this run's builds (RUSTC_WORKSPACE_WRAPPER={wrapper}): a warning fails the build"
        ),
        None => run("cargo", &["clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings"])?,
    }
    run("cfn-lint", &["template.yaml"])
}

/// The wrapper CI gives cargo (`.ci/clippy-rustc`) when the workspace's crates are compiled with
/// clippy-driver in every build, so that the lint is part of the builds rather than one of its own.
fn clippy_in_builds() -> Option<String> {
    let wrapper = std::env::var("RUSTC_WORKSPACE_WRAPPER").ok()?;
    let name = Path::new(&wrapper).file_name()?.to_str()?;
    name.starts_with("clippy").then_some(wrapper)
}
