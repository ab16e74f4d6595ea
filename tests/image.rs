//! The sandbox image as the tests use it: its root filesystem (`SANDBOX_ROOT`, which `cargo xtask
//! test` builds and sets) and a way to run one of its programs on files of the test, to read back
//! what a skill made with the same tools the skill had.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The image's root filesystem.
pub fn root() -> PathBuf {
    std::env::var_os("SANDBOX_ROOT").filter(|dir| !dir.is_empty()).map(PathBuf::from).expect(
        "SANDBOX_ROOT names the sandbox image's root filesystem: run `cargo xtask test`, or `cargo xtask sandbox image` \
         and export SANDBOX_ROOT=<the path it prints>",
    )
}

/// `SANDBOX=local` over the image, as a function's environment.
pub fn local_sandbox_env() -> Vec<(&'static str, String)> {
    vec![("SANDBOX", "local".to_owned()), ("SANDBOX_ROOT", root().to_string_lossy().into_owned())]
}

/// Runs `program args…` inside the image (bubblewrap, read-only root, no network) with `dir` mounted
/// at `/workspace` (a mount point of the read-only image) as its working directory.
pub fn run_in_image(dir: &Path, program: &str, args: &[&str]) -> Output {
    Command::new("bwrap")
        .args(["--unshare-all", "--die-with-parent", "--ro-bind"])
        .arg(root())
        .arg("/")
        .args(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind"])
        .arg(dir)
        .args(["/workspace", "--chdir", "/workspace", "--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin"])
        .args(["--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8", "--"])
        .arg(program)
        .args(args)
        .output()
        .expect("run bwrap")
}
