//! Building a skill's bundle: `pip download` of its needs (wheels only, with the image's pins as
//! constraints), the image's own distributions left out, the rest pinned by version and hash and
//! packed in a tar whose every header is fixed, so the same wheels always make the same bytes and
//! the same name. The name carries the runtime's signature for the tenant (`super::sign`), which
//! is what lets the sandbox install it. `cargo xtask skills sync` runs it with pip on the
//! developer's machine for the image's platform; `skills-index`, in the image, with the image's own pip.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_ports::bundle::{unmet_marker, MAX_BUNDLE_BYTES, MAX_BUNDLE_WHEELS};
use agent_ports::UserId;
use sha2::{Digest, Sha256};

use super::sign::BundleKey;

/// The longest one `pip download` may take.
const RESOLVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// What goes beside one skill: its bundle (when any need resolved) and a marker per unmet need.
#[derive(Debug, Default)]
pub struct SkillBundleFiles {
    /// Paths inside the skill's folder, with their bytes.
    pub files: Vec<(String, Vec<u8>)>,
    /// The needs bundled, and those left unmet with why.
    pub bundled: Vec<String>,
    pub unmet: Vec<(String, String)>,
}

/// How to run pip and what the image already has.
pub struct Resolver<'a> {
    /// A `pip download` command for the image's Python and platform, wheels only; the builder adds
    /// the destination, the constraints and the requirements.
    pub pip_download: &'a dyn Fn() -> Command,
    /// The image's pins (`name==version` lines; extras are dropped).
    pub constraints: &'a Path,
    /// Whether the image has a distribution (any spelling).
    pub image_has: &'a dyn Fn(&str) -> bool,
    /// Written into `bundle.json`: the image and its Python.
    pub image: &'a str,
    pub python: &'a str,
}

/// The image's pins as pip constraints, which take no extras: `name[extra]==1` becomes `name==1`.
pub fn constraints_file(requirements: &Path) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(requirements)
        .map_err(|err| format!("could not read {}: {err}", requirements.display()))?;
    let mut pins = String::new();
    for line in
        text.lines().map(|line| line.split('#').next().unwrap_or_default().trim()).filter(|line| !line.is_empty())
    {
        match (line.find('['), line.find(']')) {
            (Some(open), Some(close)) if open < close => {
                pins.push_str(&format!("{}{}\n", &line[..open], &line[close + 1..]))
            }
            _ => pins.push_str(&format!("{line}\n")),
        }
    }
    // Beside the other scratch folders; one per process is enough.
    let file = std::env::temp_dir().join(format!("bundle-constraints-{}.txt", std::process::id()));
    std::fs::write(&file, pins).map_err(|err| format!("could not write {}: {err}", file.display()))?;
    Ok(file)
}

/// Whose bundle it is and the key its name is signed with.
pub struct Signer<'a> {
    pub key: &'a BundleKey,
    pub tenant: &'a UserId,
}

