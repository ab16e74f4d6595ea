//! The experts' `AwsSecretResolver` against moto's Secrets Manager and SSM: what a tenant and the
//! deployment may read, JSON keys, missing names, and the cache.

use std::time::Duration;

use agent_core::UserId;
use aws_config::SdkConfig;
use aws_sdk_ssm::types::ParameterType;
use experts::{AwsSecretResolver, EnvSecretResolver, SecretError, SecretRef, SecretResolver, SecretScope};
use local_stack::moto;

/// The names one test seeds: two tenants and a deployment prefix of its own, so that tests
/// sharing the process's moto cannot see each other's secrets.
struct Names {
    tenant: UserId,
    other: UserId,
    deploy: String,
}

impl Names {
    fn new() -> Names {
        let user = |prefix| UserId::parse(moto::unique_name(prefix)).unwrap();
        Names { tenant: user("u1"), other: user("u2"), deploy: moto::unique_name("deploy") }
    }

    /// The tenant's JSON secret.
    fn api(&self) -> String {
        format!("agent/{}/api", self.tenant)
    }

    /// The tenant's SecureString parameter.
    fn key(&self) -> String {
        format!("/agent/{}/key", self.tenant)
    }

    /// A name of the deployment's, under `/` for a parameter.
    fn deploy(&self, name: &str) -> String {
        format!("{}/{name}", self.deploy)
    }
}

fn sm(id: &str, json_key: Option<&str>) -> SecretRef {
    SecretRef::SecretsManager { secret_id: id.into(), json_key: json_key.map(Into::into) }
}

fn ssm(name: &str) -> SecretRef {
    SecretRef::Ssm { name: name.into() }
}

