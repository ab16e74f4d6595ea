//! Where installed bundles are kept: `{bundle_dir}/{hash of the tenant}/{sha256}/` holds `site/`
//! (the installed packages, read-only), `ready` (the stamp: its size, written last) and, under
//! bubblewrap, `used` (its mtime is the last use). A tenant's installs together stay within
//! `Config::bundle_bytes`: the least recently used ones are evicted to make room, never one a
//! running call holds (a shared `flock` on `ready` for the call's length).
//!
//! In process isolation (Lambda) a command runs as the handler's own uid and could write here, so
//! the handler keeps, in its own memory, the metadata of every entry it installed (inode, ctime,
//! size, mode: a write, a chmod, a new link or a rename changes the ctime, which no unprivileged
//! process can set back), and [`audit`] compares them after every call: whatever changed, and
//! anything the handler did not put there, is removed before the next call runs. A fresh process
//! trusts nothing it finds.

use std::collections::HashMap;
use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::handler::scratch::remove_tree;
use crate::handler::{human_bytes, Config, HandlerError, Isolation};

/// The stamp a finished install leaves; a folder without it is not used.
const READY: &str = "ready";
/// Under bubblewrap, the file whose mtime is the install's last use.
const USED: &str = "used";
/// The stamp's format: installs an earlier handler made (as root, before the installer had a
/// command's walls) are not used, and are replaced when the bundle is installed again.
const STAMP_FORMAT: u64 = 2;
/// Where a bundle's parts wait for the last one (Lambda).
pub(super) const PARTIAL: &str = ".partial";

/// One installed bundle, held for a call: it is not evicted while held.
#[derive(Debug)]
pub struct InUse {
    site: PathBuf,
    _lock: File,
}

impl InUse {
    /// The installed packages.
    pub fn site(&self) -> PathBuf {
        self.site.clone()
    }
}

/// What an install added to the tenant's bundles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Admitted {
    pub files: u64,
    pub bytes: u64,
}

/// The folder of `tenant`'s bundles: a hash of its id, so no id can name a path.
pub(super) fn tenant_dir(config: &Config, tenant: &str) -> PathBuf {
    let digest = Sha256::digest(format!("bundles:{tenant}").as_bytes());
    config.bundle_dir.join(&hex::encode(digest)[..32])
}

fn install_dir(config: &Config, tenant: &str, sha256: &str) -> PathBuf {
    tenant_dir(config, tenant).join(sha256)
}

/// Whether `sha256` is installed for `tenant` (and, in process isolation, by this process).
pub(super) fn is_installed(config: &Config, tenant: &str, sha256: &str) -> bool {
    let dir = install_dir(config, tenant, sha256);
    match config.isolation {
        Isolation::Process => registry().contains_key(&dir),
        Isolation::Bwrap { .. } => stamped_bytes(&dir).is_some(),
    }
}

/// The installed bundle, held for a call and marked used; `None` when it is not installed (or is
/// being evicted).
pub(crate) fn use_installed(config: &Config, tenant: &str, sha256: &str) -> Option<InUse> {
    let dir = install_dir(config, tenant, sha256);
    if config.isolation == Isolation::Process && !registry().contains_key(&dir) {
        return None;
    }
    let lock =
        OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(dir.join(READY)).ok()?;
    if !flock(&lock, libc::LOCK_SH | libc::LOCK_NB) {
        return None;
    }
    stamped_bytes(&dir)?;
    // An eviction renames the folder before it removes it: the stamp held must still be this one.
    let here = std::fs::symlink_metadata(dir.join(READY)).ok()?;
    if here.ino() != lock.metadata().ok()?.ino() {
        return None;
    }
    match config.isolation {
        Isolation::Process => {
            if let Some(entry) = registry().get_mut(&dir) {
                entry.last_used = SystemTime::now();
            }
        }
        Isolation::Bwrap { .. } => {
            if let Ok(used) = OpenOptions::new().write(true).custom_flags(libc::O_NOFOLLOW).open(dir.join(USED)) {
                let _ = used.set_modified(SystemTime::now());
            }
        }
    }
    Some(InUse { site: dir.join("site"), _lock: lock })
}

