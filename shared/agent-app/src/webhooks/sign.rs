//! Webhook signatures, the Standard Webhooks way: `webhook-signature: v1,<base64 HMAC-SHA256 over
//! "{id}.{timestamp}.{body}">`. Each tenant's key is derived from one deployment secret (HMAC of the
//! secret and the tenant id), so a tenant's key signs nothing another tenant would accept; the
//! deployment secret is read once at cold start from the Secrets Manager secret
//! `WEBHOOK_SIGNING_KEY_SECRET` names (the template generates it), or `WEBHOOK_SIGNING_KEY` in tests.

use agent_core::UserId;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use experts::secrets::SecretResolver;
use hmac::{Hmac, KeyInit, Mac};

use crate::config::ConfigError;
use crate::secret_key::{read_key, KeySource};

type HmacSha256 = Hmac<sha2_hmac::Sha256>;

/// Names the secret (name or ARN) whose string is the deployment's webhook secret.
pub const SIGNING_KEY_SECRET_ENV: &str = "WEBHOOK_SIGNING_KEY_SECRET";
/// The deployment's webhook secret itself, for local use and the tests.
pub const SIGNING_KEY_ENV: &str = "WEBHOOK_SIGNING_KEY";
/// The prefix Standard Webhooks libraries expect before a base64 key.
pub const SECRET_PREFIX: &str = "whsec_";
/// A shorter deployment secret is refused: it could be guessed.
const MIN_SECRET_BYTES: usize = 32;
/// A longer one is not a key but a misconfigured secret.
const MAX_SECRET_BYTES: usize = 4096;
/// What the derivation mixes in before the tenant id, so these keys are never another HMAC's.
const DERIVATION_LABEL: &[u8] = b"agent-runtime webhook signing key v1\0";

/// The deployment's secret, from which every tenant's key is derived.
#[derive(Clone)]
pub struct DeploymentKey(Vec<u8>);

impl std::fmt::Debug for DeploymentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeploymentKey(..)")
    }
}

impl DeploymentKey {
    /// The secret's bytes, within bounds.
    pub fn new(secret: &[u8]) -> Result<Self, String> {
        if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&secret.len()) {
            return Err(format!("the webhook secret must hold {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes"));
        }
        Ok(Self(secret.to_vec()))
    }

    /// `user`'s signing key: HMAC-SHA256 of the label and the tenant id under the deployment secret.
    pub fn tenant(&self, user: &UserId) -> TenantKey {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(DERIVATION_LABEL);
        mac.update(user.as_str().as_bytes());
        TenantKey(mac.finalize().into_bytes().into())
    }
}

/// One tenant's signing key.
#[derive(Clone, PartialEq, Eq)]
pub struct TenantKey([u8; 32]);

impl std::fmt::Debug for TenantKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TenantKey(..)")
    }
}

impl TenantKey {
    /// The key as a Standard Webhooks library takes it: `whsec_` and its base64.
    pub fn whsec(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode(self.0))
    }

    /// The `webhook-signature` value of `body` sent as message `id` at `timestamp` (Unix seconds).
    pub fn sign(&self, id: &str, timestamp: i64, body: &str) -> String {
        signature(&self.0, id, timestamp, body)
    }
}

/// `v1,` and the base64 of HMAC-SHA256 under `key` of `{id}.{timestamp}.{body}`.
fn signature(key: &[u8], id: &str, timestamp: i64, body: &str) -> String {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body.as_bytes());
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The deployment secret from the secret `WEBHOOK_SIGNING_KEY_SECRET` names, through `resolver`,
/// else from `WEBHOOK_SIGNING_KEY`; `None` when neither is set, an error when both are. Errors name
/// the secret, never its value.
pub async fn deployment_key(
    lookup: impl Fn(&str) -> Option<String>,
    resolver: &dyn SecretResolver,
) -> Result<Option<DeploymentKey>, ConfigError> {
    let source = KeySource { secret_env: SIGNING_KEY_SECRET_ENV, value_env: Some(SIGNING_KEY_ENV) };
    let Some(key) = read_key(&source, lookup, resolver).await? else { return Ok(None) };
    DeploymentKey::new(key.text.as_bytes()).map(Some).map_err(|reason| key.invalid(reason))
}

#[cfg(test)]
mod tests {
    use crate::secret_key::testing::world;

    use super::*;

    const SECRET: &str = "a webhook deployment secret of at least thirty-two bytes";

    #[test]
    fn signatures_match_the_standard_webhooks_specification_vector() {
        // The test vector of the Standard Webhooks specification and its reference libraries.
        let key = STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let signed = signature(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, r#"{"test": 2432232314}"#);
        assert_eq!(signed, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn each_tenant_has_its_own_key_derived_from_the_one_secret() {
        let deployment = DeploymentKey::new(SECRET.as_bytes()).unwrap();
        let (ana, bob) = (UserId::parse("ana").unwrap(), UserId::parse("bob").unwrap());
        let (ana_key, bob_key) = (deployment.tenant(&ana), deployment.tenant(&bob));
        assert_ne!(ana_key, bob_key);
        assert_eq!(ana_key, DeploymentKey::new(SECRET.as_bytes()).unwrap().tenant(&ana), "stable");
        let whsec = ana_key.whsec();
        assert!(whsec.starts_with(SECRET_PREFIX));
        assert_eq!(STANDARD.decode(&whsec[SECRET_PREFIX.len()..]).unwrap(), ana_key.0);
        assert_ne!(ana_key.sign("turn_1", 1, "{}"), bob_key.sign("turn_1", 1, "{}"));
        assert_ne!(ana_key.sign("turn_1", 1, "{}"), ana_key.sign("turn_1", 2, "{}"));
        assert!(!format!("{deployment:?}{ana_key:?}").contains(SECRET) && !format!("{ana_key:?}").contains(&whsec));
    }

    async fn read(
        vars: &[(&str, &str)],
        secrets: &[(&'static str, &'static str)],
    ) -> Result<Option<DeploymentKey>, String> {
        let (lookup, resolver) = world(vars, secrets);
        deployment_key(lookup, &resolver).await.map_err(|err| err.to_string())
    }

    #[tokio::test]
    async fn the_secret_comes_from_secrets_manager_or_the_variable_and_derives_alike() {
        let ana = UserId::parse("ana").unwrap();
        let from_secret = read(&[(SIGNING_KEY_SECRET_ENV, "rt/webhooks")], &[("rt/webhooks", SECRET)]).await.unwrap();
        let from_env = read(&[(SIGNING_KEY_ENV, SECRET)], &[]).await.unwrap();
        assert_eq!(from_secret.unwrap().tenant(&ana), from_env.unwrap().tenant(&ana));
        assert!(read(&[], &[]).await.unwrap().is_none());
        let error =
            read(&[(SIGNING_KEY_SECRET_ENV, "agent/webhooks")], &[("agent/webhooks", SECRET)]).await.unwrap_err();
        assert!(error.contains("tenants' namespace"), "{error}");
        let error = read(&[(SIGNING_KEY_SECRET_ENV, "short")], &[("short", "tiny-secret")]).await.unwrap_err();
        assert!(error.contains("secret short") && !error.contains("tiny-secret"), "{error}");
        let both = [(SIGNING_KEY_SECRET_ENV, "k"), (SIGNING_KEY_ENV, SECRET)];
        assert!(read(&both, &[("k", SECRET)]).await.unwrap_err().contains("not both"));
    }
}
