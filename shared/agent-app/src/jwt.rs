//! Bearer-token (JWT) verification for endpoints with no authorizer in front, such as a Lambda
//! Function URL: the signature against the issuer's JWKS (cached per process, refetched with a rate
//! limit), then the issuer, audience, validity period and subject. Only asymmetric algorithms are
//! accepted, and each key only verifies the algorithms it is published for.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, KeyOperations, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};
use thiserror::Error;
use tokio::time::Instant;
use url::{Host, Url};

use crate::config::ConfigError;

/// Tokens longer than this are refused before any parsing; real ones are a few hundred bytes.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// The clock skew tolerated on `exp` and `nbf` unless configured otherwise.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);
/// A fetched key set is used this long before it is fetched again.
pub const JWKS_MAX_AGE: Duration = Duration::from_secs(60 * 60);
/// The least time between two refetches (for an unknown key id or an expired set), so tokens with
/// made-up key ids cannot turn into a flood of requests to the issuer.
pub const JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// A larger key set is refused: real ones hold a handful of keys.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;
/// A key set fetch, body included, is abandoned after this long.
pub const JWKS_TIMEOUT: Duration = Duration::from_secs(5);

/// The algorithms a token may name: asymmetric only, so a public key can never serve as an HMAC
/// secret, and `none` does not even parse.
const ACCEPTED_ALGORITHMS: [Algorithm; 9] = [
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

const RSA_ALGORITHMS: [Algorithm; 6] =
    [Algorithm::RS256, Algorithm::RS384, Algorithm::RS512, Algorithm::PS256, Algorithm::PS384, Algorithm::PS512];

/// Whose tokens are accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtConfig {
    /// The exact `iss` of accepted tokens.
    pub issuer: String,
    /// Accepted `aud` values (or `client_id` values, for Cognito access tokens); empty to skip the
    /// audience check.
    pub audiences: Vec<String>,
    /// Where the issuer publishes its signing keys.
    pub jwks_url: String,
    /// Clock skew tolerated on `exp` and `nbf`.
    pub leeway: Duration,
}

impl JwtConfig {
    /// Reads `JWT_ISSUER` (required), `JWT_AUDIENCE` (comma-separated, optional) and
    /// `JWT_JWKS_URL` (default `{issuer}/.well-known/jwks.json`, right for Amazon Cognito, Auth0
    /// and Okta).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`JwtConfig::from_env`] through `lookup`, so tests need not touch the process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let setting = |name: &str| lookup(name).map(|value| value.trim().to_owned()).filter(|value| !value.is_empty());
        let issuer = setting("JWT_ISSUER").ok_or_else(|| ConfigError::Invalid {
            name: "JWT_ISSUER",
            reason: "it is required: the identity provider's issuer URL, exactly as in the tokens' `iss`".to_owned(),
        })?;
        check_endpoint("JWT_ISSUER", &issuer)?;
        let audiences = setting("JWT_AUDIENCE")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|audience| !audience.is_empty())
            .map(str::to_owned)
            .collect();
        let jwks_url = setting("JWT_JWKS_URL")
            .unwrap_or_else(|| format!("{}/.well-known/jwks.json", issuer.trim_end_matches('/')));
        check_endpoint("JWT_JWKS_URL", &jwks_url)?;
        Ok(Self { issuer, audiences, jwks_url, leeway: DEFAULT_LEEWAY })
    }
}

/// Keys must come over TLS; plain http is accepted only on the loopback interface, for local tests.
fn check_endpoint(name: &'static str, value: &str) -> Result<(), ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid { name, reason };
    let url = Url::parse(value).map_err(|err| invalid(format!("`{value}` is not a URL: {err}")))?;
    let loopback = match url.host() {
        Some(Host::Ipv4(address)) => address.is_loopback(),
        Some(Host::Ipv6(address)) => address.is_loopback(),
        Some(Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match url.scheme() {
        "https" if url.host().is_some() => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(invalid(format!("expected an https:// URL (plain http only on 127.0.0.1), got `{value}`"))),
    }
}

/// The verified identity of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedClaims {
    pub sub: String,
    pub name: Option<String>,
    pub locale: Option<String>,
    pub profile: Option<String>,
    /// `exp`, in seconds since the Unix epoch.
    pub expires_at: i64,
}

/// Why a token was refused. Every message is safe to show the client: none repeats the token,
/// its claims or any key.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum JwtError {
    #[error("the token is missing or malformed")]
    Malformed,
    #[error("the token's algorithm is not accepted for its key")]
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
    #[error("the identity provider's keys are unavailable; try again later")]
    KeysUnavailable,
}

