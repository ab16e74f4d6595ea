//! What the sandbox image provides to a skill's scripts: its Python's standard library, importable
//! modules and installed distributions, the npm packages `require` finds, and the commands on its
//! `PATH`. Asked of the image itself (its own python3 and node under bubblewrap) once per image,
//! and kept as `provides.json` beside its root filesystem.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::image::READY;

/// Bumped when what is asked of the image changes, so older `provides.json` files are remade.
const FORMAT: u64 = 1;
/// The file beside the root filesystem.
const CACHE_FILE: &str = "provides.json";
/// Where the sandbox points `NODE_PATH` (as `sandbox::handler` sets it for every command).
const NODE_MODULES: &str = "/usr/local/lib/node_modules";
/// The `PATH` of a sandboxed command.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Asking the image what it has, at most.
const ASK_TIMEOUT: Duration = Duration::from_secs(120);

/// Prints what the image's Python has: its version, the standard library's module names, every
/// top-level module importable from `sys.path` (namespace packages too: a folder on the path is
/// one, though pkgutil lists only folders with an `__init__.py`), and the installed distributions
/// by PEP 503 name with their versions.
const PYTHON_SCRIPT: &str = r#"
import importlib.metadata as metadata, json, os, pkgutil, re, sys

modules = {module.name for module in pkgutil.iter_modules() if "." not in module.name}
for entry in sys.path:
    try:
        names = os.listdir(entry or ".")
    except OSError:
        continue
    modules.update(name for name in names
                   if name.isidentifier() and name != "__pycache__" and os.path.isdir(os.path.join(entry, name)))
distributions = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if name:
        distributions[re.sub(r"[-_.]+", "-", name).lower()] = dist.version
print(json.dumps({
    "version": "%d.%d.%d" % sys.version_info[:3],
    "stdlib": sorted(sys.stdlib_module_names),
    "modules": sorted(modules),
    "distributions": distributions,
}))
"#;

/// Prints Node's version, its own modules and the folders `require` searches for a bare name.
const NODE_SCRIPT: &str = "const m = require('module'); \
    console.log(JSON.stringify({version: process.version, builtins: m.builtinModules, paths: m.globalPaths}))";

/// What the image provides.
#[derive(Debug, Clone, Default)]
pub(super) struct Provides {
    /// The image's Python version (`3.13.5`).
    pub python: String,
    pub stdlib: BTreeSet<String>,
    pub modules: BTreeSet<String>,
    /// Installed distributions by PEP 503 name, with their versions.
    pub distributions: BTreeMap<String, String>,
    /// Node's version, empty when the image has no node.
    pub node: String,
    pub node_builtins: BTreeSet<String>,
    /// `name` and `@scope/name` in the folders `require` searches.
    pub node_packages: BTreeSet<String>,
    pub commands: BTreeSet<String>,
}

/// The image to check against: `SANDBOX_ROOT` when set, else the image of the current list when
/// `cargo xtask sandbox image` has built it. A validate never builds one (that takes minutes).
pub(super) fn locate(workspace: &Path) -> Result<PathBuf, String> {
    if let Some(root) = std::env::var_os("SANDBOX_ROOT").filter(|root| !root.is_empty()) {
        let root = PathBuf::from(root);
        return match root.join("usr/bin/python3").exists() {
            true => Ok(root),
            false => Err(format!("SANDBOX_ROOT={} is not a sandbox image's root (no usr/bin/python3)", root.display())),
        };
    }
    match crate::image::built(workspace)? {
        (image, true) => Ok(image.root),
        (image, false) => Err(format!(
            "the sandbox image {} is not built: run `cargo xtask sandbox image`, or set SANDBOX_ROOT",
            image.hash
        )),
    }
}

/// What the image at `root` provides: from `provides.json` beside it when that was made for this
/// build of the image, else asked of the image and written there (when the folder is writable).
pub(super) fn provides(root: &Path) -> Result<Provides, String> {
    let dir = root.parent().unwrap_or(root);
    // The stamp beside a finished root (its hash and size): a rebuilt root has a new one, which
    // makes the cache stale.
    let stamp = std::fs::read_to_string(dir.join(READY)).ok();
    let cache = dir.join(CACHE_FILE);
    if let Some(stamp) = &stamp {
        if let Some(provides) = std::fs::read_to_string(&cache)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .filter(|cached| cached["format"] == FORMAT && cached["stamp"] == stamp.as_str())
            .and_then(|cached| from_json(&cached))
        {
            return Ok(provides);
        }
    }
    let provides = ask(root)?;
    // Without the stamp there is no telling when the cache goes stale, so none is kept.
    if let Some(stamp) = stamp {
        let mut value = to_json(&provides);
        value["format"] = json!(FORMAT);
        value["stamp"] = json!(stamp);
        value["root"] = json!(root.display().to_string());
        let partial = dir.join(format!("{CACHE_FILE}.{}", std::process::id()));
        // Written whole, then renamed, so a reader never sees half of it; a read-only folder only
        // means asking again next time.
        let written = serde_json::to_string_pretty(&value)
            .map_err(|err| err.to_string())
            .and_then(|text| std::fs::write(&partial, text + "\n").map_err(|err| err.to_string()))
            .and_then(|()| std::fs::rename(&partial, &cache).map_err(|err| err.to_string()));
        if written.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
    }
    Ok(provides)
}

