//! Skill bundles in the sandbox: a bundle (a tar of pinned wheels, named by its SHA-256) is
//! installed offline with the image's own pip, once per tenant, and kept for that tenant's later
//! calls ([`store`]); a call whose skills' bundles are all there gets them on `PYTHONPATH`,
//! read-only. A bundle never serves another tenant: each tenant has a folder of its own, named by a
//! hash of its id.
//!
//! A bundle is data, and installing it runs no code of the tenant's: its tar is read and checked
//! in memory first ([`contents`]: only wheels, each pinned by name, version and hash), and the
//! installer then runs as a command does ([`run_job`]): an unprivileged uid, the seccomp filter,
//! the call's memory bound, the read-only image root, no network, and every process it started
//! killed before the handler copies the installed tree into a folder of its own.
//!
//! The local backend installs a missing bundle straight from the bytes the runtime fetched; the
//! Lambda function answers `missing_bundles` and then receives the bytes in parts
//! ([`receive_part`]), since its environment has no credentials and no network.

mod contents;
mod store;

use std::time::{Duration, Instant};

use agent_ports::bundle::{
    is_sha256, MAX_BUNDLE_BYTES, MAX_BUNDLE_FILES, MAX_BUNDLE_INSTALLED_BYTES, MAX_BUNDLE_WHEELS,
};
use sha2::{Digest, Sha256};

pub(crate) use store::audit;
pub(crate) use store::use_installed;
pub use store::InUse;

use super::scratch::Inputs;
use super::{run_job, Config, HandlerError, Job, Limits};
use crate::wire::{WireBundle, WireBundlePart, WireFile, WirePartAnswer};

/// The installer the image's Python runs.
const INSTALLER: &str = include_str!("install.py");
/// How long one install may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);
/// Where the bundle folders are mounted in a bwrap call (a mount point in the image).
pub(crate) const BUNDLE_MOUNT: &str = "/opt/bundles";
/// The installed tree may hold the wheels' members, their compiled bytecode and their folders.
const INSTALL_ENTRIES: usize = 3 * MAX_BUNDLE_FILES;
/// The installed tree's bytes: the members plus their bytecode, and pip's own unpacking beside it.
const INSTALL_DISK_BYTES: u64 = 2 * MAX_BUNDLE_INSTALLED_BYTES;
/// The installer's output kept: one JSON line, and pip's errors.
const INSTALL_OUTPUT_BYTES: u64 = 1 << 20;

/// What an install did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub wheels: u64,
    pub files: u64,
    pub bytes: u64,
    pub took: Duration,
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
/// hash to the name and hold only a bundle's files ([`contents::read`]).
pub fn install(config: &Config, tenant: &str, sha256: &str, bytes: &[u8]) -> Result<Option<Installed>, HandlerError> {
    install_running(config, tenant, sha256, bytes, INSTALLER)
}

/// [`install`] with another installer script, so tests can show that the walls hold even for an
/// installer that misbehaves; never built into a deployed binary.
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub fn install_with_installer(
    config: &Config,
    tenant: &str,
    sha256: &str,
    bytes: &[u8],
    installer: &str,
) -> Result<Option<Installed>, HandlerError> {
    install_running(config, tenant, sha256, bytes, installer)
}

