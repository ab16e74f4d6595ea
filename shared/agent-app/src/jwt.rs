//! Bearer-token verification for endpoints with no authorizer in front (a Lambda Function URL):
//! the JWT's signature against the issuer's JWKS (cached per process, refreshed with a rate
//! limit), its issuer, audience, expiry and subject. Only asymmetric algorithms are accepted.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;
use thiserror::Error;
use tokio::time::Instant;

use crate::ConfigError;

/// Tokens longer than this are refused before any parsing.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// A fetched key set is used this long before it is fetched again.
const JWKS_MAX_AGE: Duration = Duration::from_secs(60 * 60);
/// At most one fetch for an unknown key id per this interval (by default), so tokens with random
/// key ids cannot turn into a flood of requests to the issuer.
pub const JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// The key set is bounded in size and in time.
const MAX_JWKS_BYTES: usize = 256 * 1024;
const JWKS_TIMEOUT: Duration = Duration::from_secs(5);

/// The algorithms accepted: asymmetric only, so a public key can never serve as an HMAC secret.
const ACCEPTED: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Whose tokens are accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtConfig {
    /// The exact `iss` of accepted tokens.
    pub issuer: String,
    /// Accepted `aud` values (or `client_id`, for Cognito access tokens); empty to skip the check.
    pub audiences: Vec<String>,
    pub jwks_url: String,
    /// Clock skew tolerated on `exp` and `nbf`.
    pub leeway: Duration,
    /// The least time between two fetches of the key set for unknown key ids.
    pub refetch_interval: Duration,
}

impl JwtConfig {
    /// `JWT_ISSUER` (required), `JWT_AUDIENCE` (comma-separated), `JWT_JWKS_URL` (default
    /// `{issuer}/.well-known/jwks.json`, right for Amazon Cognito, Auth0 and Okta).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let issuer = lookup("JWT_ISSUER").map(|issuer| issuer.trim().to_owned()).unwrap_or_default();
        let invalid = |name: &'static str, reason: &str| ConfigError::Invalid { name, reason: reason.to_owned() };
        if issuer.is_empty() {
            return Err(invalid("JWT_ISSUER", "it is required: the issuer URL of the identity provider"));
        }
        let secure = issuer.starts_with("https://");
        let loopback = issuer.starts_with("http://127.0.0.1") || issuer.starts_with("http://localhost");
        if !secure && !loopback {
            return Err(invalid("JWT_ISSUER", "it must be an https:// URL"));
        }
        let audiences = lookup("JWT_AUDIENCE")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|audience| !audience.is_empty())
            .map(str::to_owned)
            .collect();
        let jwks_url = lookup("JWT_JWKS_URL")
            .map(|url| url.trim().to_owned())
            .filter(|url| !url.is_empty())
            .unwrap_or_else(|| format!("{}/.well-known/jwks.json", issuer.trim_end_matches('/')));
        Ok(Self {
            issuer,
            audiences,
            jwks_url,
            leeway: Duration::from_secs(60),
            refetch_interval: JWKS_REFETCH_INTERVAL,
        })
    }
}

/// The verified identity of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedClaims {
    pub sub: String,
    pub name: Option<String>,
    pub locale: Option<String>,
    pub profile: Option<String>,
    /// `exp`, in Unix seconds.
    pub expires_at: i64,
}

/// Why a token was refused; every message is safe to show the client.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum JwtError {
    #[error("the token is missing or malformed")]
    Malformed,
    #[error("the token's algorithm is not accepted")]
    UnsupportedAlgorithm,
    #[error("the token was signed with an unknown key")]
    UnknownKey,
    #[error("the token's signature is invalid")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token was issued by another issuer")]
    WrongIssuer,
    #[error("the token was issued for another audience")]
    WrongAudience,
    #[error("the token names no subject")]
    MissingSubject,
    /// The issuer's keys could not be fetched and none are cached: not the client's fault.
    #[error("the identity provider's keys are unavailable; try again")]
    KeysUnavailable,
}

