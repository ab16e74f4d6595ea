//! The JWT verifier against a JWKS server on loopback that counts its requests and can change its
//! keys or fail: valid RS256 and ES256 tokens, every claim check, forged and confused tokens, key
//! rotation, the refetch rate limit, single-flight fetches and an unreachable issuer.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_app::jwt::{bearer_token, JwtConfig, JwtError, JwtVerifier, MAX_TOKEN_BYTES};
use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

const AUDIENCE: &str = "app-client";
const RSA_KID: &str = "test-rsa-1";
const EC_KID: &str = "test-ec-1";
const ROTATED_KID: &str = "test-rsa-2";

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jwt").join(name);
    std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn jwks(name: &str) -> Value {
    serde_json::from_slice(&fixture(name)).unwrap()
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// The identity provider's JWKS endpoint, with switches for the tests.
#[derive(Clone)]
struct Issuer {
    keys: Arc<Mutex<Value>>,
    requests: Arc<AtomicU64>,
    down: Arc<AtomicBool>,
    /// Milliseconds each answer takes, so concurrent verifications overlap with a fetch.
    delay_ms: Arc<AtomicU64>,
    /// Sends the key set in chunks without a `Content-Length`, as a hostile server could.
    chunked: Arc<AtomicBool>,
}

impl Issuer {
    fn publish(&self, keys: Value) {
        *self.keys.lock().unwrap() = keys;
    }
}

async fn serve_keys(State(issuer): State<Issuer>) -> Response {
    issuer.requests.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(issuer.delay_ms.load(Ordering::SeqCst))).await;
    if issuer.down.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let keys = issuer.keys.lock().unwrap().clone();
    if issuer.chunked.load(Ordering::SeqCst) {
        let body = keys.to_string().into_bytes();
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = body.chunks(16 * 1024).map(|c| Ok(c.to_vec())).collect();
        return Body::from_stream(futures::stream::iter(chunks)).into_response();
    }
    Json(keys).into_response()
}

struct Setup {
    issuer: Issuer,
    /// The issuer URL, `http://127.0.0.1:{port}`, which is also the tokens' `iss`.
    url: String,
    verifier: JwtVerifier,
}

