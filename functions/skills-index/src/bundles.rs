//! Bundles for skills uploaded straight to the bucket and for published versions: when a skill's
//! declared `requirements.txt` (in its folder or its `scripts/`) changes, the packages the sandbox
//! image lacks are resolved by the image's own pip into the skill's bundle, as `cargo xtask skills
//! sync` makes it, and stored beside the skill (`.bundle/`), with a marker per need none meets; a
//! removed declaration removes the bundle. A published version's declaration arrives once, with the
//! version's files (`{user}/skill-versions/{skill}/@files/{sha256}/`), and its bundle goes beside
//! them, in that version's `.bundle/`. It runs only where the function runs in the sandbox image
//! (`SKILLS_BUNDLES=pip`), which has that pip and the network the sandbox lacks; the template deploys
//! it so as a function of its own for `requirements.txt` events (`SKILLS_INDEX=skip`), beside the
//! index function. Needs a skill does not declare (imports read from its scripts) are `skills
//! sync`'s alone. Each bundle's name carries the runtime's signature for its tenant, made with the
//! deployment's bundle key (required with `pip`): the sandbox installs no other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use agent_core::ids::SkillPath;
use agent_core::keys;
use agent_core::skills::bundle::{is_bundle_file, normalize_distribution as normalize, BUNDLE_DIR};
use agent_core::skills::index::{classify, SkillFile, TenantFile};
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

    /// Brings the bundles of the skills and versions whose declarations are among `changed` (keys
    /// relative to the tenant's prefix, `skills/…` or `skill-versions/…`) up to date; returns the
    /// index's files it wrote or removed.
    pub async fn refresh(
        &self,
        objects: &dyn ObjectStore,
        user: &UserId,
        changed: &BTreeSet<String>,
    ) -> Result<Vec<TenantFile>, StoreError> {
        let targets: BTreeSet<Target> = changed.iter().filter_map(|rel| target(rel)).collect();
        let mut touched = Vec::new();
        for target in &targets {
            touched.extend(self.refresh_target(objects, user, target).await?);
        }
        Ok(touched)
    }

    async fn refresh_target(
        &self,
        objects: &dyn ObjectStore,
        user: &UserId,
        target: &Target,
    ) -> Result<Vec<TenantFile>, StoreError> {
        let (prefix, folder) = match target {
            Target::Folder(folder) => (format!("{}{folder}/", keys::skills_prefix(user)), folder.clone()),
            Target::Version(skill, sha256) => (
                keys::skill_version_files_prefix(user, skill, sha256),
                format!("{skill}@{}", sha256.get(..12).unwrap_or(sha256)),
            ),
        };
        let listed = objects.list(&prefix).await?;
        let rels: BTreeMap<String, u64> =
            listed.iter().filter_map(|meta| Some((meta.key.strip_prefix(&prefix)?.to_owned(), meta.size))).collect();
        // A folder makes a bundle only while it is a skill. A version's files are written in any
        // order, so its SKILL.md may not be there yet: its declaration alone decides.
        if matches!(target, Target::Folder(_)) && !rels.contains_key("SKILL.md") {
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
        let mut written = Vec::new();
        let desired: BTreeSet<&str> = built.files.iter().map(|(rel, _)| rel.as_str()).collect();
        for (rel, bytes) in &built.files {
            if rels.get(rel) != Some(&(bytes.len() as u64)) {
                objects.put(&format!("{prefix}{rel}"), bytes.clone()).await?;
                written.push(rel.clone());
            }
        }
        for rel in rels.keys().filter(|rel| is_bundle_file(rel) && !desired.contains(rel.as_str())) {
            objects.delete(&format!("{prefix}{rel}")).await?;
            written.push(rel.clone());
        }
        tracing::info!(
            %folder,
            bundled = built.bundled.len(),
            unmet = built.unmet.len(),
            files = written.len(),
            "a skill's bundle brought up to date"
        );
        debug_assert!(written.iter().all(|rel| rel.starts_with(BUNDLE_DIR)));
        Ok(match target {
            Target::Folder(folder) => written.iter().map(|rel| TenantFile::Skill(format!("{folder}/{rel}"))).collect(),
            // The index reads a version's file list again as a whole.
            Target::Version(skill, sha256) if !written.is_empty() => {
                vec![TenantFile::Version(skill.clone(), sha256.clone())]
            }
            Target::Version(..) => Vec::new(),
        })
    }
}

/// Where a changed declaration asks for a bundle.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    /// A skill's folder, relative to the tenant's `skills/`.
    Folder(String),
    /// A published version: its skill and content hash.
    Version(SkillPath, String),
}

