//! The project-local Python environment (`.venv`) with the pinned tools the tests need: moto_server
//! (S3, DynamoDB and SQS on loopback), the MCP SDK for the expert servers, and cfn-lint. It is made
//! on first use and remade only when `tests/requirements.txt` changes; `cargo xtask local` installs
//! only moto's server with S3 and DynamoDB (`tests/requirements-local.txt`). The sandbox's own
//! packages are in its image (`crate::image`), not here.

use std::path::{Path, PathBuf};
use std::process::Command;

const REQUIREMENTS: &str = "tests/requirements.txt";
/// The subset `cargo xtask local` needs: moto's server with S3 and DynamoDB, about 140 MB instead
/// of the whole test environment (deepagents, langchain, the MCP SDK, cfn-lint: about 485 MB).
const LOCAL_REQUIREMENTS: &str = "tests/requirements-local.txt";
/// Written after a successful install, holding the requirements it installed.
const STAMP: &str = "installed-requirements.txt";
/// The same, for an install of the local set alone.
const LOCAL_STAMP: &str = "installed-requirements-local.txt";

/// Makes sure `.venv` holds the pinned requirements, then puts its `bin` first on this process's
/// `PATH`, so every command xtask starts (and the tests they start) finds them.
pub fn activate(root: &Path) -> Result<(), String> {
    venv(root, REQUIREMENTS, STAMP, None)
}

/// What `cargo xtask local` needs: `.venv` with moto only, first on `PATH`.
pub fn activate_local(root: &Path) -> Result<(), String> {
    // The full set holds the same moto with every server extra, so its install does too.
    venv(root, LOCAL_REQUIREMENTS, LOCAL_STAMP, Some((REQUIREMENTS, STAMP)))
}