impl JwtError {
    /// The HTTP status to answer with.
    pub fn status(&self) -> u16 {
        match self {
            JwtError::KeysUnavailable => 503,
            _ => 401,
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header value (the scheme is case-insensitive).
pub fn bearer_token(header_value: &str) -> Option<&str> {
    let (scheme, token) = header_value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The claims read from a verified token.
#[derive(Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
    exp: i64,
    #[serde(default)]
    aud: Option<Value>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    locale: Option<Value>,
    #[serde(default)]
    profile: Option<Value>,
}

#[derive(Default)]
struct CachedKeys {
    set: Option<Arc<JwkSet>>,
    fetched_at: Option<Instant>,
    last_attempt: Option<Instant>,
}

/// Verifies tokens of one issuer; build it once per process and share it.
pub struct JwtVerifier {
    config: JwtConfig,
    client: reqwest::Client,
    keys: RwLock<CachedKeys>,
    /// One fetch at a time: concurrent verifications wait for it instead of fetching too.
    refresh: tokio::sync::Mutex<()>,
}

impl JwtVerifier {
    pub fn new(config: JwtConfig, client: reqwest::Client) -> Self {
        Self { config, client, keys: RwLock::default(), refresh: tokio::sync::Mutex::new(()) }
    }

    /// Verifies `token` (without the `Bearer ` prefix) and returns its identity.
    pub async fn verify(&self, token: &str) -> Result<VerifiedClaims, JwtError> {
        if token.is_empty() || token.len() > MAX_TOKEN_BYTES {
            return Err(JwtError::Malformed);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| JwtError::Malformed)?;
        if !ACCEPTED.contains(&header.alg) {
            return Err(JwtError::UnsupportedAlgorithm);
        }
        let kid = header.kid.as_deref().filter(|kid| !kid.is_empty()).ok_or(JwtError::UnknownKey)?;
        let jwk = self.key(kid).await?;
        if !key_allows(&jwk, header.alg) {
            return Err(JwtError::UnsupportedAlgorithm);
        }
        let key = DecodingKey::from_jwk(&jwk).map_err(|_| JwtError::UnknownKey)?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.config.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_required_spec_claims(&["exp", "iss", "sub"]);
        if self.config.audiences.is_empty() {
            validation.validate_aud = false;
        } else {
            validation.set_audience(&self.config.audiences);
        }
        let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(|err| {
            use jsonwebtoken::errors::ErrorKind;
            match err.kind() {
                ErrorKind::InvalidSignature => JwtError::BadSignature,
                ErrorKind::ExpiredSignature => JwtError::Expired,
                ErrorKind::ImmatureSignature => JwtError::NotYetValid,
                ErrorKind::InvalidIssuer => JwtError::WrongIssuer,
                ErrorKind::InvalidAudience => JwtError::WrongAudience,
                ErrorKind::MissingRequiredClaim(claim) if claim == "sub" => JwtError::MissingSubject,
                ErrorKind::MissingRequiredClaim(claim) if claim == "iss" => JwtError::WrongIssuer,
                ErrorKind::InvalidAlgorithm | ErrorKind::UnsupportedAlgorithm => JwtError::UnsupportedAlgorithm,
                _ => JwtError::Malformed,
            }
        })?;
        let claims = claims.claims;
        // A Cognito access token carries `client_id` instead of `aud`.
        if !self.config.audiences.is_empty() && claims.aud.is_none() {
            let client = claims.client_id.as_deref().unwrap_or("");
            if !self.config.audiences.iter().any(|audience| audience == client) {
                return Err(JwtError::WrongAudience);
            }
        }
        let sub = claims.sub.filter(|sub| !sub.trim().is_empty()).ok_or(JwtError::MissingSubject)?;
        let text = |value: Option<Value>| match value {
            Some(Value::String(text)) if !text.trim().is_empty() => Some(text),
            _ => None,
        };
        Ok(VerifiedClaims {
            sub,
            name: text(claims.name),
            locale: text(claims.locale),
            profile: text(claims.profile),
            expires_at: claims.exp,
        })
    }

    /// The key `kid`, from the cached set or a fresh fetch (rate-limited for unknown ids).
    async fn key(&self, kid: &str) -> Result<Jwk, JwtError> {
        if let Some(jwk) = self.cached(kid, true) {
            return Ok(jwk);
        }
        let _fetching = self.refresh.lock().await;
        // Another verification may have fetched while this one waited.
        if let Some(jwk) = self.cached(kid, true) {
            return Ok(jwk);
        }
        let (have_set, fresh, may_fetch) = {
            let keys = self.keys.read().unwrap_or_else(|poisoned| poisoned.into_inner());
            let fresh = keys.fetched_at.is_some_and(|at| at.elapsed() < JWKS_MAX_AGE);
            let may_fetch = keys.last_attempt.is_none_or(|at| at.elapsed() >= self.config.refetch_interval);
            (keys.set.is_some(), fresh, may_fetch)
        };
        if !have_set || !fresh || may_fetch {
            let now = Instant::now();
            match self.fetch().await {
                Ok(set) => {
                    let mut keys = self.keys.write().unwrap_or_else(|poisoned| poisoned.into_inner());
                    *keys = CachedKeys { set: Some(Arc::new(set)), fetched_at: Some(now), last_attempt: Some(now) };
                }
                Err(error) => {
                    tracing::warn!(jwks_url = %self.config.jwks_url, %error, "could not fetch the issuer's keys");
                    let mut keys = self.keys.write().unwrap_or_else(|poisoned| poisoned.into_inner());
                    keys.last_attempt = Some(now);
                    if keys.set.is_none() {
                        return Err(JwtError::KeysUnavailable);
                    }
                }
            }
        }
        self.cached(kid, false).ok_or(JwtError::UnknownKey)
    }

    /// The key `kid` of the cached set; with `fresh_only`, only from a set younger than its max age.
    fn cached(&self, kid: &str, fresh_only: bool) -> Option<Jwk> {
        let keys = self.keys.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        if fresh_only && keys.fetched_at.is_none_or(|at| at.elapsed() >= JWKS_MAX_AGE) {
            return None;
        }
        keys.set.as_ref()?.find(kid).cloned()
    }

    async fn fetch(&self) -> Result<JwkSet, String> {
        let mut response = self
            .client
            .get(&self.config.jwks_url)
            .timeout(JWKS_TIMEOUT)
            .send()
            .await
            .map_err(|err| format!("request failed: {err}"))?;
        if !response.status().is_success() {
            return Err(format!("HTTP {}", response.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|err| format!("reading the body: {err}"))? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(format!("the key set is larger than {MAX_JWKS_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        // Keys this library cannot use are left out rather than failing the whole set.
        let raw: Value = serde_json::from_slice(&body).map_err(|err| format!("not JSON: {err}"))?;
        let keys = raw.get("keys").and_then(Value::as_array).ok_or("no `keys` array")?;
        let keys: Vec<Jwk> = keys.iter().filter_map(|key| serde_json::from_value(key.clone()).ok()).collect();
        Ok(JwkSet { keys })
    }
}

/// Whether a token signed with `alg` may be verified with `jwk`: the key's declared `alg` when it
/// has one, otherwise its key type's family.
fn key_allows(jwk: &Jwk, alg: Algorithm) -> bool {
    if let Some(declared) = &jwk.common.key_algorithm {
        return format!("{declared:?}") == format!("{alg:?}");
    }
    match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => matches!(
            alg,
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
        ),
        AlgorithmParameters::EllipticCurve(_) => matches!(alg, Algorithm::ES256 | Algorithm::ES384),
        AlgorithmParameters::OctetKeyPair(_) => alg == Algorithm::EdDSA,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_and_configuration() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        let config = JwtConfig::from_lookup(|name| match name {
            "JWT_ISSUER" => Some("https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_X/".into()),
            "JWT_AUDIENCE" => Some("a, b,".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(config.audiences, ["a", "b"]);
        assert_eq!(config.jwks_url, "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_X/.well-known/jwks.json");
        assert!(JwtConfig::from_lookup(|_| None).is_err());
        assert!(JwtConfig::from_lookup(|_| Some("http://example.com".into())).is_err());
    }
}
