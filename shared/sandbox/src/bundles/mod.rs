//! Where a backend gets a skill's bundle when its sandbox lacks it: the tenant's own object store,
//! read by the turn's process (the sandbox itself has no credentials), the key checked to lie under
//! the tenant's `skills/` or its published versions (`skill-versions/`) and the bytes checked
//! against the SHA-256 the bundle is named by. Before
//! any of that, [`admit`] keeps in a call only the bundles the runtime signed for its tenant
//! (`sign`), so no other is ever named to a sandbox, read or installed; the command runs without
//! the others and the model is told why.
//! `build`: making a bundle from a skill's needs.

pub mod build;
pub mod sign;

use std::sync::Arc;

use agent_ports::bundle::MAX_BUNDLE_BYTES;
use agent_ports::keys;
use agent_ports::sandbox::{BundleRef, ExecOutcome, ExecRequest, SandboxError};
use agent_ports::store::ObjectStore;
use agent_ports::UserId;
use sha2::{Digest, Sha256};

pub use sign::BundleKey;

/// Why a bundle is not installed when the deployment has no key to check it with.
const NO_KEY: &str = "this deployment has no bundle signing key, so it installs no skill's bundle";
/// Why a bundle whose name carries no valid signature for the tenant is not installed.
const NOT_BUILT_BY_THE_RUNTIME: &str = "the skill's bundle was not built by the runtime (its name carries no valid \
     signature for this tenant); sync the skill again so the runtime builds it";

/// Reads the bundles a sandbox said it lacks.
#[derive(Clone)]
pub struct BundleSource {
    objects: Arc<dyn ObjectStore>,
    /// The deployment's signing key; without it no bundle is admitted.
    key: Option<BundleKey>,
}

impl std::fmt::Debug for BundleSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BundleSource")
    }
}

impl BundleSource {
    /// Bundles from `objects`, admitted only when signed with `key` (none at all without one).
    pub fn new(objects: Arc<dyn ObjectStore>, key: Option<BundleKey>) -> Self {
        Self { objects, key }
    }

    /// Whether `bundle` is one the runtime built for `tenant`; the error is what the model is told.
    pub fn check(&self, tenant: &UserId, bundle: &BundleRef) -> Result<(), &'static str> {
        let key = self.key.as_ref().ok_or(NO_KEY)?;
        match &bundle.mac {
            Some(mac) if key.verify(tenant, &bundle.sha256, mac) => Ok(()),
            _ => Err(NOT_BUILT_BY_THE_RUNTIME),
        }
    }

    /// The bytes of the call's bundle named `sha256`: the reference must be one of the call's
    /// skills', signed by the runtime for the call's tenant, under the tenant's own `skills/` or
    /// `skill-versions/`.
    pub async fn fetch(&self, request: &ExecRequest, sha256: &str) -> Result<(BundleRef, Vec<u8>), SandboxError> {
        let unavailable = |detail: String| {
            tracing::warn!(error = %detail, "a skill's bundle could not be read");
            SandboxError::Unavailable(detail)
        };
        let bundle = request
            .skills
            .iter()
            .filter_map(|skill| skill.bundle.as_ref())
            .find(|bundle| bundle.sha256 == sha256)
            .ok_or_else(|| {
                unavailable(format!("the sandbox asked for bundle {sha256}, which the call does not name"))
            })?;
        // Checked again here, whoever built the call: not one byte of an unsigned bundle is read.
        if let Err(reason) = self.check(&request.tenant, bundle) {
            tracing::warn!(reason, "a skill's bundle was refused before it was read");
            return Err(SandboxError::Bundle(reason.to_owned()));
        }
        if !within_tenants_skills(&request.tenant, &bundle.key) {
            return Err(unavailable(format!("bundle key {} is outside the tenant's skills", bundle.key)));
        }
        if bundle.size > MAX_BUNDLE_BYTES {
            return Err(SandboxError::Bundle(format!("the bundle is over {MAX_BUNDLE_BYTES} bytes")));
        }
        let object = self.objects.get(&bundle.key).await.map_err(|err| unavailable(err.to_string()))?;
        let Some(object) = object else {
            return Err(SandboxError::Bundle("the skill's bundle is gone from storage; sync the skill again".into()));
        };
        if object.bytes.len() as u64 > MAX_BUNDLE_BYTES || hex::encode(Sha256::digest(&object.bytes)) != sha256 {
            return Err(SandboxError::Bundle(
                "the stored bundle does not match its name (SHA-256); sync the skill again".into(),
            ));
        }
        Ok((bundle.clone(), object.bytes))
    }
}

