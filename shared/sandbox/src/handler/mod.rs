//! The sandbox's own code: one call from the request to the response. The Lambda function and the
//! local backend both run it; only the [`Isolation`] differs.
//!
//! A call writes the request's files into a fresh scratch directory, runs `bash -c` over them with
//! bounded time, memory, processes, output and disk, kills whatever the command left running,
//! collects what changed under the workspace and removes the scratch directory.

pub mod bundle;
mod collect;
mod identity;
mod memory;
pub(crate) mod output;
mod run;
mod scratch;
mod seccomp;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, Once};
use std::time::Duration;

use agent_ports::sandbox::{SandboxLayout, MAX_COMMAND_BYTES, MAX_TIMEOUT};
use agent_ports::{SessionId, UserId};
use thiserror::Error;

use crate::wire::{
    WireError, WireRequest, WireResponse, BAD_BUNDLE, INTERNAL, INVALID_REQUEST, MAX_RESPONSE_FILE_BYTES,
    MISSING_BUNDLES, TOO_LARGE,
};

/// How the command is kept apart from the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// Linux namespaces through bubblewrap over the sandbox image's root filesystem (`root`, read
    /// only): the command sees the image and its own folders, nothing of the host, and has no
    /// network. When the handler runs as root, each call also runs under a fresh unprivileged uid.
    Bwrap { bwrap: PathBuf, root: PathBuf },
    /// A plain child process, for a Lambda execution environment (no namespaces there): the
    /// microVM of one tenant is the isolation, and the handler clears the environment, applies the
    /// rlimits, uses a fresh scratch directory and kills every straggler afterwards. Calls are
    /// sequential (one process-wide lock), as they are in one Lambda environment.
    Process,
}

/// The bounds of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// CPU seconds per process (RLIMIT_CPU); a call gets at most its timeout plus one second.
    pub cpu_seconds: u64,
    /// Address space per process: only AgentCore's runner sets it (RLIMIT_AS); the handler bounds
    /// the call's memory as a whole instead, since Chromium reserves tens of GiB it never uses.
    pub memory_bytes: u64,
    /// Memory of the whole call, every process together: a memory cgroup of the call's own, or a
    /// watchdog where none can be made (bwrap); the function's memory size in Lambda (process).
    pub call_memory_bytes: u64,
    /// Processes (threads) of the command (RLIMIT_NPROC, counted on top of what its uid runs):
    /// room for a headless browser's thread pools (Playwright and Chromium peak at about 130
    /// tasks on two cores), still far below what a fork bomb needs to hurt the machine.
    pub processes: u64,
    /// The largest file a process may write (RLIMIT_FSIZE).
    pub file_bytes: u64,
    /// Bytes the command may add under the workspace (also the size of its `/tmp` and `/dev/shm`).
    pub disk_bytes: u64,
    /// Files and folders the command may add under the workspace.
    pub files: usize,
    /// Output past which the command is stopped; only the head and tail are kept anyway.
    pub output_hard_bytes: u64,
    /// Open files per process (RLIMIT_NOFILE).
    pub open_files: u64,
    /// Bytes of files one response brings back together.
    pub result_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            cpu_seconds: MAX_TIMEOUT.as_secs() + 1,
            memory_bytes: 2 << 30,
            call_memory_bytes: 2 << 30,
            processes: 256,
            file_bytes: 32 << 20,
            disk_bytes: 64 << 20,
            files: 1000,
            output_hard_bytes: 64 << 20,
            open_files: 256,
            result_bytes: MAX_RESPONSE_FILE_BYTES,
        }
    }
}

