//! Runs `bash -c <command>` over the scratch directory, inside bubblewrap or as a plain process,
//! with rlimits, in a process group of its own, and stops it at the timeout or past a bound. Its
//! stdout and stderr share one pipe, so the output is interleaved as written. `command` builds the
//! command line and its environment, `watch` waits for it and stops it; this file starts it and
//! cleans up after it.

mod command;
mod places;
mod watch;

use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::collect::Bounds;
use super::identity;
use super::memory::Bound;
use super::output::Capture;
use super::scratch::{self, Scratch};
use super::seccomp;
use super::{Config, HandlerError, Isolation};
use command::{bwrap_command, process_command, rlimit_values};
use places::Places;
use watch::{lock, read_output, read_status, wait_for_exit, Control, State, Stop, Watch};

/// How long the handler waits for the output's end once the command's processes are killed.
const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// How the command ended, before its files are collected.
pub(crate) struct Ran {
    pub capture: Capture,
    pub exit_code: Option<i32>,
    pub stopped: Option<String>,
    pub timed_out: bool,
    pub duration: Duration,
}

pub(crate) fn execute(
    config: &Config,
    scratch: &Scratch,
    command: &str,
    timeout: Duration,
    owner: Option<u32>,
    bounds: &Bounds,
) -> Result<Ran, HandlerError> {
    let internal = |what: &str, err: std::io::Error| HandlerError::Internal(format!("{what}: {err}"));
    let (output, writer) = std::io::pipe().map_err(|err| internal("could not make the output pipe", err))?;
    // bwrap reports on this pipe whether it started the command, which tells its own failures
    // (printed to the output like the command's) from the command's.
    let status = match config.isolation {
        Isolation::Bwrap { .. } => Some(std::io::pipe().map_err(|err| internal("could not make a pipe", err))?),
        Isolation::Process => None,
    };
    let status_fd = status.as_ref().map(|(_, writer)| writer.as_raw_fd());
    // Everything the child needs is made before the fork: the seccomp programs (bwrap reads them
    // from memfds, a plain process installs them itself), the call's memory bound.
    let filters = seccomp::programs().map_err(HandlerError::Internal)?;
    let (bound, filter_fds) = match config.isolation {
        Isolation::Bwrap { .. } => {
            let fds = [seccomp::memfd(&filters.deny), seccomp::memfd(&filters.clone3)];
            let [deny, clone3] = fds;
            let fds = [
                deny.map_err(|err| internal("could not hand over the seccomp filter", err))?,
                clone3.map_err(|err| internal("could not hand over the seccomp filter", err))?,
            ];
            (Some(Bound::for_call(config.limits.call_memory_bytes)), Some(fds))
        }
        // No cgroup can be made in a Lambda environment: the watchdog measures the call there.
        Isolation::Process => (Some(Bound::Watchdog), None),
    };
    let seccomp_fds = filter_fds.as_ref().map(|[deny, clone3]| [deny.as_raw_fd(), clone3.as_raw_fd()]);
    let procs_fd = match &bound {
        Some(Bound::Cgroup(group)) => Some(group.procs_fd()),
        _ => None,
    };
    let install = match config.isolation {
        Isolation::Process => Some(filters),
        Isolation::Bwrap { .. } => None,
    };
    // As root, the call's /tmp and /dev/shm are bounded in files too; they go after the call.
    let places = match (&config.isolation, owner) {
        (Isolation::Bwrap { .. }, Some(uid)) => Some(Places::mount(scratch, config, uid)?),
        _ => None,
    };
    let mut cmd = match &config.isolation {
        Isolation::Bwrap { bwrap, root } => {
            bwrap_command(bwrap, root, config, scratch, places.as_ref(), command, (status_fd, seccomp_fds))
        }
        Isolation::Process => process_command(scratch, command),
    };
    let stdout = writer.try_clone().map_err(|err| internal("could not share the output pipe", err))?;
    cmd.stdin(Stdio::null()).stdout(stdout).stderr(writer).process_group(0);
    if let Some(uid) = owner {
        // std drops the supplementary groups, then sets the gid and the uid, before `pre_exec`.
        cmd.uid(uid).gid(uid);
    }
    let [cpu, processes, file, open_files] = rlimit_values(config, timeout, owner);
    // SAFETY: the closure only makes system calls (write, close_range, getrlimit, setrlimit, fcntl,
    // prctl, seccomp: all async-signal-safe) on values computed before the fork, and allocates
    // nothing.
    unsafe {
        cmd.pre_exec(move || {
            // Into the call's memory cgroup first, so that every process of the call is in it.
            if let Some(fd) = procs_fd {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // Descriptors the handler itself inherited without close-on-exec stay out of the command.
            if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) != 0 {
                let mut current = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                libc::getrlimit(libc::RLIMIT_NOFILE, &mut current);
                for fd in 3..current.rlim_cur.min(65_536) as libc::c_int {
                    libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                }
            }
            let rlimits = [
                (libc::RLIMIT_CPU, cpu),
                (libc::RLIMIT_NPROC, processes),
                (libc::RLIMIT_FSIZE, file),
                (libc::RLIMIT_NOFILE, open_files),
                (libc::RLIMIT_CORE, 0),
            ];
            for (resource, value) in rlimits {
                let limit = libc::rlimit { rlim_cur: value, rlim_max: value };
                if libc::setrlimit(resource, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for fd in status_fd.into_iter().chain(seccomp_fds.into_iter().flatten()) {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // Last: the filter also binds what the closure itself would call.
            if let Some(filters) = install {
                seccomp::install(filters)?;
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    // The handler's copies of the pipes' write ends go now, so the reads end when the command's do.
    drop(cmd);
    drop(filter_fds);
    let status = status.map(|(reader, _)| reader);
    let mut child = spawned.map_err(|err| internal("could not start the command", err))?;
    let started = Instant::now();
    let pid = libc::pid_t::try_from(child.id()).map_err(|_| HandlerError::Internal("pid out of range".into()))?;
    let control = Arc::new(Control { group: pid, state: Mutex::new(State { reason: None, alive: true }) });

    let capture = Arc::new(Mutex::new(Capture::default()));
    let (done, drained) = mpsc::channel::<()>();
    let reader = {
        let (capture, control) = (Arc::clone(&capture), Arc::clone(&control));
        let hard = config.limits.output_hard_bytes;
        std::thread::Builder::new()
            .name("sandbox-output".into())
            .spawn(move || read_output(output, &capture, &control, hard, done))
            .map_err(|err| internal("could not start the output reader", err))
    };
    if let Err(err) = reader {
        control.kill_group();
        let _ = child.wait();
        return Err(err);
    }

    let watch = Watch { config, scratch, bounds, memory: bound.as_ref() };
    let exit = wait_for_exit(&mut child, pid, &control, &watch, timeout);
    let duration = started.elapsed();
    // Whatever of the command's group is still running goes while the leader is unreaped, so the
    // group id cannot have been reused.
    control.kill_group();
    control.state().alive = false;
    let status_code = child.wait().map_err(|err| internal("could not wait for the command", err))?;
    let stopped = control.state().reason.clone();
    match (&config.isolation, owner) {
        (Isolation::Bwrap { .. }, Some(uid)) => identity::sweep(uid),
        (Isolation::Process, _) => {
            identity::sweep_own_uid();
            identity::reap_orphans();
            scratch::wipe_leftovers(config);
        }
        (Isolation::Bwrap { .. }, None) => {}
    }
    if let Some(bound) = &bound {
        tracing::debug!(memory_bound = bound.kind(), "the call's memory bound");
    }
    drop(bound);
    if drained.recv_timeout(DRAIN_WAIT) == Err(mpsc::RecvTimeoutError::Timeout) {
        tracing::warn!("a process of the sandboxed command kept its output open; the output reader is left behind");
    }
    let capture = lock(&capture).clone();
    if stopped.is_none() {
        if let Some(status) = status {
            if !read_status(status).contains("\"child-pid\"") {
                let (text, _) = capture.render();
                return Err(HandlerError::Internal(format!("bubblewrap did not start the command: {text}")));
            }
        }
    }
    Ok(Ran {
        capture,
        exit_code: if stopped.is_some() { None } else { status_code.code() },
        timed_out: exit == Err(Stop::Timeout),
        stopped,
        duration,
    })
}
