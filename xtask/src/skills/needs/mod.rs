//! What a skill's scripts need that the sandbox image lacks, for `skills validate`: the needs a
//! skill declares (`requirements.txt`, `pyproject.toml`, `package.json`, in its folder or its
//! `scripts/`), else the third-party imports of its scripts; each checked against what the image
//! provides (`image`), and with `--resolve`, whether pip finds a wheel for the image (`resolve`).
//! Unmet needs are warnings: a skill loads whatever its scripts need. The skills are read in
//! `scan`, and their needs reported in `report`. Apart from these, [`optional`] names the modules
//! scripts import only inside `try: … except ImportError`, with the scan an upload runs.

mod declared;
mod image;
mod node;
mod python;
mod report;
mod resolve;
mod scan;
mod toml;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use agent_core::skills::versions::{optional_needs, SkillFileBytes, MAX_SCRIPT_BYTES as MAX_SCANNED_BYTES};

use super::{read_bounded, Folder};
use declared::Requirement;
use image::Provides;
pub(super) use report::{render_skill, render_summary};

/// Whether an unmet need could be met.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Resolution {
    /// Not asked: that takes the network (`--resolve`).
    NotChecked,
    /// pip found this wheel for the image.
    Resolvable(String),
    /// pip's last error line.
    Unresolvable(String),
    /// An npm package: the image's are fixed when it is built, and bundling a skill's own is out of scope.
    Offline,
}

/// One thing a skill's scripts need.
#[derive(Debug, Clone)]
struct Need {
    /// The PyPI or npm name.
    pub name: String,
    /// The module its scripts import, for a need found in them.
    pub import: Option<String>,
    /// The declared versions, as written.
    pub specifier: String,
    /// The declaration it comes from, or `imports`.
    pub from: String,
    /// The scripts that import it, for a need found in them.
    pub files: BTreeSet<String>,
    pub met: bool,
    /// For an unmet need.
    pub resolution: Option<Resolution>,
}

/// A skill's needs.
#[derive(Debug, Clone, Default)]
struct SkillNeeds {
    /// The declarations read, and `imports` when scripts were read instead.
    pub declared_from: Vec<String>,
    pub python: Vec<Need>,
    pub node: Vec<Need>,
    /// The skill's scripts (.py, .js, .mjs, .cjs outside `node_modules`).
    pub scripts: usize,
    /// Declarations that could not be read, scripts that could not be parsed or were not read.
    pub problems: Vec<String>,
}

impl SkillNeeds {
    fn unmet(&self) -> impl Iterator<Item = &Need> {
        self.python.iter().chain(&self.node).filter(|need| !need.met)
    }

    /// `met`, `unmet`, or `unresolvable` when an unmet need is known not to be resolvable.
    pub fn status(&self) -> &'static str {
        let unresolvable =
            |need: &Need| matches!(need.resolution, Some(Resolution::Unresolvable(_) | Resolution::Offline));
        match (self.unmet().next().is_some(), self.unmet().any(unresolvable)) {
            (false, _) => "met",
            (true, false) => "unmet",
            (true, true) => "unresolvable",
        }
    }
}

/// Every loaded skill's needs, or why they were not checked.
pub(super) struct Needs {
    image: Result<(PathBuf, Provides), String>,
    resolve: bool,
    skills: BTreeMap<String, SkillNeeds>,
}

/// The needs of each skill in `skills` (their paths in `folder`), against the image `validate`
/// uses (see [`image::locate`]); with `resolve`, pip is asked about the Python ones it lacks.
pub(super) fn check(workspace: &Path, folder: &Folder, skills: &[String], resolve: bool) -> Needs {
    let image = image::locate(workspace).and_then(|root| Ok((root.clone(), image::provides(&root)?)));
    let mut needs = match &image {
        Ok((root, provides)) => match scan::detect(root, provides, folder, skills) {
            Ok(skills) => Needs { image, resolve, skills },
            Err(err) => Needs { image: Err(err), resolve, skills: BTreeMap::new() },
        },
        Err(_) => Needs { image, resolve, skills: BTreeMap::new() },
    };
    if resolve {
        resolve_unmet(&mut needs.skills);
    }
    needs
}

/// Each skill's optional needs (see `agent_core::skills::versions::optional_needs`): found by the
/// same scan an upload through the API runs, so both name the same modules, and without the image.
/// A script that cannot be read is left out here; the needs report says why.
pub(super) fn optional(folder: &Folder, skills: &[String]) -> BTreeMap<String, Vec<String>> {
    scan::skill_files(folder, skills)
        .into_iter()
        .map(|(skill, files)| {
            let scripts: Vec<SkillFileBytes> = files
                .iter()
                .filter(|(inner, file)| inner.ends_with(".py") && file.size <= MAX_SCANNED_BYTES as u64)
                .filter_map(|(inner, file)| {
                    let bytes = read_bounded(&file.path, MAX_SCANNED_BYTES as u64).ok().flatten()?;
                    Some(SkillFileBytes { path: inner.clone(), bytes })
                })
                .collect();
            (skill, optional_needs(&scripts))
        })
        .collect()
}

