//! Secret references in expert headers, and the port that resolves them (AWS in production, env or fakes in tests).

use std::collections::HashMap;
use std::fmt;

use agent_ports::UserId;
use async_trait::async_trait;
use serde::Deserialize;
use thiserror::Error;

/// Where a header value comes from when it is not written in plain text.
///
/// In JSON: `{"secretsmanager": "arn-or-name", "json_key": "k"}`, `{"ssm": "/param/name"}`
/// or `{"env": "NAME"}`; exactly one source per reference.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawSecretRef")]
pub enum SecretRef {
    /// A Secrets Manager secret; with `json_key`, the secret string is a JSON object and the value is that key.
    SecretsManager { secret_id: String, json_key: Option<String> },
    /// An SSM Parameter Store parameter, decrypted.
    Ssm { name: String },
    /// An environment variable of the function; never allowed in a tenant's configuration.
    Env { name: String },
}

impl SecretRef {
    /// The reference's kind, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            SecretRef::SecretsManager { .. } => "secretsmanager",
            SecretRef::Ssm { .. } => "ssm",
            SecretRef::Env { .. } => "env",
        }
    }
}

/// Names a reference without its value, so it can be logged.
impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretRef::SecretsManager { secret_id, json_key: Some(key) } => {
                write!(f, "secretsmanager:{secret_id}#{key}")
            }
            SecretRef::SecretsManager { secret_id, json_key: None } => write!(f, "secretsmanager:{secret_id}"),
            SecretRef::Ssm { name } => write!(f, "ssm:{name}"),
            SecretRef::Env { name } => write!(f, "env:{name}"),
        }
    }
}

/// The wire form; checked into a [`SecretRef`] so that ambiguous objects are rejected, not guessed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSecretRef {
    secretsmanager: Option<String>,
    json_key: Option<String>,
    ssm: Option<String>,
    env: Option<String>,
}

impl TryFrom<RawSecretRef> for SecretRef {
    type Error = String;

    fn try_from(raw: RawSecretRef) -> Result<Self, Self::Error> {
        let nonempty = |kind: &str, value: String| {
            if value.trim().is_empty() {
                Err(format!("the {kind} reference is empty"))
            } else {
                Ok(value)
            }
        };
        let sources = [&raw.secretsmanager, &raw.ssm, &raw.env].iter().filter(|source| source.is_some()).count();
        if sources != 1 {
            return Err("a secret reference must name exactly one of secretsmanager, ssm or env".into());
        }
        if raw.json_key.is_some() && raw.secretsmanager.is_none() {
            return Err("json_key only applies to secretsmanager references".into());
        }
        if let Some(id) = raw.secretsmanager {
            return Ok(SecretRef::SecretsManager {
                secret_id: nonempty("secretsmanager", id)?,
                json_key: raw.json_key,
            });
        }
        if let Some(name) = raw.ssm {
            return Ok(SecretRef::Ssm { name: nonempty("ssm", name)? });
        }
        let name = raw.env.unwrap_or_default();
        Ok(SecretRef::Env { name: nonempty("env", name)? })
    }
}

/// Whose configuration a reference comes from. A resolver must confine tenant references to
/// the tenant's own secrets: otherwise a tenant could have the function's credentials, or another
/// tenant's, sent to a server of their choosing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretScope<'a> {
    /// The deployment-wide `EXPERTS_CONFIG`, written by the operator.
    Deployment,
    /// A tenant's `experts.json`.
    Tenant(&'a UserId),
}

