//! Bundles for skills uploaded straight to the bucket: when a skill's declared `requirements.txt`
//! (in its folder or its `scripts/`) changes, the packages the sandbox image lacks are resolved by
//! the image's own pip into the skill's bundle, as `cargo xtask skills sync` makes it, and stored
//! beside the skill (`.bundle/`), with a marker per need none meets; a removed declaration removes
//! the bundle. It runs only where the function runs in the sandbox image (`SKILLS_BUNDLES=pip`),
//! which has that pip and the network the sandbox lacks; the template deploys it so as a function of
//! its own for `requirements.txt` events (`SKILLS_INDEX=skip`), beside the index function. Needs a skill does not declare (imports
//! read from its scripts) are `skills sync`'s alone. Each bundle's name carries the runtime's
//! signature for its tenant, made with the deployment's bundle key (required with `pip`): the
//! sandbox installs no other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use agent_core::skills::bundle::{is_bundle_file, normalize_distribution as normalize, BUNDLE_DIR};
use agent_core::skills::index::{classify, SkillFile};
use agent_core::{ObjectStore, StoreError, UserId};
use sandbox::bundles::build::{self, constraints_file, requirement_name, Resolver, Signer};
use sandbox::bundles::BundleKey;

/// The image's pinned packages, the constraints of every bundle (the image is built from this file).
const IMAGE_REQUIREMENTS: &str = include_str!("../../sandbox/image/requirements.txt");
/// The image's Python, for `bundle.json`.
const PYTHON_VERSION: &str = "3.13";
/// The largest declaration read.
const MAX_DECLARATION_BYTES: u64 = 64 * 1024;
/// Where a skill declares its Python needs, inside its folder.
const DECLARATIONS: [&str; 2] = ["requirements.txt", "scripts/requirements.txt"];
/// pip's settings passed on from the function's environment (a private index, a mirror).
const PIP_SETTINGS: [&str; 5] =
    ["PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_TRUSTED_HOST"];

/// Makes bundles with the image's pip.
pub struct Bundler {
    python: PathBuf,
    constraints: PathBuf,
    /// The image's distributions, by PEP 503 name.
    distributions: BTreeSet<String>,
    pip_env: Vec<(String, String)>,
    /// `SKILLS_INDEX=skip`: make bundles, leave the index to the index function.
    bundles_only: bool,
    /// Signs each bundle's name for its tenant.
    key: BundleKey,
}

/// Whether `SKILLS_BUNDLES` asks for bundles (`pip`); unset or `none` does not.
pub fn wanted(lookup: impl Fn(&str) -> Option<String>) -> Result<bool, String> {
    match lookup("SKILLS_BUNDLES").map(|value| value.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("none") => Ok(false),
        Some("pip") => Ok(true),
        Some(other) => Err(format!("SKILLS_BUNDLES={other}: expected `pip` or `none`")),
    }
}