impl Need {
    /// The need as pip takes it on its command line: the name alone for one found in the scripts'
    /// imports, else the requirement as declared.
    fn pip_argument(&self) -> String {
        match self.from.as_str() {
            "imports" => self.name.clone(),
            _ => Requirement { name: self.name.clone(), specifier: self.specifier.clone() }.pip_argument(),
        }
    }
}

/// Asks pip about every unmet Python need, each distinct requirement once.
fn resolve_unmet(skills: &mut BTreeMap<String, SkillNeeds>) {
    let wanted: BTreeSet<String> =
        skills.values().flat_map(|skill| &skill.python).filter(|need| !need.met).map(Need::pip_argument).collect();
    let found = resolve::resolve(&wanted);
    for need in skills.values_mut().flat_map(|skill| &mut skill.python).filter(|need| !need.met) {
        need.resolution = Some(match found.get(&need.pip_argument()) {
            Some(Ok(wheel)) => Resolution::Resolvable(wheel.clone()),
            Some(Err(err)) => Resolution::Unresolvable(err.clone()),
            None => Resolution::NotChecked,
        });
    }
}

// For `skills sync`, which bundles the wheels of each skill's unmet Python needs.
impl Needs {
    /// The pip arguments (`name` or `name<spec>` as `resolve_unmet` forms them) of `skill`'s unmet
    /// Python needs, in name order; `None` when the needs could not be checked (no image) or the
    /// skill is unknown.
    pub(in crate::skills) fn unmet_python(&self, skill: &str) -> Option<Vec<String>> {
        self.image.as_ref().ok()?;
        let needs = self.skills.get(skill)?;
        // `scan` keeps a skill's Python needs in the order of their normalized names.
        Some(needs.python.iter().filter(|need| !need.met).map(Need::pip_argument).collect())
    }

    /// Why the needs were not checked: no image, or the image could not be asked.
    pub(in crate::skills) fn image_error(&self) -> Option<&str> {
        self.image.as_ref().err().map(String::as_str)
    }

    /// Whether the image has the distribution `name` (any spelling; PEP 503 comparison).
    pub(in crate::skills) fn image_has(&self, name: &str) -> bool {
        self.image.as_ref().is_ok_and(|(_, provides)| provides.distributions.contains_key(&python::normalize(name)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(name: &str, specifier: &str, from: &str, met: bool) -> Need {
        Need {
            name: name.to_owned(),
            import: None,
            specifier: specifier.to_owned(),
            from: from.to_owned(),
            files: BTreeSet::new(),
            met,
            resolution: (!met).then_some(Resolution::NotChecked),
        }
    }

    #[test]
    fn optional_needs_are_the_guarded_imports_of_each_skill_s_own_scripts() {
        let dir = std::env::temp_dir().join(format!("xtask-optional-needs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let write = |rel: &str, text: &str| {
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("demo/SKILL.md", "---\nname: demo\ndescription: A demo.\n---\n");
        write("demo/scripts/run.py", "import os\ntry:\n    import torch\nexcept ImportError:\n    torch = None\n");
        write("demo/scripts/notes.txt", "try:\n    import not_python\nexcept ImportError:\n    pass\n");
        write("plain/SKILL.md", "---\nname: plain\ndescription: No scripts.\n---\n");
        let folder = crate::skills::read_folder(&dir).unwrap();
        let found = optional(&folder, &["demo".to_owned(), "plain".to_owned()]);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(found["demo"], ["torch"]);
        assert!(found["plain"].is_empty());
    }

    #[test]
    fn a_skill_s_unmet_python_needs_are_pip_arguments() {
        let demo = SkillNeeds {
            python: vec![
                need("anthropic", ">=0.40", "requirements.txt", false),
                need("numpy", "", "imports", true),
                need("rdkit", "", "imports", false),
                need("tool", "@ https://x/y.whl", "pyproject.toml", false),
            ],
            node: vec![need("left-pad", "", "imports", false)],
            ..SkillNeeds::default()
        };
        let needs = Needs {
            image: Ok((PathBuf::from("/image"), Provides::default())),
            resolve: false,
            skills: BTreeMap::from([("demo".to_owned(), demo)]),
        };
        let unmet = needs.unmet_python("demo").expect("the demo's needs were checked");
        assert_eq!(unmet, ["anthropic>=0.40", "rdkit", "tool @ https://x/y.whl"]);
        assert_eq!(needs.unmet_python("other"), None);
        assert_eq!(needs.image_error(), None);
        let unchecked = Needs { image: Err("no image built".to_owned()), resolve: false, skills: BTreeMap::new() };
        assert_eq!(unchecked.unmet_python("demo"), None);
        assert_eq!(unchecked.image_error(), Some("no image built"));
    }
}
