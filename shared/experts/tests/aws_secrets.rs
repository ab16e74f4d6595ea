//! `AwsSecretResolver` against moto_server (Secrets Manager and SSM) on loopback; needs
//! `pip install "moto[server]"`.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use agent_ports::UserId;
use aws_config::{BehaviorVersion, SdkConfig};
use aws_sdk_secretsmanager::config::{Credentials, Region};
use aws_sdk_ssm::types::ParameterType;
use experts::{AwsSecretResolver, EnvSecretResolver, SecretError, SecretRef, SecretResolver, SecretScope};

/// A moto_server child, killed on drop.
struct Moto {
    child: Child,
    endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One moto_server per test; each test gets its own, so their secrets cannot collide.
fn start_moto() -> Moto {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|error| panic!("could not start moto_server ({error}): run `pip install \"moto[server]\"`"));
    let mut moto = Moto { child, endpoint: format!("http://127.0.0.1:{port}") };
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = moto.child.try_wait().unwrap() {
            panic!("moto_server exited with {status}");
        }
        if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
            return moto;
        }
        assert!(Instant::now() < deadline, "moto_server did not listen on {address} within 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

async fn sdk_config(endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto-tests"))
        .endpoint_url(endpoint)
        .load()
        .await
}

fn u1() -> &'static UserId {
    static USER: OnceLock<UserId> = OnceLock::new();
    USER.get_or_init(|| UserId::parse("u1").unwrap())
}

fn sm(id: &str, json_key: Option<&str>) -> SecretRef {
    SecretRef::SecretsManager { secret_id: id.into(), json_key: json_key.map(Into::into) }
}

fn ssm(name: &str) -> SecretRef {
    SecretRef::Ssm { name: name.into() }
}

