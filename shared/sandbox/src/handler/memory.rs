//! The memory of one call as a whole, every process of it together. Locally: a memory cgroup of
//! the call's own (cgroup v2, else v1), made under the handler's own, its limit set, the command
//! put in it before exec and the group removed after. Where no cgroup can be made (bwrap without
//! root, process isolation in a Lambda environment): a watchdog that sums the resident memory of
//! the command's process tree every 50 ms and stops the call past the bound; in Lambda the
//! function's memory size bounds the environment as well.
//!
//! These bounds replace RLIMIT_AS, which the commands do not get (`run/command.rs`): it bounds one
//! process's address space, not what the call uses, and Chromium, which reserves tens of GiB it
//! never touches, dies under it.
//!
//! A group is removed when the call ends. One whose processes are still leaving (a namespace
//! freeing many files takes seconds) goes to a reaper thread that removes it once empty; groups an
//! earlier handler left behind are removed when a new one is made.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use agent_ports::sandbox::MAX_TIMEOUT;

/// The prefix of every call's group, which the sweep of stale groups looks for.
const GROUP_PREFIX: &str = "sandbox-call-";
/// How long the end of a call waits for its group to empty before the reaper takes it.
const REMOVE_WAIT: Duration = Duration::from_secs(5);
/// How often the reaper tries again, and for how long before it says so.
const REAP_EVERY: Duration = Duration::from_millis(200);
const REAP_FOR: Duration = Duration::from_secs(600);
/// A group this old belongs to no running call: no call lasts longer than its timeout, and its
/// group is made just before it starts.
const STALE_AFTER: Duration = Duration::from_secs(2 * MAX_TIMEOUT.as_secs() + 60);

/// How a call's memory is bounded.
pub(crate) enum Bound {
    /// A memory cgroup of the call's own.
    Cgroup(Group),
    /// No cgroup could be made: the command's process tree is measured while it runs.
    Watchdog,
}

impl Bound {
    /// A cgroup when one can be made, else the watchdog (and a log line saying why, once).
    pub(crate) fn for_call(bytes: u64) -> Bound {
        match Group::create(bytes) {
            Ok(group) => Bound::Cgroup(group),
            Err(reason) => {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    tracing::warn!(
                        %reason,
                        "no memory cgroup for the sandbox's calls: their memory is bounded by a watchdog over their processes instead"
                    );
                });
                Bound::Watchdog
            }
        }
    }

    /// Which bound applies, for the logs.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Bound::Cgroup(group) => match group.version {
                Version::V1 => "cgroup v1",
                Version::V2 => "cgroup v2",
            },
            Bound::Watchdog => "watchdog",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// A call's memory cgroup; dropping it removes it (its processes are gone by then).
pub(crate) struct Group {
    dir: PathBuf,
    version: Version,
    /// `cgroup.procs`, opened by the handler (so its credentials move the child) before the fork.
    procs: File,
}

impl Group {
    fn create(bytes: u64) -> Result<Group, String> {
        let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|err| format!("/proc/self/cgroup: {err}"))?;
        let mounts =
            std::fs::read_to_string("/proc/self/mountinfo").map_err(|err| format!("/proc/self/mountinfo: {err}"))?;
        let name = format!("{GROUP_PREFIX}{:016x}", rand::random::<u64>());
        let mut reasons = Vec::new();
        for version in [Version::V2, Version::V1] {
            let Some(parent) = own_group(&own, &mounts, version) else {
                reasons.push(format!("{version:?}: no memory hierarchy"));
                continue;
            };
            sweep_stale(&parent);
            match Group::make(parent.join(&name), version, bytes) {
                Ok(group) => return Ok(group),
                Err(err) => reasons.push(format!("{version:?}: {err}")),
            }
        }
        Err(reasons.join("; "))
    }

    fn make(dir: PathBuf, version: Version, bytes: u64) -> Result<Group, String> {
        std::fs::create_dir(&dir).map_err(|err| format!("{}: {err}", dir.display()))?;
        let set = |file: &str, value: &str| {
            std::fs::write(dir.join(file), value).map_err(|err| format!("{}/{file}: {err}", dir.display()))
        };
        let limits = match version {
            Version::V2 => set("memory.max", &bytes.to_string())
                .and_then(|()| set("memory.swap.max", "0").or(Ok(())))
                // The kernel kills the whole group at once rather than one process of it.
                .and_then(|()| set("memory.oom.group", "1").or(Ok(()))),
            Version::V1 => set("memory.limit_in_bytes", &bytes.to_string()).and_then(|()| {
                if dir.join("memory.memsw.limit_in_bytes").exists() {
                    set("memory.memsw.limit_in_bytes", &bytes.to_string())?;
                }
                Ok(())
            }),
        };
        let procs = limits.and_then(|()| {
            OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(dir.join("cgroup.procs"))
                .map_err(|err| format!("{}/cgroup.procs: {err}", dir.display()))
        });
        match procs {
            Ok(procs) => Ok(Group { dir, version, procs }),
            Err(err) => {
                let _ = std::fs::remove_dir(&dir);
                Err(err)
            }
        }
    }

    /// The descriptor the child writes "0" to, between fork and exec, to enter the group.
    pub(crate) fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// Whether the kernel killed a process of the call for the group's memory.
    pub(crate) fn oom_killed(&self) -> bool {
        let file = match self.version {
            Version::V1 => "memory.oom_control",
            Version::V2 => "memory.events",
        };
        std::fs::read_to_string(self.dir.join(file)).is_ok_and(|text| {
            text.lines()
                .filter_map(|line| line.strip_prefix("oom_kill "))
                .any(|count| count.trim().parse::<u64>().is_ok_and(|count| count > 0))
        })
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !remove_within(&self.dir, REMOVE_WAIT) {
            hand_to_reaper(self.dir.clone());
        }
    }
}