impl Bundler {
    /// The bundler `SKILLS_BUNDLES=pip` asks for (none when unset or `none`), signing with `key`,
    /// which it needs: the image's `python3` is asked once for its distributions.
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>, key: Option<BundleKey>) -> Result<Option<Self>, String> {
        if !wanted(&lookup)? {
            return Ok(None);
        }
        let key = key.ok_or(
            "SKILLS_BUNDLES=pip needs the bundle signing key (BUNDLE_SIGNING_KEY_SECRET, or BUNDLE_SIGNING_KEY \
             locally): the sandbox installs only the bundles the runtime signed",
        )?;
        let python = PathBuf::from(lookup("SKILLS_BUNDLES_PYTHON").unwrap_or_else(|| "python3".to_owned()));
        let listed = Command::new(&python)
            .args(["-c", "import importlib.metadata as m; print('\\n'.join(d.metadata['Name'] or '' for d in m.distributions()))"])
            .output()
            .map_err(|err| format!("SKILLS_BUNDLES=pip needs the image's python3: {err}"))?;
        if !listed.status.success() {
            return Err(format!("python3 could not list its packages: {}", String::from_utf8_lossy(&listed.stderr)));
        }
        let distributions = String::from_utf8_lossy(&listed.stdout).lines().map(normalize).collect();
        let requirements = std::env::temp_dir().join("image-requirements.txt");
        std::fs::write(&requirements, IMAGE_REQUIREMENTS).map_err(|err| format!("writing the image's pins: {err}"))?;
        let constraints = constraints_file(&requirements)?;
        let pip_env = PIP_SETTINGS.iter().filter_map(|name| Some((name.to_string(), lookup(name)?))).collect();
        let bundles_only = match lookup("SKILLS_INDEX").map(|value| value.trim().to_ascii_lowercase()).as_deref() {
            None | Some("") | Some("update") => false,
            Some("skip") => true,
            Some(other) => return Err(format!("SKILLS_INDEX={other}: expected `update` or `skip`")),
        };
        Ok(Some(Self { python, constraints, distributions, pip_env, bundles_only, key }))
    }

    /// Whether this function leaves the index to another (`SKILLS_INDEX=skip`).
    pub fn bundles_only(&self) -> bool {
        self.bundles_only
    }

    /// Brings the bundles of the skills whose declarations are among `changed` (relative to the
    /// tenant's `skills/`) up to date; returns the `.bundle/` files it wrote or removed.
    pub async fn refresh(
        &self,
        objects: &dyn ObjectStore,
        user: &UserId,
        changed: &BTreeSet<String>,
    ) -> Result<Vec<String>, StoreError> {
        let folders: BTreeSet<&str> = changed
            .iter()
            .filter_map(|rel| {
                DECLARATIONS.iter().find_map(|declaration| rel.strip_suffix(&format!("/{declaration}")).map(|_| rel))
            })
            .filter_map(|rel| {
                let folder = rel.strip_suffix("/requirements.txt")?;
                Some(folder.strip_suffix("/scripts").unwrap_or(folder))
            })
            .collect();
        let mut touched = Vec::new();
        for folder in folders {
            touched.extend(self.refresh_skill(objects, user, folder).await?);
        }
        Ok(touched)
    }

    async fn refresh_skill(
        &self,
        objects: &dyn ObjectStore,
        user: &UserId,
        folder: &str,
    ) -> Result<Vec<String>, StoreError> {
        let skills = format!("{user}/skills/");
        let prefix = format!("{skills}{folder}/");
        let listed = objects.list(&prefix).await?;
        let rels: BTreeMap<String, u64> =
            listed.iter().filter_map(|meta| Some((meta.key.strip_prefix(&prefix)?.to_owned(), meta.size))).collect();
        if !matches!(classify(&format!("{folder}/SKILL.md")), SkillFile::Skill(_)) || !rels.contains_key("SKILL.md") {
            return Ok(Vec::new());
        }
        let mut wanted = Vec::new();
        for declaration in DECLARATIONS {
            match rels.get(declaration) {
                Some(size) if *size > MAX_DECLARATION_BYTES => {
                    tracing::warn!(%folder, declaration, size, "a skill's requirements.txt is too large to read");
                }
                Some(_) => {
                    if let Some(object) = objects.get(&format!("{prefix}{declaration}")).await? {
                        wanted.extend(requirements(&String::from_utf8_lossy(&object.bytes)));
                    }
                }
                None => {}
            }
        }
        wanted.retain(|need| !self.distributions.contains(&normalize(&requirement_name(need))));
        wanted.sort();
        wanted.dedup();
        let built = match wanted.is_empty() {
            true => build::SkillBundleFiles::default(),
            false => {
                let pip = || {
                    let mut pip = Command::new(&self.python);
                    pip.env_clear().env("HOME", std::env::temp_dir()).env("PATH", "/usr/local/bin:/usr/bin:/bin");
                    pip.envs(self.pip_env.iter().map(|(key, value)| (key.as_str(), value.as_str())));
                    pip.args(["-m", "pip", "download", "--disable-pip-version-check", "--no-input", "--no-cache-dir"]);
                    pip.arg("--only-binary=:all:");
                    pip
                };
                let image_has = |name: &str| self.distributions.contains(&normalize(name));
                let resolver = Resolver {
                    pip_download: &pip,
                    constraints: &self.constraints,
                    image_has: &image_has,
                    image: "sandbox image",
                    python: PYTHON_VERSION,
                };
                let wanted = wanted.clone();
                let signer = Signer { key: &self.key, tenant: user };
                // pip runs for seconds: off the runtime's threads.
                let built = tokio::task::block_in_place(|| build::build(&wanted, &resolver, &signer));
                built.map_err(StoreError::Backend)?
            }
        };
        for (need, why) in &built.unmet {
            tracing::warn!(%folder, %need, reason = %why, "a skill's need could not be bundled");
        }
        let mut touched = Vec::new();
        let desired: BTreeSet<&str> = built.files.iter().map(|(rel, _)| rel.as_str()).collect();
        for (rel, bytes) in &built.files {
            if rels.get(rel) != Some(&(bytes.len() as u64)) {
                objects.put(&format!("{prefix}{rel}"), bytes.clone()).await?;
                touched.push(format!("{folder}/{rel}"));
            }
        }
        for rel in rels.keys().filter(|rel| is_bundle_file(rel) && !desired.contains(rel.as_str())) {
            objects.delete(&format!("{prefix}{rel}")).await?;
            touched.push(format!("{folder}/{rel}"));
        }
        tracing::info!(
            %folder,
            bundled = built.bundled.len(),
            unmet = built.unmet.len(),
            files = touched.len(),
            "a skill's bundle brought up to date"
        );
        debug_assert!(touched.iter().all(|rel| rel.contains(BUNDLE_DIR)));
        Ok(touched)
    }
}

/// The requirements of a `requirements.txt`: one a line, comments and pip's options left out.
fn requirements(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| line.split(" #").next().unwrap_or_default().trim())
        .filter(|line| !line.is_empty() && !line.starts_with('#') && !line.starts_with('-'))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_read_as_pip_reads_them() {
        let text = "# pins\nnotarial-dates==1.0  # dates\n\n-r other.txt\n--hash=sha256:x\nPyYAML>=6\n";
        assert_eq!(requirements(text), ["notarial-dates==1.0", "PyYAML>=6"]);
    }

    #[test]
    fn the_image_pins_are_compiled_in() {
        assert!(IMAGE_REQUIREMENTS.lines().any(|line| line.starts_with("openpyxl==")));
    }
}
