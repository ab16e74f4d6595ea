//! Skill bundles in the sandbox: a bundle (a tar of pinned wheels, named by its SHA-256) is
//! installed offline with the image's own pip, once per tenant, and kept for that tenant's later
//! calls under `{bundle_dir}/{tenant}/{sha256}/site`; a call whose skills' bundles are all there
//! gets them on `PYTHONPATH`, read-only. A bundle never serves another tenant: each tenant has a
//! folder of its own, named by a hash of its id.
//!
//! The local backend installs a missing bundle straight from the bytes the runtime fetched; the
//! Lambda function answers `missing_bundles` and then receives the bytes in parts
//! ([`receive_part`]), since its environment has no credentials and no network.

use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_ports::bundle::{
    is_sha256, MAX_BUNDLE_BYTES, MAX_BUNDLE_FILES, MAX_BUNDLE_INSTALLED_BYTES, MAX_BUNDLE_WHEELS,
};
use sha2::{Digest, Sha256};

use super::{Config, HandlerError, Isolation};
use crate::wire::{WireBundle, WireBundlePart, WireFile, WirePartAnswer};

/// The installer the image's Python runs.
const INSTALLER: &str = include_str!("install.py");
/// How long one install may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);
/// Where the bundle folders are mounted in a bwrap call (a mount point in the image).
pub(crate) const BUNDLE_MOUNT: &str = "/opt/bundles";
/// The stamp a finished install leaves; a folder without it is not used.
const READY: &str = "ready";
/// The files a bundle may hold besides its wheels.
const BUNDLE_FILES: [&str; 2] = ["requirements.txt", "bundle.json"];

/// What an install did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub wheels: u64,
    pub files: u64,
    pub bytes: u64,
    pub took: Duration,
}

/// The folder of `tenant`'s bundles: a hash of its id, so no id can name a path.
fn tenant_dir(config: &Config, tenant: &str) -> PathBuf {
    let digest = Sha256::digest(format!("bundles:{tenant}").as_bytes());
    config.bundle_dir.join(&hex::encode(digest)[..32])
}

/// The installed site of `sha256` for `tenant`, when its install finished.
pub(crate) fn installed_site(config: &Config, tenant: &str, sha256: &str) -> Option<PathBuf> {
    let dir = tenant_dir(config, tenant).join(sha256);
    dir.join(READY).is_file().then(|| dir.join("site"))
}

/// Checks a call's bundle reference.
pub(crate) fn check(bundle: &WireBundle) -> Result<(), HandlerError> {
    if !is_sha256(&bundle.sha256) {
        return Err(HandlerError::InvalidRequest("a bundle's sha256 must be 64 lowercase hex digits".into()));
    }
    if bundle.size > MAX_BUNDLE_BYTES {
        return Err(HandlerError::InvalidRequest(format!("a bundle is over {MAX_BUNDLE_BYTES} bytes")));
    }
    Ok(())
}

/// Installs `bytes` as `tenant`'s bundle `sha256`, unless it is installed already. The bytes must
/// hash to the name; the tar may hold only `requirements.txt`, `bundle.json` and `wheels/*.whl`.
pub fn install(config: &Config, tenant: &str, sha256: &str, bytes: &[u8]) -> Result<Option<Installed>, HandlerError> {
    let started = Instant::now();
    check(&WireBundle { sha256: sha256.to_owned(), size: bytes.len() as u64 })?;
    if hex::encode(Sha256::digest(bytes)) != sha256 {
        return Err(HandlerError::BadBundle("its bytes do not match its SHA-256".into()));
    }
    if installed_site(config, tenant, sha256).is_some() {
        return Ok(None);
    }
    let internal = |what: &str, err: std::io::Error| HandlerError::Internal(format!("{what}: {err}"));
    let tenant_dir = tenant_dir(config, tenant);
    std::fs::create_dir_all(&tenant_dir).map_err(|err| internal("could not make the bundle folder", err))?;
    let staging = tenant_dir.join(format!(".staging-{}-{}", std::process::id(), rand::random::<u64>()));
    std::fs::create_dir(&staging).map_err(|err| internal("could not make a staging folder", err))?;
    let result = unpack(bytes, &staging.join("in")).and_then(|()| run_installer(config, &staging));
    let installed = match result {
        Ok(installed) => installed,
        Err(err) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(err);
        }
    };
    let _ = std::fs::remove_dir_all(staging.join("in"));
    std::fs::write(staging.join(READY), sha256).map_err(|err| internal("could not stamp the bundle", err))?;
    let target = tenant_dir.join(sha256);
    if std::fs::rename(&staging, &target).is_err() {
        // Another call installed it meanwhile: theirs is as good.
        let _ = std::fs::remove_dir_all(&staging);
    }
    Ok(Some(Installed { took: started.elapsed(), ..installed }))
}

