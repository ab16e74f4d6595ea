//! Section 7: a skill's bundle of pinned wheels made here, installed by a tenant's first call, then
//! the installed call against one without a bundle.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::keys::skills_prefix;
use agent_core::sandbox::{BundleRef, ExecOutcome, ExecRequest, Sandbox, SkillMount};
use agent_core::skills::bundle::bundle_file;
use agent_core::UserId;
use local_store::MemoryObjectStore;
use sandbox::bundles::build::{pack, Wheel};
use sandbox::{BundleSource, Config, LocalSandbox};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::calls::{exec_request, file, succeeded};
use crate::WARMUP;

/// The bundle's wheels: distribution, version, modules. The first imports the other two, as a
/// package imports its dependencies.
pub(crate) const BUNDLE_WHEELS: [(&str, &str, usize); 3] =
    [("notary_dates", "1.4.2", 12), ("notary_text", "0.9.0", 6), ("notary_tables", "2.1.0", 8)];
/// The skill the bundle belongs to.
pub(crate) const BUNDLE_SKILL: &str = "notary";
/// Tenants whose first call is measured, each installing the bundle anew.
pub(crate) const BUNDLE_TENANTS: usize = 5;
pub(crate) const IMPORT_BUNDLE: &str = "python -c 'import notary_dates; print(notary_dates.__version__)'";
pub(crate) const IMPORT_JSON: &str = "python -c 'import json; print(json.__name__)'";

/// Writes pure-Python wheels to `argv[1]` by the spec in `argv[2]`: each module a table, a dozen
/// functions and a class (about 4 KB of source), the package's `__init__` importing its modules
/// and those of the packages it depends on; fixed dates and modes, so the same spec always makes
/// the same bytes.
pub(crate) const WRITE_WHEELS: &str = r#"
import base64, hashlib, json, sys, zipfile
out, spec = sys.argv[1], json.loads(sys.argv[2])
def module(name, m):
    table = ", ".join(f"{k}: {k * k + m}" for k in range(40))
    lines = [f'"""{name}.m{m:02d}: made for the sandbox benchmark."""', "", "import math", "", f"TABLE = {{{table}}}", ""]
    for f in range(12):
        lines += [
            f"def f{f:02d}(x, y=1):",
            f"    '''Function {f} of module {m}: a sum over range(x), scaled.'''",
            "    total = 0",
            "    for i in range(x):",
            f"        total += (i * {f + 1} + y) % {m + 7}",
            "    return math.sqrt(total) + TABLE.get(x % 40, 0)",
            "",
        ]
    lines += [
        f"class Record{m:02d}:",
        "    def __init__(self, value):",
        "        self.value = value",
        "",
        "    def scaled(self, k):",
        "        return [f00(self.value + i) * k for i in range(3)]",
        "",
        "    def __repr__(self):",
        f"        return f'Record{m:02d}({{self.value!r}})'",
        "",
    ]
    return "\n".join(lines)