/// Installs `requirements_file` into `.venv` unless `stamp` says it was installed as it is now (or
/// `or_else`'s stamp says that larger set was), with pip's progress shown; then puts `.venv/bin`
/// first on `PATH`.
fn venv(root: &Path, requirements_file: &str, stamp: &str, or_else: Option<(&str, &str)>) -> Result<(), String> {
    let venv = root.join(".venv");
    let bin = venv.join("bin");
    let requirements = std::fs::read_to_string(root.join(requirements_file))
        .map_err(|err| format!("could not read {requirements_file}: {err}"))?;
    let current = |file: &str, stamp: &str| {
        std::fs::read_to_string(root.join(file)).is_ok_and(|wanted| installed(&venv, stamp, &wanted))
    };
    let done = current(requirements_file, stamp) || or_else.is_some_and(|(file, stamp)| current(file, stamp));
    if !done || !bin.join("python3").exists() {
        eprintln!(
            "xtask: setting up .venv from {requirements_file} (first use, or the pins changed); pip's progress follows"
        );
        create(&venv)?;
        let python = bin.join("python3");
        let status = Command::new(&python)
            .args(["-m", "pip", "install", "--progress-bar", "on", "--disable-pip-version-check", "-r"])
            .arg(root.join(requirements_file))
            .status()
            .map_err(|err| format!("could not start {}: {err}", python.display()))?;
        if !status.success() {
            return Err(format!("installing {requirements_file} into .venv failed ({status})"));
        }
        std::fs::write(venv.join(stamp), &requirements).map_err(|err| format!("could not write the stamp: {err}"))?;
        eprintln!("xtask: .venv ready");
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths: Vec<PathBuf> = vec![bin.clone()];
    paths.extend(std::env::split_paths(&path));
    let joined = std::env::join_paths(paths).map_err(|err| format!("PATH: {err}"))?;
    // xtask is single-threaded here, before any child process starts.
    std::env::set_var("PATH", joined);
    std::env::set_var("VIRTUAL_ENV", &venv);
    Ok(())
}

/// Whether `stamp` in `venv` records an install of exactly `wanted`.
fn installed(venv: &Path, stamp: &str, wanted: &str) -> bool {
    std::fs::read_to_string(venv.join(stamp)).is_ok_and(|installed| installed == wanted)
}

/// `python3 -m venv`, with pip; where the interpreter has no `ensurepip` (Debian without
/// python3-venv), a venv without pip that the outer pip installs into.
fn create(venv: &Path) -> Result<(), String> {
    if venv.join("bin/python3").exists() && pip_works(venv) {
        return Ok(());
    }
    let made = Command::new("python3").args(["-m", "venv"]).arg(venv).status();
    if made.is_ok_and(|status| status.success()) && pip_works(venv) {
        return Ok(());
    }
    let bare = Command::new("python3")
        .args(["-m", "venv", "--clear", "--without-pip"])
        .arg(venv)
        .status()
        .map_err(|err| format!("could not start python3: {err}"))?;
    if !bare.success() {
        return Err(format!("python3 -m venv {} failed ({bare})", venv.display()));
    }
    // pip 22.3 and later install into another interpreter with --python.
    let status = Command::new("python3")
        .args(["-m", "pip", "--python"])
        .arg(venv.join("bin/python3"))
        .args(["install", "--quiet", "--disable-pip-version-check", "pip"])
        .status()
        .map_err(|err| format!("could not start pip: {err}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("installing pip into {} failed ({status})", venv.display()))
    }
}

fn pip_works(venv: &Path) -> bool {
    Command::new(venv.join("bin/python3"))
        .args(["-m", "pip", "--version"])
        .output()
        .is_ok_and(|output| output.status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pinned moto of a requirements file, without its extras: `moto==5.2.1`.
    fn moto_pin(requirements: &str) -> String {
        let line = requirements.lines().find(|line| line.starts_with("moto[")).expect("a moto line");
        let (name, rest) = line.split_once('[').unwrap();
        let version = rest.split_once(']').unwrap().1.trim();
        format!("{name}{version}")
    }

    #[test]
    fn the_local_set_pins_the_moto_of_the_test_set() {
        let full = std::fs::read_to_string(crate::root().join(REQUIREMENTS)).unwrap();
        let local = std::fs::read_to_string(crate::root().join(LOCAL_REQUIREMENTS)).unwrap();
        assert_eq!(moto_pin(&local), moto_pin(&full));
        assert!(moto_pin(&full).starts_with("moto=="), "{}", moto_pin(&full));
        // Only moto and what its server needs: none of the test set's other tools.
        for tool in ["deepagents", "mcp", "cfn-lint"] {
            assert!(!local.lines().any(|line| line.starts_with(tool)), "{tool} in the local set");
        }
    }

    #[test]
    fn the_local_set_runs_the_moto_launcher_of_local_stack() {
        // `cargo xtask local` starts moto through local-stack's `moto_serial.py`, which imports
        // moto's server application: Flask and flask-cors, which the set names since it has no
        // `server` extra.
        let script = std::fs::read_to_string(crate::root().join("shared/local-stack/moto_serial.py")).unwrap();
        assert!(script.contains("from moto.moto_server.werkzeug_app import"), "moto_serial.py changed its imports");
        let local = std::fs::read_to_string(crate::root().join(LOCAL_REQUIREMENTS)).unwrap();
        let names: Vec<&str> = local
            .lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_')).next())
            .collect();
        for package in ["moto", "flask", "flask-cors"] {
            assert!(names.contains(&package), "{package} is not in {LOCAL_REQUIREMENTS}: {names:?}");
        }
    }

    #[test]
    fn a_stamp_counts_only_when_it_matches_the_requirements() {
        let venv = std::env::temp_dir().join(format!("xtask-stamp-{}", std::process::id()));
        std::fs::create_dir_all(&venv).unwrap();
        assert!(!installed(&venv, STAMP, "moto[server]==5.2.1\n"), "no stamp yet");
        std::fs::write(venv.join(STAMP), "moto[server]==5.2.0\n").unwrap();
        assert!(!installed(&venv, STAMP, "moto[server]==5.2.1\n"), "a changed pin");
        std::fs::write(venv.join(STAMP), "moto[server]==5.2.1\n").unwrap();
        assert!(installed(&venv, STAMP, "moto[server]==5.2.1\n"));
        assert!(!installed(&venv, LOCAL_STAMP, "moto[server]==5.2.1\n"), "each set has its own stamp");
        std::fs::remove_dir_all(&venv).unwrap();
    }
}