/// A reference that could not be resolved; the message names the reference, never its value.
#[derive(Debug, Error)]
pub enum SecretError {
    #[error("secret {0} was not found")]
    NotFound(String),
    #[error("secret {0} is not allowed in this configuration")]
    Forbidden(String),
    #[error("{0} references are not supported by this resolver")]
    Unsupported(&'static str),
    #[error("secret {reference} is not a JSON object with the key {key:?}")]
    MissingJsonKey { reference: String, key: String },
    #[error("secret backend failed for {reference}: {message}")]
    Backend { reference: String, message: String },
}

/// Turns references into values. Production wires Secrets Manager and SSM behind it;
/// implementations should cache, since every turn loads the experts again.
#[async_trait]
pub trait SecretResolver: Send + Sync {
    async fn resolve(&self, reference: &SecretRef, scope: SecretScope<'_>) -> Result<String, SecretError>;
}

/// Picks `key` out of a Secrets Manager secret string holding a JSON object, as the console's
/// key/value secrets are stored; for resolvers that fetch the whole string.
pub fn select_json_key(reference: &SecretRef, secret: &str, key: &str) -> Result<String, SecretError> {
    let missing = || SecretError::MissingJsonKey { reference: reference.to_string(), key: key.to_owned() };
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(secret).map_err(|_| missing())?;
    match object.get(key) {
        Some(serde_json::Value::String(value)) => Ok(value.clone()),
        // Numbers and booleans are unambiguous as header text; objects and null are not.
        Some(value @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => Ok(value.to_string()),
        _ => Err(missing()),
    }
}

/// Resolves `{"env": "NAME"}` from the environment (or from a fixed map, for tests), and only for
/// the deployment's configuration. Secrets Manager and SSM references are reported unsupported.
#[derive(Debug, Clone, Default)]
pub struct EnvSecretResolver {
    vars: Option<HashMap<String, String>>,
}

impl EnvSecretResolver {
    /// Reads the process environment.
    pub fn new() -> Self {
        Self { vars: None }
    }

    /// Reads only the given variables, so tests need not mutate the process environment.
    pub fn from_vars<K: Into<String>, V: Into<String>>(vars: impl IntoIterator<Item = (K, V)>) -> Self {
        Self { vars: Some(vars.into_iter().map(|(k, v)| (k.into(), v.into())).collect()) }
    }

    fn lookup(&self, name: &str) -> Option<String> {
        match &self.vars {
            Some(vars) => vars.get(name).cloned(),
            None => std::env::var(name).ok(),
        }
    }
}

#[async_trait]
impl SecretResolver for EnvSecretResolver {
    async fn resolve(&self, reference: &SecretRef, scope: SecretScope<'_>) -> Result<String, SecretError> {
        match reference {
            SecretRef::Env { name } => {
                // The environment holds the function's own credentials: never hand it to a tenant.
                if matches!(scope, SecretScope::Tenant(_)) {
                    return Err(SecretError::Forbidden(reference.to_string()));
                }
                self.lookup(name).ok_or_else(|| SecretError::NotFound(reference.to_string()))
            }
            other => Err(SecretError::Unsupported(other.kind())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<SecretRef, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn parses_each_kind_and_rejects_ambiguity() {
        assert_eq!(
            parse(r#"{"secretsmanager": "arn:x", "json_key": "token"}"#).unwrap(),
            SecretRef::SecretsManager { secret_id: "arn:x".into(), json_key: Some("token".into()) }
        );
        assert_eq!(parse(r#"{"ssm": "/p"}"#).unwrap(), SecretRef::Ssm { name: "/p".into() });
        assert_eq!(parse(r#"{"env": "K"}"#).unwrap(), SecretRef::Env { name: "K".into() });
        for bad in [r#"{}"#, r#"{"ssm": "/p", "env": "K"}"#, r#"{"ssm": "/p", "json_key": "k"}"#, r#"{"vault": "x"}"#] {
            assert!(parse(bad).is_err(), "{bad} should be rejected");
        }
        assert!(parse(r#"{"env": " "}"#).is_err());
    }

    #[test]
    fn selects_json_keys() {
        let reference = SecretRef::SecretsManager { secret_id: "s".into(), json_key: Some("k".into()) };
        assert_eq!(select_json_key(&reference, r#"{"k": "v", "n": 3}"#, "k").unwrap(), "v");
        assert_eq!(select_json_key(&reference, r#"{"k": "v", "n": 3}"#, "n").unwrap(), "3");
        assert!(matches!(select_json_key(&reference, r#"{"k": "v"}"#, "x"), Err(SecretError::MissingJsonKey { .. })));
        assert!(select_json_key(&reference, "not json", "k").is_err());
    }

    #[tokio::test]
    async fn env_resolver_refuses_tenants() {
        let resolver = EnvSecretResolver::from_vars([("TOKEN", "t0k")]);
        let reference = SecretRef::Env { name: "TOKEN".into() };
        assert_eq!(resolver.resolve(&reference, SecretScope::Deployment).await.unwrap(), "t0k");
        let user = UserId::parse("u1").unwrap();
        assert!(matches!(
            resolver.resolve(&reference, SecretScope::Tenant(&user)).await,
            Err(SecretError::Forbidden(_))
        ));
        let missing = SecretRef::Env { name: "NOPE".into() };
        assert!(matches!(resolver.resolve(&missing, SecretScope::Deployment).await, Err(SecretError::NotFound(_))));
        let ssm = SecretRef::Ssm { name: "/p".into() };
        assert!(matches!(resolver.resolve(&ssm, SecretScope::Deployment).await, Err(SecretError::Unsupported("ssm"))));
    }
}
