//! `cargo xtask sandbox image`: the one sandbox image. The root filesystem built from the declared
//! list (`list`, `build`) is what the local sandbox runs every command in, in the tests, the demo,
//! `cargo xtask local` and the console; the same tree with the sandbox function as its bootstrap,
//! packed as an OCI image (`oci`), is what a deploy pushes to ECR for the sandbox function.

mod build;
pub mod list;
mod oci;

use std::path::Path;

pub use build::{built, ensure, Rootfs, READY};

pub(crate) const USAGE: &str = "\
usage: cargo xtask sandbox image [--oci] [--push <registry/repository:tag>]

Builds the sandbox's root filesystem from functions/sandbox/image/ (debian.txt, requirements.txt,
package.json and its lockfile, customize.sh) with mmdebstrap, or reuses the one built for the same
list, and prints its path.
  --oci    also pack it, with the release build of the sandbox function as its bootstrap, as an
           OCI image (umoci) under target/sandbox-image/<hash>/oci
  --push   also copy that image to a registry with skopeo (no Docker needed), for example
           123456789012.dkr.ecr.eu-west-1.amazonaws.com/agent-sandbox:<hash>";

/// `cargo xtask sandbox <args>`.
pub fn run(root: &Path, args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("image") => image(root, &args[1..]),
        Some("--help" | "-h") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(USAGE.to_owned()),
    }
}

fn image(root: &Path, args: &[String]) -> Result<(), String> {
    let (mut oci, mut push) = (false, None);
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--oci" => oci = true,
            "--push" => {
                push = Some(rest.next().ok_or("--push needs an image reference")?.clone());
                oci = true;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    let rootfs = ensure(root)?;
    println!("{}", rootfs.root.display());
    if oci {
        let layout = oci::pack(root, &rootfs)?;
        println!("{}", layout.display());
        if let Some(reference) = push {
            oci::push(&layout, &reference)?;
        }
    }
    Ok(())
}

/// Builds (or reuses) the image and names its root for the commands xtask starts (`SANDBOX_ROOT`),
/// which the local sandbox runs every command in.
pub fn activate(root: &Path) -> Result<Rootfs, String> {
    let rootfs = ensure(root)?;
    // xtask is single-threaded here, before any child process starts.
    std::env::set_var("SANDBOX_ROOT", &rootfs.root);
    Ok(rootfs)
}
