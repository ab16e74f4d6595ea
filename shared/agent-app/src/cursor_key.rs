//! The key `GET /sessions` cursors are signed with, when deployed: read once at cold start from
//! the Secrets Manager secret `CURSOR_SIGNING_KEY_SECRET` names (the template generates it), as the
//! model's key is. Without it the function falls back to `CURSOR_SIGNING_KEY` or a random key of
//! its own (see http-turn's `sessions_list`).

use experts::secrets::SecretResolver;

use crate::config::ConfigError;
use crate::secret_key::{read_key, KeySource};

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
    let source = KeySource { secret_env: CURSOR_KEY_SECRET_ENV, value_env: None };
    let Some(key) = read_key(&source, lookup, resolver).await? else { return Ok(None) };
    if !(MIN_KEY_BYTES..=MAX_KEY_BYTES).contains(&key.text.len()) {
        return Err(key.invalid(format!("must hold {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes")));
    }
    Ok(Some(key.text.into_bytes()))
}

/// [`cursor_signing_key`] from the process environment, with the deployment's secret resolver.
pub async fn cursor_signing_key_from_env() -> Result<Option<Vec<u8>>, ConfigError> {
    let resolver = experts::AwsSecretResolver::from_env();
    cursor_signing_key(|name| std::env::var(name).ok(), &resolver).await
}
