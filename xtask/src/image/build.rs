//! Builds the image's root filesystem from the declared list, without Docker: the npm packages with
//! `npm ci`, the Python wheels with `pip download` for the image's Python and architecture, then
//! `mmdebstrap` makes a Debian root with the listed packages and runs `customize.sh` in it, which
//! installs the wheels offline with the image's own pip. The result is kept under
//! `target/sandbox-image/<hash>/rootfs` and reused while the list is unchanged.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use super::list::{pip_download, List};

/// A finished root filesystem.
pub struct Rootfs {
    pub hash: String,
    /// `target/sandbox-image/<hash>`.
    pub dir: PathBuf,
    /// `<dir>/rootfs`, the tree a command sees as `/`.
    pub root: PathBuf,
}

/// Written last, beside the root, so a half-built tree is never taken for a finished one.
pub const READY: &str = "ready";

/// The current list and where its image is (or goes), and whether it is finished.
fn current(workspace: &Path) -> Result<(List, Rootfs, bool), String> {
    let list = List::read(workspace)?;
    let dir = workspace.join("target/sandbox-image").join(&list.hash);
    let rootfs = Rootfs { hash: list.hash.clone(), root: dir.join("rootfs"), dir };
    let finished = rootfs.dir.join(READY).is_file() && rootfs.root.join("usr/bin/python3").exists();
    Ok((list, rootfs, finished))
}

/// Where the current list's image is and whether it is built; never builds one.
pub fn built(workspace: &Path) -> Result<(Rootfs, bool), String> {
    current(workspace).map(|(_, rootfs, finished)| (rootfs, finished))
}

/// The root filesystem for the current list: the one already built, or a new one (minutes). Builds
/// of one image take turns: a second `ensure` (CI's background build and `cargo xtask test`'s)
/// waits for the first, then finds the image finished, instead of removing its half-built tree.
pub fn ensure(workspace: &Path) -> Result<Rootfs, String> {
    let (_, rootfs, finished) = current(workspace)?;
    if finished {
        return Ok(rootfs);
    }
    let _turn = take_turn(&rootfs)?;
    let (list, rootfs, finished) = current(workspace)?;
    if finished {
        return Ok(rootfs);
    }
    let dir = rootfs.dir.clone();
    eprintln!(
        "xtask: building the sandbox image {} from {} (first use, or the list changed; a few minutes)",
        list.hash,
        super::list::LIST_DIR
    );
    let started = Instant::now();
    require_tool("mmdebstrap", "apt-get install mmdebstrap (and uidmap when not root)")?;
    if dir.exists() {
        remove_tree(&dir)?;
    }
    std::fs::create_dir_all(&dir).map_err(|err| format!("could not create {}: {err}", dir.display()))?;
    let node_modules = npm_packages(&list, &dir)?;
    let wheels = python_wheels(&list, &dir)?;
    debootstrap(&list, &dir, &node_modules, &wheels)?;
    std::fs::rename(dir.join("rootfs.partial"), &rootfs.root)
        .map_err(|err| format!("could not move the root in place: {err}"))?;
    for scratch in [dir.join("npm"), wheels] {
        remove_tree(&scratch)?;
    }
    let size = tree_bytes(&rootfs.root);
    std::fs::write(dir.join(READY), format!("{}\n{size}\n", list.hash))
        .map_err(|err| format!("could not write the stamp: {err}"))?;
    eprintln!(
        "xtask: sandbox image {} ready in {:.0} s: {} MB at {}",
        list.hash,
        started.elapsed().as_secs_f64(),
        size / 1_000_000,
        rootfs.root.display()
    );
    Ok(rootfs)
}