/// Where and how the handler runs commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub isolation: Isolation,
    /// Bwrap: the parent of each call's scratch directory (made world-traversable, 0711, so a
    /// call's uid can reach its own directory). Process: the scratch directory itself, wiped and
    /// made again on every call.
    pub scratch_base: PathBuf,
    /// Where installed skill bundles are kept, a folder per tenant ([`bundle`]); unlike the
    /// scratch, it outlives the call.
    pub bundle_dir: PathBuf,
    /// The bytes one tenant's installed bundles may take together (in Lambda, the environment's,
    /// which serves one tenant); the least recently used are evicted to make room.
    pub bundle_bytes: u64,
    pub limits: Limits,
}

/// The default scratch base of the local backend.
pub const LOCAL_SCRATCH_BASE: &str = "/tmp/agent-sandbox";
/// The scratch directory inside a Lambda execution environment.
pub const LAMBDA_SCRATCH_DIR: &str = "/tmp/sandbox";
/// The default bundle folder of the local backend.
pub const LOCAL_BUNDLE_DIR: &str = "/tmp/agent-sandbox-bundles";
/// The bundle folder inside a Lambda execution environment (its `/tmp`, kept while it is warm).
pub const LAMBDA_BUNDLE_DIR: &str = "/tmp/bundles";
/// A Lambda call's memory, all its processes together: the function's 2,048 MB less the handler's
/// own and the room the kernel needs.
pub const LAMBDA_CALL_MEMORY_BYTES: u64 = 1536 << 20;
/// The default of [`Config::bundle_bytes`]: four bundles at their largest; in Lambda, half of the
/// function's 4 GB `/tmp`, which also holds a call's scratch and an install's unpacking.
pub const DEFAULT_BUNDLE_BYTES: u64 = 2 << 30;

impl Config {
    /// The local backend: bubblewrap over the image's `root`, scratch directories under
    /// `/tmp/agent-sandbox`.
    pub fn local_default(bwrap: PathBuf, root: PathBuf) -> Self {
        Self {
            isolation: Isolation::Bwrap { bwrap, root },
            scratch_base: PathBuf::from(LOCAL_SCRATCH_BASE),
            bundle_dir: PathBuf::from(LOCAL_BUNDLE_DIR),
            bundle_bytes: DEFAULT_BUNDLE_BYTES,
            limits: Limits::default(),
        }
    }

    /// The Lambda function: plain processes over `/tmp/sandbox`, the call's memory watched below
    /// the function's 2,048 MB so that the watchdog, not the kernel's OOM killer, stops a command.
    pub fn lambda_default() -> Self {
        Self {
            isolation: Isolation::Process,
            scratch_base: PathBuf::from(LAMBDA_SCRATCH_DIR),
            bundle_dir: PathBuf::from(LAMBDA_BUNDLE_DIR),
            bundle_bytes: DEFAULT_BUNDLE_BYTES,
            limits: Limits { call_memory_bytes: LAMBDA_CALL_MEMORY_BYTES, ..Limits::default() },
        }
    }

    /// Where the command finds its files.
    pub fn layout(&self) -> SandboxLayout {
        match self.isolation {
            Isolation::Bwrap { .. } => SandboxLayout::default(),
            Isolation::Process => {
                let at = |name: &str| self.scratch_base.join(name).to_string_lossy().into_owned();
                SandboxLayout { workspace: at("workspace"), skills: at("skills"), ticket: at("ticket") }
            }
        }
    }
}

/// Why a call was not run.
#[derive(Debug, Error)]
pub enum HandlerError {
    /// The request breaks the contract (a bad path, id, timeout or base64).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The request's files are over what one call may carry.
    #[error("the files are too large: {bytes} bytes in {files} files")]
    TooLarge { bytes: u64, files: usize },
    /// Skills' bundles this environment has not installed yet, by SHA-256: the caller sends them.
    #[error("the skills' bundles {} are not installed here", .0.join(", "))]
    MissingBundles(Vec<String>),
    /// A skill's bundle cannot be installed (its bytes, its files, pip's verdict).
    #[error("{0}")]
    BadBundle(String),
    /// The sandbox itself failed (the filesystem, bubblewrap).
    #[error("the sandbox failed: {0}")]
    Internal(String),
}