/// Asks the image's python3 and node, and reads its npm packages and commands from the tree.
fn ask(root: &Path) -> Result<Provides, String> {
    let output = run(root, &["python3", "-I", "-c", PYTHON_SCRIPT], &[], Vec::new(), ASK_TIMEOUT)
        .map_err(|err| format!("asking the image's Python what it has: {err}"))?;
    let python: Value = serde_json::from_slice(&output).map_err(|err| format!("the image's Python answered: {err}"))?;
    let strings = |value: &Value| -> BTreeSet<String> {
        value.as_array().into_iter().flatten().filter_map(|item| item.as_str().map(str::to_owned)).collect()
    };
    let mut provides = Provides {
        python: python["version"].as_str().unwrap_or_default().to_owned(),
        stdlib: strings(&python["stdlib"]),
        modules: strings(&python["modules"]),
        distributions: python["distributions"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, version)| (name.clone(), version.as_str().unwrap_or_default().to_owned()))
            .collect(),
        ..Provides::default()
    };
    // An image without node has no npm packages for a script either: only the Python part counts.
    let node = run(root, &["node", "-e", NODE_SCRIPT], &[("NODE_PATH", NODE_MODULES)], Vec::new(), ASK_TIMEOUT)
        .ok()
        .and_then(|output| serde_json::from_slice::<Value>(&output).ok());
    let paths = match &node {
        Some(node) => {
            provides.node = node["version"].as_str().unwrap_or_default().to_owned();
            provides.node_builtins = strings(&node["builtins"]);
            strings(&node["paths"]).into_iter().collect()
        }
        None => vec![NODE_MODULES.to_owned()],
    };
    for path in paths {
        provides.node_packages.extend(npm_packages(&inside(root, &path)));
    }
    for dir in PATH.split(':') {
        provides.commands.extend(commands(&inside(root, dir)));
    }
    Ok(provides)
}

/// A path of the image as a path of this machine.
fn inside(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// The packages in a `node_modules` folder: `name`, and `@scope/name` a level down.
fn npm_packages(dir: &Path) -> BTreeSet<String> {
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| entry.file_name().to_str().map(str::to_owned))
            .filter(|name| !name.starts_with('.'))
            .collect()
    };
    let mut packages = BTreeSet::new();
    for name in names(dir) {
        match name.starts_with('@') {
            true => packages.extend(names(&dir.join(&name)).into_iter().map(|inner| format!("{name}/{inner}"))),
            false => {
                packages.insert(name);
            }
        }
    }
    packages
}

/// The programs in a folder of the image's `PATH`: executable files, and links (whose targets are
/// paths of the image, not of this machine).
fn commands(dir: &Path) -> BTreeSet<String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            entry.file_type().is_ok_and(|kind| kind.is_symlink())
                || entry.metadata().is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
        .filter_map(|entry| entry.file_name().to_str().map(str::to_owned))
        .collect()
}

fn to_json(provides: &Provides) -> Value {
    json!({
        "python": {
            "version": provides.python,
            "stdlib": provides.stdlib,
            "modules": provides.modules,
            "distributions": provides.distributions,
        },
        "node": {
            "version": provides.node,
            "builtins": provides.node_builtins,
            "packages": provides.node_packages,
        },
        "commands": provides.commands,
    })
}

fn from_json(value: &Value) -> Option<Provides> {
    let strings = |value: &Value| -> Option<BTreeSet<String>> {
        value.as_array()?.iter().map(|item| item.as_str().map(str::to_owned)).collect()
    };
    Some(Provides {
        python: value["python"]["version"].as_str()?.to_owned(),
        stdlib: strings(&value["python"]["stdlib"])?,
        modules: strings(&value["python"]["modules"])?,
        distributions: value["python"]["distributions"]
            .as_object()?
            .iter()
            .map(|(name, version)| Some((name.clone(), version.as_str()?.to_owned())))
            .collect::<Option<_>>()?,
        node: value["node"]["version"].as_str()?.to_owned(),
        node_builtins: strings(&value["node"]["builtins"])?,
        node_packages: strings(&value["node"]["packages"])?,
        commands: strings(&value["commands"])?,
    })
}

/// Runs `command` inside the image at `root` as a sandboxed command runs (bubblewrap, the image
/// read-only as `/`, no network, a clean environment), with `input` on its stdin; its stdout when
/// it succeeds within `timeout`.
pub(super) fn run(
    root: &Path,
    command: &[&str],
    env: &[(&str, &str)],
    input: Vec<u8>,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let mut bwrap = Command::new("bwrap");
    bwrap.env_clear();
    bwrap.args(["--unshare-all", "--die-with-parent", "--new-session", "--ro-bind"]).arg(root).arg("/");
    bwrap.args(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp", "--clearenv"]);
    bwrap.args(["--setenv", "PATH", PATH, "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8"]);
    bwrap.args(["--setenv", "PYTHONDONTWRITEBYTECODE", "1"]);
    for (key, value) in env {
        bwrap.args(["--setenv", key, value]);
    }
    bwrap.arg("--").args(command);
    bwrap.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child =
        bwrap.spawn().map_err(|err| format!("could not start bwrap (apt-get install bubblewrap): {err}"))?;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    // Written and read on threads of their own, so a large input cannot block on a full output pipe.
    let writer = std::thread::spawn(move || {
        if let Some(mut stdin) = stdin {
            // A program that stops reading early fails below by its status, not here.
            let _ = stdin.write_all(&input);
        }
    });
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = read(stdout.map(|pipe| Box::new(pipe) as Box<dyn Read + Send>));
    let stderr = read(stderr.map(|pipe| Box::new(pipe) as Box<dyn Read + Send>));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait().map_err(|err| format!("waiting for {}: {err}", command[0]))? {
            Some(status) => break status,
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{} took over {} s", command[0], timeout.as_secs()));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let _ = writer.join();
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    match status.success() {
        true => Ok(stdout),
        false => {
            let stderr = String::from_utf8_lossy(&stderr);
            let last = stderr.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or_default();
            Err(format!("{} failed ({status}): {last}", command[0]))
        }
    }
}