/// An exclusive lock on `<hash>.lock` beside the image's folder, held until the returned file is
/// dropped (or the process ends); waits, saying so, while another build holds it.
fn take_turn(rootfs: &Rootfs) -> Result<std::fs::File, String> {
    let parent = rootfs.dir.parent().ok_or("the image folder has no parent")?;
    std::fs::create_dir_all(parent).map_err(|err| format!("could not create {}: {err}", parent.display()))?;
    let path = parent.join(format!("{}.lock", rootfs.hash));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|err| format!("could not open {}: {err}", path.display()))?;
    match file.try_lock() {
        Ok(()) => return Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            eprintln!("xtask: waiting for another build of the sandbox image {} to finish", rootfs.hash)
        }
        Err(std::fs::TryLockError::Error(err)) => return Err(format!("could not lock {}: {err}", path.display())),
    }
    file.lock().map_err(|err| format!("could not lock {}: {err}", path.display()))?;
    Ok(file)
}

fn require_tool(tool: &str, install: &str) -> Result<(), String> {
    let found = Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output();
    if found.is_ok_and(|output| output.status.success()) {
        Ok(())
    } else {
        Err(format!("building the sandbox image needs {tool}: {install}"))
    }
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let status = command.status().map_err(|err| format!("could not start {what}: {err}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

/// `npm ci` of the pinned packages, scripts off (nothing runs at install; sharp's native part comes
/// as a package of its own). Returns the `node_modules` folder.
fn npm_packages(list: &List, dir: &Path) -> Result<PathBuf, String> {
    let npm = dir.join("npm");
    std::fs::create_dir_all(&npm).map_err(|err| format!("could not create {}: {err}", npm.display()))?;
    for name in ["package.json", "package-lock.json"] {
        std::fs::copy(list.dir.join(name), npm.join(name)).map_err(|err| format!("could not copy {name}: {err}"))?;
    }
    run(
        Command::new("npm").args(["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev"]).current_dir(&npm),
        "npm ci of the image's npm packages",
    )?;
    Ok(npm.join("node_modules"))
}

/// `pip download` of the pinned Python packages as wheels for the image's Python and architecture
/// (never built from source), with `requirements.txt` beside them for the offline install.
fn python_wheels(list: &List, dir: &Path) -> Result<PathBuf, String> {
    let wheels = dir.join("image-wheels");
    let requirements = list.dir.join("requirements.txt");
    download_wheels(&requirements, &wheels, false)?;
    std::fs::copy(&requirements, wheels.join("requirements.txt"))
        .map_err(|err| format!("could not copy requirements.txt: {err}"))?;
    Ok(wheels)
}

/// `pip download --only-binary=:all:` of `requirements` into `into`, for the image's Python 3.13 on
/// x86_64 glibc, whatever Python runs pip. With `resolve`, their dependencies too.
pub(super) fn download_wheels(requirements: &Path, into: &Path, resolve: bool) -> Result<(), String> {
    let mut pip = pip_download();
    pip.arg("--quiet");
    if !resolve {
        pip.arg("--no-deps");
    }
    pip.arg("-d").arg(into).arg("-r").arg(requirements);
    run(&mut pip, &format!("pip download of {}", requirements.display()))
}

fn debootstrap(list: &List, dir: &Path, node_modules: &Path, wheels: &Path) -> Result<(), String> {
    let mut cmd = Command::new("mmdebstrap");
    cmd.args(["--mode=auto", "--variant=apt", "--format=directory", "--components=main", "--quiet"]);
    cmd.arg(format!("--include={}", list.debian.packages.join(",")));
    // Documentation, manuals and translations are of no use to a command and a third of the size.
    for exclude in ["/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*"] {
        cmd.arg(format!("--dpkgopt=path-exclude={exclude}"));
    }
    cmd.arg("--dpkgopt=path-include=/usr/share/locale/locale.alias");
    // Copyright files stay: they are the licences of what the image ships.
    cmd.arg("--dpkgopt=path-include=/usr/share/doc/*/copyright");
    // The disk a build needs at its peak is kept near the image's own size: the downloaded .debs go
    // before the wheels come in, and each folder copied in leaves the builder's side at once.
    cmd.arg("--customize-hook=rm -f \"$1\"/var/cache/apt/archives/*.deb");
    cmd.arg(format!("--customize-hook=copy-in {} /tmp", wheels.display()));
    cmd.arg(format!("--customize-hook=rm -rf {}", shell_quote(wheels)));
    cmd.arg("--customize-hook=mkdir -p \"$1/usr/local/lib\"");
    cmd.arg(format!("--customize-hook=copy-in {} /usr/local/lib", node_modules.display()));
    cmd.arg(format!("--customize-hook=rm -rf {}", shell_quote(node_modules)));
    cmd.arg(format!("--customize-hook={} \"$1\"", list.dir.join("customize.sh").display()));
    cmd.arg(&list.debian.suite).arg(dir.join("rootfs.partial")).arg(&list.debian.mirror);
    run(&mut cmd, "mmdebstrap")
}

/// `path` as one word of a shell command line (mmdebstrap runs its hooks with `sh -c`).
fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

fn remove_tree(dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        return Ok(());
    }
    // A build killed mid-way (SIGKILL gives mmdebstrap no chance to clean up) leaves /dev/pts,
    // /dev/shm, /proc or /sys mounted inside its half-built root; removing through such a mount
    // would reach the host's own files.
    unmount_under(dir)?;
    std::fs::remove_dir_all(dir).map_err(|err| format!("could not remove {}: {err}", dir.display()))
}

/// Detaches every mount at or under `dir`, deepest first; an error when one stays.
fn unmount_under(dir: &Path) -> Result<(), String> {
    let dir = dir.canonicalize().map_err(|err| format!("could not resolve {}: {err}", dir.display()))?;
    let Ok(table) = std::fs::read_to_string("/proc/self/mounts") else { return Ok(()) };
    let mut points: Vec<PathBuf> = table
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1))
        .map(|point| PathBuf::from(unescape_mount_point(point)))
        .filter(|point| point.starts_with(&dir))
        .collect();
    points.sort_by_key(|point| std::cmp::Reverse(point.components().count()));
    points.dedup();
    for point in &points {
        eprintln!("xtask: unmounting {} left by an interrupted build", point.display());
        run(Command::new("umount").arg("--lazy").arg(point), &format!("umount {}", point.display()))?;
    }
    Ok(())
}