/// Downloads the wheels of `wanted` (all together; when that fails, each alone, to tell which
/// cannot be had) and packs them, named as `signer` signs them.
pub fn build(wanted: &[String], resolver: &Resolver<'_>, signer: &Signer<'_>) -> Result<SkillBundleFiles, String> {
    let dir = scratch_dir()?;
    let mut unmet = Vec::new();
    let mut resolved: Vec<String> = wanted.to_vec();
    if download(&dir, wanted, resolver).is_err() {
        resolved.clear();
        for need in wanted {
            let alone = scratch_dir()?;
            match download(&alone, std::slice::from_ref(need), resolver) {
                Ok(()) => resolved.push(need.clone()),
                Err(err) => unmet.push((need.clone(), err)),
            }
            let _ = std::fs::remove_dir_all(&alone);
        }
        if !resolved.is_empty() {
            std::fs::remove_dir_all(&dir).map_err(|err| format!("could not clear {}: {err}", dir.display()))?;
            std::fs::create_dir_all(&dir).map_err(|err| format!("could not make {}: {err}", dir.display()))?;
            if let Err(err) = download(&dir, &resolved, resolver) {
                // Each resolves alone but not together: none is bundled.
                unmet.extend(resolved.drain(..).map(|need| (need, format!("conflicts with the others ({err})"))));
            }
        }
    }
    let mut wheels = Vec::new();
    if !resolved.is_empty() {
        for entry in std::fs::read_dir(&dir).map_err(|err| format!("could not read {}: {err}", dir.display()))? {
            let entry = entry.map_err(|err| err.to_string())?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some((distribution, version)) = wheel_name(&name) else { continue };
            // The image has it already (pip fetched it as a dependency, pinned to the image's version).
            if (resolver.image_has)(&distribution) {
                continue;
            }
            let bytes = std::fs::read(entry.path()).map_err(|err| format!("could not read {name}: {err}"))?;
            wheels.push(Wheel { file: name, distribution, version, bytes });
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    wheels.sort_by(|a, b| a.file.cmp(&b.file));
    let total: u64 = wheels.iter().map(|wheel| wheel.bytes.len() as u64).sum();
    if wheels.len() > MAX_BUNDLE_WHEELS || total > MAX_BUNDLE_BYTES {
        let why = format!(
            "the bundle would be {} wheels, {total} bytes (at most {MAX_BUNDLE_WHEELS} wheels, {MAX_BUNDLE_BYTES} bytes)",
            wheels.len()
        );
        unmet.extend(resolved.drain(..).map(|need| (need, why.clone())));
        wheels.clear();
    }
    let mut files = Vec::new();
    if !wheels.is_empty() {
        let tar = pack(&wheels, &resolved, resolver.image, resolver.python)?;
        let sha256 = hex::encode(Sha256::digest(&tar));
        files.push((signer.key.file(signer.tenant, &sha256), tar));
    }
    for (need, _) in &unmet {
        if let Some(marker) = unmet_marker(&requirement_name(need)) {
            files.push((marker, Vec::new()));
        }
    }
    Ok(SkillBundleFiles { files, bundled: resolved, unmet })
}

/// One downloaded wheel.
pub struct Wheel {
    /// The wheel's file name.
    pub file: String,
    pub distribution: String,
    pub version: String,
    pub bytes: Vec<u8>,
}

/// `pip download` of `requirements` with their dependencies into `dir`, for the image.
fn download(dir: &Path, requirements: &[String], resolver: &Resolver<'_>) -> Result<(), String> {
    let mut pip = (resolver.pip_download)();
    pip.arg("-d").arg(dir).arg("-c").arg(resolver.constraints).arg("--quiet");
    pip.args(requirements);
    // pip's resolver can search for a very long time (backtracking through a package's history):
    // past the bound the needs are left unmet rather than hanging the sync or the function.
    let output_file = dir.join(".pip-output");
    let log = std::fs::File::create(&output_file).map_err(|err| format!("could not create pip's log: {err}"))?;
    let errors = log.try_clone().map_err(|err| format!("could not share pip's log: {err}"))?;
    let mut child = pip
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(errors)
        .spawn()
        .map_err(|err| format!("could not start python3 -m pip: {err}"))?;
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait().map_err(|err| format!("waiting for pip: {err}"))? {
            Some(status) => break status,
            None if started.elapsed() > RESOLVE_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = std::fs::remove_file(&output_file);
                return Err(format!("pip found no resolution within {} s", RESOLVE_TIMEOUT.as_secs()));
            }
            None => std::thread::sleep(std::time::Duration::from_millis(100)),
        }
    };
    let text = std::fs::read_to_string(&output_file).unwrap_or_default();
    let _ = std::fs::remove_file(&output_file);
    if status.success() {
        return Ok(());
    }
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
    let error = lines.iter().rev().find(|line| line.starts_with("ERROR:")).or(lines.last());
    Err(error.map_or_else(|| format!("pip download failed ({status})"), |line| (*line).to_owned()))
}