for wheel in spec:
    name, version, modules, deps = wheel["name"], wheel["version"], wheel["modules"], wheel["deps"]
    info = f"{name}-{version}.dist-info"
    files = {}
    for m in range(modules):
        files[f"{name}/m{m:02d}.py"] = module(name, m)
    imports = "".join(f"import {dep}\n" for dep in deps)
    imports += "".join(f"from . import m{m:02d}\n" for m in range(modules))
    files[f"{name}/__init__.py"] = f'"""{name}: made for the sandbox benchmark."""\n{imports}__version__ = "{version}"\n'
    requires = "".join(f"Requires-Dist: {dep}\n" for dep in deps)
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requires}"
    files[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: sandbox-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    def add(archive, path, data):
        entry = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
        entry.compress_type = zipfile.ZIP_DEFLATED
        entry.external_attr = 0o644 << 16
        archive.writestr(entry, data)
    with zipfile.ZipFile(f"{out}/{name}-{version}-py3-none-any.whl", "w") as archive:
        for path, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
            add(archive, path, data)
        record.append(f"{info}/RECORD,,")
        add(archive, f"{info}/RECORD", "\n".join(record) + "\n")
"#;

/// The bundle's wheels, written by the host's `python3` into `dir`, by file name.
pub(crate) fn write_wheels(dir: &Path) -> Vec<Wheel> {
    let spec: Vec<serde_json::Value> = BUNDLE_WHEELS
        .iter()
        .enumerate()
        .map(|(i, (name, version, modules))| {
            let deps: Vec<&str> = if i == 0 { BUNDLE_WHEELS[1..].iter().map(|w| w.0).collect() } else { vec![] };
            json!({"name": name, "version": version, "modules": modules, "deps": deps})
        })
        .collect();
    let made = std::process::Command::new("python3")
        .args(["-c", WRITE_WHEELS])
        .arg(dir)
        .arg(serde_json::to_string(&spec).unwrap())
        .output()
        .expect("section 7 writes its wheels with python3 on the host");
    assert!(made.status.success(), "writing the wheels: {}", String::from_utf8_lossy(&made.stderr));
    let mut wheels: Vec<Wheel> = BUNDLE_WHEELS
        .iter()
        .map(|(name, version, _)| {
            let file = format!("{name}-{version}-py3-none-any.whl");
            let bytes = std::fs::read(dir.join(&file)).expect("read a wheel");
            Wheel { file, distribution: (*name).to_owned(), version: (*version).to_owned(), bytes }
        })
        .collect();
    wheels.sort_by(|a, b| a.file.cmp(&b.file));
    wheels
}

/// The bundle's tar as `cargo xtask skills sync` packs it.
pub(crate) fn pack_bundle(wheels: &[Wheel]) -> Vec<u8> {
    let needs = [BUNDLE_WHEELS[0].0.to_owned()];
    pack(wheels, &needs, "sandbox-bench", "3").expect("pack the bundle")
}

/// The files under `dir` inside an installed `site` folder, and their bytes.
pub(crate) fn installed_size(dir: &Path) -> (u64, u64) {
    fn walk(dir: &Path, in_site: bool, totals: &mut (u64, u64)) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let (path, kind) = (entry.path(), entry.file_type().expect("a file type"));
            if kind.is_dir() {
                walk(&path, in_site || entry.file_name() == "site", totals);
            } else if in_site && kind.is_file() {
                totals.0 += 1;
                totals.1 += entry.metadata().map_or(0, |meta| meta.len());
            }
        }
    }
    let mut totals = (0, 0);
    walk(dir, false, &mut totals);
    totals
}

/// What section 7 measured.
pub(crate) struct BundleFigures {
    pub(crate) tar_bytes: usize,
    /// The tar's SHA-256 (the same every run: the wheels and the tar are made deterministically).
    pub(crate) sha256: String,
    pub(crate) wheel_bytes: usize,
    pub(crate) modules: usize,
    /// Files and bytes one install leaves.
    pub(crate) installed: (u64, u64),
    /// The process's first install (it warms the page cache for pip; not among `first`).
    pub(crate) process_first: Duration,
    pub(crate) first: Vec<Duration>,
    pub(crate) cached: Vec<Duration>,
    pub(crate) plain: Vec<Duration>,
}

