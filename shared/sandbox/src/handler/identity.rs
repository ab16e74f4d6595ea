//! Who a command runs as and how its processes are swept. As root, each bwrap call gets a fresh
//! unprivileged uid (RLIMIT_NPROC does not bind uid 0, and a uid of its own lets the handler kill
//! exactly the call's processes); elsewhere the command keeps the handler's uid.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::HandlerError;

/// The uids handed out: far above any account's and below the usual subordinate-id ranges' end.
const FIRST_UID: u32 = 200_000;
const UIDS: u32 = 60_000;
/// The lock file whose byte `uid - FIRST_UID` is locked while a call uses that uid.
const LOCK_FILE: &str = ".uids.lock";

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

pub(crate) fn is_uid_root() -> bool {
    // SAFETY: getuid and geteuid have no preconditions.
    unsafe { libc::getuid() == 0 || libc::geteuid() == 0 }
}

/// A uid (and the gid of the same number) held for one call. An open-file-description lock on one
/// byte per uid keeps it distinct among concurrent calls, in this process and in any other handler
/// sharing the scratch base; the lock goes with the file when the lease is dropped or the process
/// dies.
pub(crate) struct Lease {
    uid: u32,
    _lock: File,
}

impl Lease {
    pub(crate) fn acquire(scratch_base: &Path) -> Result<Self, HandlerError> {
        for _ in 0..64 {
            // A new open file description per attempt: locks of one description never conflict.
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(scratch_base.join(LOCK_FILE))
                .map_err(|err| HandlerError::Internal(format!("could not open the uid lock file: {err}")))?;
            let offset = rand::random_range(0..UIDS);
            // SAFETY: an all-zero flock is a valid value; the fields are then set.
            let mut lock: libc::flock = unsafe { std::mem::zeroed() };
            lock.l_type = libc::F_WRLCK as libc::c_short;
            lock.l_whence = libc::SEEK_SET as libc::c_short;
            lock.l_start = libc::off_t::from(offset);
            lock.l_len = 1;
            // SAFETY: the descriptor is open and `lock` outlives the call.
            if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &lock) } == 0 {
                return Ok(Self { uid: FIRST_UID + offset, _lock: file });
            }
            let err = std::io::Error::last_os_error();
            if !matches!(err.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) {
                return Err(HandlerError::Internal(format!("could not lock a uid: {err}")));
            }
        }
        Err(HandlerError::Internal("no free uid for the call".into()))
    }

    pub(crate) fn uid(&self) -> u32 {
        self.uid
    }
}

/// Kills every process of `uid` (root only) and waits until none is left, zombies included (at
/// most two seconds). A helper switches to the uid and signals -1, which reaches exactly the
/// processes that uid may signal, with no pid read from /proc that could be reused meanwhile; one
/// such signal also stops forks in flight (the kernel fails a fork whose parent is being killed).
pub(crate) fn sweep(uid: u32) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let mut helper = Command::new("/bin/true");
        helper.uid(uid).gid(uid).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        // SAFETY: kill is async-signal-safe and runs after the switch to `uid`.
        unsafe {
            helper.pre_exec(|| {
                libc::kill(-1, libc::SIGKILL);
                Ok(())
            });
        }
        if let Err(err) = helper.status() {
            tracing::warn!(uid, error = %err, "could not sweep the call's processes");
            return;
        }
        // Killed processes linger a moment (a namespace's init reaps its own first); any still
        // there after 20 ms get the signal again.
        for _ in 0..10 {
            if !has_processes(uid) {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        if Instant::now() >= deadline {
            tracing::warn!(uid, "processes of the call outlived the sweep");
            return;
        }
    }
}

/// Whether any live process runs as `uid`, from the owners of /proc's entries (a stat each,
/// cheaper than reading every status). Zombies do not count: they run nothing and hold no file,
/// and the namespace's init, orphaned when bwrap exits, waits as one until the machine's init
/// reaps it. A process that made itself undumpable shows as root and is missed, but it was
/// killed all the same.
fn has_processes(uid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else { return false };
    entries.flatten().any(|entry| {
        entry.file_name().as_encoded_bytes().first().is_some_and(u8::is_ascii_digit)
            && entry.metadata().is_ok_and(|meta| meta.uid() == uid)
            && std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| !is_dead(&stat))
    })
}

/// Whether a /proc/{pid}/stat line is a zombie's or a dead task's (the state after the command
/// name, which may itself hold parentheses).
fn is_dead(stat: &str) -> bool {
    let state = stat.rfind(')').and_then(|end| stat[end + 1..].trim_start().chars().next());
    matches!(state, Some('Z' | 'X' | 'x'))
}

/// Kills every other process of the handler's own uid (process isolation, never as root).
pub(crate) fn sweep_own_uid() {
    if is_uid_root() {
        return;
    }
    // SAFETY: kill has no memory-safety preconditions; -1 spares this process itself.
    unsafe {
        libc::kill(-1, libc::SIGKILL);
    }
}

/// Reaps every child the handler has left (process isolation): as a subreaper it inherits the
/// orphans of the command's daemons, which `sweep_own_uid` has just killed; waits for them to
/// exit (at most two seconds). No other child of the handler runs now: calls are sequential and
/// the sweep killed every other process of its uid. Never as root, where the sweep kills nothing
/// and the process may have children of its own (the tests' other calls).
pub(crate) fn reap_orphans() {
    if is_uid_root() {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only `status`.
        let reaped = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        match reaped {
            // Reaped one; there may be more.
            pid if pid > 0 => continue,
            // Children remain, none has exited yet.
            0 if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            0 => {
                tracing::warn!("children of the handler outlived the call's sweep");
                return;
            }
            // ECHILD: none left.
            _ => return,
        }
    }
}

/// The tasks (threads) whose real uid is `uid`: what RLIMIT_NPROC counts.
pub(crate) fn tasks_of(uid: u32) -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    let mut tasks = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.as_encoded_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else { continue };
        let field = |key: &str| {
            status.lines().find_map(|line| line.strip_prefix(key)).and_then(|rest| rest.split_whitespace().next())
        };
        if field("Uid:").and_then(|real| real.parse::<u32>().ok()) == Some(uid) {
            tasks += field("Threads:").and_then(|threads| threads.parse::<u64>().ok()).unwrap_or(1);
        }
    }
    tasks
}

/// The handler's own uid.
pub(crate) fn own_uid() -> u32 {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zombies_are_told_from_live_processes() {
        assert!(is_dead("42 (bwrap) Z 1 42 42 0"));
        assert!(is_dead("42 (a) b) Z 1"));
        assert!(!is_dead("42 (bash) S 1 42"));
        assert!(!is_dead("42 (Z) R 1"));
        assert!(!is_dead("garbage"));
    }
}
