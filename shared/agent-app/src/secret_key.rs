//! A deployment's own secret key, read once at cold start: from the Secrets Manager secret a variable
//! names (outside the tenants' namespace, where a key would guard nothing), or, for local use and the
//! tests, from a variable that holds the key itself. Bundles, `GET /sessions` cursors and webhooks each
//! keep one this way. Errors name the secret, never its value.

use experts::secrets::{SecretRef, SecretResolver, SecretScope};

use crate::config::ConfigError;

/// Where one key is read from.
pub struct KeySource {
    /// The variable that names the key's secret (a name or ARN).
    pub secret_env: &'static str,
    /// The variable that holds the key itself, when the key may be given so.
    pub value_env: Option<&'static str>,
}

/// A key's text as read, and how to name where it came from in an error.
pub struct KeyText {
    pub text: String,
    /// The variable it came through.
    pub env: &'static str,
    /// `secret {id}` when it came from a secret.
    pub secret: Option<String>,
}

impl KeyText {
    /// The error for a key whose text is refused for `reason`.
    pub fn invalid(&self, reason: String) -> ConfigError {
        let reason = match &self.secret {
            Some(secret) => format!("{secret}: {reason}"),
            None => reason,
        };
        ConfigError::Invalid { name: self.env, reason }
    }
}

/// The key's text, trimmed: from the secret `source.secret_env` names, through `resolver`, else from
/// `source.value_env`; `None` when neither is set, and an error when both are (which one wins would
/// be a guess).
pub async fn read_key(
    source: &KeySource,
    lookup: impl Fn(&str) -> Option<String>,
    resolver: &dyn SecretResolver,
) -> Result<Option<KeyText>, ConfigError> {
    let get = |name: &str| lookup(name).map(|value| value.trim().to_owned()).filter(|value| !value.is_empty());
    let value = source.value_env.and_then(|name| get(name).map(|value| (name, value)));
    match (get(source.secret_env), value) {
        (Some(_), Some((value_env, _))) => Err(ConfigError::Invalid {
            name: source.secret_env,
            reason: format!("set either {} or {value_env}, not both", source.secret_env),
        }),
        (Some(secret_id), None) => {
            let text = read_secret(&secret_id, source.secret_env, resolver).await?;
            Ok(Some(KeyText { text, env: source.secret_env, secret: Some(format!("secret {secret_id}")) }))
        }
        (None, Some((env, text))) => Ok(Some(KeyText { text, env, secret: None })),
        (None, None) => Ok(None),
    }
}

/// The trimmed string of secret `secret_id`, which `env` named; refused inside the tenants' namespace.
pub async fn read_secret(
    secret_id: &str,
    env: &'static str,
    resolver: &dyn SecretResolver,
) -> Result<String, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid { name: env, reason };
    // The functions may read every secret under the tenants' namespace: a key there guards nothing.
    if experts::in_tenant_namespace(secret_id) {
        return Err(invalid(format!("secret {secret_id} is in the tenants' namespace; keep the key outside it")));
    }
    let reference = SecretRef::SecretsManager { secret_id: secret_id.to_owned(), json_key: None };
    let secret = resolver.resolve(&reference, SecretScope::Deployment).await.map_err(|err| invalid(err.to_string()))?;
    Ok(secret.trim().to_owned())
}

/// For the keys' tests: Secrets Manager as a map, and a key read through it from a set of variables.
#[cfg(test)]
pub(crate) mod testing {
    use std::collections::HashMap;

    use experts::secrets::{SecretError, SecretRef, SecretResolver, SecretScope};

    /// Secrets Manager as a map of secret ids to their strings.
    pub(crate) struct Secrets(pub(crate) HashMap<&'static str, &'static str>);

    #[async_trait::async_trait]
    impl SecretResolver for Secrets {
        async fn resolve(&self, reference: &SecretRef, scope: SecretScope<'_>) -> Result<String, SecretError> {
            assert_eq!(scope, SecretScope::Deployment);
            let SecretRef::SecretsManager { secret_id, .. } = reference else {
                return Err(SecretError::Unsupported(reference.kind()));
            };
            let value = self.0.get(secret_id.as_str()).ok_or_else(|| SecretError::NotFound(reference.to_string()))?;
            Ok(value.to_string())
        }
    }

    /// The variables `vars` as a lookup, and `secrets` as Secrets Manager.
    pub(crate) fn world(
        vars: &[(&str, &str)],
        secrets: &[(&'static str, &'static str)],
    ) -> (impl Fn(&str) -> Option<String>, Secrets) {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        (move |name: &str| vars.get(name).cloned(), Secrets(secrets.iter().copied().collect()))
    }
}