impl JwtError {
    /// The HTTP status to answer with: 503 when the keys are unavailable, 401 otherwise.
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

/// One usable key of the issuer's set.
struct SigningKey {
    kid: String,
    /// The algorithms this key verifies: the one its JWK declares, or its key type's.
    algorithms: Vec<Algorithm>,
    key: DecodingKey,
}

/// The usable keys of one successful fetch.
struct KeySet {
    keys: Vec<SigningKey>,
    fetched_at: Instant,
}

impl KeySet {
    /// The key `kid` for `algorithm`; `Ok(None)` when no key has that id, so a refetch may help.
    fn find(&self, kid: &str, algorithm: Algorithm) -> Result<Option<DecodingKey>, JwtError> {
        let mut with_id = self.keys.iter().filter(|key| key.kid == kid).peekable();
        if with_id.peek().is_none() {
            return Ok(None);
        }
        // A known key under another algorithm is algorithm confusion, not rotation: no refetch.
        match with_id.find(|key| key.algorithms.contains(&algorithm)) {
            Some(key) => Ok(Some(key.key.clone())),
            None => Err(JwtError::UnsupportedAlgorithm),
        }
    }
}

#[derive(Default)]
struct KeyCache {
    keys: Option<Arc<KeySet>>,
    /// When a fetch was last tried while keys were cached; refetches are rate-limited from it.
    last_refetch: Option<Instant>,
    /// Fetches tried so far, so a verification that waited for another's fetch uses its outcome.
    attempts: u64,
}

/// Verifies the tokens of one issuer. Build it once per process and share it (`Arc`): its key
/// cache is what keeps the issuer from being asked for every request.
pub struct JwtVerifier {
    config: JwtConfig,
    client: reqwest::Client,
    max_age: Duration,
    refetch_interval: Duration,
    cache: Mutex<KeyCache>,
    /// One fetch at a time: concurrent verifications wait for it rather than fetching too.
    fetching: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier").field("config", &self.config).finish_non_exhaustive()
    }
}