/// Unpacks the tar into `dir`, refusing anything but the bundle's own files.
fn unpack(bytes: &[u8], dir: &Path) -> Result<(), HandlerError> {
    let bad = |reason: String| HandlerError::BadBundle(reason);
    std::fs::create_dir_all(dir.join("wheels"))
        .map_err(|err| HandlerError::Internal(format!("could not make the unpack folder: {err}")))?;
    let mut archive = tar::Archive::new(bytes);
    let entries = archive.entries().map_err(|err| bad(format!("it is not a tar archive ({err})")))?;
    let mut wheels = 0;
    for entry in entries {
        let mut entry = entry.map_err(|err| bad(format!("its tar is damaged ({err})")))?;
        let path = entry.path().map_err(|err| bad(format!("a name in it is not usable ({err})")))?.into_owned();
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            continue;
        }
        if !kind.is_file() {
            return Err(bad(format!("{} is not a plain file", path.display())));
        }
        let parts: Vec<&str> = path
            .components()
            .map(|part| match part {
                Component::Normal(name) => name.to_str().unwrap_or("\u{0}"),
                _ => "\u{0}",
            })
            .collect();
        let allowed = match parts.as_slice() {
            [name] => BUNDLE_FILES.contains(name),
            ["wheels", name] => name.ends_with(".whl") && !name.starts_with('.') && !name.contains('\u{0}'),
            _ => false,
        };
        if !allowed {
            return Err(bad(format!("{} is not a file a bundle holds", path.display())));
        }
        wheels += usize::from(parts.len() == 2);
        if wheels > MAX_BUNDLE_WHEELS {
            return Err(bad(format!("it holds more than {MAX_BUNDLE_WHEELS} wheels")));
        }
        let mut content = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0).min(bytes.len()));
        entry.read_to_end(&mut content).map_err(|err| bad(format!("{} cannot be read ({err})", path.display())))?;
        std::fs::write(dir.join(&path), content)
            .map_err(|err| HandlerError::Internal(format!("could not write {}: {err}", path.display())))?;
    }
    Ok(())
}

