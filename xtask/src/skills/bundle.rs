//! `skills sync`'s bundles: each skill's Python needs that the sandbox image lacks, resolved by pip
//! to wheels for the image's Python and platform (never a source build), with the image's own
//! packages as constraints and left out, hashes pinned, packed in a tar named by its SHA-256 and
//! stored beside the skill (`.bundle/`); a need pip cannot resolve, or a bundle over the bounds,
//! becomes a marker the index turns into a warning. Each bundle's name is signed for the tenant
//! with the deployment's bundle key (`BundleKeySource`), without which the sandbox would not
//! install it. Nothing is installed here: the sandbox installs the bundle offline.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(super) use sandbox::bundles::build::Signer;
use sandbox::bundles::build::{self, constraints_file, Resolver, SkillBundleFiles};
use sandbox::bundles::BundleKey;

use super::needs::Needs;
use crate::image::list::{pip_download, List, LIST_DIR, PYTHON_VERSION};

/// Where pip looks besides its index: `--find-links` of the sync; and where the key that signs
/// the bundles comes from.
#[derive(Debug, Clone, Default)]
pub(super) struct PipSource {
    pub find_links: Option<PathBuf>,
    pub key: BundleKeySource,
}

/// Where `sync` finds the bundle signing key: `--bundle-key-secret <name>` (Secrets Manager, with
/// the usual AWS credentials), else `BUNDLE_SIGNING_KEY`, else (for the local stacks) the
/// `BUNDLE_SIGNING_KEY` of the stack's environment file.
#[derive(Debug, Clone, Default)]
pub(super) struct BundleKeySource {
    pub secret: Option<String>,
    /// The local stack's key, from its environment file.
    pub stack: Option<String>,
}

impl BundleKeySource {
    /// The key, or why there is none; a sync that makes bundles needs one.
    pub async fn read(&self) -> Result<BundleKey, String> {
        let from_env = std::env::var(agent_app::bundle_key::BUNDLE_KEY_ENV).ok().filter(|key| !key.trim().is_empty());
        if let Some(secret) = &self.secret {
            return agent_app::bundle_key::bundle_key_from_aws_secret(secret).await.map_err(|err| err.to_string());
        }
        match from_env.or_else(|| self.stack.clone()) {
            Some(key) => BundleKey::new(key.trim().as_bytes())
                .map_err(|reason| format!("{}: {reason}", agent_app::bundle_key::BUNDLE_KEY_ENV)),
            None => Err(format!(
                "skills sync signs the bundles it makes with the deployment's bundle key, and none was given: pass \
                 --bundle-key-secret <name> (the stack's BundleSigningKeySecret) or set {}; or --no-bundles to make \
                 none and keep the bundles stored",
                agent_app::bundle_key::BUNDLE_KEY_ENV
            )),
        }
    }
}

/// Whether any of `skills` has Python needs the image lacks, so that [`build_all`] makes a bundle
/// (and needs the key); never when there is no image to check the needs against.
pub(super) fn anything_to_bundle(needs: &Needs, skills: &[String]) -> bool {
    needs.image_error().is_none()
        && skills.iter().any(|skill| !needs.unmet_python(skill).unwrap_or_default().is_empty())
}

/// The bundle files of every skill with unmet Python needs, by the skill's path in the folder,
/// named as `signer` signs them; `None` when there is no image to check the needs against.
pub(super) fn build_all(
    workspace: &Path,
    needs: &Needs,
    skills: &[String],
    source: &PipSource,
    signer: Option<&Signer<'_>>,
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
        let signer = signer.ok_or("a bundle to make and no key to sign it with")?;
        eprintln!("  {skill}: bundling {}", wanted.join(" "));
        let files = build::build(&wanted, &resolver, signer)?;
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
