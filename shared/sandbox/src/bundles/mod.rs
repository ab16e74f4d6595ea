//! Where a backend gets a skill's bundle when its sandbox lacks it: the tenant's own object store,
//! read by the turn's process (the sandbox itself has no credentials), the key checked to lie under
//! the tenant's `skills/` and the bytes checked against the SHA-256 the bundle is named by.
//! `build`: making a bundle from a skill's needs.

pub mod build;

use std::sync::Arc;

use agent_ports::bundle::MAX_BUNDLE_BYTES;
use agent_ports::keys;
use agent_ports::sandbox::{BundleRef, ExecRequest, SandboxError};
use agent_ports::store::ObjectStore;
use sha2::{Digest, Sha256};

/// Reads the bundles a sandbox said it lacks.
#[derive(Clone)]
pub struct BundleSource {
    objects: Arc<dyn ObjectStore>,
}

impl std::fmt::Debug for BundleSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BundleSource")
    }
}

impl BundleSource {
    pub fn new(objects: Arc<dyn ObjectStore>) -> Self {
        Self { objects }
    }

    /// The bytes of the call's bundle named `sha256`: the reference must be one of the call's
    /// skills', under the tenant's own `skills/`.
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
        if !bundle.key.starts_with(&keys::skills_prefix(&request.tenant)) {
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