/// Runs the installer over `staging/in` into `staging/site`, with the image's Python, no network.
fn run_installer(config: &Config, staging: &Path) -> Result<Installed, HandlerError> {
    let bounds = [MAX_BUNDLE_FILES.to_string(), MAX_BUNDLE_INSTALLED_BYTES.to_string(), MAX_BUNDLE_WHEELS.to_string()];
    let timeout = INSTALL_TIMEOUT.as_secs().to_string();
    let mut cmd = match &config.isolation {
        Isolation::Bwrap { bwrap, root } => {
            let mut cmd = Command::new(bwrap);
            cmd.env_clear();
            cmd.args(["--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--ro-bind"])
                .arg(root)
                .arg("/");
            cmd.args(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind"]).arg(staging).arg(BUNDLE_MOUNT);
            for (key, value) in [("HOME", "/tmp"), ("PATH", "/usr/local/bin:/usr/bin:/bin"), ("LANG", "C.UTF-8")] {
                cmd.args(["--setenv", key, value]);
            }
            cmd.args(["--", "timeout", &timeout, "python3", "-c", INSTALLER]);
            cmd.arg(format!("{BUNDLE_MOUNT}/in")).arg(format!("{BUNDLE_MOUNT}/site"));
            cmd.current_dir("/");
            cmd
        }
        Isolation::Process => {
            let mut cmd = Command::new("timeout");
            cmd.env_clear();
            cmd.env("HOME", staging).env("PATH", "/usr/local/bin:/usr/bin:/bin").env("LANG", "C.UTF-8");
            cmd.args([&timeout, "python3", "-c", INSTALLER]).arg(staging.join("in")).arg(staging.join("site"));
            cmd.current_dir(staging);
            cmd
        }
    };
    cmd.args(&bounds).stdin(Stdio::null());
    let output =
        cmd.output().map_err(|err| HandlerError::Internal(format!("could not start the bundle installer: {err}")))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let answer = stdout.lines().rev().find_map(|line| serde_json::from_str::<serde_json::Value>(line).ok());
    match answer {
        Some(answer) if answer.get("error").is_some() => {
            Err(HandlerError::BadBundle(answer["error"].as_str().unwrap_or("the installer failed").to_owned()))
        }
        Some(answer) => Ok(Installed {
            wheels: answer["wheels"].as_u64().unwrap_or(0),
            files: answer["files"].as_u64().unwrap_or(0),
            bytes: answer["bytes"].as_u64().unwrap_or(0),
            took: Duration::ZERO,
        }),
        None => {
            let stderr: String = String::from_utf8_lossy(&output.stderr).chars().take(600).collect();
            Err(HandlerError::Internal(format!("the bundle installer failed ({}): {stderr}", output.status)))
        }
    }
}

/// Takes one part of a bundle (the Lambda function's path), and installs the bundle after its
/// last part. Parts are appended in order; a part at offset 0 starts over.
pub fn receive_part(config: &Config, part: WireBundlePart) -> Result<WirePartAnswer, HandlerError> {
    agent_ports::UserId::parse(part.tenant.as_str()).map_err(|err| HandlerError::InvalidRequest(err.to_string()))?;
    check(&WireBundle { sha256: part.sha256.clone(), size: part.size })?;
    if installed_site(config, &part.tenant, &part.sha256).is_some() {
        return Ok(WirePartAnswer { received: part.size, installed: true });
    }
    let data = WireFile { path: "bundle".into(), data: part.data };
    let bytes = data.decode(part.size.saturating_sub(part.offset)).map_err(HandlerError::InvalidRequest)?;
    let internal = |what: &str, err: std::io::Error| HandlerError::Internal(format!("{what}: {err}"));
    let partial_dir = tenant_dir(config, &part.tenant).join(".partial");
    std::fs::create_dir_all(&partial_dir).map_err(|err| internal("could not make the parts folder", err))?;
    let file = partial_dir.join(format!("{}.tar", part.sha256));
    let held = match part.offset {
        0 => 0,
        _ => std::fs::metadata(&file).map_or(0, |meta| meta.len()),
    };
    if held != part.offset {
        return Ok(WirePartAnswer { received: held, installed: false });
    }
    // Each part is appended where the last one ended, so a bundle of n parts costs its size once, not n².
    let mut held_file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(part.offset == 0)
        .append(part.offset != 0)
        .open(&file)
        .map_err(|err| internal("could not open the parts held", err))?;
    std::io::Write::write_all(&mut held_file, &bytes).map_err(|err| internal("could not keep the part", err))?;
    drop(held_file);
    let received = part.offset + bytes.len() as u64;
    if received < part.size {
        return Ok(WirePartAnswer { received, installed: false });
    }
    let content = std::fs::read(&file).map_err(|err| internal("could not read the parts held", err))?;
    let _ = std::fs::remove_file(&file);
    install(config, &part.tenant, &part.sha256, &content)?;
    Ok(WirePartAnswer { received, installed: true })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path) -> Config {
        Config { bundle_dir: dir.to_path_buf(), ..Config::lambda_default() }
    }

    fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, bytes) in files {
            // The name written as is, so that names `append_data` would refuse (`../x`) can be tried.
            let mut header = tar::Header::new_gnu();
            header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append(&header, *bytes).unwrap();
        }
        builder.into_inner().unwrap()
    }

    #[test]
    fn a_bundle_whose_bytes_do_not_match_its_name_or_holding_other_files_is_refused() {
        let dir = std::env::temp_dir().join(format!("bundle-unit-{}", std::process::id()));
        let config = config(&dir);
        let bytes = tar_of(&[("requirements.txt", b"x==1\n")]);
        let wrong = "0".repeat(64);
        assert!(matches!(install(&config, "user-1", &wrong, &bytes), Err(HandlerError::BadBundle(_))));
        for (name, content) in [("../evil", &b"x"[..]), ("wheels/a.sh", b"x"), ("scripts/x.whl", b"x")] {
            let bytes = tar_of(&[(name, content)]);
            let sha = hex::encode(Sha256::digest(&bytes));
            let err = install(&config, "user-1", &sha, &bytes).expect_err(name);
            assert!(
                matches!(err, HandlerError::BadBundle(ref reason) if reason.contains("not a file")),
                "{name}: {err}"
            );
        }
        assert!(install(&config, "user-1", "NOT-A-HASH", &bytes).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn parts_are_joined_in_order_and_a_repeated_part_changes_nothing() {
        let dir = std::env::temp_dir().join(format!("bundle-parts-{}", std::process::id()));
        let config = config(&dir);
        // A bundle whose only flaw is a member the install refuses: reaching that refusal shows the
        // joined bytes matched the name.
        let bytes = tar_of(&[("../evil", b"x")]);
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let part = |offset: usize, end: usize| WireBundlePart {
            tenant: "user-1".into(),
            sha256: sha256.clone(),
            size: bytes.len() as u64,
            offset: offset as u64,
            data: WireFile::encode("bundle", &bytes[offset..end]).data,
        };
        let answer = |part| receive_part(&config, part).map(|answer| (answer.received, answer.installed));
        assert_eq!(answer(part(0, 700)).unwrap(), (700, false));
        assert_eq!(answer(part(0, 700)).unwrap(), (700, false), "a part at offset 0 starts over");
        assert_eq!(answer(part(700, 1400)).unwrap(), (1400, false));
        assert_eq!(answer(part(700, 1400)).unwrap(), (1400, false), "a repeated part is not appended twice");
        let last = answer(part(1400, bytes.len())).expect_err("the member is refused");
        assert!(matches!(last, HandlerError::BadBundle(ref reason) if reason.contains("not a file")), "{last}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tenants_get_folders_of_their_own_that_no_id_can_steer() {
        let config = config(Path::new("/tmp/bundles-x"));
        let (a, b) = (tenant_dir(&config, "user-a"), tenant_dir(&config, "../user-a"));
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(Path::new("/tmp/bundles-x")));
        assert_eq!(b.parent(), Some(Path::new("/tmp/bundles-x")));
    }
}
