//! The scratch directory's files: its base and its randomly named folder, the request's files
//! written without following links and handed to the call's uid, the workspace's bounded tmpfs
//! (`mount_tmpfs`, which also makes the call's `/tmp` and `/dev/shm`, `run/places`), and trees removed afterwards
//! whatever the command did to them.

use std::collections::BTreeSet;
use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::inputs::{Decoded, Inputs};
use crate::handler::{Config, HandlerError};

/// Mounts a tmpfs over the (empty) workspace folder, owned by the call's uid: its size is the
/// inputs' pages plus the disk bound, its inodes the inputs' files and folders plus the file
/// bound, so writing past either fails with ENOSPC inside the command, at once. Root only.
pub(super) fn mount_workspace(dir: &Path, uid: u32, config: &Config, inputs: &Inputs) -> std::io::Result<()> {
    const PAGE: u64 = 4096;
    let pages: u64 = inputs.workspace.iter().map(|(_, bytes)| (bytes.len() as u64).div_ceil(PAGE)).sum();
    let folders: BTreeSet<&str> =
        inputs.workspace.iter().flat_map(|(path, _)| path.match_indices('/').map(|(at, _)| &path[..at])).collect();
    let size = (pages * PAGE).saturating_add(config.limits.disk_bytes);
    // The root folder is an inode too.
    let inodes = (inputs.workspace.len() + folders.len() + config.limits.files + 1) as u64;
    mount_tmpfs(dir, size, inodes, uid)
}

/// Mounts a tmpfs of `size` bytes and `inodes` files and folders over `dir`, its root owned by
/// `uid` (and the gid of the same number), mode 0755, no setuid or device files. Root only.
pub(crate) fn mount_tmpfs(dir: &Path, size: u64, inodes: u64, uid: u32) -> std::io::Result<()> {
    let options = format!("size={size},nr_inodes={inodes},mode=0755,uid={uid},gid={uid}");
    let c = |text: &[u8]| std::ffi::CString::new(text).map_err(std::io::Error::other);
    let (source, target, kind, data) =
        (c(b"tmpfs")?, c(dir.as_os_str().as_encoded_bytes())?, c(b"tmpfs")?, c(options.as_bytes())?);
    let flags = libc::MS_NOSUID | libc::MS_NODEV;
    // SAFETY: mount takes NUL-terminated strings that outlive the call.
    if unsafe { libc::mount(source.as_ptr(), target.as_ptr(), kind.as_ptr(), flags, data.as_ptr().cast()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Makes the scratch base if needed: a real directory of this user, traversable by every uid
/// (0711) but not listable, so a call's uid reaches its own directory only by its random name.
pub(crate) fn prepare_base(base: &Path) -> Result<(), HandlerError> {
    let internal = |err: std::io::Error| HandlerError::Internal(format!("scratch base {}: {err}", base.display()));
    if let Some(parent) = base.parent() {
        std::fs::create_dir_all(parent).map_err(internal)?;
    }
    match DirBuilder::new().mode(0o711).create(base) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(internal(err)),
    }
    let meta = std::fs::symlink_metadata(base).map_err(internal)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me {
        return Err(HandlerError::Internal(format!(
            "the scratch base {} must be a directory owned by uid {me}",
            base.display()
        )));
    }
    if meta.mode() & 0o7777 != 0o711 {
        std::fs::set_permissions(base, Permissions::from_mode(0o711)).map_err(internal)?;
    }
    Ok(())
}

/// A new directory with a random name under `base`, mode 0700.
pub(super) fn make_unique(base: &Path) -> Result<PathBuf, HandlerError> {
    for _ in 0..8 {
        let dir = base.join(format!("{:016x}", rand::random::<u64>()));
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(HandlerError::Internal(format!("could not make the scratch: {err}"))),
        }
    }
    Err(HandlerError::Internal("could not find a free scratch name".into()))
}

/// Whether `path` is absolute and below a top-level folder, so that wiping it cannot wipe `/` or
/// `/tmp`.
pub(super) fn is_safe_to_wipe(path: &Path) -> bool {
    path.is_absolute() && path.components().count() >= 3
}

/// Writes checked files under a new folder `dir`, never over anything (the tree is new).
pub(super) fn write_tree(dir: &Path, files: &[Decoded]) -> std::io::Result<()> {
    DirBuilder::new().mode(0o755).create(dir)?;
    write_files(dir, files)
}

/// Writes checked files under the empty folder `dir`.
pub(super) fn write_files(dir: &Path, files: &[Decoded]) -> std::io::Result<()> {
    for (path, bytes) in files {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            DirBuilder::new().mode(0o755).recursive(true).create(parent)?;
        }
        let mut file =
            OpenOptions::new().write(true).create_new(true).mode(0o644).custom_flags(libc::O_NOFOLLOW).open(&target)?;
        file.write_all(bytes)?;
    }
    Ok(())
}

/// Hands a tree the handler just wrote to `uid` (and the gid of the same number).
pub(super) fn chown_tree(dir: &Path, uid: u32) -> std::io::Result<()> {
    std::os::unix::fs::lchown(dir, Some(uid), Some(uid))?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            chown_tree(&entry.path(), uid)?;
        } else {
            std::os::unix::fs::lchown(entry.path(), Some(uid), Some(uid))?;
        }
    }
    Ok(())
}

/// Removes a tree without following links. A folder the command made unwritable or unreadable
/// (possible when it runs as the handler's uid) gets its owner's permissions back first.
pub(crate) fn remove_tree(root: &Path) {
    if std::fs::remove_dir_all(root).is_ok() || std::fs::symlink_metadata(root).is_err() {
        return;
    }
    restore_permissions(root);
    if let Err(err) = std::fs::remove_dir_all(root) {
        tracing::warn!(path = %root.display(), error = %err, "could not remove a sandbox scratch directory");
    }
}

fn restore_permissions(dir: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(dir) else { return };
    if !meta.is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(dir, Permissions::from_mode(0o700));
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            restore_permissions(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_deep_absolute_paths_are_wiped() {
        assert!(is_safe_to_wipe(Path::new("/tmp/sandbox")));
        for unsafe_path in ["/", "/tmp", "tmp/sandbox", ""] {
            assert!(!is_safe_to_wipe(Path::new(unsafe_path)), "{unsafe_path:?}");
        }
    }
}
