//! The deployable form of the image: the root filesystem the tests use, plus the release build of the
//! sandbox function at `/var/runtime/bootstrap` (and of skills-index at `/var/runtime/skills-index`,
//! which the template's SkillsBundleFunction runs), as an OCI image made with `umoci` (no Docker), and
//! its copy to a registry with `skopeo`. Lambda runs OCI images; the function is x86_64 like the root.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::build::Rootfs;

/// The tag inside the layout.
const TAG: &str = "sandbox";

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let status =
        command.status().map_err(|err| format!("could not start {what}: {err} (apt-get install umoci skopeo)"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

/// Packs `rootfs` with the sandbox function into `<dir>/oci`; returns the layout's path.
pub fn pack(workspace: &Path, rootfs: &Rootfs) -> Result<PathBuf, String> {
    run(
        crate::cargo()
            .args(["build", "--release", "--locked", "-p", "sandbox-function", "-p", "skills-index"])
            .current_dir(workspace),
        "cargo build --release -p sandbox-function -p skills-index",
    )?;
    let layout = rootfs.dir.join("oci");
    if layout.exists() {
        std::fs::remove_dir_all(&layout).map_err(|err| format!("could not remove {}: {err}", layout.display()))?;
    }
    let image = format!("{}:{TAG}", layout.display());
    let rootless: &[&str] = if is_root() { &[] } else { &["--rootless"] };
    run(Command::new("umoci").args(["init", "--layout"]).arg(&layout), "umoci init")?;
    run(Command::new("umoci").args(["new", "--image", &image]), "umoci new")?;
    run(
        Command::new("umoci").arg("insert").args(rootless).args(["--image", &image]).arg(&rootfs.root).arg("/"),
        "umoci insert of the root filesystem",
    )?;
    let bootstrap = workspace.join("target/release/sandbox");
    run(
        Command::new("umoci")
            .arg("insert")
            .args(rootless)
            .args(["--image", &image])
            .arg(&bootstrap)
            .arg("/var/runtime/bootstrap"),
        "umoci insert of the sandbox function",
    )?;
    // The same image runs skills-index for skills' bundles (the template's SkillsBundleFunction),
    // with the image's own pip.
    run(
        Command::new("umoci")
            .arg("insert")
            .args(rootless)
            .args(["--image", &image])
            .arg(workspace.join("target/release/skills-index"))
            .arg("/var/runtime/skills-index"),
        "umoci insert of skills-index",
    )?;
    run(
        Command::new("umoci").args([
            "config",
            "--image",
            &image,
            "--architecture=amd64",
            "--os=linux",
            "--config.entrypoint=/var/runtime/bootstrap",
            "--config.workingdir=/",
            "--config.env=PATH=/usr/local/bin:/usr/bin:/bin",
            &format!("--config.label=org.opencontainers.image.revision={}", rootfs.hash),
        ]),
        "umoci config",
    )?;
    Ok(layout)
}

/// Copies the layout's image to `reference` (a registry repository and tag) with skopeo, which
/// reads the registry login of `skopeo login` (for ECR: `aws ecr get-login-password | skopeo login
/// --username AWS --password-stdin <registry>`).
pub fn push(layout: &Path, reference: &str) -> Result<(), String> {
    run(
        Command::new("skopeo")
            .args(["copy", "--format", "v2s2"])
            .arg(format!("oci:{}:{TAG}", layout.display()))
            .arg(format!("docker://{reference}")),
        "skopeo copy",
    )
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
