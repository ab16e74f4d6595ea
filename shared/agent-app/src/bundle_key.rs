//! The key the runtime signs skills' bundles with (`sandbox::bundles::sign`): read once at cold
//! start from the Secrets Manager secret `BUNDLE_SIGNING_KEY_SECRET` names (the template generates
//! it), as the cursor key is, or taken from `BUNDLE_SIGNING_KEY` for local use and the tests. The
//! turn functions check bundles with it before installing any; skills-index (`SKILLS_BUNDLES=pip`)
//! and `cargo xtask skills sync` sign the bundles they build. Without a key no bundle is installed.

use experts::secrets::SecretResolver;
use sandbox::bundles::BundleKey;

use crate::config::ConfigError;
use crate::secret_key::{read_key, read_secret, KeySource};

/// Names the secret (name or ARN) whose string is the bundle signing key.
pub const BUNDLE_KEY_SECRET_ENV: &str = "BUNDLE_SIGNING_KEY_SECRET";
/// The key itself, for local use and the tests.
pub const BUNDLE_KEY_ENV: &str = "BUNDLE_SIGNING_KEY";

/// Where the bundle key is read from.
const SOURCE: KeySource = KeySource { secret_env: BUNDLE_KEY_SECRET_ENV, value_env: Some(BUNDLE_KEY_ENV) };

/// The key from the secret `BUNDLE_SIGNING_KEY_SECRET` names, through `resolver`, else from
/// `BUNDLE_SIGNING_KEY`; `None` when neither is set, and an error when both are. Errors name the
/// secret, never its value.
pub async fn bundle_signing_key(
    lookup: impl Fn(&str) -> Option<String>,
    resolver: &dyn SecretResolver,
) -> Result<Option<BundleKey>, ConfigError> {
    let Some(key) = read_key(&SOURCE, lookup, resolver).await? else { return Ok(None) };
    BundleKey::new(key.text.as_bytes()).map(Some).map_err(|reason| key.invalid(reason))
}

/// The key held by secret `secret_id` (a name or ARN outside the tenants' namespace).
pub async fn bundle_key_from_secret(secret_id: &str, resolver: &dyn SecretResolver) -> Result<BundleKey, ConfigError> {
    let secret = read_secret(secret_id, BUNDLE_KEY_SECRET_ENV, resolver).await?;
    BundleKey::new(secret.as_bytes()).map_err(|reason| ConfigError::Invalid {
        name: BUNDLE_KEY_SECRET_ENV,
        reason: format!("secret {secret_id}: {reason}"),
    })
}

/// The key held by secret `secret_id`, read from Secrets Manager with this process's AWS settings
/// (`cargo xtask skills sync --bundle-key-secret`).
pub async fn bundle_key_from_aws_secret(secret_id: &str) -> Result<BundleKey, ConfigError> {
    bundle_key_from_secret(secret_id, &experts::AwsSecretResolver::from_env()).await
}

/// [`bundle_signing_key`] from the process environment, with the deployment's secret resolver.
pub async fn bundle_signing_key_from_env() -> Result<Option<BundleKey>, ConfigError> {
    let resolver = experts::AwsSecretResolver::from_env();
    bundle_signing_key(|name| std::env::var(name).ok(), &resolver).await
}

/// Where the `local` and `lambda` sandboxes read skills' bundles: `objects`, checked with the key
/// read once here (at cold start); without a key no bundle is installed, which is said once in the log.
pub async fn bundle_source(
    lookup: &impl Fn(&str) -> Option<String>,
    objects: std::sync::Arc<dyn agent_core::store::ObjectStore>,
    secrets: &dyn SecretResolver,
) -> Result<sandbox::BundleSource, ConfigError> {
    let key = bundle_signing_key(lookup, secrets).await?;
    if key.is_none() {
        tracing::warn!(
            "no bundle signing key is configured ({BUNDLE_KEY_SECRET_ENV} or {BUNDLE_KEY_ENV}): skills' bundles are not installed"
        );
    }
    Ok(sandbox::BundleSource::new(objects, key))
}

#[cfg(test)]
mod tests {
    use crate::secret_key::testing::world;
    use agent_core::UserId;

    use super::*;

    const KEY: &str = "a bundle key of at least thirty-two bytes";

    async fn read(
        vars: &[(&str, &str)],
        secrets: &[(&'static str, &'static str)],
    ) -> Result<Option<BundleKey>, String> {
        let (lookup, resolver) = world(vars, secrets);
        bundle_signing_key(lookup, &resolver).await.map_err(|err| err.to_string())
    }

    #[tokio::test]
    async fn the_key_comes_from_its_secret_or_the_variable_and_signs_alike() {
        let ana = UserId::parse("ana").unwrap();
        let hash = "0".repeat(64);
        let from_secret =
            read(&[(BUNDLE_KEY_SECRET_ENV, "agent-runtime/bundle-key")], &[("agent-runtime/bundle-key", KEY)])
                .await
                .unwrap()
                .expect("a key");
        let from_env = read(&[(BUNDLE_KEY_ENV, KEY)], &[]).await.unwrap().expect("a key");
        assert_eq!(from_secret.mac(&ana, &hash), from_env.mac(&ana, &hash));
        assert!(read(&[], &[]).await.unwrap().is_none());
        assert!(read(&[(BUNDLE_KEY_ENV, "  ")], &[]).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_key_in_the_tenants_namespace_short_missing_or_twice_given_is_refused_without_its_value() {
        let error =
            read(&[(BUNDLE_KEY_SECRET_ENV, "agent/bundle-key")], &[("agent/bundle-key", KEY)]).await.unwrap_err();
        assert!(error.contains("tenants' namespace"), "{error}");
        let error = read(&[(BUNDLE_KEY_SECRET_ENV, "short")], &[("short", "tiny-secret")]).await.unwrap_err();
        assert!(error.contains("secret short") && !error.contains("tiny-secret"), "{error}");
        let error = read(&[(BUNDLE_KEY_SECRET_ENV, "gone")], &[]).await.unwrap_err();
        assert!(error.contains(BUNDLE_KEY_SECRET_ENV), "{error}");
        let error = read(&[(BUNDLE_KEY_ENV, "tiny-key")], &[]).await.unwrap_err();
        assert!(error.contains(BUNDLE_KEY_ENV) && !error.contains("tiny-key"), "{error}");
        let both = [(BUNDLE_KEY_SECRET_ENV, "k"), (BUNDLE_KEY_ENV, KEY)];
        assert!(read(&both, &[("k", KEY)]).await.unwrap_err().contains("not both"));
    }
}
