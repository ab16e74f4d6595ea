//! The scanning step of `needs`: each file of the folder given to the skill that holds it, a
//! skill's declarations read (else its scripts), the Python of every skill parsed in one run of the
//! image's Python, and each need found checked against what the image provides.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::declared::{self, Requirement};
use super::image::Provides;
use super::python::{self, MAX_SCRIPTS, MAX_SCRIPT_BYTES};
use super::{node, Need, Resolution, SkillNeeds};
use crate::skills::{read_bounded, Folder, LocalFile};

/// Where a skill's declarations are looked for, inside its folder.
const DECLARATION_DIRS: [&str; 2] = ["", "scripts/"];
/// Node's own modules, for an image whose node could not be asked.
const NODE_BUILTINS: &str = "\
    assert async_hooks buffer child_process cluster console constants crypto dgram \
    diagnostics_channel dns domain events fs http http2 https inspector module net os path \
    perf_hooks process punycode querystring readline repl stream string_decoder sys test \
    timers tls trace_events tty url util v8 vm wasi worker_threads zlib";

/// A skill's files, by their paths inside it: each file of the folder belongs to the innermost
/// skill whose folder holds it.
pub(super) fn skill_files<'a>(folder: &'a Folder, skills: &[String]) -> BTreeMap<String, Vec<(String, &'a LocalFile)>> {
    let known: BTreeSet<&str> = skills.iter().map(String::as_str).collect();
    let mut files: BTreeMap<String, Vec<(String, &LocalFile)>> =
        skills.iter().map(|skill| (skill.clone(), Vec::new())).collect();
    for file in &folder.files {
        let owner = file.rel.match_indices('/').rev().map(|(at, _)| &file.rel[..at]).find(|dir| known.contains(dir));
        if let Some(owner) = owner {
            let inner = file.rel[owner.len() + 1..].to_owned();
            files.entry(owner.to_owned()).or_default().push((inner, file));
        }
    }
    files
}

/// What one skill holds that says what it needs, before the Python is parsed.
#[derive(Default)]
struct Scan {
    needs: SkillNeeds,
    python_declared: Option<Vec<(Requirement, String)>>,
    node_declared: Option<Vec<(String, String)>>,
    /// Scripts to parse: their paths in the skill and their index in the sources.
    python_scripts: Vec<(String, usize)>,
    /// Packages the JavaScript loads, with the scripts that load them.
    node_imports: BTreeMap<String, BTreeSet<String>>,
    own_python: BTreeSet<String>,
    own_node: BTreeSet<String>,
}

/// The needs of every skill, parsing all their Python in one run of the image's Python.
pub(super) fn detect(
    root: &Path,
    provides: &Provides,
    folder: &Folder,
    skills: &[String],
) -> Result<BTreeMap<String, SkillNeeds>, String> {
    let mut sources = Vec::new();
    let mut scans = BTreeMap::new();
    for (skill, files) in skill_files(folder, skills) {
        scans.insert(skill, scan(&files, provides, &mut sources));
    }
    let parsed = python::read_imports(root, &sources)?;
    Ok(scans.into_iter().map(|(skill, scan)| (skill, needs_of(scan, &parsed, provides))).collect())
}