/// The bundle's calls through a `LocalSandbox` like `base` whose bundles go to a fresh folder and
/// come from an in-memory store: a warm-up tenant's first call, [`BUNDLE_TENANTS`] more tenants'
/// first calls, then the last tenant's same call and a call without the bundle, alternating.
pub(crate) async fn time_bundle(base: &LocalSandbox, runs: usize) -> BundleFigures {
    let dir = std::env::temp_dir().join(format!("sandbox-bench-bundle-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (wheels_dir, bundle_dir) = (dir.join("wheels"), dir.join("installed"));
    for folder in [&wheels_dir, &bundle_dir] {
        std::fs::create_dir_all(folder).expect("make the bundle benchmark's folders");
    }
    let wheels = write_wheels(&wheels_dir);
    let tar = pack_bundle(&wheels);
    let sha256 = hex::encode(Sha256::digest(&tar));
    let objects = Arc::new(MemoryObjectStore::new());
    let config = Config { bundle_dir: bundle_dir.clone(), ..base.config().clone() };
    let key = local_stack::stack::test_bundle_key();
    let local = LocalSandbox::new(config).with_bundles(BundleSource::new(objects.clone(), Some(key.clone())));
    let skill_md = format!(
        "---\nname: {BUNDLE_SKILL}\ndescription: Deadlines and tables for notarial deeds.\n---\n\n# Notary\n\n\
         Run `python -c 'import notary_dates'`.\n"
    );
    // The tenant's copy of the skill and its bundle in the store, and the call naming it.
    let request_for = |tenant: &UserId, command: &str| {
        // Signed for the tenant as skills sync signs it: the sandbox installs no other.
        let mac = key.mac(tenant, &sha256);
        let stored = format!("{}{BUNDLE_SKILL}/{}", skills_prefix(tenant), bundle_file(&sha256, &mac));
        objects.insert(&stored, tar.clone());
        let bundle = BundleRef { key: stored, sha256: sha256.clone(), mac: Some(mac), size: tar.len() as u64 };
        let skill = SkillMount {
            name: BUNDLE_SKILL.to_owned(),
            files: vec![file("SKILL.md", skill_md.clone().into_bytes())],
            bundle: Some(bundle),
        };
        ExecRequest { tenant: tenant.clone(), ..exec_request(command, vec![], vec![skill]) }
    };
    let imported = |outcome: &ExecOutcome| {
        succeeded(outcome);
        assert_eq!(outcome.output, format!("{}\n", BUNDLE_WHEELS[0].1), "the bundle's package imports");
    };
    let call = |request: ExecRequest| {
        let local = &local;
        async move {
            let started = Instant::now();
            let outcome = local.execute(request).await.unwrap_or_else(|err| panic!("the bundle's call: {err:?}"));
            (started.elapsed(), outcome)
        }
    };

    let (process_first, outcome) = call(request_for(&UserId::parse("bench-bundle-warm").unwrap(), IMPORT_BUNDLE)).await;
    imported(&outcome);
    let installed = installed_size(&bundle_dir);
    assert!(installed.0 > 0, "the bundle was installed under {}", bundle_dir.display());
    let mut first = Vec::new();
    let mut last = None;
    for i in 0..BUNDLE_TENANTS {
        let tenant = UserId::parse(format!("bench-bundle-{i}")).unwrap();
        let (elapsed, outcome) = call(request_for(&tenant, IMPORT_BUNDLE)).await;
        imported(&outcome);
        first.push(elapsed);
        last = Some(tenant);
    }
    let tenant = last.expect("a tenant");
    let (installed_all, _) = installed_size(&bundle_dir);
    assert_eq!(installed_all, installed.0 * (BUNDLE_TENANTS as u64 + 1), "every tenant installed its own copy");
    let cached_request = request_for(&tenant, IMPORT_BUNDLE);
    let plain_request = ExecRequest { tenant: tenant.clone(), ..exec_request(IMPORT_JSON, vec![], vec![]) };
    let (mut cached, mut plain) = (Vec::new(), Vec::new());
    for run in 0..WARMUP + runs {
        for step in 0..2 {
            let with_bundle = (run + step) % 2 == 0;
            if with_bundle {
                let (elapsed, outcome) = call(cached_request.clone()).await;
                imported(&outcome);
                if run >= WARMUP {
                    cached.push(elapsed);
                }
            } else {
                let (elapsed, outcome) = call(plain_request.clone()).await;
                succeeded(&outcome);
                assert_eq!(outcome.output, "json\n");
                if run >= WARMUP {
                    plain.push(elapsed);
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    BundleFigures {
        tar_bytes: tar.len(),
        sha256,
        wheel_bytes: wheels.iter().map(|wheel| wheel.bytes.len()).sum(),
        modules: BUNDLE_WHEELS.iter().map(|wheel| wheel.2).sum(),
        installed,
        process_first,
        first,
        cached,
        plain,
    }
}