impl From<&HandlerError> for WireError {
    fn from(error: &HandlerError) -> Self {
        match error {
            HandlerError::InvalidRequest(message) => WireError::new(INVALID_REQUEST, message.clone()),
            HandlerError::TooLarge { bytes, files } => {
                WireError { bytes: Some(*bytes), files: Some(*files), ..WireError::new(TOO_LARGE, error.to_string()) }
            }
            HandlerError::MissingBundles(missing) => {
                WireError { missing: Some(missing.clone()), ..WireError::new(MISSING_BUNDLES, error.to_string()) }
            }
            HandlerError::BadBundle(message) => WireError::new(BAD_BUNDLE, message.clone()),
            HandlerError::Internal(message) => WireError::new(INTERNAL, message.clone()),
        }
    }
}

/// Runs one call on the blocking pool (the command's whole run is blocking work).
pub async fn run(config: &Config, request: WireRequest) -> Result<WireResponse, HandlerError> {
    let config = config.clone();
    tokio::task::spawn_blocking(move || run_blocking(&config, request))
        .await
        .map_err(|err| HandlerError::Internal(format!("the sandbox task failed: {err}")))?
}

/// Serialises process-mode calls: they share one scratch path and one uid.
static PROCESS_CALLS: Mutex<()> = Mutex::new(());
static NOT_DUMPABLE: Once = Once::new();

/// Runs one call on this thread, which it blocks until the command and its processes are gone.
pub fn run_blocking(config: &Config, request: WireRequest) -> Result<WireResponse, HandlerError> {
    let timeout = check_request(&request)?;
    let bundles = installed_bundles(config, &request)?;
    let inputs = scratch::Inputs::decode(request.workspace, request.skills, request.ticket)?;
    let input_hashes: HashMap<String, [u8; 32]> =
        inputs.workspace.iter().map(|(path, bytes)| (path.clone(), collect::sha256(bytes))).collect();
    let job =
        Job { inputs, command: &request.command, timeout, bundles: bundles.iter().map(bundle::InUse::site).collect() };
    let (ran, changes) = run_job(config, job, |scratch, bounds, _ran| {
        Ok(collect::collect(&scratch.workspace, &input_hashes, bounds, config.limits.result_bytes))
    })?;
    drop(bundles);
    let (output, omitted_bytes) = ran.capture.render();
    Ok(WireResponse {
        output,
        omitted_bytes,
        exit_code: ran.exit_code,
        stopped: ran.stopped,
        timed_out: ran.timed_out,
        written: changes.written,
        deleted: changes.deleted,
        not_kept: changes.not_kept,
        duration_ms: u64::try_from(ran.duration.as_millis()).unwrap_or(u64::MAX),
    })
}

/// One command over files: a call's, or a bundle's install.
pub(crate) struct Job<'a> {
    pub inputs: scratch::Inputs,
    pub command: &'a str,
    pub timeout: Duration,
    /// The installed sites the command gets read-only.
    pub bundles: Vec<PathBuf>,
}