impl JwtVerifier {
    /// A verifier with an empty cache: the key set is fetched on first use.
    pub fn new(config: JwtConfig, client: reqwest::Client) -> Self {
        Self {
            config,
            client,
            max_age: JWKS_MAX_AGE,
            refetch_interval: JWKS_REFETCH_INTERVAL,
            cache: Mutex::default(),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// Uses a fetched key set for `max_age` (default [`JWKS_MAX_AGE`]) before fetching it again.
    pub fn with_max_age(mut self, max_age: Duration) -> Self {
        self.max_age = max_age;
        self
    }

    /// Refetches at most once per `interval` (default [`JWKS_REFETCH_INTERVAL`]).
    pub fn with_refetch_interval(mut self, interval: Duration) -> Self {
        self.refetch_interval = interval;
        self
    }

    /// Whose tokens this verifier accepts.
    pub fn config(&self) -> &JwtConfig {
        &self.config
    }

    /// Verifies `token` (without the `Bearer ` prefix) and returns the identity it carries.
    pub async fn verify(&self, token: &str) -> Result<VerifiedClaims, JwtError> {
        if token.is_empty() || token.len() > MAX_TOKEN_BYTES {
            return Err(JwtError::Malformed);
        }
        // `none` and unknown algorithms fail to parse here.
        let header = jsonwebtoken::decode_header(token).map_err(|_| JwtError::Malformed)?;
        if !ACCEPTED_ALGORITHMS.contains(&header.alg) {
            return Err(JwtError::UnsupportedAlgorithm);
        }
        let kid = header.kid.as_deref().filter(|kid| !kid.is_empty()).ok_or(JwtError::UnknownKey)?;
        let key = self.key(kid, header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.config.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp"]);
        // The issuer and the audience are checked below, strictly: the library would also
        // accept an array `iss`, and skips an `aud` of the wrong type.
        validation.validate_aud = false;
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|err| match err.kind() {
                ErrorKind::InvalidSignature => JwtError::BadSignature,
                ErrorKind::ExpiredSignature => JwtError::Expired,
                ErrorKind::ImmatureSignature => JwtError::NotYetValid,
                ErrorKind::InvalidAlgorithm | ErrorKind::UnsupportedAlgorithm => JwtError::UnsupportedAlgorithm,
                _ => JwtError::Malformed,
            })?
            .claims;
        self.identity(claims)
    }

    /// Checks the claims the signature vouches for, and reads the identity from them.
    fn identity(&self, claims: Map<String, Value>) -> Result<VerifiedClaims, JwtError> {
        let text = |name: &str| claims.get(name).and_then(Value::as_str).filter(|value| !value.trim().is_empty());
        if text("iss") != Some(self.config.issuer.as_str()) {
            return Err(JwtError::WrongIssuer);
        }
        if !self.config.audiences.is_empty() {
            let accepted =
                |value: &Value| value.as_str().is_some_and(|value| self.config.audiences.iter().any(|a| a == value));
            let audience_matches = match claims.get("aud") {
                // A Cognito access token names its app client in `client_id` instead of `aud`.
                None | Some(Value::Null) => claims.get("client_id").is_some_and(accepted),
                Some(Value::Array(audiences)) => audiences.iter().any(accepted),
                Some(audience) => accepted(audience),
            };
            if !audience_matches {
                return Err(JwtError::WrongAudience);
            }
        }
        let sub = text("sub").ok_or(JwtError::MissingSubject)?.to_owned();
        // The library has checked that `exp` is a non-negative number.
        let expires_at = claims.get("exp").and_then(|exp| exp.as_i64().or_else(|| exp.as_f64().map(|exp| exp as i64)));
        Ok(VerifiedClaims {
            sub,
            name: text("name").map(str::to_owned),
            locale: text("locale").map(str::to_owned),
            profile: text("profile").map(str::to_owned),
            expires_at: expires_at.ok_or(JwtError::Malformed)?,
        })
    }

    fn cache(&self) -> MutexGuard<'_, KeyCache> {
        // The cache is always left consistent, so a panic elsewhere does not spoil it.
        self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The key `kid` for `algorithm`, from the cache while it is fresh, else after a fetch.
    async fn key(&self, kid: &str, algorithm: Algorithm) -> Result<DecodingKey, JwtError> {
        let (cached, attempts_seen) = {
            let cache = self.cache();
            (cache.keys.clone(), cache.attempts)
        };
        if let Some(keys) = cached.filter(|keys| keys.fetched_at.elapsed() < self.max_age) {
            if let Some(key) = keys.find(kid, algorithm)? {
                return Ok(key);
            }
        }
        let keys = self.refresh(attempts_seen).await?;
        keys.find(kid, algorithm)?.ok_or(JwtError::UnknownKey)
    }

    /// Fetches the key set unless another verification did while this one waited, or the last
    /// refetch is too recent; returns the keys to use (possibly older than their max age, when
    /// the issuer cannot be reached).
    async fn refresh(&self, attempts_seen: u64) -> Result<Arc<KeySet>, JwtError> {
        let _single_flight = self.fetching.lock().await;
        let (cached, attempts, last_refetch) = {
            let cache = self.cache();
            (cache.keys.clone(), cache.attempts, cache.last_refetch)
        };
        if attempts != attempts_seen {
            return cached.ok_or(JwtError::KeysUnavailable);
        }
        if let Some(keys) = &cached {
            if last_refetch.is_some_and(|at| at.elapsed() < self.refetch_interval) {
                return Ok(keys.clone());
            }
        }
        let started = Instant::now();
        let fetched = self.fetch().await;
        let mut cache = self.cache();
        cache.attempts += 1;
        // The first fetch does not count: a key rotated just before a cold start is picked up at once.
        if cache.keys.is_some() {
            cache.last_refetch = Some(started);
        }
        match fetched {
            Ok(keys) => {
                tracing::debug!(keys = keys.len(), "fetched the issuer's keys");
                cache.keys = Some(Arc::new(KeySet { keys, fetched_at: started }));
            }
            // Cached keys, even old ones, beat refusing every caller while the issuer is down.
            Err(error) => tracing::warn!(
                jwks_url = %self.config.jwks_url,
                %error,
                keys_cached = cache.keys.is_some(),
                "could not fetch the issuer's keys"
            ),
        }
        cache.keys.clone().ok_or(JwtError::KeysUnavailable)
    }

    /// The usable keys of the issuer's set, bounded in size and time.
    async fn fetch(&self) -> Result<Vec<SigningKey>, String> {
        let body = tokio::time::timeout(JWKS_TIMEOUT, self.fetch_body())
            .await
            .map_err(|_| format!("no complete answer within {} s", JWKS_TIMEOUT.as_secs()))??;
        #[derive(Deserialize)]
        struct RawKeySet {
            keys: Vec<Value>,
        }
        let raw: RawKeySet = serde_json::from_slice(&body).map_err(|err| format!("not a JWK set: {err}"))?;
        let published = raw.keys.len();
        // Keys that cannot verify signatures (encryption keys, symmetric keys, unknown types)
        // are left out rather than failing the whole set.
        let keys: Vec<SigningKey> = raw.keys.into_iter().filter_map(signing_key).collect();
        if keys.is_empty() {
            return Err(format!("none of its {published} keys can verify token signatures"));
        }
        Ok(keys)
    }

    async fn fetch_body(&self) -> Result<Vec<u8>, String> {
        let mut response = self
            .client
            .get(&self.config.jwks_url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|err| format!("request failed: {err}"))?;
        if !response.status().is_success() {
            return Err(format!("HTTP {}", response.status()));
        }
        let too_large = || format!("the key set is larger than {MAX_JWKS_BYTES} bytes");
        if response.content_length().is_some_and(|length| length > MAX_JWKS_BYTES as u64) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|err| format!("reading the key set: {err}"))? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// A published key this verifier can use, with the algorithms it may verify; `None` for keys
/// without an id, not meant for signatures, symmetric, or of a type or curve not supported.
fn signing_key(value: Value) -> Option<SigningKey> {
    let jwk: Jwk = serde_json::from_value(value).ok()?;
    let kid = jwk.common.key_id.clone().filter(|kid| !kid.is_empty())?;
    if jwk.common.public_key_use.as_ref().is_some_and(|usage| *usage != PublicKeyUse::Signature) {
        return None;
    }
    if jwk.common.key_operations.as_ref().is_some_and(|operations| !operations.contains(&KeyOperations::Verify)) {
        return None;
    }
    let by_key_type: &[Algorithm] = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => &RSA_ALGORITHMS,
        AlgorithmParameters::EllipticCurve(params) => match params.curve {
            EllipticCurve::P256 => &[Algorithm::ES256],
            EllipticCurve::P384 => &[Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(params) if params.curve == EllipticCurve::Ed25519 => &[Algorithm::EdDSA],
        // Symmetric (`oct`) keys above all: a published secret is no secret.
        _ => return None,
    };
    let algorithms = match jwk.common.key_algorithm {
        None => by_key_type.to_vec(),
        // A declared algorithm must also fit the key type, or the key is unusable.
        Some(declared) => vec![*by_key_type.iter().find(|algorithm| KeyAlgorithm::from(**algorithm) == declared)?],
    };
    let key = DecodingKey::from_jwk(&jwk).ok()?;
    Some(SigningKey { kid, algorithms, key })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("BEARER abc"), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearerabc"), None);
        assert_eq!(bearer_token(""), None);
    }

    #[test]
    fn keys_verify_only_their_algorithms() {
        let rsa = json_key(r#"{"kty":"RSA","kid":"r","n":"q0qm","e":"AQAB"}"#).unwrap();
        assert_eq!(rsa.algorithms, RSA_ALGORITHMS);
        let declared = json_key(r#"{"kty":"RSA","kid":"r","alg":"PS384","n":"q0qm","e":"AQAB"}"#).unwrap();
        assert_eq!(declared.algorithms, [Algorithm::PS384]);
        let ec = json_key(r#"{"kty":"EC","kid":"e","crv":"P-384","x":"AA","y":"AA"}"#).unwrap();
        assert_eq!(ec.algorithms, [Algorithm::ES384]);
        // Unusable: a declared algorithm of another key type, an encryption key, a secret, no id.
        assert!(json_key(r#"{"kty":"RSA","kid":"r","alg":"ES256","n":"q0qm","e":"AQAB"}"#).is_none());
        assert!(json_key(r#"{"kty":"RSA","kid":"r","use":"enc","n":"q0qm","e":"AQAB"}"#).is_none());
        assert!(json_key(r#"{"kty":"oct","kid":"s","k":"c2VjcmV0"}"#).is_none());
        assert!(json_key(r#"{"kty":"RSA","n":"q0qm","e":"AQAB"}"#).is_none());
    }

    fn json_key(json: &str) -> Option<SigningKey> {
        signing_key(serde_json::from_str(json).unwrap())
    }
}
