//! Secret references resolved on AWS: Secrets Manager (`GetSecretValue`) and SSM Parameter Store
//! (`GetParameter` with decryption), with `env` references delegated to [`EnvSecretResolver`].
//!
//! Tenants are confined to their own names: `agent/{user}/…` in Secrets Manager (a name, or the
//! secret name inside an ARN) and `/agent/{user}/…` in Parameter Store. Anything else in a tenant's
//! configuration is refused before any call to AWS, since the function's role may read far more than
//! one tenant's secrets. The deployment's configuration (written by the operator) is unrestricted.
//!
//! Values are cached in the process for five minutes, so a warm Lambda does not call AWS every turn.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_secretsmanager::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use tokio::sync::OnceCell;

use crate::secrets::{select_json_key, EnvSecretResolver, SecretError, SecretRef, SecretResolver, SecretScope};

/// How long a resolved value is reused.
pub const SECRET_CACHE_TTL: Duration = Duration::from_secs(5 * 60);

/// The prefix of a tenant's Secrets Manager names; the tenant's id and a `/` follow.
pub const TENANT_SECRET_PREFIX: &str = "agent/";

/// The prefix of a tenant's SSM parameter names; the tenant's id and a `/` follow.
pub const TENANT_PARAMETER_PREFIX: &str = "/agent/";

/// More cached values than any warm function should need; past it, expired values are dropped,
/// and if that is not enough, all of them.
const MAX_CACHED: usize = 1024;

#[derive(Debug, Clone)]
struct Clients {
    secrets: aws_sdk_secretsmanager::Client,
    ssm: aws_sdk_ssm::Client,
}

impl Clients {
    fn new(config: &SdkConfig) -> Self {
        Self { secrets: aws_sdk_secretsmanager::Client::new(config), ssm: aws_sdk_ssm::Client::new(config) }
    }
}

/// What a cached value was fetched as; a Secrets Manager secret is cached whole, so several
/// `json_key`s of one secret cost one call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum CacheKey {
    Secret(String),
    Parameter(String),
}

/// Resolves Secrets Manager, SSM and `env` references, with tenant confinement and a cache.
pub struct AwsSecretResolver {
    clients: OnceCell<Clients>,
    env: EnvSecretResolver,
    ttl: Duration,
    cache: Mutex<HashMap<CacheKey, (Instant, String)>>,
}

impl AwsSecretResolver {
    /// Uses the default AWS configuration chain (`aws_http::load_config`),
    /// loaded once, on the first Secrets Manager or SSM reference; `env` references read the
    /// process environment.
    pub fn from_env() -> Self {
        Self::with_clients(OnceCell::new())
    }

    /// Uses an explicit SDK configuration (tests point it at moto).
    pub fn from_sdk_config(config: &SdkConfig) -> Self {
        Self::with_clients(OnceCell::new_with(Some(Clients::new(config))))
    }

    fn with_clients(clients: OnceCell<Clients>) -> Self {
        Self { clients, env: EnvSecretResolver::new(), ttl: SECRET_CACHE_TTL, cache: Mutex::default() }
    }

    /// Resolves `env` references (deployment scope only) with `env` instead of the process environment.
    pub fn with_env_resolver(mut self, env: EnvSecretResolver) -> Self {
        self.env = env;
        self
    }

    /// Keeps values for `ttl` instead of [`SECRET_CACHE_TTL`]; zero disables the cache.
    pub fn with_cache_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    async fn clients(&self) -> &Clients {
        self.clients.get_or_init(|| async { Clients::new(&aws_http::load_config().await) }).await
    }

