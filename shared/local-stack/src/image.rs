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

/// A wheel of a package the image lacks (`notarial-dates`, whose `plazo(10)` is "plazo de 10 dias
/// habiles"), made as pip makes one, in `dir`.
pub fn write_test_wheel(dir: &Path) {
    let script = r#"
import base64, hashlib, sys, zipfile
files = {
    "notarial_dates/__init__.py": "def plazo(dias):\n    return f'plazo de {dias} dias habiles'\n",
    "notarial_dates-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: notarial-dates\nVersion: 1.0\n",
    "notarial_dates-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(sys.argv[1] + "/notarial_dates-1.0-py3-none-any.whl", "w") as wheel:
    for name, text in files.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
        wheel.writestr(name, data)
    record.append("notarial_dates-1.0.dist-info/RECORD,,")
    wheel.writestr("notarial_dates-1.0.dist-info/RECORD", "\n".join(record) + "\n")
"#;
    let made = Command::new("python3").args(["-c", script]).arg(dir).output().expect("python3");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
}

/// A bundle of the test wheel ([`write_test_wheel`]) as the runtime packs one, and its SHA-256.
pub fn test_wheel_bundle() -> (Vec<u8>, String) {
    use sha2::Digest;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let number = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("test-wheel-bundle-{}-{number}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    write_test_wheel(&dir);
    let file = "notarial_dates-1.0-py3-none-any.whl";
    let bytes = std::fs::read(dir.join(file)).expect("the test wheel");
    let _ = std::fs::remove_dir_all(&dir);
    let wheel = sandbox::bundles::build::Wheel {
        file: file.into(),
        distribution: "notarial_dates".into(),
        version: "1.0".into(),
        bytes,
    };
    let tar = sandbox::bundles::build::pack(&[wheel], &["notarial-dates==1.0".into()], "sandbox image", "3.13")
        .expect("a bundle");
    let sha256 = hex::encode(sha2::Sha256::digest(&tar));
    (tar, sha256)
}