/// Takes the installed tree at `staged` (made by the installer in its own scratch) into the
/// tenant's bundles as `sha256`: only folders and regular files, copied with ordinary modes into
/// a folder of the handler's own, after evicting the least recently used installs the bound needs.
pub(super) fn admit(config: &Config, tenant: &str, sha256: &str, staged: &Path) -> Result<Admitted, HandlerError> {
    let internal = |what: &str, err: std::io::Error| HandlerError::Internal(format!("{what}: {err}"));
    let measured = measure(staged)?;
    if measured.bytes > config.bundle_bytes {
        return Err(HandlerError::BadBundle(format!(
            "the bundle unpacks to {}, over the {} this sandbox keeps for a tenant's bundles",
            human_bytes(measured.bytes),
            human_bytes(config.bundle_bytes)
        )));
    }
    let tenant_dir = tenant_dir(config, tenant);
    // Traversable but not listable: a call's uid reaches the sites bound into its sandbox by path.
    DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(&tenant_dir)
        .map_err(|err| internal("could not make the bundle folder", err))?;
    make_room(config, &tenant_dir, measured.bytes)?;
    let staging = tenant_dir.join(format!(".staging-{}-{:016x}", std::process::id(), rand::random::<u64>()));
    let copied = (|| {
        DirBuilder::new().mode(0o755).create(&staging)?;
        copy_tree(staged, &staging.join("site"))?;
        let stamp = serde_json::json!({
            "format": STAMP_FORMAT, "sha256": sha256, "bytes": measured.bytes, "files": measured.files,
        });
        if config.isolation != Isolation::Process {
            File::create(staging.join(USED))?;
        }
        let mut ready = File::create(staging.join(READY))?;
        ready.write_all(stamp.to_string().as_bytes())?;
        ready.sync_all()
    })();
    if let Err(err) = copied {
        remove_tree(&staging);
        return Err(internal("could not keep the installed bundle", err));
    }
    let target = tenant_dir.join(sha256);
    if std::fs::symlink_metadata(&target).is_ok() && stamped_bytes(&target).is_none() {
        // An earlier handler's install, or one never finished: this one replaces it.
        discard(&target);
    }
    if std::fs::rename(&staging, &target).is_err() {
        // Another call installed it meanwhile: theirs is as good.
        remove_tree(&staging);
        return Ok(measured);
    }
    if config.isolation == Isolation::Process {
        seal(&target.join("site"));
        match snapshot(&target) {
            Ok(manifest) => {
                registry().insert(target, Known { manifest, last_used: SystemTime::now() });
            }
            Err(err) => {
                remove_tree(&target);
                return Err(internal("could not record the installed bundle", err));
            }
        }
    }
    Ok(measured)
}

/// Evicts the tenant's least recently used installs, none held by a call, until `incoming` more
/// bytes fit in the bound.
fn make_room(config: &Config, tenant_dir: &Path, incoming: u64) -> Result<(), HandlerError> {
    let mut installs: Vec<(PathBuf, u64, SystemTime)> = Vec::new();
    for entry in std::fs::read_dir(tenant_dir).into_iter().flatten().flatten() {
        let dir = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(".staging-") || name.starts_with(".evicted-") {
            // What a process that died while installing or evicting left: gone once no install
            // could still be writing it.
            let stale = entry.metadata().and_then(|meta| meta.modified()).is_ok_and(|modified| {
                modified.elapsed().is_ok_and(|age| age > super::INSTALL_TIMEOUT + std::time::Duration::from_secs(60))
            });
            if stale {
                remove_tree(&dir);
            }
            continue;
        }
        if !agent_ports::bundle::is_sha256(&name) {
            continue;
        }
        let Some(bytes) = stamped_bytes(&dir) else { continue };
        let used = match config.isolation {
            Isolation::Process => registry().get(&dir).map(|known| known.last_used),
            Isolation::Bwrap { .. } => std::fs::metadata(dir.join(USED)).and_then(|meta| meta.modified()).ok(),
        };
        installs.push((dir, bytes, used.unwrap_or(SystemTime::UNIX_EPOCH)));
    }
    let mut total: u64 = installs.iter().map(|(_, bytes, _)| bytes).sum();
    installs.sort_by_key(|(_, _, used)| *used);
    for (dir, bytes, _) in installs {
        if total.saturating_add(incoming) <= config.bundle_bytes {
            break;
        }
        if evict(&dir) {
            tracing::info!(freed_bytes = bytes, "evicted a tenant's least recently used bundle");
            total -= bytes;
        }
    }
    if total.saturating_add(incoming) > config.bundle_bytes {
        return Err(HandlerError::BadBundle(format!(
            "the bundle needs {} and the tenant's other bundles, in use now, leave less of the {} kept for them",
            human_bytes(incoming),
            human_bytes(config.bundle_bytes)
        )));
    }
    Ok(())
}