/// Reads a skill's declarations, and its scripts where it declares nothing; Python sources are
/// added to `sources` for one parse of them all.
fn scan(files: &[(String, &LocalFile)], provides: &Provides, sources: &mut Vec<Vec<u8>>) -> Scan {
    let mut scan = Scan::default();
    declarations(&mut scan, files, &provides.python);
    let in_node_modules = |inner: &str| inner.starts_with("node_modules/") || inner.contains("/node_modules/");
    scan.own_python =
        python::own_modules(files.iter().map(|(inner, _)| inner.as_str()).filter(|inner| !in_node_modules(inner)));
    for (inner, _) in files {
        // A package the skill carries in a node_modules folder of its own is found by `require`.
        if let Some((_, rest)) = inner.split_once("node_modules/").filter(|_| in_node_modules(inner)) {
            let mut parts = rest.split('/');
            let package = match parts.next() {
                Some(scope) if scope.starts_with('@') => parts.next().map(|name| format!("{scope}/{name}")),
                other => other.map(str::to_owned),
            };
            scan.own_node.extend(package.filter(|_| rest.contains('/')));
        }
    }
    let builtins = |name: &str| match provides.node_builtins.is_empty() {
        true => NODE_BUILTINS.split_whitespace().any(|builtin| builtin == name),
        false => provides.node_builtins.contains(name),
    };
    let (mut python_read, mut node_read, mut skipped) = (0usize, 0usize, 0usize);
    for (inner, file) in files.iter().filter(|(inner, _)| !in_node_modules(inner)) {
        let is_python = inner.ends_with(".py");
        if !is_python && ![".js", ".mjs", ".cjs"].iter().any(|suffix| inner.ends_with(suffix)) {
            continue;
        }
        scan.needs.scripts += 1;
        // A language the skill declares its needs for is not read.
        let (declared, read) = match is_python {
            true => (scan.python_declared.is_some(), &mut python_read),
            false => (scan.node_declared.is_some(), &mut node_read),
        };
        if declared {
            continue;
        }
        let bytes = match *read < MAX_SCRIPTS && file.size <= MAX_SCRIPT_BYTES {
            true => read_bounded(&file.path, MAX_SCRIPT_BYTES),
            false => Ok(None),
        };
        let bytes = match bytes {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                skipped += 1;
                continue;
            }
            Err(err) => {
                scan.needs.problems.push(err);
                continue;
            }
        };
        *read += 1;
        match is_python {
            true => {
                scan.python_scripts.push((inner.clone(), sources.len()));
                sources.push(bytes);
            }
            false => {
                for specifier in node::specifiers(&String::from_utf8_lossy(&bytes)) {
                    if let Some(package) = node::package_of(&specifier, &builtins) {
                        scan.node_imports.entry(package).or_default().insert(inner.clone());
                    }
                }
            }
        }
    }
    if skipped > 0 {
        scan.needs.problems.push(format!(
            "{} not read (over {} KiB, or past the first {MAX_SCRIPTS} of a language)",
            crate::counted(skipped as u64, "script", "scripts"),
            MAX_SCRIPT_BYTES / 1024
        ));
    }
    if python_read > 0 && scan.python_declared.is_none() || node_read > 0 && scan.node_declared.is_none() {
        scan.needs.declared_from.push("imports".to_owned());
    }
    scan
}

/// Reads the declarations in the skill's folder and its `scripts/` (`python` is the image's
/// version, for environment markers); one that cannot be read is a problem, not a declaration.
fn declarations(scan: &mut Scan, files: &[(String, &LocalFile)], python: &str) {
    let by_path: BTreeMap<&str, &LocalFile> = files.iter().map(|(inner, file)| (inner.as_str(), *file)).collect();
    let problems = &mut scan.needs.problems;
    let mut read = |name: &str| -> Option<String> {
        let file = by_path.get(name)?;
        match read_bounded(&file.path, MAX_SCRIPT_BYTES) {
            Ok(Some(bytes)) => Some(String::from_utf8_lossy(&bytes).into_owned()),
            Ok(None) => {
                problems.push(format!("{name}: larger than {} KiB, not read", MAX_SCRIPT_BYTES / 1024));
                None
            }
            Err(err) => {
                problems.push(err);
                None
            }
        }
    };
    let mut sources = Vec::new();
    for dir in DECLARATION_DIRS {
        for file in ["requirements.txt", "pyproject.toml", "package.json"] {
            let name = format!("{dir}{file}");
            if let Some(text) = read(&name) {
                sources.push((name, file, text));
            }
        }
    }
    for (name, file, text) in sources {
        let declared = match file {
            "requirements.txt" => {
                let (found, bad) = declared::requirements_txt(&text, python);
                problems.extend(bad.into_iter().map(|problem| format!("{name} {problem}")));
                scan.python_declared.get_or_insert_default().extend(found.into_iter().map(|need| (need, name.clone())));
                true
            }
            "pyproject.toml" => match declared::pyproject_dependencies(&text) {
                Ok(Some(found)) => {
                    let declared = scan.python_declared.get_or_insert_default();
                    for line in found {
                        match declared::requirement(&line, python) {
                            Ok(Some(need)) => declared.push((need, name.clone())),
                            Ok(None) => {}
                            Err(err) => problems.push(format!("{name}: {err}")),
                        }
                    }
                    true
                }
                Ok(None) => false,
                Err(err) => {
                    problems.push(err.replacen(file, &name, 1));
                    false
                }
            },
            _ => match declared::package_json_dependencies(&text) {
                Ok(Some(found)) => {
                    scan.node_declared.get_or_insert_default().extend(found);
                    true
                }
                Ok(None) => false,
                Err(err) => {
                    problems.push(err.replacen(file, &name, 1));
                    false
                }
            },
        };
        if declared {
            scan.needs.declared_from.push(name);
        }
    }
}