async fn setup() -> Setup {
    let issuer = Issuer {
        keys: Arc::new(Mutex::new(jwks("jwks.json"))),
        requests: Arc::default(),
        down: Arc::default(),
        delay_ms: Arc::default(),
        chunked: Arc::default(),
    };
    let app = Router::new().route("/.well-known/jwks.json", get(serve_keys)).with_state(issuer.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let verifier = JwtVerifier::new(config(&url, AUDIENCE), reqwest::Client::new());
    Setup { issuer, url, verifier }
}

fn config(issuer: &str, audience: &str) -> JwtConfig {
    JwtConfig::from_lookup(|name| match name {
        "JWT_ISSUER" => Some(issuer.to_owned()),
        "JWT_AUDIENCE" => Some(audience.to_owned()),
        _ => None,
    })
    .unwrap()
}

fn sign(alg: Algorithm, kid: &str, key_file: &str, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_owned());
    let pem = fixture(key_file);
    let key = match alg {
        Algorithm::ES256 | Algorithm::ES384 => EncodingKey::from_ec_pem(&pem).unwrap(),
        _ => EncodingKey::from_rsa_pem(&pem).unwrap(),
    };
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

/// A token assembled by hand, for headers the library refuses to produce.
fn raw_token(header: Value, claims: &Value, signature: &[u8]) -> String {
    let part = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
    format!("{}.{}.{}", part(header.to_string().as_bytes()), part(claims.to_string().as_bytes()), part(signature))
}

impl Setup {
    fn claims(&self) -> Value {
        json!({
            "iss": self.url,
            "sub": "user-1",
            "aud": AUDIENCE,
            "exp": now() + 600,
            "iat": now(),
            "name": "Ana",
            "locale": "es",
            "profile": "Writes about birds.",
        })
    }

    /// An RS256 token under the published RSA key, with `change` applied to the usual claims.
    fn token(&self, change: impl FnOnce(&mut Value)) -> String {
        let mut claims = self.claims();
        change(&mut claims);
        sign(Algorithm::RS256, RSA_KID, "rsa-private.pem", &claims)
    }

    fn fetches(&self) -> u64 {
        self.issuer.requests.load(Ordering::SeqCst)
    }

    async fn verify(&self, token: &str) -> Result<String, JwtError> {
        self.verifier.verify(token).await.map(|claims| claims.sub)
    }

    async fn verify_owned(&self, token: String) -> Result<String, JwtError> {
        self.verify(&token).await
    }

    /// Another verifier of the same issuer, with an empty cache.
    fn fresh_verifier(&self) -> JwtVerifier {
        JwtVerifier::new(config(&self.url, AUDIENCE), reqwest::Client::new())
    }
}

fn remove(claims: &mut Value, name: &str) {
    claims.as_object_mut().unwrap().remove(name);
}

#[tokio::test]
async fn valid_rsa_and_ec_tokens_give_their_claims() {
    let setup = setup().await;
    let exp = now() + 600;
    let claims = setup.verifier.verify(&setup.token(|claims| claims["exp"] = json!(exp))).await.unwrap();
    assert_eq!(claims.sub, "user-1");
    assert_eq!(claims.name.as_deref(), Some("Ana"));
    assert_eq!(claims.locale.as_deref(), Some("es"));
    assert_eq!(claims.profile.as_deref(), Some("Writes about birds."));
    assert_eq!(claims.expires_at, exp);
    let ec = sign(Algorithm::ES256, EC_KID, "ec-private.pem", &setup.claims());
    assert_eq!(setup.verify(&ec).await, Ok("user-1".to_owned()));
    assert_eq!(setup.fetches(), 1, "the key set is fetched once and cached");
    // Claims that are not strings are left out rather than failing the token.
    let odd = setup.verifier.verify(&setup.token(|claims| claims["name"] = json!({"given": "Ana"}))).await.unwrap();
    assert_eq!(odd.name, None);
}

#[tokio::test]
async fn every_claim_is_checked() {
    let setup = setup().await;
    let verify = |change: fn(&mut Value)| setup.verify_owned(setup.token(change));
    assert_eq!(verify(|c| c["exp"] = json!(now() - 120)).await, Err(JwtError::Expired));
    assert_eq!(verify(|c| c["exp"] = json!(now() - 10)).await, Ok("user-1".into()), "within the leeway");
    assert_eq!(verify(|c| remove(c, "exp")).await, Err(JwtError::Malformed), "exp is required");
    assert_eq!(verify(|c| c["nbf"] = json!(now() + 600)).await, Err(JwtError::NotYetValid));
    assert_eq!(verify(|c| c["nbf"] = json!(now() + 10)).await, Ok("user-1".into()), "within the leeway");
    assert_eq!(verify(|c| c["iss"] = json!("https://evil.example")).await, Err(JwtError::WrongIssuer));
    assert_eq!(verify(|c| remove(c, "iss")).await, Err(JwtError::WrongIssuer));
    let issuers_array = setup.token(|c| c["iss"] = json!([c["iss"].clone(), "https://evil.example"]));
    assert_eq!(setup.verify(&issuers_array).await, Err(JwtError::WrongIssuer), "iss must be the one string");
    assert_eq!(verify(|c| c["aud"] = json!("another-app")).await, Err(JwtError::WrongAudience));
    assert_eq!(verify(|c| c["aud"] = json!(["x", AUDIENCE])).await, Ok("user-1".into()));
    assert_eq!(verify(|c| c["aud"] = json!(["x", "y"])).await, Err(JwtError::WrongAudience));
    assert_eq!(verify(|c| c["aud"] = json!(7)).await, Err(JwtError::WrongAudience));
    assert_eq!(verify(|c| remove(c, "sub")).await, Err(JwtError::MissingSubject));
    assert_eq!(verify(|c| c["sub"] = json!("")).await, Err(JwtError::MissingSubject));
    assert_eq!(verify(|c| c["sub"] = json!(42)).await, Err(JwtError::MissingSubject));
}

#[tokio::test]
async fn cognito_access_tokens_name_their_client_instead_of_an_audience() {
    let setup = setup().await;
    let verify = |change: fn(&mut Value)| setup.verify_owned(setup.token(change));
    let access = |client: &'static str| {
        move |claims: &mut Value| {
            remove(claims, "aud");
            claims["client_id"] = json!(client);
            claims["token_use"] = json!("access");
        }
    };
    assert_eq!(setup.verify(&setup.token(access(AUDIENCE))).await, Ok("user-1".into()));
    assert_eq!(setup.verify(&setup.token(access("other-client"))).await, Err(JwtError::WrongAudience));
    assert_eq!(verify(|c| remove(c, "aud")).await, Err(JwtError::WrongAudience), "neither aud nor client_id");
    // With an `aud`, `client_id` does not stand in for it.
    assert_eq!(
        verify(|c| {
            c["aud"] = json!([]);
            c["client_id"] = json!(AUDIENCE);
        })
        .await,
        Err(JwtError::WrongAudience)
    );
}

