//! A skill's bundle installed as hostile input: the installer inside the walls of a command (an
//! unprivileged uid, the seccomp filter, no capabilities, the read-only image root, nothing left
//! running), the installed folder the handler's own and out of a command's reach, and a tenant's
//! installs within their bound, the least recently used evicted.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sandbox::bundles::build::{pack, Wheel};
use sandbox::handler::{self, bundle, Config, HandlerError};
use sandbox::{WireBundle, WireRequest, WireSkill};
use sha2::{Digest, Sha256};

use super::{bwrap_config, is_root, process_config, request, sandbox_root};

/// A wheel of `module` (importable, printing nothing) with `payload` bytes of zeros in a data file,
/// made by the host's Python as pip makes one.
fn wheel(distribution: &str, payload: usize) -> Wheel {
    let dir = std::env::temp_dir().join(format!("bundle-wheel-{}-{distribution}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = r#"
import base64, hashlib, sys, zipfile
name, payload, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
files = {
    f"{name}/__init__.py": b"VALUE = 'from the bundle'\n",
    f"{name}/payload.bin": bytes(payload),
    f"{name}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
    f"{name}-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(f"{out}/{name}-1.0-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as wheel:
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
        wheel.writestr(path, data)
    record.append(f"{name}-1.0.dist-info/RECORD,,")
    wheel.writestr(f"{name}-1.0.dist-info/RECORD", "\n".join(record) + "\n")
"#;
    let made = Command::new("python3")
        .args(["-c", script, distribution, &payload.to_string()])
        .arg(&dir)
        .output()
        .expect("python3");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let file = format!("{distribution}-1.0-py3-none-any.whl");
    let bytes = std::fs::read(dir.join(&file)).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Wheel { file, distribution: distribution.into(), version: "1.0".into(), bytes }
}

fn bundle_of(distribution: &str, payload: usize) -> (String, Vec<u8>) {
    let bytes = pack(&[wheel(distribution, payload)], &[distribution.to_owned()], "test", "3.13").unwrap();
    (hex::encode(Sha256::digest(&bytes)), bytes)
}

fn config_with_bundles(mut config: Config, name: &str) -> Config {
    config.bundle_dir = std::env::temp_dir().join(format!("bundle-tests-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&config.bundle_dir);
    config
}

/// A call of `tenant` whose skill has the bundle `sha256`.
fn call_with_bundle(tenant: &str, sha256: &str, size: usize, command: &str) -> WireRequest {
    let mut call = request(command, Duration::from_secs(30));
    call.tenant = tenant.into();
    call.skills = vec![WireSkill {
        name: "s".into(),
        files: vec![],
        bundle: Some(WireBundle { sha256: sha256.into(), size: size as u64 }),
    }];
    call
}

fn image_untouched(marker: &str) -> bool {
    let root = sandbox_root();
    ["usr/lib/python3/dist-packages", "usr/local/lib", "etc", "tmp"]
        .iter()
        .all(|dir| !root.join(dir).join(marker).exists())
}

#[test]
fn an_installed_bundle_imports_and_its_folder_is_the_handlers_read_only() {
    let config = config_with_bundles(bwrap_config(), "ok");
    let (sha256, bytes) = bundle_of("tiny_ok", 10);
    let installed = bundle::install(&config, "tenant-1", &sha256, &bytes).expect("installs").expect("new");
    assert_eq!(installed.wheels, 1);
    assert!(bundle::install(&config, "tenant-1", &sha256, &bytes).expect("again").is_none(), "installed once");
    let command = "python3 -c 'import tiny_ok; print(tiny_ok.VALUE)'; \
                   touch \"$(python3 -c 'import tiny_ok, os; print(os.path.dirname(tiny_ok.__file__))')/x\" && echo WROTE";
    let response = handler::run_blocking(&config, call_with_bundle("tenant-1", &sha256, bytes.len(), command)).unwrap();
    assert!(response.output.starts_with("from the bundle\n"), "{}", response.output);
    assert!(!response.output.contains("WROTE"), "the installed folder is read-only: {}", response.output);
    // The handler owns every installed file; no call's uid does.
    let me = unsafe { libc::geteuid() };
    let site = walk(&config.bundle_dir);
    assert!(site.iter().any(|path| path.ends_with("tiny_ok/__init__.py")), "{site:?}");
    for path in &site {
        let meta = std::fs::symlink_metadata(path).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), me, "{}", path.display());
        assert!(!meta.file_type().is_symlink(), "{}", path.display());
    }
    // Another tenant does not get it.
    let other = handler::run_blocking(&config, call_with_bundle("tenant-2", &sha256, bytes.len(), "true"));
    assert!(matches!(other, Err(HandlerError::MissingBundles(_))), "{other:?}");
    let _ = std::fs::remove_dir_all(&config.bundle_dir);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

/// An installer that does what a build backend of an sdist could: it reports who it runs as and
/// tries to remount the root, write into the image, reach the network and leave a daemon behind.
const HOSTILE_INSTALLER: &str = r#"
import json, os, socket, subprocess, sys
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
probe = {
    "uid": os.getuid(),
    "cap_eff": status["CapEff"].strip(),
    "seccomp": status["Seccomp"].strip(),
    "no_new_privs": status["NoNewPrivs"].strip(),
}
try:
    probe["remount"] = subprocess.run(["mount", "-o", "remount,rw,bind", "/"], capture_output=True).returncode
except OSError as err:
    probe["remount"] = -err.errno
for path in ["/usr/lib/python3/dist-packages/evil-bundle.pth", "/etc/evil-bundle.pth"]:
    try:
        open(path, "w").write("import os\n")
        probe["wrote"] = path
    except OSError as err:
        probe.setdefault("write_errors", []).append(err.errno)
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("127.0.0.1", 9))
    probe["inet"] = "connected"
except OSError as err:
    probe["inet"] = err.errno
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "424242"])
    os._exit(0)
print(json.dumps({"error": "probe " + json.dumps(probe)}))
"#;

#[test]
fn a_hostile_installer_meets_the_walls_of_a_command_and_leaves_nothing_running() {
    if !is_root() {
        eprintln!("skipped: the handler gives each call a uid of its own only as root");
        return;
    }
    let config = config_with_bundles(bwrap_config(), "hostile");
    let (sha256, bytes) = bundle_of("tiny_hostile", 10);
    let err = bundle::install_with_installer(&config, "tenant-1", &sha256, &bytes, HOSTILE_INSTALLER)
        .expect_err("the probe reports as an error");
    let HandlerError::BadBundle(reason) = err else { panic!("{err}") };
    let probe: serde_json::Value = serde_json::from_str(reason.strip_prefix("probe ").expect(&reason)).unwrap();
    assert_ne!(probe["uid"], 0, "{probe}");
    assert_eq!(probe["cap_eff"], "0000000000000000", "{probe}");
    assert_eq!(probe["seccomp"], "2", "{probe}");
    assert_ne!(probe["remount"], 0, "{probe}");
    assert!(probe.get("wrote").is_none(), "{probe}");
    assert_ne!(probe["inet"], "connected", "{probe}");
    assert!(image_untouched("evil-bundle.pth"));
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
        .map(|cmdline| String::from_utf8_lossy(&cmdline).replace('\0', " "))
        .filter(|cmdline| cmdline.contains("424242"))
        .collect();
    assert!(left.is_empty(), "the installer's daemon outlived the install: {left:?}");
    assert!(!config.bundle_dir.exists() || walk(&config.bundle_dir).iter().all(|path| !path.ends_with("site")));
    let _ = std::fs::remove_dir_all(&config.bundle_dir);
}

#[test]
fn a_tenants_bundles_stay_within_their_bound_and_the_least_recently_used_go_first() {
    let mut config = config_with_bundles(bwrap_config(), "bound");
    config.bundle_bytes = 7 << 20;
    let (one, one_bytes) = bundle_of("tiny_one", 3 << 20);
    let (two, two_bytes) = bundle_of("tiny_two", 3 << 20);
    let (three, three_bytes) = bundle_of("tiny_three", 3 << 20);
    let (large, large_bytes) = bundle_of("tiny_large", 8 << 20);
    bundle::install(&config, "tenant-1", &one, &one_bytes).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    bundle::install(&config, "tenant-1", &two, &two_bytes).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    // The first is used again, so the second is now the least recently used.
    let used = handler::run_blocking(&config, call_with_bundle("tenant-1", &one, one_bytes.len(), "true"));
    assert_eq!(used.expect("runs").exit_code, Some(0));
    bundle::install(&config, "tenant-1", &three, &three_bytes).unwrap();
    let installed = |sha: &str, size: usize| {
        !matches!(
            handler::run_blocking(&config, call_with_bundle("tenant-1", sha, size, "true")),
            Err(HandlerError::MissingBundles(_))
        )
    };
    assert!(installed(&one, one_bytes.len()), "the recently used one stays");
    assert!(!installed(&two, two_bytes.len()), "the least recently used one was evicted");
    assert!(installed(&three, three_bytes.len()));
    let err = bundle::install(&config, "tenant-1", &large, &large_bytes).expect_err("over the bound alone");
    assert!(
        matches!(&err, HandlerError::BadBundle(reason) if reason.contains("over the 7 MiB this sandbox keeps")),
        "{err}"
    );
    assert!(
        installed(&one, one_bytes.len()) && installed(&three, three_bytes.len()),
        "a refused bundle evicts nothing"
    );
    let _ = std::fs::remove_dir_all(&config.bundle_dir);
}

#[test]
fn in_process_isolation_a_bundle_a_command_changed_or_a_file_it_left_there_is_gone_before_the_next_call() {
    let config = config_with_bundles(process_config("bundle-audit"), "audit");
    let (sha256, bytes) = bundle_of("tiny_audit", 10);
    bundle::install(&config, "tenant-1", &sha256, &bytes).expect("installs");
    let call =
        |command: &str| handler::run_blocking(&config, call_with_bundle("tenant-1", &sha256, bytes.len(), command));
    let ran = call("python3 -c 'import tiny_audit; print(tiny_audit.VALUE)'").expect("runs");
    assert!(ran.output.starts_with("from the bundle"), "{}", ran.output);
    // A command finds the folder and changes it, and leaves a file beside it for a later call.
    let bundles = config.bundle_dir.display().to_string();
    let tamper = format!(
        "site=$(python3 -c 'import tiny_audit, os; print(os.path.dirname(tiny_audit.__file__))'); \
         chmod u+w \"$site\" \"$site/__init__.py\" && echo \"VALUE = 'changed'\" > \"$site/__init__.py\" && \
         echo secret > {bundles}/left-for-later && echo TAMPERED"
    );
    let tampered = call(&tamper).expect("runs");
    assert!(tampered.output.contains("TAMPERED"), "{}", tampered.output);
    assert!(!config.bundle_dir.join("left-for-later").exists(), "the file left there is gone");
    let after = call("python3 -c 'import tiny_audit; print(tiny_audit.VALUE)'");
    assert!(matches!(after, Err(HandlerError::MissingBundles(_))), "the changed install is gone: {after:?}");
    bundle::install(&config, "tenant-1", &sha256, &bytes).expect("installs again");
    let ran = call("python3 -c 'import tiny_audit; print(tiny_audit.VALUE)'").expect("runs");
    assert!(ran.output.starts_with("from the bundle"), "{}", ran.output);
    let _ = std::fs::remove_dir_all(&config.bundle_dir);
    let _ = std::fs::remove_dir_all(&config.scratch_base);
}

#[test]
fn a_500_mib_bundle_beyond_the_tenants_room_is_refused_plainly_and_takes_nothing() {
    let mut config = config_with_bundles(bwrap_config(), "large");
    config.bundle_bytes = 400 << 20;
    let (small, small_bytes) = bundle_of("tiny_small", 1 << 20);
    bundle::install(&config, "tenant-1", &small, &small_bytes).expect("installs");
    // 500 MiB of zeros compress to well under a megabyte: what counts is what it unpacks to.
    let (large, large_bytes) = bundle_of("tiny_huge", 500 << 20);
    assert!(large_bytes.len() < 4 << 20, "{}", large_bytes.len());
    let err = bundle::install(&config, "tenant-1", &large, &large_bytes).expect_err("over the room");
    let HandlerError::BadBundle(reason) = &err else { panic!("{err}") };
    assert!(
        reason.contains("the bundle unpacks to") && reason.contains("over the 400 MiB this sandbox keeps"),
        "{reason}"
    );
    let kept = handler::run_blocking(&config, call_with_bundle("tenant-1", &small, small_bytes.len(), "true"));
    assert_eq!(kept.expect("the smaller install stays").exit_code, Some(0));
    let on_disk: u64 = walk(&config.bundle_dir)
        .iter()
        .filter_map(|path| std::fs::symlink_metadata(path).ok())
        .map(|meta| meta.len())
        .sum();
    assert!(on_disk < 8 << 20, "nothing of the refused bundle is kept: {on_disk} bytes");
    let _ = std::fs::remove_dir_all(&config.bundle_dir);
}

#[test]
fn an_install_an_earlier_handler_made_is_not_used_and_is_replaced() {
    let config = config_with_bundles(bwrap_config(), "earlier");
    let (sha256, bytes) = bundle_of("tiny_earlier", 10);
    bundle::install(&config, "tenant-1", &sha256, &bytes).expect("installs");
    // The stamp the handler wrote before installs had a command's walls: the bare hash.
    let stamp = walk(&config.bundle_dir).into_iter().find(|path| path.ends_with("ready")).expect("a stamp");
    std::fs::write(&stamp, &sha256).unwrap();
    let call = || handler::run_blocking(&config, call_with_bundle("tenant-1", &sha256, bytes.len(), "true"));
    assert!(matches!(call(), Err(HandlerError::MissingBundles(_))), "the earlier install is not used");
    assert!(bundle::install(&config, "tenant-1", &sha256, &bytes).expect("installs again").is_some());
    assert_eq!(call().expect("runs").exit_code, Some(0));
    let _ = std::fs::remove_dir_all(&config.bundle_dir);
}
