//! Waiting for the command and stopping it: the waiter measures the workspace and the call's
//! memory until the exit or the timeout, the output reader keeps the head and tail of the output,
//! and either may kill the command's process group, the first reason given kept.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::Child;
use std::sync::{mpsc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::handler::collect::{over_bounds, Bounds};
use crate::handler::memory::{self, Bound};
use crate::handler::output::Capture;
use crate::handler::scratch::Scratch;
use crate::handler::{human_bytes, seconds, Config};

/// How often the workspace is measured while the command runs.
const WATCH_EVERY: Duration = Duration::from_millis(50);

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Stop {
    Timeout,
    Bound,
}

/// What the waiter measures while the command runs.
pub(super) struct Watch<'a> {
    pub(super) config: &'a Config,
    pub(super) scratch: &'a Scratch,
    pub(super) bounds: &'a Bounds,
    pub(super) memory: Option<&'a Bound>,
}

impl Watch<'_> {
    /// The reason to stop the command past its memory bound: the kernel killed a process of the
    /// call's cgroup, or the watchdog measured the tree over the bound.
    fn over_memory(&self, pid: libc::pid_t) -> Option<String> {
        let limit = self.config.limits.call_memory_bytes;
        let over = match self.memory? {
            Bound::Cgroup(group) => group.oom_killed(),
            Bound::Watchdog => memory::tree_resident_bytes(pid) > limit,
        };
        over.then(|| format!("used more than {} of memory (all its processes together)", human_bytes(limit)))
    }
}

/// Waits for the command's exit (without reaping it), measuring the workspace and the memory
/// meanwhile; stops the command at the timeout or past a bound.
pub(super) fn wait_for_exit(
    child: &mut Child,
    pid: libc::pid_t,
    control: &Control,
    watch: &Watch<'_>,
    timeout: Duration,
) -> Result<(), Stop> {
    let started = Instant::now();
    let pidfd = pidfd_open(pid);
    let result = loop {
        let remaining = timeout.saturating_sub(started.elapsed());
        if remaining.is_zero() {
            control.stop(format!("timed out after {}", seconds(timeout)));
            break Err(Stop::Timeout);
        }
        if exited_within(pid, pidfd.as_ref(), remaining.min(WATCH_EVERY)) {
            // A process the kernel killed for the call's memory may have ended the command.
            if let Some(reason) = watch.over_memory(pid) {
                control.stop(reason);
                return Err(Stop::Bound);
            }
            return Ok(());
        }
        if let Some(reason) = watch.over_memory(pid) {
            control.stop(reason);
            break Err(Stop::Bound);
        }
        if !watch.scratch.workspace_bounded {
            if let Some(reason) = over_bounds(&watch.scratch.workspace, watch.bounds, &watch.config.limits) {
                control.stop(reason);
                break Err(Stop::Bound);
            }
        }
        if control.state().reason.is_some() {
            // The output reader stopped it.
            break Err(Stop::Bound);
        }
    };
    // SIGKILL is on its way; the exit follows unless the process is stuck in the kernel.
    if !exited_within(pid, pidfd.as_ref(), Duration::from_secs(5)) {
        tracing::warn!(pid, "the sandboxed command did not exit 5 s after SIGKILL");
        let _ = child.kill();
    }
    result
}

/// Who may stop the command (the waiter, the output reader) and why it was stopped first.
pub(super) struct Control {
    pub(super) group: libc::pid_t,
    pub(super) state: Mutex<State>,
}

pub(super) struct State {
    pub(super) reason: Option<String>,
    /// Until the leader is reaped its process group id cannot be reused, so killing it is safe.
    pub(super) alive: bool,
}

impl Control {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Kills the command's process group, keeping the first reason given.
    fn stop(&self, reason: String) {
        let mut state = self.state();
        state.reason.get_or_insert(reason);
        if state.alive {
            kill_group(self.group);
        }
    }

    pub(super) fn kill_group(&self) {
        if self.state().alive {
            kill_group(self.group);
        }
    }
}

fn kill_group(group: libc::pid_t) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Reads the output to its end, keeping the head and tail, and stops the command once it has
/// printed more than `hard` bytes; dropping `done` tells the handler it has finished.
pub(super) fn read_output(
    mut output: std::io::PipeReader,
    capture: &Mutex<Capture>,
    control: &Control,
    hard: u64,
    done: mpsc::Sender<()>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    let mut stopped = false;
    loop {
        match output.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => {
                let total = {
                    let mut capture = lock(capture);
                    capture.push(&buffer[..read]);
                    capture.total
                };
                if total > hard && !stopped {
                    stopped = true;
                    control.stop(format!("printed more than {} of output", human_bytes(hard)));
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    drop(done);
}

/// What bwrap wrote on its status pipe (bounded, never blocking: every writer is gone or stuck).
pub(super) fn read_status(status: std::io::PipeReader) -> String {
    let fd = status.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function owns.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    let mut text = Vec::new();
    let _ = status.take(4096).read_to_end(&mut text);
    String::from_utf8_lossy(&text).into_owned()
}

fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a non-negative result is a descriptor this process now owns.
    RawFd::try_from(fd).ok().filter(|fd| *fd >= 0).map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether the child exits within `wait`; it is left unreaped.
fn exited_within(pid: libc::pid_t, pidfd: Option<&OwnedFd>, wait: Duration) -> bool {
    if let Some(pidfd) = pidfd {
        let mut poll = libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let millis = libc::c_int::try_from(wait.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd.
        return unsafe { libc::poll(&mut poll, 1, millis) } > 0;
    }
    // Kernels before 5.3 have no pidfd: poll waitid instead.
    let deadline = Instant::now() + wait;
    loop {
        // SAFETY: an all-zero siginfo_t is valid; waitid fills it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        // SAFETY: `info` outlives the call; si_pid is read only after a successful waitid.
        if unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) } == 0
            && unsafe { info.si_pid() } != 0
        {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(5)));
    }
}