/// Runs `job` inside the walls every command has (the scratch, the uid, the seccomp filter, the
/// memory bound, the rlimits), then `after` over its scratch once every process of it is gone and
/// before the scratch is removed.
pub(crate) fn run_job<T>(
    config: &Config,
    job: Job<'_>,
    after: impl FnOnce(&scratch::Scratch, &collect::Bounds, &run::Ran) -> Result<T, HandlerError>,
) -> Result<(run::Ran, T), HandlerError> {
    let _sequential = match config.isolation {
        Isolation::Process => {
            // A same-uid child could otherwise read this process's environment (the function's
            // credentials) from /proc.
            NOT_DUMPABLE.call_once(|| {
                // SAFETY: prctl with PR_SET_DUMPABLE takes plain integers.
                if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
                    tracing::warn!(error = %std::io::Error::last_os_error(), "could not make the handler undumpable");
                }
                // Orphans of a command (a daemon it double-forked) come to the handler, which
                // reaps them after each call, rather than to an init that may be this process.
                // Not as root, where neither the sweep nor the reaping runs (see `reap_orphans`).
                // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integers.
                if !identity::is_uid_root() && unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
                    tracing::warn!(error = %std::io::Error::last_os_error(), "could not make the handler a subreaper");
                }
            });
            Some(PROCESS_CALLS.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
        }
        Isolation::Bwrap { .. } => None,
    };
    let lease = match config.isolation {
        Isolation::Bwrap { .. } => {
            scratch::prepare_base(&config.scratch_base)?;
            identity::is_root().then(|| identity::Lease::acquire(&config.scratch_base)).transpose()?
        }
        Isolation::Process => None,
    };
    let owner = lease.as_ref().map(identity::Lease::uid);
    let mut scratch = scratch::Scratch::create(config, owner, &job.inputs)?;
    scratch.bundles = job.bundles;
    drop(job.inputs);
    let bounds = collect::Bounds {
        entries: scratch.baseline_entries.saturating_add(config.limits.files),
        bytes: scratch.baseline_bytes.saturating_add(config.limits.disk_bytes),
    };
    let ran = run::execute(config, &scratch, job.command, job.timeout, owner, &bounds)?;
    let result = after(&scratch, &bounds, &ran)?;
    drop(scratch);
    drop(lease);
    Ok((ran, result))
}

/// The installed sites of the call's skills' bundles, held in use for the call (so none is
/// evicted under it), or the bundles this environment lacks.
fn installed_bundles(config: &Config, request: &WireRequest) -> Result<Vec<bundle::InUse>, HandlerError> {
    let (mut sites, mut missing) = (Vec::new(), Vec::new());
    for bundle in request.skills.iter().filter_map(|skill| skill.bundle.as_ref()) {
        bundle::check(bundle)?;
        match bundle::use_installed(config, &request.tenant, &bundle.sha256) {
            Some(site) => sites.push(site),
            None => missing.push(bundle.sha256.clone()),
        }
    }
    missing.sort();
    missing.dedup();
    match missing.is_empty() {
        true => Ok(sites),
        false => Err(HandlerError::MissingBundles(missing)),
    }
}

/// Checks what is not a file: the ids, the command and the timeout.
fn check_request(request: &WireRequest) -> Result<Duration, HandlerError> {
    UserId::parse(request.tenant.as_str()).map_err(|err| HandlerError::InvalidRequest(err.to_string()))?;
    SessionId::parse(request.session.as_str()).map_err(|err| HandlerError::InvalidRequest(err.to_string()))?;
    if request.command.len() > MAX_COMMAND_BYTES {
        return Err(HandlerError::InvalidRequest(format!("the command is longer than {MAX_COMMAND_BYTES} bytes")));
    }
    if request.command.contains('\0') {
        return Err(HandlerError::InvalidRequest("the command contains a NUL byte".into()));
    }
    let timeout = Duration::from_millis(request.timeout_ms);
    if timeout.is_zero() || timeout > MAX_TIMEOUT {
        return Err(HandlerError::InvalidRequest(format!(
            "the timeout must be between 1 ms and {} s",
            MAX_TIMEOUT.as_secs()
        )));
    }
    Ok(timeout)
}

/// `SANDBOX_BUNDLE_BYTES`: a positive number of bytes.
pub fn parse_bundle_bytes(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(bytes) if bytes > 0 => Ok(bytes),
        _ => Err(format!("SANDBOX_BUNDLE_BYTES={text} must be a positive number of bytes")),
    }
}

/// "2 s" or "1.5 s", for the messages the model reads.
pub(crate) fn seconds(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

/// "64 MiB", "4 KiB" or "1234 bytes", for the messages the model reads.
pub(crate) fn human_bytes(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}