/// Removes one install unless a call holds it: the folder is renamed away first, so no call finds
/// it half removed.
fn evict(dir: &Path) -> bool {
    let Ok(stamp) =
        OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(dir.join(READY))
    else {
        return false;
    };
    if !flock(&stamp, libc::LOCK_EX | libc::LOCK_NB) {
        return false;
    }
    let gone = discard(dir);
    drop(stamp);
    gone
}

/// Renames an install away, then removes it, so no call finds it half removed.
fn discard(dir: &Path) -> bool {
    let Some(parent) = dir.parent() else { return false };
    let away = parent.join(format!(".evicted-{:016x}", rand::random::<u64>()));
    if std::fs::rename(dir, &away).is_err() {
        return false;
    }
    registry().remove(dir);
    remove_tree(&away);
    true
}

/// The size a finished install's stamp records, when it is of this handler's format.
fn stamped_bytes(dir: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join(READY)).ok()?;
    let stamp = serde_json::from_str::<serde_json::Value>(&text).ok()?;
    (stamp["format"].as_u64() == Some(STAMP_FORMAT)).then(|| stamp["bytes"].as_u64()).flatten()
}

/// The files and bytes of the installer's tree; a link or a special file refuses the bundle.
fn measure(root: &Path) -> Result<Admitted, HandlerError> {
    let mut found = Admitted { files: 0, bytes: 0 };
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let listing = std::fs::read_dir(&folder)
            .map_err(|err| HandlerError::Internal(format!("could not read the installed bundle: {err}")))?;
        for entry in listing {
            let entry =
                entry.map_err(|err| HandlerError::Internal(format!("could not read the installed bundle: {err}")))?;
            let meta = std::fs::symlink_metadata(entry.path())
                .map_err(|err| HandlerError::Internal(format!("could not read the installed bundle: {err}")))?;
            found.files += 1;
            if meta.is_dir() {
                folders.push(entry.path());
            } else if meta.is_file() {
                found.bytes += meta.len();
            } else {
                return Err(HandlerError::BadBundle("its install made a link or a special file".into()));
            }
        }
    }
    Ok(found)
}

/// Copies a tree of folders and regular files (checked by [`measure`]) without following links:
/// folders 0755, files 0644, or 0755 where any execute bit was set.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    DirBuilder::new().mode(0o755).create(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let meta = std::fs::symlink_metadata(entry.path())?;
        let target = to.join(entry.file_name());
        if meta.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if meta.is_file() {
            let mut source = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(entry.path())?;
            let mode = if meta.mode() & 0o111 != 0 { 0o755 } else { 0o644 };
            let mut copy = OpenOptions::new().write(true).create_new(true).mode(mode).open(&target)?;
            std::io::copy(&mut source, &mut copy)?;
        } else {
            return Err(std::io::Error::other("a link or a special file"));
        }
    }
    Ok(())
}

/// Takes the write bits away (process isolation), so a command's careless write fails; the audit,
/// not this, is what a deliberate one meets.
fn seal(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else { continue };
        if meta.is_dir() {
            seal(&entry.path());
        } else if meta.is_file() {
            let _ = std::fs::set_permissions(entry.path(), Permissions::from_mode(meta.mode() & 0o555));
        }
    }
    let _ = std::fs::set_permissions(dir, Permissions::from_mode(0o555));
}

