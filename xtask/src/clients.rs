//! The protocols' own client libraries the integration tests drive the functions with, installed in
//! `tests/clients` from its lockfile (`npm ci`) when `node_modules` is missing or older than the
//! lockfile, as the console's packages are.

use std::path::Path;
use std::time::SystemTime;

/// Installs `tests/clients`' locked packages when they are missing or stale.
pub fn install(root: &Path) -> Result<(), String> {
    let clients = root.join("tests/clients");
    let installed = modified(&clients.join("node_modules/.package-lock.json"));
    if installed.is_some() && installed >= modified(&clients.join("package-lock.json")) {
        return Ok(());
    }
    eprintln!("$ (cd tests/clients && npm ci --no-audit --no-fund)");
    let status = std::process::Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&clients)
        .status()
        .map_err(|err| format!("could not run npm ({err}): the AG-UI tests need Node.js 20 and npm"))?;
    status.success().then_some(()).ok_or_else(|| format!("`npm ci` in tests/clients failed ({status})"))
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|metadata| metadata.modified()).ok()
}
