//! Runs `bash -c <command>` over the scratch directory, inside bubblewrap or as a plain process,
//! with rlimits, in a process group of its own, and stops it at the timeout or past a bound. Its
//! stdout and stderr share one pipe, so the output is interleaved as written.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use agent_ports::sandbox::SandboxLayout;

use super::bundle::BUNDLE_MOUNT;
use super::collect::{over_bounds, Bounds};
use super::identity;
use super::memory::{self, Bound};
use super::output::Capture;
use super::scratch::{self, Scratch};
use super::seccomp;
use super::{human_bytes, Config, HandlerError, Isolation};

/// How often the workspace is measured while the command runs.
const WATCH_EVERY: Duration = Duration::from_millis(50);
/// How long the handler waits for the output's end once the command's processes are killed.
const DRAIN_WAIT: Duration = Duration::from_secs(2);
/// Where the image keeps the npm packages a command can `require`.
const NODE_MODULES: &str = "/usr/local/lib/node_modules";
/// Where Playwright finds its browsers in the image (links to Debian's chromium).
const PLAYWRIGHT_BROWSERS: &str = "/opt/ms-playwright";

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
        Isolation::Process => (None, None),
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
    let mut cmd = match &config.isolation {
        Isolation::Bwrap { bwrap, root } => {
            bwrap_command(bwrap, root, config, scratch, command, status_fd, seccomp_fds)
        }
        Isolation::Process => process_command(scratch, command),
    };
    let stdout = writer.try_clone().map_err(|err| internal("could not share the output pipe", err))?;
    cmd.stdin(Stdio::null()).stdout(stdout).stderr(writer).process_group(0);
    if let Some(uid) = owner {
        // std drops the supplementary groups, then sets the gid and the uid, before `pre_exec`.
        cmd.uid(uid).gid(uid);
    }
    let [cpu, memory, processes, file, open_files] = rlimit_values(config, timeout, owner);
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
                (libc::RLIMIT_AS, memory),
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

#[derive(Debug, PartialEq, Eq)]
enum Stop {
    Timeout,
    Bound,
}

