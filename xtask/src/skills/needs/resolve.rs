//! Whether a Python package the image lacks could be added to it: `pip download` of its wheel for
//! the image's Python and platform (never a source build, as the image's own list is made), on this
//! machine, with the network. Each package is tried alone, so one that has no wheel does not hide
//! the others.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::image::list::PYTHON_VERSION;

/// `pip download`s running at once.
const PARALLEL: usize = 8;

/// For each requirement (as pip takes it), the wheel pip found for the image, or pip's last error.
pub(super) fn resolve(requirements: &BTreeSet<String>) -> BTreeMap<String, Result<String, String>> {
    if requirements.is_empty() {
        return BTreeMap::new();
    }
    eprintln!(
        "xtask: looking for wheels of {} for Python {PYTHON_VERSION} on x86_64 (pip download, network)",
        crate::counted(requirements.len() as u64, "package", "packages")
    );
    let pending = Mutex::new(requirements.iter().cloned().collect::<Vec<_>>());
    let results = Mutex::new(BTreeMap::new());
    std::thread::scope(|scope| {
        for _ in 0..PARALLEL.min(requirements.len()) {
            scope.spawn(|| loop {
                let Some(requirement) = pending.lock().unwrap_or_else(|err| err.into_inner()).pop() else { break };
                let result = download(&requirement);
                results.lock().unwrap_or_else(|err| err.into_inner()).insert(requirement, result);
            });
        }
    });
    results.into_inner().unwrap_or_else(|err| err.into_inner())
}

/// `pip download --no-deps` of one requirement into a folder of its own, removed after: the name
/// of the wheel it got. Only the package's own wheel is fetched, not its dependencies'.
fn download(requirement: &str) -> Result<String, String> {
    let dir = scratch_dir(requirement)?;
    let mut pip = crate::image::list::pip_download();
    pip.arg("--no-deps");
    pip.arg("-d").arg(&dir).arg(requirement);
    let output = pip.output();
    let wheel = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().map(str::to_owned))
        .find(|name| name.ends_with(".whl"));
    let _ = std::fs::remove_dir_all(&dir);
    let output = output.map_err(|err| format!("could not start python3 -m pip: {err}"))?;
    match (output.status.success(), wheel) {
        (true, Some(wheel)) => Ok(wheel),
        (true, None) => Err("pip downloaded no wheel".to_owned()),
        (false, _) => Err(last_error(&String::from_utf8_lossy(&output.stderr))
            .or_else(|| last_error(&String::from_utf8_lossy(&output.stdout)))
            .unwrap_or_else(|| format!("pip download failed ({})", output.status))),
    }
}

/// pip's last `ERROR:` line, else its last line.
fn last_error(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
    lines.iter().rev().find(|line| line.starts_with("ERROR:")).or(lines.last()).map(|line| (*line).to_owned())
}

/// A new empty folder under the temporary directory for one download.
fn scratch_dir(requirement: &str) -> Result<std::path::PathBuf, String> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let tag: String = requirement.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).take(40).collect();
    let number = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("xtask-needs-{}-{number}-{tag}", std::process::id()));
    if Path::new(&dir).exists() {
        std::fs::remove_dir_all(&dir).map_err(|err| format!("could not clear {}: {err}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|err| format!("could not create {}: {err}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_error_line_is_reported() {
        let stderr = "Collecting ete3\nERROR: Could not find a version that satisfies the requirement ete3 (from versions: none)\nERROR: No matching distribution found for ete3\n\n";
        assert_eq!(last_error(stderr).as_deref(), Some("ERROR: No matching distribution found for ete3"));
        assert_eq!(last_error("something\nelse\n").as_deref(), Some("else"));
        assert_eq!(last_error(""), None);
    }
}