    fn cached(&self, key: &CacheKey) -> Option<String> {
        let cache = self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        cache.get(key).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, value)| value.clone())
    }

    fn remember(&self, key: CacheKey, value: &str) {
        if self.ttl.is_zero() {
            return;
        }
        let mut cache = self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, (at, _)| at.elapsed() < self.ttl);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(key, (Instant::now(), value.to_owned()));
    }

    /// The whole value behind `key`, from the cache or from AWS.
    async fn fetch(&self, reference: &SecretRef, key: CacheKey) -> Result<String, SecretError> {
        if let Some(value) = self.cached(&key) {
            return Ok(value);
        }
        let value = match &key {
            CacheKey::Secret(id) => self.get_secret(reference, id).await?,
            CacheKey::Parameter(name) => self.get_parameter(reference, name).await?,
        };
        self.remember(key, &value);
        Ok(value)
    }

    async fn get_secret(&self, reference: &SecretRef, secret_id: &str) -> Result<String, SecretError> {
        let output =
            self.clients().await.secrets.get_secret_value().secret_id(secret_id).send().await.map_err(|error| {
                match error.as_service_error() {
                    Some(service) if service.is_resource_not_found_exception() => {
                        SecretError::NotFound(reference.to_string())
                    }
                    _ => backend(reference, &error),
                }
            })?;
        if let Some(text) = output.secret_string() {
            return Ok(text.to_owned());
        }
        let binary = output.secret_binary().map(|blob| blob.as_ref().to_vec());
        binary.and_then(|bytes| String::from_utf8(bytes).ok()).ok_or_else(|| SecretError::Backend {
            reference: reference.to_string(),
            message: "the secret has no text value".into(),
        })
    }

    async fn get_parameter(&self, reference: &SecretRef, name: &str) -> Result<String, SecretError> {
        let output = self.clients().await.ssm.get_parameter().name(name).with_decryption(true).send().await.map_err(
            |error| match error.as_service_error() {
                Some(service) if service.is_parameter_not_found() || service.is_parameter_version_not_found() => {
                    SecretError::NotFound(reference.to_string())
                }
                _ => backend(reference, &error),
            },
        )?;
        output.parameter().and_then(|parameter| parameter.value()).map(str::to_owned).ok_or_else(|| {
            SecretError::Backend { reference: reference.to_string(), message: "the parameter has no value".into() }
        })
    }
}

impl std::fmt::Debug for AwsSecretResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cached = self.cache.lock().map(|cache| cache.len()).unwrap_or_default();
        f.debug_struct("AwsSecretResolver").field("ttl", &self.ttl).field("cached", &cached).finish_non_exhaustive()
    }
}

/// A backend failure described by the service's error code and message (never a secret value:
/// the request carried only the reference).
fn backend<E, R>(reference: &SecretRef, error: &SdkError<E, R>) -> SecretError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let message = match error.as_service_error() {
        Some(service) => match (service.code(), service.message()) {
            (Some(code), Some(message)) => format!("{code}: {message}"),
            (Some(code), None) => code.to_owned(),
            _ => DisplayErrorContext(error).to_string(),
        },
        None => DisplayErrorContext(error).to_string(),
    };
    SecretError::Backend { reference: reference.to_string(), message }
}

#[async_trait]
impl SecretResolver for AwsSecretResolver {
    async fn resolve(&self, reference: &SecretRef, scope: SecretScope<'_>) -> Result<String, SecretError> {
        check_scope(reference, scope)?;
        match reference {
            SecretRef::SecretsManager { secret_id, json_key } => {
                let secret = self.fetch(reference, CacheKey::Secret(secret_id.clone())).await?;
                match json_key {
                    Some(key) => select_json_key(reference, &secret, key),
                    None => Ok(secret),
                }
            }
            SecretRef::Ssm { name } => self.fetch(reference, CacheKey::Parameter(name.clone())).await,
            // The environment is read on every call: it is local and may be changed by tests.
            SecretRef::Env { .. } => self.env.resolve(reference, scope).await,
        }
    }
}

/// Refuses what a tenant may not reference: another name than its own, or any `env` reference.
/// The deployment may reference anything.
pub fn check_scope(reference: &SecretRef, scope: SecretScope<'_>) -> Result<(), SecretError> {
    let SecretScope::Tenant(user) = scope else {
        return Ok(());
    };
    let allowed = match reference {
        SecretRef::SecretsManager { secret_id, .. } => {
            secret_name(secret_id).is_some_and(|name| within(name, &format!("{TENANT_SECRET_PREFIX}{user}/")))
        }
        SecretRef::Ssm { name } => {
            parameter_name(name).is_some_and(|name| within(name, &format!("{TENANT_PARAMETER_PREFIX}{user}/")))
        }
        SecretRef::Env { .. } => false,
    };
    if allowed {
        Ok(())
    } else {
        let rule = match reference {
            SecretRef::SecretsManager { .. } => format!("tenant secrets must be named {TENANT_SECRET_PREFIX}{user}/…"),
            SecretRef::Ssm { .. } => format!("tenant parameters must be named {TENANT_PARAMETER_PREFIX}{user}/…"),
            SecretRef::Env { .. } => "tenants may not read the environment".to_owned(),
        };
        Err(SecretError::Forbidden(format!("{reference} ({rule})")))
    }
}

/// Whether a Secrets Manager name or ARN names a secret in the tenants' namespace
/// ([`TENANT_SECRET_PREFIX`]), which the functions' role may read for every tenant: the
/// deployment's own secrets, the model's key first, must live outside it.
pub fn in_tenant_namespace(secret_id: &str) -> bool {
    secret_name(secret_id).is_some_and(|name| name.starts_with(TENANT_SECRET_PREFIX))
}

