//! The project-local Python environment (`.venv`) with the pinned tools the tests need: moto_server
//! (S3, DynamoDB and SQS on loopback), the MCP SDK for the expert servers, and cfn-lint. It is made
//! on first use and remade only when `tests/requirements.txt` changes. Also the sandbox's Python
//! packages (`target/sandbox-python`), remade only when `functions/sandbox/requirements.txt` changes.

use std::path::{Path, PathBuf};
use std::process::Command;

const REQUIREMENTS: &str = "tests/requirements.txt";
/// Written after a successful install, holding the requirements it installed.
const STAMP: &str = "installed-requirements.txt";
/// What a sandboxed command can import, and where `pip install --target` puts it.
const SANDBOX_REQUIREMENTS: &str = "functions/sandbox/requirements.txt";
const SANDBOX_PACKAGES: &str = "target/sandbox-python";

/// Makes sure `.venv` holds the pinned requirements, then puts its `bin` first on this process's
/// `PATH`, so every command xtask starts (and the tests they start) finds them; then the sandbox's
/// packages, named by `SANDBOX_PYTHON_PACKAGES`.
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
    let mut paths: Vec<PathBuf> = vec![bin.clone()];
    paths.extend(std::env::split_paths(&path));
    let joined = std::env::join_paths(paths).map_err(|err| format!("PATH: {err}"))?;
    // xtask is single-threaded here, before any child process starts.
    std::env::set_var("PATH", joined);
    std::env::set_var("VIRTUAL_ENV", &venv);
    sandbox_packages(root, &bin.join("python3"))
}

/// Installs the sandbox's pinned packages with the `.venv`'s pip into `target/sandbox-python`
/// (from scratch, only when the pins changed), readable by every user (the local sandbox runs
/// commands under throwaway uids), and sets `SANDBOX_PYTHON_PACKAGES` for the commands xtask starts.
/// The wheels are cp311: the sandbox runs Debian's /usr/bin/python3, not the `.venv`'s.
fn sandbox_packages(root: &Path, python: &Path) -> Result<(), String> {
    let requirements = std::fs::read_to_string(root.join(SANDBOX_REQUIREMENTS))
        .map_err(|err| format!("could not read {SANDBOX_REQUIREMENTS}: {err}"))?;
    let target = root.join(SANDBOX_PACKAGES);
    let installed = std::fs::read_to_string(target.join(STAMP)).unwrap_or_default();
    if installed != requirements {
        eprintln!("xtask: installing the sandbox's Python packages into {SANDBOX_PACKAGES} (new pins; takes a while)");
        // A half-made directory never passes for a finished one: pip fills a fresh one, which then
        // replaces the old.
        let partial = root.join(format!("{SANDBOX_PACKAGES}.partial"));
        for dir in [&partial, &target] {
            if dir.exists() {
                std::fs::remove_dir_all(dir).map_err(|err| format!("could not remove {}: {err}", dir.display()))?;
            }
        }
        // The target never meets the .venv's own packages, so pip's conflict check against them (moto's
        // botocore pins an older python-dateutil) is noise.
        let status = Command::new(python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-warn-conflicts", "--target"])
            .arg(&partial)
            .arg("-r")
            .arg(root.join(SANDBOX_REQUIREMENTS))
            .status()
            .map_err(|err| format!("could not start {}: {err}", python.display()))?;
        if !status.success() {
            return Err(format!("installing {SANDBOX_REQUIREMENTS} into {SANDBOX_PACKAGES} failed ({status})"));
        }
        readable_by_all(&partial).map_err(|err| format!("could not open {SANDBOX_PACKAGES} to every user: {err}"))?;
        std::fs::write(partial.join(STAMP), &requirements)
            .map_err(|err| format!("could not write the stamp: {err}"))?;
        std::fs::rename(&partial, &target).map_err(|err| format!("could not move the packages in place: {err}"))?;
    }
    std::env::set_var("SANDBOX_PYTHON_PACKAGES", &target);
    Ok(())
}

/// Folders 0755 and files at least 0444 (executables keep their bits), without following links.
fn readable_by_all(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let set = |path: &Path, mode: u32| std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
    let mode = std::fs::symlink_metadata(dir)?.permissions().mode() & 0o7777;
    if mode & 0o755 != 0o755 {
        set(dir, mode | 0o755)?;
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            readable_by_all(&entry.path())?;
        } else if kind.is_file() {
            let mode = entry.metadata()?.permissions().mode() & 0o7777;
            if mode & 0o444 != 0o444 {
                set(&entry.path(), mode | 0o444)?;
            }
        }
    }
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