fn flock(file: &File, operation: libc::c_int) -> bool {
    // SAFETY: flock on a descriptor the caller owns.
    unsafe { libc::flock(file.as_raw_fd(), operation) == 0 }
}

/// An install or a part file this process made, as it left it.
struct Known {
    manifest: Vec<Stat>,
    last_used: SystemTime,
}

/// What the audit compares of one entry.
#[derive(Debug, PartialEq, Eq)]
struct Stat {
    path: PathBuf,
    ino: u64,
    ctime: (i64, i64),
    size: u64,
    mode: u32,
}

fn registry() -> MutexGuard<'static, HashMap<PathBuf, Known>> {
    static KNOWN: LazyLock<Mutex<HashMap<PathBuf, Known>>> = LazyLock::new(Mutex::default);
    KNOWN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Every entry under `root` (itself included), in a fixed order, without following links.
fn snapshot(root: &Path) -> std::io::Result<Vec<Stat>> {
    let mut stats = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.is_dir() {
            let mut children: Vec<PathBuf> =
                std::fs::read_dir(&path)?.map(|entry| entry.map(|e| e.path())).collect::<Result<_, _>>()?;
            children.sort();
            pending.extend(children.into_iter().rev());
        }
        stats.push(Stat {
            path,
            ino: meta.ino(),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            size: meta.size(),
            mode: meta.mode(),
        });
    }
    Ok(stats)
}

/// Records a part file as the handler left it, so the audit keeps it.
pub(super) fn record_part(config: &Config, file: &Path) {
    if config.isolation != Isolation::Process {
        return;
    }
    if let Ok(manifest) = snapshot(file) {
        registry().insert(file.to_path_buf(), Known { manifest, last_used: SystemTime::now() });
    }
}

/// Forgets a part file the handler removed.
pub(super) fn forget(file: &Path) {
    registry().remove(file);
}

/// Process isolation, after every call (when no process of the call is left): everything under
/// the bundle folder that this process did not put there, or that changed since, is removed.
pub(crate) fn audit(config: &Config) {
    if config.isolation != Isolation::Process {
        return;
    }
    let root = &config.bundle_dir;
    let mut known = registry();
    match std::fs::symlink_metadata(root) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            known.retain(|path, _| !path.starts_with(root));
            return;
        }
        Ok(meta) if meta.is_dir() && meta.uid() == crate::handler::identity::own_uid() => {}
        _ => {
            tracing::warn!("the bundle folder was replaced by a command; it is removed");
            remove_entry(root);
            known.retain(|path, _| !path.starts_with(root));
            return;
        }
    }
    let mut removed = 0usize;
    for tenant in entries(root) {
        if !is_real_dir(&tenant) {
            remove_entry(&tenant);
            removed += 1;
            continue;
        }
        for install in entries(&tenant) {
            if install.file_name().is_some_and(|name| name == PARTIAL) && is_real_dir(&install) {
                for part in entries(&install) {
                    removed += usize::from(!keep_if_unchanged(&mut known, &part));
                }
                continue;
            }
            removed += usize::from(!keep_if_unchanged(&mut known, &install));
        }
    }
    known.retain(|path, _| !path.starts_with(root) || std::fs::symlink_metadata(path).is_ok());
    if removed > 0 {
        tracing::warn!(removed, "entries of the bundle folder that a command added or changed were removed");
    }
}

/// Keeps `path` when it is recorded and unchanged; otherwise removes it and forgets it.
fn keep_if_unchanged(known: &mut HashMap<PathBuf, Known>, path: &Path) -> bool {
    let unchanged = known.get(path).is_some_and(|entry| snapshot(path).is_ok_and(|now| now == entry.manifest));
    if !unchanged {
        known.remove(path);
        remove_entry(path);
    }
    unchanged
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).into_iter().flatten().flatten().map(|entry| entry.path()).collect()
}

fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir())
}

fn remove_entry(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => remove_tree(path),
        Ok(_) => {
            let _ = std::fs::remove_file(path);
        }
        Err(_) => {}
    }
}