/// Whether `key` lies under `tenant`'s skills: a folder under `skills/`, or a published version
/// under `skill-versions/` (where a version's bundle is written beside its files). No other
/// tenant's prefix starts with either, as a user id holds no `/`.
fn within_tenants_skills(tenant: &UserId, key: &str) -> bool {
    key.starts_with(&keys::skills_prefix(tenant)) || key.starts_with(&keys::skill_versions_root(tenant))
}

/// Takes out of `request` every bundle `source` does not admit (all of them without a source), so
/// the sandbox never hears of it; the command then runs without it. Returns what the model is told,
/// one line per skill whose bundle was taken out.
pub fn admit(source: Option<&BundleSource>, request: &mut ExecRequest) -> Option<String> {
    let mut notes = Vec::new();
    for skill in &mut request.skills {
        let Some(bundle) = &skill.bundle else { continue };
        let refused = match source {
            Some(source) => source.check(&request.tenant, bundle).err(),
            None => Some(NO_KEY),
        };
        if let Some(reason) = refused {
            tracing::warn!(skill = %skill.name, reason, "a skill's bundle was not admitted; the command runs without it");
            notes.push(format!(
                "[Not installed: the packages of skill `{}`, so the command ran without them: {reason}.]",
                skill.name
            ));
            skill.bundle = None;
        }
    }
    (!notes.is_empty()).then(|| notes.join("\n"))
}