#[tokio::test]
async fn without_configured_audiences_the_audience_is_not_checked() {
    let setup = setup().await;
    let verifier = JwtVerifier::new(config(&setup.url, " "), reqwest::Client::new());
    for token in [setup.token(|c| c["aud"] = json!("anything")), setup.token(|c| remove(c, "aud"))] {
        assert_eq!(verifier.verify(&token).await.unwrap().sub, "user-1");
    }
}

#[tokio::test]
async fn forged_and_confused_tokens_are_refused() {
    let setup = setup().await;
    // `alg: none`, and HS256 keyed with the RSA public key's PEM (algorithm confusion): refused
    // before the keys are even fetched.
    let none = raw_token(json!({"alg": "none", "typ": "JWT", "kid": RSA_KID}), &setup.claims(), b"");
    assert_eq!(setup.verify(&none).await, Err(JwtError::Malformed));
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(RSA_KID.to_owned());
    let public_pem = fixture("rsa-public.pem");
    let confused = jsonwebtoken::encode(&header, &setup.claims(), &EncodingKey::from_secret(&public_pem)).unwrap();
    assert_eq!(setup.verify(&confused).await, Err(JwtError::UnsupportedAlgorithm));
    assert_eq!(setup.fetches(), 0);

    // Signed by another key under the known key id, or altered after signing.
    let forged = sign(Algorithm::RS256, RSA_KID, "rsa-other-private.pem", &setup.claims());
    assert_eq!(setup.verify(&forged).await, Err(JwtError::BadSignature));
    let genuine = setup.token(|_| {});
    let parts: Vec<&str> = genuine.split('.').collect();
    let mut altered = setup.claims();
    altered["sub"] = json!("admin");
    let altered = format!("{}.{}.{}", parts[0], URL_SAFE_NO_PAD.encode(altered.to_string()), parts[2]);
    assert_eq!(setup.verify(&altered).await, Err(JwtError::BadSignature));

    // The header's algorithm must agree with the key: its declared `alg`, else its type and curve.
    let rs384 = sign(Algorithm::RS384, RSA_KID, "rsa-private.pem", &setup.claims());
    assert_eq!(setup.verify(&rs384).await, Err(JwtError::UnsupportedAlgorithm), "the JWK declares RS256");
    let ec_under_rsa = sign(Algorithm::ES256, RSA_KID, "ec-private.pem", &setup.claims());
    assert_eq!(setup.verify(&ec_under_rsa).await, Err(JwtError::UnsupportedAlgorithm));
    let wrong_curve = raw_token(json!({"alg": "ES384", "kid": EC_KID}), &setup.claims(), &[7; 96]);
    assert_eq!(setup.verify(&wrong_curve).await, Err(JwtError::UnsupportedAlgorithm), "the key is P-256");
    assert_eq!(setup.fetches(), 1, "a known key under the wrong algorithm is no reason to refetch");

    // A symmetric key published under a known id is never used, not even for HS256.
    let mut keys = jwks("jwks.json");
    let secret = b"published-secret";
    keys["keys"]
        .as_array_mut()
        .unwrap()
        .insert(0, json!({"kty": "oct", "kid": RSA_KID, "k": URL_SAFE_NO_PAD.encode(secret)}));
    setup.issuer.publish(keys);
    let fresh = setup.fresh_verifier();
    let hs256 = jsonwebtoken::encode(&header, &setup.claims(), &EncodingKey::from_secret(secret)).unwrap();
    assert_eq!(fresh.verify(&hs256).await.map(|c| c.sub), Err(JwtError::UnsupportedAlgorithm));
    assert_eq!(fresh.verify(&genuine).await.map(|c| c.sub), Ok("user-1".into()), "the RSA key still works");

    // Garbage of every kind is malformed, and costs no fetch.
    let fetched = setup.fetches();
    for garbage in ["", "not.a.token", "a.b", "....", "eyJhbGciOiJSUzI1NiJ9.e30"] {
        assert_eq!(setup.verify(garbage).await, Err(JwtError::Malformed), "{garbage:?}");
    }
    let no_kid = sign(Algorithm::RS256, "", "rsa-private.pem", &setup.claims());
    assert_eq!(setup.verify(&no_kid).await, Err(JwtError::UnknownKey));
    assert_eq!(setup.fetches(), fetched);
}

