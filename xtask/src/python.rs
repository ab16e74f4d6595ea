//! The project-local Python environment (`.venv`) with the pinned tools the tests need: moto_server
//! (S3, DynamoDB and SQS on loopback), the MCP SDK for the expert servers, and cfn-lint. It is made
//! on first use and remade only when `tests/requirements.txt` changes.

use std::path::{Path, PathBuf};
use std::process::Command;

const REQUIREMENTS: &str = "tests/requirements.txt";
/// Written after a successful install, holding the requirements it installed.
const STAMP: &str = "installed-requirements.txt";

/// Makes sure `.venv` holds the pinned requirements, then puts its `bin` first on this process's
/// `PATH`, so every command xtask starts (and the tests they start) finds them.
pub fn activate(root: &Path) -> Result<(), String> {
    let venv = root.join(".venv");
    let bin = venv.join("bin");
    let requirements = std::fs::read_to_string(root.join(REQUIREMENTS))
        .map_err(|err| format!("could not read {REQUIREMENTS}: {err}"))?;
    let installed = std::fs::read_to_string(venv.join(STAMP)).unwrap_or_default();
    if installed != requirements || !bin.join("python3").exists() {
        eprintln!("xtask: setting up .venv from {REQUIREMENTS} (first use, or the pins changed)");
        create(&venv)?;
        let python = bin.join("python3");
        let status = Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(root.join(REQUIREMENTS))
            .status()
            .map_err(|err| format!("could not start {}: {err}", python.display()))?;
        if !status.success() {
            return Err(format!("installing {REQUIREMENTS} into .venv failed ({status})"));
        }
        std::fs::write(venv.join(STAMP), &requirements).map_err(|err| format!("could not write the stamp: {err}"))?;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths: Vec<PathBuf> = vec![bin];
    paths.extend(std::env::split_paths(&path));
    let joined = std::env::join_paths(paths).map_err(|err| format!("PATH: {err}"))?;
    // xtask is single-threaded here, before any child process starts.
    std::env::set_var("PATH", joined);
    std::env::set_var("VIRTUAL_ENV", &venv);
    Ok(())
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
