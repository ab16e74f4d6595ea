//! The model provider's configuration with its API key: read from Secrets Manager when
//! `LLM_API_KEY_SECRET` names a secret (the deployed way), or from `LLM_API_KEY` (local use).
//!
//! The secret is read once per process, at cold start, and kept only inside the [`llm::LlmConfig`],
//! whose `Debug` redacts it; errors name the secret, never its value.

use experts::secrets::{SecretRef, SecretResolver, SecretScope};

use crate::config::ConfigError;

/// Names the secret holding the model's API key: a Secrets Manager name or ARN, optionally
/// followed by `#key` when the secret string is a JSON object (as the console's key/value secrets are).
pub const API_KEY_SECRET_ENV: &str = "LLM_API_KEY_SECRET";

/// The plain-text key, for local use only.
pub const API_KEY_ENV: &str = "LLM_API_KEY";

/// Longer than any provider's key; a longer value is a misconfigured secret, not a key.
const MAX_KEY_BYTES: usize = 4096;

/// Reads the provider configuration through `lookup`, resolving `LLM_API_KEY_SECRET` with
/// `resolver` when it is set. Setting both variables is refused: which one wins would be a guess.
pub async fn llm_config(
    lookup: impl Fn(&str) -> Option<String>,
    resolver: &dyn SecretResolver,
) -> Result<llm::LlmConfig, ConfigError> {
    let get = |name: &str| lookup(name).map(|value| value.trim().to_owned()).filter(|value| !value.is_empty());
    let key = match (get(API_KEY_SECRET_ENV), get(API_KEY_ENV)) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::Invalid {
                name: API_KEY_SECRET_ENV,
                reason: format!("set either {API_KEY_SECRET_ENV} or {API_KEY_ENV}, not both"),
            })
        }
        (Some(reference), None) => Some(fetch_key(&reference, resolver).await?),
        (None, plain) => plain,
    };
    Ok(llm::LlmConfig::from_lookup(|name| if name == API_KEY_ENV { key.clone() } else { lookup(name) })?)
}

/// Parses `name-or-arn` or `name-or-arn#json_key`. Secrets Manager names and ARNs cannot contain
/// `#`, so the split is unambiguous.
pub fn secret_reference(value: &str) -> Result<SecretRef, ConfigError> {
    let invalid = |reason: &str| ConfigError::Invalid { name: API_KEY_SECRET_ENV, reason: reason.to_owned() };
    let (secret_id, json_key) = match value.split_once('#') {
        Some((id, key)) if key.trim().is_empty() => return Err(invalid(&format!("`{id}#` names no JSON key"))),
        Some((id, key)) => (id.trim(), Some(key.trim().to_owned())),
        None => (value.trim(), None),
    };
    if secret_id.is_empty() {
        return Err(invalid("names no secret"));
    }
    Ok(SecretRef::SecretsManager { secret_id: secret_id.to_owned(), json_key })
}