#[tokio::test]
async fn an_oversized_token_is_refused_before_any_fetch() {
    let setup = setup().await;
    let oversized = setup.token(|claims| claims["padding"] = json!("x".repeat(9 * 1024)));
    assert!(oversized.len() > MAX_TOKEN_BYTES);
    assert_eq!(setup.verify(&oversized).await, Err(JwtError::Malformed));
    assert_eq!(setup.fetches(), 0);
}

#[tokio::test]
async fn an_unknown_key_id_triggers_one_refetch_and_a_rotated_key_is_accepted() {
    let setup = setup().await;
    assert!(setup.verify(&setup.token(|_| {})).await.is_ok());
    assert_eq!(setup.fetches(), 1);
    let unknown = sign(Algorithm::RS256, "unknown-kid", "rsa-private.pem", &setup.claims());
    assert_eq!(setup.verify(&unknown).await, Err(JwtError::UnknownKey));
    assert_eq!(setup.fetches(), 2, "one refetch for the unknown key id");

    let rotation = setup.fresh_verifier();
    assert!(rotation.verify(&setup.token(|_| {})).await.is_ok());
    let mut rotated = jwks("jwks.json");
    rotated["keys"].as_array_mut().unwrap().push(jwks("jwks-rotated.json")["keys"][0].clone());
    setup.issuer.publish(rotated);
    let new_key = sign(Algorithm::RS256, ROTATED_KID, "rsa-other-private.pem", &setup.claims());
    let before = setup.fetches();
    assert_eq!(rotation.verify(&new_key).await.unwrap().sub, "user-1");
    assert_eq!(setup.fetches(), before + 1);
    assert!(rotation.verify(&new_key).await.is_ok());
    assert_eq!(setup.fetches(), before + 1, "the new key is cached too");
}

#[tokio::test]
async fn a_flood_of_unknown_key_ids_costs_at_most_one_fetch_per_interval() {
    let setup = setup().await;
    let verifier = setup.fresh_verifier().with_refetch_interval(Duration::from_millis(400));
    assert!(verifier.verify(&setup.token(|_| {})).await.is_ok());
    let random_kid = |n: u32| sign(Algorithm::RS256, &format!("random-{n}"), "rsa-private.pem", &setup.claims());
    for n in 0..25 {
        assert_eq!(verifier.verify(&random_kid(n)).await.map(|c| c.sub), Err(JwtError::UnknownKey));
    }
    assert_eq!(setup.fetches(), 2, "the first fetch and one refetch");
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert_eq!(verifier.verify(&random_kid(99)).await.map(|c| c.sub), Err(JwtError::UnknownKey));
    assert_eq!(setup.fetches(), 3, "one more refetch once the interval has passed");
}