/// A scanned skill's needs, with its scripts' imports parsed, each checked against the image.
fn needs_of(scan: Scan, parsed: &[python::Parsed], provides: &Provides) -> SkillNeeds {
    let Scan { mut needs, python_declared, node_declared, python_scripts, node_imports, own_python, own_node } = scan;
    let installed = |distribution: &str| provides.distributions.contains_key(&python::normalize(distribution));
    let mut python_needs: BTreeMap<String, Need> = BTreeMap::new();
    for (requirement, from) in python_declared.unwrap_or_default() {
        let met = installed(&requirement.name)
            || python::imports_of(&requirement.name).iter().any(|import| provides.modules.contains(import));
        python_needs.entry(python::normalize(&requirement.name)).or_insert(Need {
            name: requirement.name,
            import: None,
            specifier: requirement.specifier,
            from,
            files: BTreeSet::new(),
            met,
            resolution: None,
        });
    }
    for (script, index) in python_scripts {
        let imports = match parsed.get(index) {
            Some(Ok(imports)) => imports,
            Some(Err(err)) => {
                needs.problems.push(format!("{script}: {err}"));
                continue;
            }
            None => continue,
        };
        for import in imports {
            let top = import.module.split('.').next().unwrap_or_default();
            if top.is_empty() || provides.stdlib.contains(top) || own_python.contains(top) || top == "__main__" {
                continue;
            }
            let (module, pypi) = python::distribution_of(&import.module);
            // A namespace package's top name (google, azure) says nothing of which part is there.
            let met = match module.contains('.') {
                true => installed(&pypi),
                false => provides.modules.contains(&module) || installed(&pypi),
            };
            let need = python_needs.entry(python::normalize(&pypi)).or_insert(Need {
                name: pypi,
                import: Some(module),
                specifier: String::new(),
                from: "imports".to_owned(),
                files: BTreeSet::new(),
                met,
                resolution: None,
            });
            need.files.insert(script.clone());
        }
    }
    needs.python = python_needs.into_values().collect();
    let mut node_needs: BTreeMap<String, Need> = BTreeMap::new();
    for (name, range) in node_declared.unwrap_or_default() {
        let met = provides.node_packages.contains(&name) || own_node.contains(&name);
        node_needs.entry(name.clone()).or_insert(Need {
            name,
            import: None,
            specifier: range,
            from: "package.json".to_owned(),
            files: BTreeSet::new(),
            met,
            resolution: None,
        });
    }
    for (package, files) in node_imports {
        if own_node.contains(&package) {
            continue;
        }
        let met = provides.node_packages.contains(&package);
        node_needs.entry(package.clone()).or_insert(Need {
            name: package,
            import: None,
            specifier: String::new(),
            from: "imports".to_owned(),
            files,
            met,
            resolution: None,
        });
    }
    needs.node = node_needs.into_values().collect();
    for need in &mut needs.python {
        need.resolution = (!need.met).then_some(Resolution::NotChecked);
    }
    for need in &mut needs.node {
        need.resolution = (!need.met).then_some(Resolution::Offline);
    }
    needs
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::image;
    use super::*;

    /// A temporary folder of one skill: a script that imports a package the image has (openpyxl),
    /// one it lacks (rdkit, in a `try` that gives up without it), its own module (helpers), the
    /// standard library, a relative import, an optional one and a fallback.
    fn demo_skill() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-needs-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let scripts = dir.join("demo/scripts");
        std::fs::create_dir_all(&scripts).unwrap();
        std::fs::write(dir.join("demo/SKILL.md"), "---\nname: demo\ndescription: A demo.\n---\nRun it.\n").unwrap();
        let script = "\
import os, json, sys
import openpyxl
import helpers
from . import sibling
try:
    import torch
except ImportError:
    torch = None
try:
    from rdkit import Chem
except ImportError:
    sys.exit(\"pip install rdkit\")
try:
    import tomllib
except ImportError:
    import tomli as tomllib
";
        std::fs::write(scripts.join("run.py"), script).unwrap();
        std::fs::write(scripts.join("helpers.py"), "import yaml_not_needed_here_either as _x  # noqa\n").unwrap();
        std::fs::write(
            scripts.join("render.mjs"),
            "import fs from 'node:fs';\nimport { Document } from 'docx';\nimport left from 'left-pad';\n",
        )
        .unwrap();
        dir
    }

    #[test]
    fn a_skill_s_imports_are_checked_against_the_image() {
        let Some(root) = std::env::var_os("SANDBOX_ROOT").filter(|root| !root.is_empty()) else {
            eprintln!("skipped: SANDBOX_ROOT names no sandbox image (cargo xtask sandbox image prints one)");
            return;
        };
        let root = PathBuf::from(root);
        let dir = demo_skill();
        let folder = crate::skills::read_folder(&dir).unwrap();
        let provides = image::provides(&root).expect("the image answers");
        assert!(provides.stdlib.contains("os") && provides.python.starts_with("3."), "{:?}", provides.python);
        let skills = detect(&root, &provides, &folder, &["demo".to_owned()]).expect("detection runs");
        let _ = std::fs::remove_dir_all(&dir);
        let demo = &skills["demo"];
        assert_eq!(demo.declared_from, ["imports"]);
        assert_eq!(demo.scripts, 3);
        let python: Vec<(&str, bool)> = demo.python.iter().map(|need| (need.name.as_str(), need.met)).collect();
        // helpers is the skill's own; its import of a module nobody has counts, as any script's.
        assert_eq!(python, [("openpyxl", true), ("rdkit", false), ("yaml_not_needed_here_either", false)]);
        assert_eq!(demo.python[1].import.as_deref(), Some("rdkit"));
        assert_eq!(demo.python[1].resolution, Some(Resolution::NotChecked));
        let node: Vec<(&str, bool)> = demo.node.iter().map(|need| (need.name.as_str(), need.met)).collect();
        assert_eq!(node, [("docx", provides.node_packages.contains("docx")), ("left-pad", false)]);
        assert_eq!(demo.status(), "unresolvable", "left-pad is an npm package the image lacks");
        assert!(demo.problems.is_empty(), "{:?}", demo.problems);
    }

    #[test]
    fn files_belong_to_the_innermost_skill() {
        let file = |rel: &str| LocalFile { rel: rel.to_owned(), path: PathBuf::from(rel), size: 1 };
        let folder = Folder {
            files: vec![file("a/SKILL.md"), file("a/x.py"), file("cat/b/SKILL.md"), file("cat/b/s/y.py"), file("z.py")],
            ignored: Vec::new(),
        };
        let files = skill_files(&folder, &["a".to_owned(), "cat/b".to_owned()]);
        let names = |skill: &str| files[skill].iter().map(|(inner, _)| inner.as_str()).collect::<Vec<_>>();
        assert_eq!(names("a"), ["SKILL.md", "x.py"]);
        assert_eq!(names("cat/b"), ["SKILL.md", "s/y.py"]);
    }
}