/// Removes a call's group, killing what is still in it, within `wait`; whether it is gone.
fn remove_within(dir: &Path, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(5);
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return true,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return true,
            // EBUSY: a process is still in it, killed but still leaving (a namespace it held may
            // be freeing many files), or another group was made in it.
            Err(_) if Instant::now() >= deadline => return false,
            Err(_) => {
                kill_members(dir);
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
        }
    }
}

/// The groups the reaper still has to remove, with when each was handed over; `None` while no
/// reaper thread runs.
static REAPER: Mutex<Option<Vec<(PathBuf, Instant)>>> = Mutex::new(None);

/// Leaves a group that is still busy to a thread that removes it once its processes are gone, so
/// the call answers now and the group still goes.
fn hand_to_reaper(dir: PathBuf) {
    tracing::info!(path = %dir.display(), "a call's memory cgroup is still emptying: it is removed in the background");
    let mut pending = REAPER.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(groups) = pending.as_mut() {
        groups.push((dir, Instant::now()));
        return;
    }
    *pending = Some(vec![(dir.clone(), Instant::now())]);
    drop(pending);
    let started = std::thread::Builder::new().name("sandbox-cgroup-reaper".into()).spawn(reap);
    if let Err(err) = started {
        *REAPER.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
        tracing::warn!(path = %dir.display(), error = %err, "could not start the cgroup reaper: the group is left");
    }
}

/// The reaper thread: tries the pending groups again until none is left, then ends.
fn reap() {
    loop {
        std::thread::sleep(REAP_EVERY);
        let mut pending = REAPER.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let groups = pending.get_or_insert_with(Vec::new);
        groups.retain(|(dir, since)| {
            kill_members(dir);
            if remove_within(dir, Duration::ZERO) {
                return false;
            }
            let given_up = since.elapsed() >= REAP_FOR;
            if given_up {
                tracing::warn!(path = %dir.display(), "could not remove a call's memory cgroup: it stayed busy for 10 minutes");
            }
            !given_up
        });
        if groups.is_empty() {
            *pending = None;
            return;
        }
    }
}

/// Removes the groups of calls that ended long ago which an earlier handler left (it died, or its
/// reaper gave up): only empty ones can be removed, so a running call's group is never touched.
fn sweep_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(GROUP_PREFIX) {
            continue;
        }
        let age = entry.metadata().and_then(|meta| meta.modified()).ok().and_then(|at| at.elapsed().ok());
        if age.is_some_and(|age| age >= STALE_AFTER) && std::fs::remove_dir(entry.path()).is_ok() {
            tracing::info!(path = %entry.path().display(), "removed a memory cgroup an earlier call left");
        }
    }
}

/// Kills whatever is still in a call's group.
fn kill_members(dir: &Path) {
    let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) else { return };
    for pid in text.lines().filter_map(|line| line.trim().parse::<libc::pid_t>().ok()).filter(|pid| *pid > 0) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// The handler's own group in the hierarchy that has the memory controller, as a path under its