/// Seeds moto; returns the ARN of the tenant's JSON secret.
async fn seed(config: &SdkConfig, names: &Names) -> String {
    let secrets = aws_sdk_secretsmanager::Client::new(config);
    let created = secrets
        .create_secret()
        .name(names.api())
        .secret_string(r#"{"token": "t0k", "retries": 3, "nested": {"a": 1}}"#)
        .send()
        .await
        .unwrap();
    secrets.create_secret().name(names.deploy("plain")).secret_string("plain-value").send().await.unwrap();
    let other = format!("agent/{}/api", names.other);
    secrets.create_secret().name(other).secret_string("other-tenant").send().await.unwrap();
    let ssm = aws_sdk_ssm::Client::new(config);
    for (name, kind, value) in [
        (names.key(), ParameterType::SecureString, "s3cure"),
        (format!("/{}", names.deploy("key")), ParameterType::SecureString, "deploy-s3cure"),
        (format!("/{}", names.deploy("plain")), ParameterType::String, "plain-param"),
    ] {
        ssm.put_parameter().name(name).r#type(kind).value(value).send().await.unwrap();
    }
    created.arn().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn resolves_secrets_and_parameters_within_scope() {
    let config = moto::sdk_config(&moto::moto().endpoint).await;
    let names = Names::new();
    let arn = seed(&config, &names).await;
    let resolver =
        AwsSecretResolver::from_sdk_config(&config).with_env_resolver(EnvSecretResolver::from_vars([("K", "env-v")]));
    let deployment = SecretScope::Deployment;
    let tenant = SecretScope::Tenant(&names.tenant);
    let resolve = |reference: SecretRef, scope| {
        let resolver = &resolver;
        async move { resolver.resolve(&reference, scope).await }
    };
    let (api, key, plain) = (names.api(), names.key(), names.deploy("plain"));

    // The deployment reads anything.
    assert_eq!(resolve(sm(&plain, None), deployment).await.unwrap(), "plain-value");
    assert_eq!(resolve(sm(&api, Some("token")), deployment).await.unwrap(), "t0k");
    assert_eq!(resolve(ssm(&format!("/{}", names.deploy("key"))), deployment).await.unwrap(), "deploy-s3cure");
    assert_eq!(resolve(ssm(&format!("/{plain}")), deployment).await.unwrap(), "plain-param");
    assert_eq!(resolve(SecretRef::Env { name: "K".into() }, deployment).await.unwrap(), "env-v");

    // json_key selects one key of a JSON secret; numbers become text, objects are refused.
    assert_eq!(resolve(sm(&api, Some("retries")), tenant).await.unwrap(), "3");
    for json_key in ["nested", "missing"] {
        let error = resolve(sm(&api, Some(json_key)), tenant).await.unwrap_err();
        assert!(matches!(error, SecretError::MissingJsonKey { .. }), "{json_key}: {error}");
    }
    let error = resolve(sm(&plain, Some("token")), deployment).await.unwrap_err();
    assert!(matches!(error, SecretError::MissingJsonKey { .. }), "{error}");

    // A tenant reads its own secrets, by name or ARN, and its own SecureString parameters, decrypted.
    assert_eq!(resolve(sm(&api, Some("token")), tenant).await.unwrap(), "t0k");
    assert_eq!(resolve(sm(&arn, Some("token")), tenant).await.unwrap(), "t0k");
    assert_eq!(resolve(ssm(&key), tenant).await.unwrap(), "s3cure");

    // ... and nothing else, refused before AWS is asked (the secrets exist).
    for refused in [
        sm(&plain, None),
        sm(&format!("agent/{}/api", names.other), None),
        ssm(&format!("/{}", names.deploy("key"))),
        ssm(&format!("/aws/reference/secretsmanager/{plain}")),
        SecretRef::Env { name: "K".into() },
    ] {
        let error = resolve(refused.clone(), tenant).await.unwrap_err();
        assert!(matches!(error, SecretError::Forbidden(_)), "{refused}: {error}");
        assert!(!error.to_string().contains("plain-value"), "{error}");
    }

    // Missing names are reported as such, naming the reference only.
    let error = resolve(sm(&format!("agent/{}/none", names.tenant), None), tenant).await.unwrap_err();
    assert!(matches!(error, SecretError::NotFound(_)), "{error}");
    let error = resolve(ssm(&format!("/agent/{}/none", names.tenant)), tenant).await.unwrap_err();
    assert!(matches!(error, SecretError::NotFound(_)), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn values_are_cached_until_they_expire() {
    let config = moto::sdk_config(&moto::moto().endpoint).await;
    let names = Names::new();
    seed(&config, &names).await;
    let cached = AwsSecretResolver::from_sdk_config(&config);
    let short = AwsSecretResolver::from_sdk_config(&config).with_cache_ttl(Duration::from_millis(300));
    let uncached = AwsSecretResolver::from_sdk_config(&config).with_cache_ttl(Duration::ZERO);
    let (api, key) = (names.api(), names.key());
    let token = sm(&api, Some("token"));
    let tenant = SecretScope::Tenant(&names.tenant);
    for resolver in [&cached, &short, &uncached] {
        assert_eq!(resolver.resolve(&token, tenant).await.unwrap(), "t0k");
        assert_eq!(resolver.resolve(&ssm(&key), tenant).await.unwrap(), "s3cure");
    }

    // Rotate both values behind the resolvers' backs.
    let secrets = aws_sdk_secretsmanager::Client::new(&config);
    secrets.put_secret_value().secret_id(&api).secret_string(r#"{"token": "r0tated"}"#).send().await.unwrap();
    let parameters = aws_sdk_ssm::Client::new(&config);
    parameters
        .put_parameter()
        .name(&key)
        .r#type(ParameterType::SecureString)
        .value("r0tated")
        .overwrite(true)
        .send()
        .await
        .unwrap();

    // The cache serves the old values; the whole secret is cached, so another key costs no call
    // but still comes from the old version.
    assert_eq!(cached.resolve(&token, tenant).await.unwrap(), "t0k");
    assert_eq!(cached.resolve(&sm(&api, Some("retries")), tenant).await.unwrap(), "3");
    assert_eq!(cached.resolve(&ssm(&key), tenant).await.unwrap(), "s3cure");
    // A tenant scope check still applies to cached values.
    assert!(matches!(cached.resolve(&token, SecretScope::Tenant(&names.other)).await, Err(SecretError::Forbidden(_))));
    // Without a cache, the new values at once.
    assert_eq!(uncached.resolve(&token, tenant).await.unwrap(), "r0tated");
    assert_eq!(uncached.resolve(&ssm(&key), tenant).await.unwrap(), "r0tated");
    // With a short one, the new values once it expires.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(short.resolve(&token, tenant).await.unwrap(), "r0tated");
    assert_eq!(short.resolve(&ssm(&key), tenant).await.unwrap(), "r0tated");
}