/// `outcome` with `note` (from [`admit`]) ahead of its output, where the model reads it first.
pub fn with_note(mut outcome: ExecOutcome, note: Option<String>) -> ExecOutcome {
    if let Some(note) = note {
        outcome.output = format!("{note}\n{}", outcome.output);
    }
    outcome
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use agent_ports::sandbox::SkillMount;
    use agent_ports::SessionId;

    use super::*;

    const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// A store that is never read: admission decides before any read.
    struct NoStore;

    #[async_trait::async_trait]
    impl ObjectStore for NoStore {
        async fn list(&self, prefix: &str) -> Result<Vec<agent_ports::store::ObjectMeta>, agent_ports::StoreError> {
            panic!("{prefix} was listed")
        }
        async fn get(&self, key: &str) -> Result<Option<agent_ports::store::Object>, agent_ports::StoreError> {
            panic!("{key} was read")
        }
        async fn put(&self, key: &str, _bytes: Vec<u8>) -> Result<(), agent_ports::StoreError> {
            panic!("{key} was written")
        }
    }

    fn request(tenant: &str, bundles: Vec<Option<BundleRef>>) -> ExecRequest {
        let skills = bundles
            .into_iter()
            .enumerate()
            .map(|(i, bundle)| SkillMount { name: format!("skill{i}"), files: vec![], bundle })
            .collect();
        ExecRequest {
            tenant: UserId::parse(tenant).unwrap(),
            session: SessionId::parse("s1").unwrap(),
            command: "true".into(),
            timeout: Duration::from_secs(1),
            workspace: vec![],
            skills,
            ticket: None,
            resume: None,
        }
    }

    fn bundle(mac: Option<String>) -> BundleRef {
        BundleRef { key: format!("ana/skills/x/.bundle/{HASH}.tar"), sha256: HASH.into(), mac, size: 10 }
    }

    #[tokio::test]
    async fn only_bundles_signed_for_the_calls_tenant_stay_in_the_call_and_the_rest_are_never_read() {
        let key = BundleKey::new(b"a key of at least thirty-two bytes!").unwrap();
        let source = BundleSource::new(Arc::new(NoStore), Some(key.clone()));
        let signed = key.mac(&UserId::parse("ana").unwrap(), HASH);
        let for_bob = key.mac(&UserId::parse("bob").unwrap(), HASH);
        let mut call =
            request("ana", vec![Some(bundle(Some(signed))), Some(bundle(None)), Some(bundle(Some(for_bob))), None]);
        let note = admit(Some(&source), &mut call).expect("a note");
        let kept: Vec<bool> = call.skills.iter().map(|skill| skill.bundle.is_some()).collect();
        assert_eq!(kept, [true, false, false, false]);
        assert_eq!(note.lines().count(), 2, "{note}");
        assert!(note.contains("skill `skill1`") && note.contains("skill `skill2`"), "{note}");
        assert!(note.contains("not built by the runtime") && note.contains("sync the skill again"), "{note}");
        // fetch refuses an unsigned reference too, before reading anything.
        let unsigned = request("ana", vec![Some(bundle(None))]);
        let error = source.fetch(&unsigned, HASH).await.expect_err("refused");
        assert!(error.to_string().contains("not built by the runtime"), "{error}");
    }

    /// A store holding one object.
    struct OneObject(String, Vec<u8>);

    #[async_trait::async_trait]
    impl ObjectStore for OneObject {
        async fn list(&self, _prefix: &str) -> Result<Vec<agent_ports::store::ObjectMeta>, agent_ports::StoreError> {
            Ok(Vec::new())
        }
        async fn get(&self, key: &str) -> Result<Option<agent_ports::store::Object>, agent_ports::StoreError> {
            Ok((key == self.0).then(|| agent_ports::store::Object { bytes: self.1.clone(), etag: "e".into() }))
        }
        async fn put(&self, key: &str, _bytes: Vec<u8>) -> Result<(), agent_ports::StoreError> {
            panic!("{key} was written")
        }
    }

    #[tokio::test]
    async fn a_published_versions_bundle_is_read_and_another_tenants_is_not() {
        let bytes = b"a bundle's bytes".to_vec();
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let key = BundleKey::new(b"a key of at least thirty-two bytes!").unwrap();
        let ana = UserId::parse("ana").unwrap();
        let files = format!("ana/skill-versions/fechas/@files/{HASH}/.bundle/{sha256}.tar");
        let source = BundleSource::new(Arc::new(OneObject(files.clone(), bytes.clone())), Some(key.clone()));
        let signed = BundleRef { key: files, sha256: sha256.clone(), mac: Some(key.mac(&ana, &sha256)), size: 16 };
        let (found, read) = source.fetch(&request("ana", vec![Some(signed.clone())]), &sha256).await.expect("read");
        assert_eq!((found, read), (signed.clone(), bytes));
        // Signed for ana, but stored under bob's versions (or outside any skills): not read.
        for elsewhere in [
            format!("bob/skill-versions/fechas/@files/{HASH}/.bundle/{sha256}.tar"),
            format!("ana/skill-versionsx/{sha256}.tar"),
            format!("ana/workspaces/s1/{sha256}.tar"),
        ] {
            let moved = BundleRef { key: elsewhere.clone(), ..signed.clone() };
            let error = source.fetch(&request("ana", vec![Some(moved)]), &sha256).await.expect_err("refused");
            let outside =
                matches!(&error, SandboxError::Unavailable(detail) if detail.contains("outside the tenant's skills"));
            assert!(outside, "{elsewhere}: {error:?}");
        }
    }

    #[tokio::test]
    async fn without_a_key_or_a_source_no_bundle_is_admitted() {
        let key = BundleKey::new(b"a key of at least thirty-two bytes!").unwrap();
        let signed = key.mac(&UserId::parse("ana").unwrap(), HASH);
        let keyless = BundleSource::new(Arc::new(NoStore), None);
        for source in [Some(&keyless), None] {
            let mut call = request("ana", vec![Some(bundle(Some(signed.clone())))]);
            let note = admit(source, &mut call).expect("a note");
            assert!(call.skills[0].bundle.is_none());
            assert!(note.contains("no bundle signing key"), "{note}");
        }
        let outcome = ExecOutcome {
            output: "out\n".into(),
            omitted_bytes: 0,
            exit_code: Some(0),
            stopped: None,
            timed_out: false,
            changes: Default::default(),
            duration: Duration::ZERO,
            session: None,
        };
        assert_eq!(with_note(outcome.clone(), Some("[n]".into())).output, "[n]\nout\n");
        assert_eq!(with_note(outcome, None).output, "out\n");
    }
}