/// The distribution and version a wheel's file name gives (`name-version(-build)?-py-abi-platform.whl`).
fn wheel_name(file: &str) -> Option<(String, String)> {
    let stem = file.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    (parts.len() == 5 || parts.len() == 6).then(|| (parts[0].to_owned(), parts[1].to_owned()))
}

/// The package name of a pip argument (`name`, `name>=1`, `name[extra]==2`).
pub fn requirement_name(requirement: &str) -> String {
    requirement.split(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c))).next().unwrap_or("").to_owned()
}

/// The tar: `requirements.txt` (each wheel pinned by version and hash, as `pip install
/// --require-hashes` takes it), `bundle.json` (what it was made for) and `wheels/`. Every header is
/// fixed, so the same wheels always make the same bytes and the same name.
pub fn pack(wheels: &[Wheel], needs: &[String], image: &str, python: &str) -> Result<Vec<u8>, String> {
    let mut lock = String::from("# A skill's bundle for the sandbox image, installed offline.\n");
    let mut listed = Vec::new();
    for wheel in wheels {
        let sha256 = hex::encode(Sha256::digest(&wheel.bytes));
        lock.push_str(&format!("{}=={} --hash=sha256:{sha256}\n", wheel.distribution, wheel.version));
        listed.push(serde_json::json!({"file": wheel.file, "sha256": sha256, "size": wheel.bytes.len()}));
    }
    let manifest = serde_json::json!({
        "format": 1,
        "image": image,
        "python": python,
        "needs": needs,
        "wheels": listed,
    });
    let manifest = serde_json::to_vec_pretty(&manifest).map_err(|err| err.to_string())?;
    let mut builder = tar::Builder::new(Vec::new());
    let mut add = |path: &str, bytes: &[u8]| {
        let mut header = tar::Header::new_ustar();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        builder.append_data(&mut header, path, bytes).map_err(|err| format!("packing {path}: {err}"))
    };
    add("bundle.json", &manifest)?;
    add("requirements.txt", lock.as_bytes())?;
    let names: BTreeSet<&str> = wheels.iter().map(|wheel| wheel.file.as_str()).collect();
    for name in names {
        let wheel = wheels.iter().find(|wheel| wheel.file == name).ok_or("a wheel went missing")?;
        add(&format!("wheels/{name}"), &wheel.bytes)?;
    }
    builder.into_inner().map_err(|err| format!("packing the bundle: {err}"))
}

/// A new empty folder for one download.
fn scratch_dir() -> Result<PathBuf, String> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let number = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("bundle-build-{}-{number}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|err| format!("could not create {}: {err}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wheel_names_and_requirement_names_are_read() {
        assert_eq!(
            wheel_name("python_dotenv-1.0.1-py3-none-any.whl"),
            Some(("python_dotenv".to_owned(), "1.0.1".to_owned()))
        );
        assert_eq!(wheel_name("x-1-2-py3-none-any.whl").map(|(_, v)| v).as_deref(), Some("1"));
        assert_eq!(wheel_name("not-a-wheel.tar.gz"), None);
        assert_eq!(requirement_name("pdfplumber>=0.10"), "pdfplumber");
        assert_eq!(requirement_name("rich[jupyter]==13"), "rich");
    }

    #[test]
    fn the_same_wheels_pack_to_the_same_bytes() {
        let wheel = || Wheel {
            file: "tiny-1.0-py3-none-any.whl".into(),
            distribution: "tiny".into(),
            version: "1.0".into(),
            bytes: b"zip".to_vec(),
        };
        let one = pack(&[wheel()], &["tiny".into()], "abc", "3.13").unwrap();
        let two = pack(&[wheel()], &["tiny".into()], "abc", "3.13").unwrap();
        assert_eq!(one, two);
        let mut archive = tar::Archive::new(one.as_slice());
        let names: Vec<String> =
            archive.entries().unwrap().map(|e| e.unwrap().path().unwrap().display().to_string()).collect();
        assert_eq!(names, ["bundle.json", "requirements.txt", "wheels/tiny-1.0-py3-none-any.whl"]);
    }
}