/// `name` is under `prefix`, has something after it, and has no `.`/`..` or empty segments that a
/// backend might normalise away.
fn within(name: &str, prefix: &str) -> bool {
    match name.strip_prefix(prefix) {
        Some(rest) if !rest.is_empty() => rest.split('/').all(|segment| !matches!(segment, "" | "." | "..")),
        _ => false,
    }
}

/// The secret's name: the id itself, or the part after `:secret:` of a Secrets Manager ARN
/// (`arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME`); `None` for any other ARN.
fn secret_name(secret_id: &str) -> Option<&str> {
    if !secret_id.starts_with("arn:") {
        return Some(secret_id);
    }
    let parts: Vec<&str> = secret_id.splitn(7, ':').collect();
    match parts.as_slice() {
        [_, _, "secretsmanager", _, _, "secret", name] => Some(name),
        _ => None,
    }
}

/// The parameter's name: the name itself, or `/` and what follows `:parameter/` in an SSM ARN
/// (`arn:PARTITION:ssm:REGION:ACCOUNT:parameter/NAME`); `None` for any other ARN.
fn parameter_name(name: &str) -> Option<&str> {
    if !name.starts_with("arn:") {
        return Some(name);
    }
    let parts: Vec<&str> = name.splitn(6, ':').collect();
    match parts.as_slice() {
        // `parameter/agent/u1/x` names `/agent/u1/x`: keep the slash after `parameter`.
        [_, _, "ssm", _, _, resource] => resource.strip_prefix("parameter").filter(|rest| rest.starts_with('/')),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_ports::UserId;

    fn sm(id: &str) -> SecretRef {
        SecretRef::SecretsManager { secret_id: id.into(), json_key: None }
    }

    fn ssm(name: &str) -> SecretRef {
        SecretRef::Ssm { name: name.into() }
    }

    #[test]
    fn tenants_reach_only_their_own_names() {
        let user = UserId::parse("u1").unwrap();
        let tenant = SecretScope::Tenant(&user);
        for allowed in [
            sm("agent/u1/token"),
            sm("agent/u1/a/b"),
            sm("arn:aws:secretsmanager:us-east-1:123456789012:secret:agent/u1/token-AbCdEf"),
            ssm("/agent/u1/token"),
            ssm("/agent/u1/token:3"),
            ssm("arn:aws:ssm:us-east-1:123456789012:parameter/agent/u1/token"),
        ] {
            assert!(check_scope(&allowed, tenant).is_ok(), "{allowed} should be allowed");
            assert!(check_scope(&allowed, SecretScope::Deployment).is_ok());
        }
        for refused in [
            sm("agent/u2/token"),
            sm("agent/u1"),
            sm("agent/u1/"),
            sm("agent/u10/token"),
            sm("agent/u1/../u2/token"),
            sm("agent/u1//token"),
            sm("prod/database"),
            sm("arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db"),
            sm("arn:aws:ssm:us-east-1:123456789012:secret:agent/u1/token"),
            ssm("agent/u1/token"),
            ssm("/agent/u2/token"),
            ssm("/agent/u1"),
            ssm("/aws/reference/secretsmanager/agent/u1/token"),
            ssm("arn:aws:ssm:us-east-1:123456789012:parameter/prod/db"),
            ssm("arn:aws:ssm:us-east-1:123456789012:parameteragent/u1/x"),
            SecretRef::Env { name: "HOME".into() },
        ] {
            let error = check_scope(&refused, tenant).unwrap_err();
            assert!(matches!(error, SecretError::Forbidden(_)), "{refused}: {error}");
            assert!(check_scope(&refused, SecretScope::Deployment).is_ok(), "{refused}");
        }
        let message = check_scope(&sm("prod/db"), tenant).unwrap_err().to_string();
        assert!(message.contains("agent/u1/"), "{message}");
    }

    #[tokio::test]
    async fn env_references_are_delegated_for_the_deployment_only() {
        let resolver = AwsSecretResolver::from_env().with_env_resolver(EnvSecretResolver::from_vars([("K", "v")]));
        let reference = SecretRef::Env { name: "K".into() };
        assert_eq!(resolver.resolve(&reference, SecretScope::Deployment).await.unwrap(), "v");
        let user = UserId::parse("u1").unwrap();
        assert!(matches!(
            resolver.resolve(&reference, SecretScope::Tenant(&user)).await,
            Err(SecretError::Forbidden(_))
        ));
        // A refused tenant reference never reaches AWS (nor loads its configuration).
        assert!(matches!(
            resolver.resolve(&sm("prod/db"), SecretScope::Tenant(&user)).await,
            Err(SecretError::Forbidden(_))
        ));
        assert!(resolver.clients.get().is_none());
    }
}
