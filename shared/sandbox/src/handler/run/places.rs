//! The call's `/tmp` and `/dev/shm` when the handler is root: tmpfs mounts of the handler's own in
//! the scratch, bounded in bytes and in files, which bubblewrap binds in. Its own `--size --tmpfs`
//! bounds only the bytes: a command could make millions of empty files, whose inodes are kernel
//! memory and take seconds to free when the call's namespace goes.

use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

use crate::handler::scratch::{mount_tmpfs, Scratch};
use crate::handler::{Config, HandlerError};

/// One file (inode) for each KiB of a place's size: 65,536 in the 64 MiB of `/tmp`, far more than
/// the profiles and caches of LibreOffice, Chromium or pip make, and freed in milliseconds.
const BYTES_PER_INODE: u64 = 1024;

/// The two mounts, unmounted when dropped (their empty folders go with the scratch).
pub(crate) struct Places {
    pub(crate) tmp: PathBuf,
    pub(crate) shm: PathBuf,
}

impl Places {
    /// Mounts both, owned by the call's `uid`, in folders of the scratch.
    pub(crate) fn mount(scratch: &Scratch, config: &Config, uid: u32) -> Result<Places, HandlerError> {
        let size = config.limits.disk_bytes;
        let inodes = (size / BYTES_PER_INODE).max(1024);
        let mut places = Places { tmp: PathBuf::new(), shm: PathBuf::new() };
        for (name, place) in [("call-tmp", &mut places.tmp), ("call-shm", &mut places.shm)] {
            let dir = scratch.root.join(name);
            let made = DirBuilder::new().mode(0o700).create(&dir).and_then(|()| mount_tmpfs(&dir, size, inodes, uid));
            made.map_err(|err| HandlerError::Internal(format!("could not mount the call's {name}: {err}")))?;
            // Only a mounted place is unmounted on drop.
            *place = dir;
        }
        Ok(places)
    }
}

impl Drop for Places {
    fn drop(&mut self) {
        for dir in [&self.tmp, &self.shm].into_iter().filter(|dir| !dir.as_os_str().is_empty()) {
            let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else { continue };
            // Detached: the files go with the last of the call's namespace's references.
            // SAFETY: umount2 takes a NUL-terminated path and flags.
            if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } != 0 {
                let err = std::io::Error::last_os_error();
                tracing::warn!(path = %dir.display(), error = %err, "could not unmount a call's temporary place");
            }
        }
    }
}
