//! `skills sync`'s bundles: each skill's Python needs that the sandbox image lacks, resolved by pip
//! to wheels for the image's Python and platform (never a source build), with the image's own
//! packages as constraints and left out, hashes pinned, packed in a tar named by its SHA-256 and
//! stored beside the skill (`.bundle/`); a need pip cannot resolve, or a bundle over the bounds,
//! becomes a marker the index turns into a warning. Nothing is installed here: the sandbox
//! installs the bundle offline.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sandbox::bundles::build::{self, constraints_file, Resolver, SkillBundleFiles};

use super::needs::Needs;
use crate::image::list::{pip_download, List, LIST_DIR, PYTHON_VERSION};

/// Where pip looks besides its index: `--find-links` of the sync.
#[derive(Debug, Clone, Default)]
pub(super) struct PipSource {
    pub find_links: Option<PathBuf>,
}

/// The bundle files of every skill with unmet Python needs, by the skill's path in the folder;
/// `None` when there is no image to check the needs against.
pub(super) fn build_all(
    workspace: &Path,
    needs: &Needs,
    skills: &[String],
    source: &PipSource,
) -> Result<Option<BTreeMap<String, SkillBundleFiles>>, String> {
    if let Some(reason) = needs.image_error() {
        eprintln!(
            "no bundles made: the skills' needs could not be checked against the sandbox image ({reason}); \
             the bundles already stored stay. `cargo xtask sandbox image` builds the image."
        );
        return Ok(None);
    }
    let list = List::read(workspace)?;
    let constraints = constraints_file(&workspace.join(LIST_DIR).join("requirements.txt"))?;
    let find_links = source.find_links.clone();
    let pip = move || {
        let mut pip = pip_download();
        if let Some(links) = &find_links {
            pip.arg("--find-links").arg(links);
        }
        pip
    };
    let image_has = |name: &str| needs.image_has(name);
    let resolver = Resolver {
        pip_download: &pip,
        constraints: &constraints,
        image_has: &image_has,
        image: &list.hash,
        python: PYTHON_VERSION,
    };
    let mut built = BTreeMap::new();
    for skill in skills {
        let wanted = needs.unmet_python(skill).unwrap_or_default();
        if wanted.is_empty() {
            continue;
        }
        eprintln!("  {skill}: bundling {}", wanted.join(" "));
        let files = build::build(&wanted, &resolver)?;
        if !files.bundled.is_empty() {
            eprintln!("  {skill}: bundled {}", files.bundled.join(" "));
        }
        for (need, why) in &files.unmet {
            eprintln!("  {skill}: {need} not bundled: {why}");
        }
        built.insert(skill.clone(), files);
    }
    Ok(Some(built))
}