/// Seeds moto; returns the ARN of `agent/u1/api`.
async fn seed(config: &SdkConfig) -> String {
    let secrets = aws_sdk_secretsmanager::Client::new(config);
    let created = secrets
        .create_secret()
        .name("agent/u1/api")
        .secret_string(r#"{"token": "t0k", "retries": 3, "nested": {"a": 1}}"#)
        .send()
        .await
        .unwrap();
    secrets.create_secret().name("deploy/plain").secret_string("plain-value").send().await.unwrap();
    secrets.create_secret().name("agent/u2/api").secret_string("other-tenant").send().await.unwrap();
    let ssm = aws_sdk_ssm::Client::new(config);
    for (name, kind, value) in [
        ("/agent/u1/key", ParameterType::SecureString, "s3cure"),
        ("/deploy/key", ParameterType::SecureString, "deploy-s3cure"),
        ("/deploy/plain", ParameterType::String, "plain-param"),
    ] {
        ssm.put_parameter().name(name).r#type(kind).value(value).send().await.unwrap();
    }
    created.arn().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn resolves_secrets_and_parameters_within_scope() {
    let moto = start_moto();
    let config = sdk_config(&moto.endpoint).await;
    let arn = seed(&config).await;
    let resolver =
        AwsSecretResolver::from_sdk_config(&config).with_env_resolver(EnvSecretResolver::from_vars([("K", "env-v")]));
    let deployment = SecretScope::Deployment;
    let tenant = SecretScope::Tenant(u1());
    let resolve = |reference: SecretRef, scope| {
        let resolver = &resolver;
        async move { resolver.resolve(&reference, scope).await }
    };

    // The deployment reads anything.
    assert_eq!(resolve(sm("deploy/plain", None), deployment).await.unwrap(), "plain-value");
    assert_eq!(resolve(sm("agent/u1/api", Some("token")), deployment).await.unwrap(), "t0k");
    assert_eq!(resolve(ssm("/deploy/key"), deployment).await.unwrap(), "deploy-s3cure");
    assert_eq!(resolve(ssm("/deploy/plain"), deployment).await.unwrap(), "plain-param");
    assert_eq!(resolve(SecretRef::Env { name: "K".into() }, deployment).await.unwrap(), "env-v");

    // json_key selects one key of a JSON secret; numbers become text, objects are refused.
    assert_eq!(resolve(sm("agent/u1/api", Some("retries")), tenant).await.unwrap(), "3");
    for key in ["nested", "missing"] {
        let error = resolve(sm("agent/u1/api", Some(key)), tenant).await.unwrap_err();
        assert!(matches!(error, SecretError::MissingJsonKey { .. }), "{key}: {error}");
    }
    let error = resolve(sm("deploy/plain", Some("token")), deployment).await.unwrap_err();
    assert!(matches!(error, SecretError::MissingJsonKey { .. }), "{error}");

    // A tenant reads its own secrets, by name or ARN, and its own SecureString parameters, decrypted.
    assert_eq!(resolve(sm("agent/u1/api", Some("token")), tenant).await.unwrap(), "t0k");
    assert_eq!(resolve(sm(&arn, Some("token")), tenant).await.unwrap(), "t0k");
    assert_eq!(resolve(ssm("/agent/u1/key"), tenant).await.unwrap(), "s3cure");

    // ... and nothing else, refused before AWS is asked (the secrets exist).
    for refused in [
        sm("deploy/plain", None),
        sm("agent/u2/api", None),
        ssm("/deploy/key"),
        ssm("/aws/reference/secretsmanager/deploy/plain"),
        SecretRef::Env { name: "K".into() },
    ] {
        let error = resolve(refused.clone(), tenant).await.unwrap_err();
        assert!(matches!(error, SecretError::Forbidden(_)), "{refused}: {error}");
        assert!(!error.to_string().contains("plain-value"), "{error}");
    }

    // Missing names are reported as such, naming the reference only.
    let error = resolve(sm("agent/u1/none", None), tenant).await.unwrap_err();
    assert!(matches!(error, SecretError::NotFound(_)), "{error}");
    let error = resolve(ssm("/agent/u1/none"), tenant).await.unwrap_err();
    assert!(matches!(error, SecretError::NotFound(_)), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn values_are_cached_until_they_expire() {
    let moto = start_moto();
    let config = sdk_config(&moto.endpoint).await;
    seed(&config).await;
    let cached = AwsSecretResolver::from_sdk_config(&config);
    let short = AwsSecretResolver::from_sdk_config(&config).with_cache_ttl(Duration::from_millis(300));
    let uncached = AwsSecretResolver::from_sdk_config(&config).with_cache_ttl(Duration::ZERO);
    let token = sm("agent/u1/api", Some("token"));
    let tenant = SecretScope::Tenant(u1());
    for resolver in [&cached, &short, &uncached] {
        assert_eq!(resolver.resolve(&token, tenant).await.unwrap(), "t0k");
        assert_eq!(resolver.resolve(&ssm("/agent/u1/key"), tenant).await.unwrap(), "s3cure");
    }

    // Rotate both values behind the resolvers' backs.
    let secrets = aws_sdk_secretsmanager::Client::new(&config);
    secrets.put_secret_value().secret_id("agent/u1/api").secret_string(r#"{"token": "r0tated"}"#).send().await.unwrap();
    let parameters = aws_sdk_ssm::Client::new(&config);
    parameters
        .put_parameter()
        .name("/agent/u1/key")
        .r#type(ParameterType::SecureString)
        .value("r0tated")
        .overwrite(true)
        .send()
        .await
        .unwrap();

    // The cache serves the old values; the whole secret is cached, so another key costs no call
    // but still comes from the old version.
    assert_eq!(cached.resolve(&token, tenant).await.unwrap(), "t0k");
    assert_eq!(cached.resolve(&sm("agent/u1/api", Some("retries")), tenant).await.unwrap(), "3");
    assert_eq!(cached.resolve(&ssm("/agent/u1/key"), tenant).await.unwrap(), "s3cure");
    // A tenant scope check still applies to cached values.
    let other = UserId::parse("u2").unwrap();
    assert!(matches!(cached.resolve(&token, SecretScope::Tenant(&other)).await, Err(SecretError::Forbidden(_))));
    // Without a cache, the new values at once.
    assert_eq!(uncached.resolve(&token, tenant).await.unwrap(), "r0tated");
    assert_eq!(uncached.resolve(&ssm("/agent/u1/key"), tenant).await.unwrap(), "r0tated");
    // With a short one, the new values once it expires.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(short.resolve(&token, tenant).await.unwrap(), "r0tated");
    assert_eq!(short.resolve(&ssm("/agent/u1/key"), tenant).await.unwrap(), "r0tated");
}