#[tokio::test]
async fn concurrent_verifications_share_one_fetch() {
    let setup = setup().await;
    setup.issuer.delay_ms.store(200, Ordering::SeqCst);
    let verifier = Arc::new(setup.fresh_verifier());
    let mut tasks = Vec::new();
    for n in 0..10 {
        let (verifier, token) = (verifier.clone(), setup.token(|c| c["sub"] = json!(format!("user-{n}"))));
        tasks.push(tokio::spawn(async move { verifier.verify(&token).await }));
    }
    for task in tasks {
        assert!(task.await.unwrap().is_ok());
    }
    assert_eq!(setup.fetches(), 1);

    // Failures are shared too: waiting verifications do not each retry the fetch.
    setup.issuer.down.store(true, Ordering::SeqCst);
    let verifier = Arc::new(setup.fresh_verifier());
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let (verifier, token) = (verifier.clone(), setup.token(|_| {}));
        tasks.push(tokio::spawn(async move { verifier.verify(&token).await }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), Err(JwtError::KeysUnavailable));
    }
    assert_eq!(setup.fetches(), 2);
}

#[tokio::test]
async fn an_unreachable_issuer_is_a_503_unless_keys_are_cached() {
    let setup = setup().await;
    setup.issuer.down.store(true, Ordering::SeqCst);
    let error = setup.verify(&setup.token(|_| {})).await.unwrap_err();
    assert_eq!(error, JwtError::KeysUnavailable);
    assert_eq!(error.status(), 503);
    // With nothing cached the next verification tries again.
    setup.issuer.down.store(false, Ordering::SeqCst);
    assert!(setup.verify(&setup.token(|_| {})).await.is_ok());
    setup.issuer.down.store(true, Ordering::SeqCst);
    assert!(setup.verify(&setup.token(|_| {})).await.is_ok(), "cached keys keep working");
    let unknown = sign(Algorithm::RS256, "unknown-kid", "rsa-private.pem", &setup.claims());
    let error = setup.verify(&unknown).await.unwrap_err();
    assert_eq!((error.clone(), error.status()), (JwtError::UnknownKey, 401), "a failed refetch keeps the cached keys");
}

#[tokio::test]
async fn expired_keys_are_refreshed_and_kept_while_the_issuer_is_down() {
    let setup = setup().await;
    let verifier = setup
        .fresh_verifier()
        .with_max_age(Duration::from_millis(200))
        .with_refetch_interval(Duration::from_millis(100));
    let token = setup.token(|_| {});
    assert!(verifier.verify(&token).await.is_ok());
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(verifier.verify(&token).await.is_ok());
    assert_eq!(setup.fetches(), 2, "an expired key set is fetched again");
    setup.issuer.down.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(verifier.verify(&token).await.is_ok(), "old keys beat refusing everyone");
    assert!(verifier.verify(&token).await.is_ok());
    assert_eq!(setup.fetches(), 3, "a failed refresh is not retried within the refetch interval");
}

#[tokio::test]
async fn oversized_or_unusable_key_sets_are_refused() {
    let setup = setup().await;
    let token = setup.token(|_| {});
    // Each key set is tried by a verifier with nothing cached.
    let verify_with_fresh_cache = || async { setup.fresh_verifier().verify(&token).await.map(|claims| claims.sub) };
    let mut padded = jwks("jwks.json");
    padded["padding"] = json!("x".repeat(300 * 1024));
    setup.issuer.publish(padded);
    assert_eq!(verify_with_fresh_cache().await, Err(JwtError::KeysUnavailable));
    // Without a `Content-Length` the body is cut off as it is read.
    setup.issuer.chunked.store(true, Ordering::SeqCst);
    assert_eq!(verify_with_fresh_cache().await, Err(JwtError::KeysUnavailable));
    setup.issuer.publish(jwks("jwks.json"));
    assert_eq!(verify_with_fresh_cache().await, Ok("user-1".into()), "a chunked key set of normal size is fine");
    setup.issuer.chunked.store(false, Ordering::SeqCst);
    setup.issuer.publish(json!({"keys": [{"kty": "oct", "kid": RSA_KID, "k": "c2VjcmV0"}]}));
    assert_eq!(verify_with_fresh_cache().await, Err(JwtError::KeysUnavailable), "no usable key");
    setup.issuer.publish(json!({"not": "a key set"}));
    assert_eq!(verify_with_fresh_cache().await, Err(JwtError::KeysUnavailable));
    assert_eq!(setup.fetches(), 5);
}

