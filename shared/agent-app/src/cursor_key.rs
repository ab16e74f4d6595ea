//! The key `GET /sessions` cursors are signed with, when deployed: read once at cold start from
//! the Secrets Manager secret `CURSOR_SIGNING_KEY_SECRET` names (the template generates it), as the
//! model's key is. Without it the function falls back to `CURSOR_SIGNING_KEY` or a random key of
//! its own (see http-turn's `sessions_list`).

use experts::secrets::{SecretRef, SecretResolver, SecretScope};

use crate::config::ConfigError;

/// Names the secret (name or ARN) whose string is the cursor signing key.
pub const CURSOR_KEY_SECRET_ENV: &str = "CURSOR_SIGNING_KEY_SECRET";
/// A shorter secret is refused: it could be guessed.
const MIN_KEY_BYTES: usize = 32;
/// A longer one is not a key but a misconfigured secret.
const MAX_KEY_BYTES: usize = 4096;

/// The key from the secret `CURSOR_SIGNING_KEY_SECRET` names, through `resolver`; `None` when the
/// variable is unset. Errors name the secret, never its value.
pub async fn cursor_signing_key(
    lookup: impl Fn(&str) -> Option<String>,
    resolver: &dyn SecretResolver,
) -> Result<Option<Vec<u8>>, ConfigError> {
    let Some(secret_id) = lookup(CURSOR_KEY_SECRET_ENV).map(|value| value.trim().to_owned()).filter(|v| !v.is_empty())
    else {
        return Ok(None);
    };
    let invalid = |reason: String| ConfigError::Invalid { name: CURSOR_KEY_SECRET_ENV, reason };
    if experts::in_tenant_namespace(&secret_id) {
        return Err(invalid(format!("secret {secret_id} is in the tenants' namespace; keep the key outside it")));
    }
    let reference = SecretRef::SecretsManager { secret_id: secret_id.clone(), json_key: None };
    let secret = resolver.resolve(&reference, SecretScope::Deployment).await.map_err(|err| invalid(err.to_string()))?;
    let key = secret.trim();
    if !(MIN_KEY_BYTES..=MAX_KEY_BYTES).contains(&key.len()) {
        return Err(invalid(format!("secret {secret_id} must hold {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes")));
    }
    Ok(Some(key.as_bytes().to_vec()))
}

/// [`cursor_signing_key`] from the process environment, with the deployment's secret resolver.
pub async fn cursor_signing_key_from_env() -> Result<Option<Vec<u8>>, ConfigError> {
    let resolver = experts::AwsSecretResolver::from_env();
    cursor_signing_key(|name| std::env::var(name).ok(), &resolver).await
}