/// mount: from `/proc/self/cgroup` (`0::/path` for v2, `N:...memory...:/path` for v1) and
/// `/proc/self/mountinfo` (`... mountpoint ... - cgroup2|cgroup source options`).
fn own_group(cgroup: &str, mountinfo: &str, version: Version) -> Option<PathBuf> {
    let path = cgroup.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let wanted = match version {
            Version::V2 => id == "0" && controllers.is_empty(),
            Version::V1 => controllers.split(',').any(|name| name == "memory"),
        };
        wanted.then(|| path.to_owned())
    })?;
    let (root, mountpoint) = mountinfo.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        let mut fs = fs.split(' ');
        let (kind, _source, options) = (fs.next()?, fs.next()?, fs.next().unwrap_or(""));
        let wanted = match version {
            Version::V2 => kind == "cgroup2",
            Version::V1 => kind == "cgroup" && options.split(',').any(|option| option == "memory"),
        };
        let mut fields = mount.split(' ');
        let (root, mountpoint) = (fields.nth(3)?, fields.next()?);
        wanted.then(|| (root.to_owned(), mountpoint.to_owned()))
    })?;
    let relative = path.strip_prefix(root.trim_end_matches('/')).unwrap_or(&path).trim_start_matches('/');
    let dir = Path::new(&mountpoint).join(relative);
    // A v2 hierarchy without the memory controller offers no `memory.max` in a child.
    if version == Version::V2 {
        let controllers = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
        if !controllers.split_whitespace().any(|name| name == "memory") {
            return None;
        }
    }
    Some(dir)
}

/// The resident bytes of `root` and every process below it (the watchdog's measure), from
/// `/proc/*/stat`: the parent is the 4th field, the resident pages the 24th.
pub(crate) fn tree_resident_bytes(root: libc::pid_t) -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    let mut processes: Vec<(libc::pid_t, libc::pid_t, u64)> = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<libc::pid_t>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let Some(end) = stat.rfind(')') else { continue };
        let fields: Vec<&str> = stat[end + 1..].split_whitespace().collect();
        // After the name: state (0), ppid (1), ..., rss (21).
        let parent = fields.get(1).and_then(|field| field.parse().ok()).unwrap_or(0);
        let pages = fields.get(21).and_then(|field| field.parse::<u64>().ok()).unwrap_or(0);
        processes.push((pid, parent, pages));
    }
    let mut tree = vec![root];
    let mut at = 0;
    while at < tree.len() {
        let parent = tree[at];
        tree.extend(processes.iter().filter(|(_, ppid, _)| *ppid == parent).map(|(pid, _, _)| *pid));
        at += 1;
    }
    // SAFETY: sysconf has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    processes.iter().filter(|(pid, _, _)| tree.contains(pid)).map(|(_, _, pages)| pages * page).sum()
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;

    use super::*;

    #[test]
    fn a_group_still_busy_is_removed_by_the_reaper_once_its_processes_are_gone() {
        let group = match Group::create(64 << 20) {
            Ok(group) => group,
            Err(reason) => {
                eprintln!("skipped: no memory cgroup can be made here ({reason})");
                return;
            }
        };
        let fd = group.procs_fd();
        let mut command = std::process::Command::new("sleep");
        command.arg("60");
        // SAFETY: the closure only writes to a descriptor opened before the fork.
        unsafe {
            command.pre_exec(move || match libc::write(fd, b"0".as_ptr().cast(), 1) {
                1 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            });
        }
        let mut child = command.spawn().expect("sleep");
        let dir = group.dir.clone();
        // The call ends with a process still in its group: the reaper takes it (the descriptor
        // the group holds is left open; this test is the only one to leave it).
        std::mem::forget(group);
        assert!(!remove_within(&dir, Duration::ZERO), "the group is busy");
        hand_to_reaper(dir.clone());
        std::thread::spawn(move || child.wait());
        let deadline = Instant::now() + Duration::from_secs(10);
        while dir.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!dir.exists(), "{} is left", dir.display());
    }

    #[test]
    fn the_memory_group_is_found_in_either_hierarchy() {
        let cgroup = "4:memory:/process_api/abc\n1:cpu:/\n0::/\n";
        let mountinfo = "30 25 0:27 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n\
                         31 25 0:28 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw\n";
        assert_eq!(
            own_group(cgroup, mountinfo, Version::V1),
            Some(PathBuf::from("/sys/fs/cgroup/memory/process_api/abc"))
        );
        let no_memory = "1:cpu:/\n0::/\n";
        assert_eq!(own_group(no_memory, mountinfo, Version::V1), None);
    }
}