#[tokio::test]
async fn error_messages_reveal_nothing_of_the_token() {
    let setup = setup().await;
    let token = setup.token(|c| c["aud"] = json!("secret-audience"));
    let error = setup.verifier.verify(&token).await.unwrap_err();
    let message = error.to_string();
    assert_eq!(error, JwtError::WrongAudience);
    for secret in ["secret-audience", "user-1", RSA_KID, &token[..20]] {
        assert!(!message.contains(secret), "{message}");
    }
    assert_eq!(JwtError::BadSignature.status(), 401);
}

/// A lookup over fixed settings, standing in for the process environment.
fn settings<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string())
}

#[test]
fn configuration_from_the_environment() {
    let cognito = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Abc";
    let config = JwtConfig::from_lookup(settings(&[("JWT_ISSUER", cognito), ("JWT_AUDIENCE", " a, b,,")])).unwrap();
    assert_eq!(config.issuer, cognito);
    assert_eq!(config.audiences, ["a", "b"]);
    assert_eq!(config.jwks_url, format!("{cognito}/.well-known/jwks.json"));
    assert_eq!(config.leeway, Duration::from_secs(60));
    let auth0 = JwtConfig::from_lookup(settings(&[("JWT_ISSUER", "https://tenant.eu.auth0.com/")])).unwrap();
    assert_eq!(auth0.issuer, "https://tenant.eu.auth0.com/", "kept exactly: it is compared with `iss`");
    assert_eq!(auth0.jwks_url, "https://tenant.eu.auth0.com/.well-known/jwks.json");
    assert!(auth0.audiences.is_empty());
    let custom = JwtConfig::from_lookup(settings(&[
        ("JWT_ISSUER", "https://id.example"),
        ("JWT_JWKS_URL", "https://id.example/oauth2/v1/keys"),
    ]))
    .unwrap();
    assert_eq!(custom.jwks_url, "https://id.example/oauth2/v1/keys");
    assert!(JwtConfig::from_lookup(settings(&[("JWT_ISSUER", "http://127.0.0.1:8080")])).is_ok());

    let refused = |pairs: &[(&str, &str)]| JwtConfig::from_lookup(settings(pairs)).unwrap_err().to_string();
    assert!(refused(&[]).contains("JWT_ISSUER"));
    assert!(refused(&[("JWT_ISSUER", "  ")]).contains("JWT_ISSUER"));
    assert!(refused(&[("JWT_ISSUER", "http://id.example")]).contains("https"));
    assert!(refused(&[("JWT_ISSUER", "http://127.0.0.1.evil.example")]).contains("JWT_ISSUER"));
    assert!(refused(&[("JWT_ISSUER", "id.example")]).contains("JWT_ISSUER"));
    let plain_keys = [("JWT_ISSUER", "https://id.example"), ("JWT_JWKS_URL", "http://keys.example/jwks")];
    assert!(refused(&plain_keys).contains("JWT_JWKS_URL"));
}

#[test]
fn bearer_tokens_are_read_from_the_authorization_header() {
    assert_eq!(bearer_token("Bearer abc.def.ghi"), Some("abc.def.ghi"));
    assert_eq!(bearer_token("bearer abc"), Some("abc"));
    assert_eq!(bearer_token("Basic dXNlcjpwYXNz"), None);
    assert_eq!(bearer_token("Bearer"), None);
}