/// The bundle a key relative to the tenant's prefix asks for, when it is a declaration: of a skill's
/// folder (`skills/{folder}/[scripts/]requirements.txt`) or of a published version
/// (`skill-versions/{skill}/@files/{sha256}/[scripts/]requirements.txt`).
fn target(rel: &str) -> Option<Target> {
    if let Some(rest) = rel.strip_prefix("skill-versions/") {
        let (skill, files) = rest.split_once("/@files/")?;
        let (sha256, declaration) = files.split_once('/')?;
        let valid_hash = sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid_hash || !DECLARATIONS.contains(&declaration) {
            return None;
        }
        return Some(Target::Version(SkillPath::parse(skill).ok()?, sha256.to_owned()));
    }
    let folder = rel.strip_prefix("skills/")?.strip_suffix("/requirements.txt")?;
    let folder = folder.strip_suffix("/scripts").unwrap_or(folder);
    matches!(classify(&format!("{folder}/SKILL.md")), SkillFile::Skill(_)).then(|| Target::Folder(folder.to_owned()))
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

    const SHA: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    #[test]
    fn declarations_of_folders_and_of_published_versions_name_their_bundle() {
        let version = |skill: &str| Some(Target::Version(SkillPath::parse(skill).unwrap(), SHA.to_owned()));
        assert_eq!(target("skills/fechas/requirements.txt"), Some(Target::Folder("fechas".into())));
        assert_eq!(target("skills/docs/fechas/scripts/requirements.txt"), Some(Target::Folder("docs/fechas".into())));
        assert_eq!(target(&format!("skill-versions/fechas/@files/{SHA}/requirements.txt")), version("fechas"));
        assert_eq!(
            target(&format!("skill-versions/eng/skills/review/@files/{SHA}/scripts/requirements.txt")),
            version("eng/skills/review")
        );
        for other in [
            "skills/fechas/SKILL.md".to_owned(),
            "skills/requirements.txt".to_owned(),
            "skills/a/b/c/d/e/requirements.txt".to_owned(),
            format!("skill-versions/fechas/@files/{SHA}/SKILL.md"),
            format!("skill-versions/fechas/@files/{SHA}/data/requirements.txt"),
            format!("skill-versions/fechas/@files/{SHA}/.bundle/requirements.txt"),
            "skill-versions/fechas/@files/not-a-hash/requirements.txt".to_owned(),
            format!("skill-versions/../x/@files/{SHA}/requirements.txt"),
            "skill-versions/defaults.json".to_owned(),
            "workspaces/s/requirements.txt".to_owned(),
        ] {
            assert_eq!(target(&other), None, "{other}");
        }
    }

    /// A bundler whose image has `openpyxl`: a declaration of it alone needs no bundle, so no pip runs.
    fn bundler() -> Bundler {
        Bundler {
            python: PathBuf::from("python3"),
            constraints: PathBuf::from("constraints.txt"),
            distributions: BTreeSet::from(["openpyxl".to_owned()]),
            pip_env: Vec::new(),
            bundles_only: false,
            key: BundleKey::new(b"a key of at least thirty-two bytes!").unwrap(),
        }
    }

    #[tokio::test]
    async fn a_versions_bundle_is_kept_beside_its_files_and_the_index_told_of_the_version() {
        let objects = local_store::MemoryObjectStore::new();
        let user = UserId::parse("ana").unwrap();
        let skill = SkillPath::parse("fechas").unwrap();
        let files = keys::skill_version_files_prefix(&user, &skill, SHA);
        objects.insert(&format!("{files}requirements.txt"), "openpyxl>=3\n");
        // A bundle from an older image, which the image now meets without one.
        let stale = format!("{files}.bundle/{SHA}.tar");
        objects.insert(&stale, "wheels");
        objects.insert(&format!("{files}.bundle/unmet/openpyxl"), "");
        let changed = BTreeSet::from([format!("skill-versions/fechas/@files/{SHA}/requirements.txt")]);
        let touched = bundler().refresh(&objects, &user, &changed).await.unwrap();
        assert_eq!(touched, [TenantFile::Version(skill, SHA.to_owned())]);
        assert_eq!(objects.keys(), [format!("{files}requirements.txt")], "only the version's own files are left");
        // Nothing changed the second time: the index is told nothing.
        assert_eq!(bundler().refresh(&objects, &user, &changed).await.unwrap(), []);
    }

    #[tokio::test]
    async fn a_folders_bundle_is_made_only_while_it_is_a_skill() {
        let objects = local_store::MemoryObjectStore::new();
        let user = UserId::parse("ana").unwrap();
        objects.insert("ana/skills/fechas/requirements.txt", "openpyxl\n");
        objects.insert(&format!("ana/skills/fechas/.bundle/{SHA}.tar"), "wheels");
        let changed = BTreeSet::from(["skills/fechas/requirements.txt".to_owned()]);
        assert_eq!(bundler().refresh(&objects, &user, &changed).await.unwrap(), [], "no SKILL.md: not a skill");
        objects.insert("ana/skills/fechas/SKILL.md", "---\nname: fechas\ndescription: x\n---\n");
        let touched = bundler().refresh(&objects, &user, &changed).await.unwrap();
        assert_eq!(touched, [TenantFile::Skill(format!("fechas/.bundle/{SHA}.tar"))]);
    }

    #[test]
    fn the_image_pins_are_compiled_in() {
        assert!(IMAGE_REQUIREMENTS.lines().any(|line| line.starts_with("openpyxl==")));
    }
}