/// What the waiter measures while the command runs.
struct Watch<'a> {
    config: &'a Config,
    scratch: &'a Scratch,
    bounds: &'a Bounds,
    memory: Option<&'a Bound>,
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
fn wait_for_exit(
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

/// "2 s" or "1.5 s".
fn seconds(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

/// Who may stop the command (the waiter, the output reader) and why it was stopped first.
struct Control {
    group: libc::pid_t,
    state: Mutex<State>,
}

struct State {
    reason: Option<String>,
    /// Until the leader is reaped its process group id cannot be reused, so killing it is safe.
    alive: bool,
}

impl Control {
    fn state(&self) -> MutexGuard<'_, State> {
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

    fn kill_group(&self) {
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

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Reads the output to its end, keeping the head and tail, and stops the command once it has
/// printed more than `hard` bytes; dropping `done` tells the handler it has finished.
fn read_output(
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
fn read_status(status: std::io::PipeReader) -> String {
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

/// RLIMIT_CPU, AS, NPROC, FSIZE and NOFILE for one call.
fn rlimit_values(config: &Config, timeout: Duration, owner: Option<u32>) -> [libc::rlim_t; 5] {
    let limits = &config.limits;
    let cpu = limits.cpu_seconds.min(timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0) + 1);
    // RLIMIT_NPROC counts every task of the uid: a call's own uid starts at none, the handler's
    // uid already runs the handler (and, locally, the user's session).
    // Root is not bound by it at all.
    let processes = if owner.is_some() || identity::is_uid_root() {
        limits.processes
    } else {
        identity::tasks_of(identity::own_uid()) + limits.processes
    };
    [cpu, limits.memory_bytes, processes, limits.file_bytes, limits.open_files]
}

/// The environment of the command, the same in both isolations but for the paths. `HOME` is a
/// folder of the temporary space, so profiles and caches (LibreOffice's, pip's, npm's) are not
/// collected from the workspace as the command's files.
fn environment(path: String, home: &Path, tmp: &Path, bundles: &[String]) -> Vec<(String, String)> {
    let text = |path: &Path| path.to_string_lossy().into_owned();
    // The skills' bundles come before the image's packages; they hold none of those.
    let bundle_path = (!bundles.is_empty()).then(|| ("PYTHONPATH".to_owned(), bundles.join(":")));
    let bundle_bins: String = bundles.iter().map(|site| format!("{site}/bin:")).collect();
    let path = format!("{bundle_bins}{path}");
    let mut env = vec![
        ("PATH".to_owned(), path),
        ("HOME".to_owned(), text(home)),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("TMPDIR".to_owned(), text(tmp)),
        ("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned()),
        ("MPLBACKEND".to_owned(), "Agg".to_owned()),
        ("MPLCONFIGDIR".to_owned(), text(&tmp.join("matplotlib"))),
        ("XDG_CACHE_HOME".to_owned(), text(&home.join(".cache"))),
        ("XDG_CONFIG_HOME".to_owned(), text(&home.join(".config"))),
        ("OPENBLAS_NUM_THREADS".to_owned(), "1".to_owned()),
        ("NODE_PATH".to_owned(), NODE_MODULES.to_owned()),
        ("PLAYWRIGHT_BROWSERS_PATH".to_owned(), PLAYWRIGHT_BROWSERS.to_owned()),
        // LibreOffice without a display, as anthropics' office scripts set it themselves.
        ("SAL_USE_VCLPLUGIN".to_owned(), "svp".to_owned()),
    ];
    env.extend(bundle_path);
    env
}

fn bwrap_command(
    bwrap: &Path,
    root: &Path,
    config: &Config,
    scratch: &Scratch,
    command: &str,
    status_fd: Option<RawFd>,
    seccomp_fds: Option<[RawFd; 2]>,
) -> Command {
    let layout = SandboxLayout::default();
    let mut cmd = Command::new(bwrap);
    // bwrap's own processes stay visible inside (the namespace's pid 1 is one): they get no
    // environment at all, so /proc/1/environ holds nothing of the handler's.
    cmd.env_clear();
    // The image is the whole root, read-only: nothing of the host's own files is mounted.
    cmd.args(["--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--ro-bind"]).arg(root).arg("/");
    let (passwd, group) = scratch.accounts();
    cmd.arg("--ro-bind").arg(passwd).arg("/etc/passwd").arg("--ro-bind").arg(group).arg("/etc/group");
    // Every writable place is small and bounded: /dev read-only but for a bounded /dev/shm, a
    // bounded /tmp, and the workspace (a bounded tmpfs of its own when the handler is root).
    let disk = config.limits.disk_bytes.to_string();
    cmd.args(["--proc", "/proc", "--dev", "/dev", "--size", &disk, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]);
    cmd.args(["--size", &disk, "--tmpfs", "/tmp", "--dir", "/tmp/home"]);
    cmd.arg("--bind").arg(&scratch.workspace).arg(&layout.workspace);
    cmd.arg("--ro-bind").arg(&scratch.skills).arg(&layout.skills);
    if let Some(ticket) = &scratch.ticket {
        cmd.arg("--ro-bind").arg(ticket).arg(&layout.ticket);
    }
    // Each installed bundle read-only under a tmpfs of the call's own.
    let mut bundles = Vec::new();
    if !scratch.bundles.is_empty() {
        cmd.args(["--tmpfs", BUNDLE_MOUNT]);
        for site in &scratch.bundles {
            let name = site
                .parent()
                .and_then(Path::file_name)
                .map_or_else(String::new, |name| name.to_string_lossy().chars().take(16).collect());
            let inside = format!("{BUNDLE_MOUNT}/{name}");
            cmd.arg("--ro-bind").arg(site).arg(&inside);
            bundles.push(inside);
        }
        cmd.args(["--remount-ro", BUNDLE_MOUNT]);
    }
    cmd.arg("--chdir").arg(&layout.workspace);
    let path = "/usr/local/bin:/usr/bin:/bin".to_owned();
    let env = environment(path, Path::new("/tmp/home"), Path::new("/tmp"), &bundles);
    for (key, value) in env {
        cmd.arg("--setenv").arg(key).arg(value);
    }
    if let Some(fd) = status_fd {
        cmd.arg("--json-status-fd").arg(fd.to_string());
    }
    for fd in seccomp_fds.into_iter().flatten() {
        cmd.arg("--add-seccomp-fd").arg(fd.to_string());
    }
    cmd.args(["--", "bash", "-c", command]);
    // Reachable by any uid; bwrap changes to the workspace inside.
    cmd.current_dir("/");
    cmd
}

fn process_command(scratch: &Scratch, command: &str) -> Command {
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", scratch.bin.to_string_lossy());
    let mut cmd = Command::new("bash");
    cmd.env_clear();
    let bundles: Vec<String> = scratch.bundles.iter().map(|site| site.to_string_lossy().into_owned()).collect();
    cmd.envs(environment(path, &scratch.tmp.join("home"), &scratch.tmp, &bundles));
    cmd.envs(scratch.nss_wrapper());
    cmd.args(["-c", command]).current_dir(&scratch.workspace);
    cmd
}