async fn fetch_key(value: &str, resolver: &dyn SecretResolver) -> Result<String, ConfigError> {
    let reference = secret_reference(value)?;
    let invalid = |reason: String| ConfigError::Invalid { name: API_KEY_SECRET_ENV, reason };
    // The functions may read every secret under the tenants' namespace (their experts' secrets):
    // a key kept there would be guarded by nothing of its own.
    if let SecretRef::SecretsManager { secret_id, .. } = &reference {
        if experts::in_tenant_namespace(secret_id) {
            return Err(invalid(format!(
                "secret {reference} is in the tenants' namespace ({}…); keep the model's key outside it, \
                 for example as agent-runtime/llm-api-key",
                experts::TENANT_SECRET_PREFIX
            )));
        }
    }
    // The operator wrote this variable, so the deployment's (unrestricted) scope applies.
    let secret = resolver.resolve(&reference, SecretScope::Deployment).await.map_err(|err| invalid(err.to_string()))?;
    // A secret typed into the console often ends with a newline that no provider accepts.
    let key = secret.trim();
    if key.is_empty() {
        return Err(invalid(format!("secret {reference} is empty")));
    }
    if key.len() > MAX_KEY_BYTES || key.chars().any(char::is_control) {
        return Err(invalid(format!(
            "secret {reference} does not hold an API key (over {MAX_KEY_BYTES} bytes or control characters)"
        )));
    }
    tracing::info!(secret = %reference, "model API key read from Secrets Manager");
    Ok(key.to_owned())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use experts::secrets::SecretError;

    use super::*;

    /// Secrets Manager as the port sees it: stored strings by id, and the number of reads.
    #[derive(Default)]
    struct StoredSecrets {
        values: HashMap<String, String>,
        reads: AtomicUsize,
    }

    #[async_trait]
    impl SecretResolver for StoredSecrets {
        async fn resolve(&self, reference: &SecretRef, scope: SecretScope<'_>) -> Result<String, SecretError> {
            assert_eq!(scope, SecretScope::Deployment);
            self.reads.fetch_add(1, Ordering::SeqCst);
            let SecretRef::SecretsManager { secret_id, json_key } = reference else {
                return Err(SecretError::Unsupported(reference.kind()));
            };
            let value = self.values.get(secret_id).ok_or_else(|| SecretError::NotFound(reference.to_string()))?;
            match json_key {
                Some(key) => experts::secrets::select_json_key(reference, value, key),
                None => Ok(value.clone()),
            }
        }
    }

    fn secrets(pairs: &[(&str, &str)]) -> StoredSecrets {
        StoredSecrets {
            values: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Default::default()
        }
    }

    fn env(pairs: &[(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<&str, &str> = pairs.iter().copied().collect();
        move |name| map.get(name).map(|value| value.to_string())
    }

    #[tokio::test]
    async fn the_key_comes_from_the_named_secret() {
        let store = secrets(&[("prod/llm", "sk-from-secret\n"), ("prod/json", r#"{"api_key": "sk-json"}"#)]);
        let config = llm_config(
            env(&[("LLM_PROVIDER", "anthropic"), ("LLM_MODEL", "claude"), ("LLM_API_KEY_SECRET", "prod/llm")]),
            &store,
        )
        .await
        .unwrap();
        assert_eq!(config.api_key.as_deref(), Some("sk-from-secret"), "trimmed of the console's newline");
        assert!(!format!("{config:?}").contains("sk-from-secret"), "Debug redacts the key");

        let config =
            llm_config(env(&[("LLM_MODEL", "m"), ("LLM_API_KEY_SECRET", "prod/json#api_key")]), &store).await.unwrap();
        assert_eq!(config.api_key.as_deref(), Some("sk-json"));
        assert_eq!(store.reads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_key_in_the_tenants_namespace_is_refused_unread() {
        let store = secrets(&[("agent/llm-api-key", "sk-shared")]);
        for reference in [
            "agent/llm-api-key",
            "agent/llm-api-key#api_key",
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:agent/llm-api-key-AbCdEf",
        ] {
            let lookup = move |name: &str| (name == API_KEY_SECRET_ENV).then(|| reference.to_owned());
            let err = llm_config(lookup, &store).await.unwrap_err().to_string();
            assert!(err.contains("tenants' namespace") && !err.contains("sk-shared"), "{reference}: {err}");
        }
        assert_eq!(store.reads.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn the_plain_key_is_read_without_any_secret_call() {
        let store = secrets(&[]);
        let config = llm_config(env(&[("LLM_MODEL", "m"), ("LLM_API_KEY", "sk-local")]), &store).await.unwrap();
        assert_eq!(config.api_key.as_deref(), Some("sk-local"));
        assert_eq!(store.reads.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn misconfigurations_are_named_and_never_show_the_value() {
        let store = secrets(&[("blank", "  \n"), ("binary", "sk\u{0}x"), ("prod/json", r#"{"other": "sk-hidden"}"#)]);
        let cases: &[(&[(&'static str, &'static str)], &str)] = &[
            (&[("LLM_API_KEY_SECRET", "prod/llm"), ("LLM_API_KEY", "sk-local")], "not both"),
            (&[("LLM_API_KEY_SECRET", "missing")], "was not found"),
            (&[("LLM_API_KEY_SECRET", "blank")], "is empty"),
            (&[("LLM_API_KEY_SECRET", "binary")], "does not hold an API key"),
            (&[("LLM_API_KEY_SECRET", "prod/json#api_key")], "api_key"),
            (&[("LLM_API_KEY_SECRET", "prod/json#")], "names no JSON key"),
            (&[("LLM_API_KEY_SECRET", "#key")], "names no secret"),
        ];
        for (vars, needle) in cases {
            let mut all = vars.to_vec();
            all.push(("LLM_MODEL", "m"));
            let err = llm_config(env(&all), &store).await.unwrap_err().to_string();
            assert!(err.contains("LLM_API_KEY_SECRET") && err.contains(needle), "{vars:?}: {err}");
            assert!(!err.contains("sk-hidden") && !err.contains("sk\u{0}x"), "{err}");
        }
    }
}