/// A mount point as `/proc/self/mounts` writes it, with its octal escapes (`\040` for a space) undone.
fn unescape_mount_point(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escape = bytes.get(index + 1..index + 4).filter(|_| bytes[index] == b'\\');
        match escape.and_then(|digits| u8::from_str_radix(std::str::from_utf8(digits).ok()?, 8).ok()) {
            Some(byte) => {
                out.push(byte);
                index += 4;
            }
            None => {
                out.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The bytes of the regular files under `dir`, links not followed.
pub fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => tree_bytes(&entry.path()),
            Ok(kind) if kind.is_file() => entry.metadata().map(|meta| meta.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_lose_their_octal_escapes() {
        assert_eq!(unescape_mount_point("/work/a\\040b/rootfs.partial/dev/pts"), "/work/a b/rootfs.partial/dev/pts");
        assert_eq!(unescape_mount_point("/plain"), "/plain");
        assert_eq!(unescape_mount_point("/trailing\\04"), "/trailing\\04");
    }

    #[test]
    fn a_second_build_of_one_image_waits_for_the_first() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let dir = std::env::temp_dir().join(format!("xtask-image-turn-{}", std::process::id()));
        let rootfs = || Rootfs { hash: "h".into(), dir: dir.join("h"), root: dir.join("h/rootfs") };
        let first = take_turn(&rootfs()).expect("the first build's turn");
        let released = Arc::new(AtomicBool::new(false));
        let second = {
            let (released, rootfs) = (released.clone(), rootfs());
            std::thread::spawn(move || {
                let _turn = take_turn(&rootfs).expect("the second build's turn");
                released.load(Ordering::SeqCst)
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!second.is_finished(), "the second build went ahead while the first held its turn");
        released.store(true, Ordering::SeqCst);
        drop(first);
        assert!(second.join().unwrap(), "the second build's turn came before the first let go");
        std::fs::remove_dir_all(&dir).ok();
    }
}