fn install_running(
    config: &Config,
    tenant: &str,
    sha256: &str,
    bytes: &[u8],
    installer: &str,
) -> Result<Option<Installed>, HandlerError> {
    let started = Instant::now();
    check(&WireBundle { sha256: sha256.to_owned(), size: bytes.len() as u64 })?;
    if hex::encode(Sha256::digest(bytes)) != sha256 {
        return Err(HandlerError::BadBundle("its bytes do not match its SHA-256".into()));
    }
    if store::is_installed(config, tenant, sha256) {
        return Ok(None);
    }
    let contents = contents::read(bytes)?;
    let wheels = contents.wheels.len() as u64;
    let mut files: Vec<(String, Vec<u8>)> =
        contents.wheels.into_iter().map(|(name, bytes)| (format!("wheels/{name}"), bytes)).collect();
    files.push(("install.py".to_owned(), installer.as_bytes().to_vec()));
    let inputs = Inputs { workspace: Vec::new(), skills: vec![("bundle".to_owned(), files)], ticket: None };
    let install_config = Config { limits: install_limits(&config.limits), ..config.clone() };
    let layout = install_config.layout();
    let (input, output) = (format!("{}/bundle", layout.skills), layout.workspace.clone());
    // pip unpacks beside the target (same filesystem, so its last step is a rename, not a copy).
    let command = format!(
        "mkdir -p {output}/.tmp && TMPDIR={output}/.tmp exec python3 -I {input}/install.py {input}/wheels {output}/site \
         {MAX_BUNDLE_FILES} {MAX_BUNDLE_INSTALLED_BYTES} {MAX_BUNDLE_WHEELS}"
    );
    let job = Job { inputs, command: &command, timeout: INSTALL_TIMEOUT, bundles: Vec::new() };
    let (_, admitted) = run_job(&install_config, job, |scratch, _, ran| {
        let (text, _) = ran.capture.render();
        if let Some(reason) = &ran.stopped {
            return Err(HandlerError::BadBundle(format!("its install was stopped: it {reason}")));
        }
        let answer = text.lines().rev().find_map(|line| serde_json::from_str::<serde_json::Value>(line).ok());
        match answer {
            Some(answer) if answer.get("error").is_some() => Err(HandlerError::BadBundle(
                answer["error"].as_str().unwrap_or("the installer failed").chars().take(1000).collect(),
            )),
            Some(answer) if ran.exit_code == Some(0) && answer.get("wheels").is_some() => {
                store::admit(config, tenant, sha256, &scratch.workspace.join("site"))
            }
            _ => {
                // The last 600 characters, cut at a character's start.
                let tail = &text[text.char_indices().rev().nth(599).map_or(0, |(at, _)| at)..];
                Err(HandlerError::Internal(format!("the bundle installer failed ({:?}): {tail}", ran.exit_code)))
            }
        }
    })?;
    Ok(Some(Installed { wheels, files: admitted.files, bytes: admitted.bytes, took: started.elapsed() }))
}

/// A command's bounds, widened only where an install needs more room: the installed tree's files
/// and bytes, one large member, and its time.
fn install_limits(limits: &Limits) -> Limits {
    Limits {
        cpu_seconds: INSTALL_TIMEOUT.as_secs() + 1,
        file_bytes: MAX_BUNDLE_INSTALLED_BYTES,
        disk_bytes: INSTALL_DISK_BYTES,
        files: INSTALL_ENTRIES,
        output_hard_bytes: INSTALL_OUTPUT_BYTES,
        ..*limits
    }
}

/// Takes one part of a bundle (the Lambda function's path), and installs the bundle after its
/// last part. Parts are appended in order; a part at offset 0 starts over.
pub fn receive_part(config: &Config, part: WireBundlePart) -> Result<WirePartAnswer, HandlerError> {
    agent_ports::UserId::parse(part.tenant.as_str()).map_err(|err| HandlerError::InvalidRequest(err.to_string()))?;
    check(&WireBundle { sha256: part.sha256.clone(), size: part.size })?;
    if store::is_installed(config, &part.tenant, &part.sha256) {
        return Ok(WirePartAnswer { received: part.size, installed: true });
    }
    let data = WireFile { path: "bundle".into(), data: part.data };
    let bytes = data.decode(part.size.saturating_sub(part.offset)).map_err(HandlerError::InvalidRequest)?;
    let internal = |what: &str, err: std::io::Error| HandlerError::Internal(format!("{what}: {err}"));
    let partial_dir = store::tenant_dir(config, &part.tenant).join(store::PARTIAL);
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
    store::record_part(config, &file);
    let received = part.offset + bytes.len() as u64;
    if received < part.size {
        return Ok(WirePartAnswer { received, installed: false });
    }
    let content = std::fs::read(&file).map_err(|err| internal("could not read the parts held", err))?;
    let _ = std::fs::remove_file(&file);
    store::forget(&file);
    install(config, &part.tenant, &part.sha256, &content)?;
    Ok(WirePartAnswer { received, installed: true })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::contents::tests::tar_of;
    use super::store::tenant_dir;
    use super::*;

    fn config(dir: &Path) -> Config {
        Config { bundle_dir: dir.to_path_buf(), ..Config::lambda_default() }
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
