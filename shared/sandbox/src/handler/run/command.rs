//! The command line of one call and its environment: bubblewrap over the image's root with the
//! call's folders bound in, or a plain `bash -c` in the scratch directory; and its rlimits.
//!
//! No RLIMIT_AS: the call's memory is bounded as a whole instead (`handler/memory`: a cgroup, else
//! a watchdog over the resident memory of the command's processes, and in Lambda the function's
//! memory size). An address-space limit bounds what a process reserves, not what it uses, and
//! Chromium reserves far more than it uses: it died with SIGTRAP under the 2 GiB the commands had,
//! even for `--version`, and renders a page only from 88 GiB on (docs/sandbox.md, "The sandbox's bounds").

use std::os::fd::RawFd;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agent_ports::sandbox::SandboxLayout;

use super::places::Places;
use crate::handler::bundle::BUNDLE_MOUNT;
use crate::handler::identity;
use crate::handler::scratch::Scratch;
use crate::handler::Config;

/// Where the image keeps the npm packages a command can `require`.
const NODE_MODULES: &str = "/usr/local/lib/node_modules";
/// Where Playwright finds its browsers in the image (links to Debian's chromium).
const PLAYWRIGHT_BROWSERS: &str = "/opt/ms-playwright";

/// RLIMIT_CPU, NPROC, FSIZE and NOFILE for one call.
pub(super) fn rlimit_values(config: &Config, timeout: Duration, owner: Option<u32>) -> [libc::rlim_t; 4] {
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
    [cpu, processes, limits.file_bytes, limits.open_files]
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

/// The bwrap command line; `places`, the call's bounded `/tmp` and `/dev/shm` when the handler is
/// root, else bubblewrap's own tmpfs mounts, bounded in bytes only.
pub(super) fn bwrap_command(
    bwrap: &Path,
    root: &Path,
    config: &Config,
    scratch: &Scratch,
    places: Option<&Places>,
    command: &str,
    fds: (Option<RawFd>, Option<[RawFd; 2]>),
) -> Command {
    let (status_fd, seccomp_fds) = fds;
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
    cmd.args(["--proc", "/proc", "--dev", "/dev"]);
    match places {
        Some(places) => cmd.arg("--bind").arg(&places.shm).arg("/dev/shm"),
        None => cmd.args(["--size", &disk, "--tmpfs", "/dev/shm"]),
    };
    cmd.args(["--remount-ro", "/dev"]);
    match places {
        Some(places) => cmd.arg("--bind").arg(&places.tmp).arg("/tmp"),
        None => cmd.args(["--size", &disk, "--tmpfs", "/tmp"]),
    };
    cmd.args(["--dir", "/tmp/home"]);
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

pub(super) fn process_command(scratch: &Scratch, command: &str) -> Command {
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", scratch.bin.to_string_lossy());
    let mut cmd = Command::new("bash");
    cmd.env_clear();
    let bundles: Vec<String> = scratch.bundles.iter().map(|site| site.to_string_lossy().into_owned()).collect();
    cmd.envs(environment(path, &scratch.tmp.join("home"), &scratch.tmp, &bundles));
    cmd.envs(scratch.nss_wrapper());
    cmd.args(["-c", command]).current_dir(&scratch.workspace);
    cmd
}
