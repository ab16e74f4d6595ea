//! The JWT verifier against a JWKS server on loopback: valid RS256 and ES256 tokens, every claim
//! check, forged and confused tokens, key rotation, the refetch rate limit and an unreachable issuer.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_app::jwt::{JwtConfig, JwtError, JwtVerifier, MAX_TOKEN_BYTES};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

const AUDIENCE: &str = "app-client";

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jwt").join(name);
    std::fs::read(path).expect("fixture")
}

fn jwks(name: &str) -> Value {
    serde_json::from_slice(&fixture(name)).unwrap()
}

#[derive(Clone)]
struct Issuer {
    keys: Arc<Mutex<Value>>,
    requests: Arc<AtomicU64>,
    down: Arc<AtomicBool>,
}

async fn serve(State(issuer): State<Issuer>) -> Response {
    issuer.requests.fetch_add(1, Ordering::SeqCst);
    if issuer.down.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    Json(issuer.keys.lock().unwrap().clone()).into_response()
}

struct Setup {
    issuer: Issuer,
    url: String,
    verifier: JwtVerifier,
}

async fn setup() -> Setup {
    let issuer =
        Issuer { keys: Arc::new(Mutex::new(jwks("jwks.json"))), requests: Arc::default(), down: Arc::default() };
    let app = Router::new().route("/.well-known/jwks.json", get(serve)).with_state(issuer.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let config = JwtConfig::from_lookup(|name| match name {
        "JWT_ISSUER" => Some(url.clone()),
        "JWT_AUDIENCE" => Some(AUDIENCE.to_owned()),
        _ => None,
    })
    .unwrap();
    Setup { issuer, url, verifier: JwtVerifier::new(config, reqwest::Client::new()) }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

fn sign(alg: Algorithm, kid: &str, key: &str, claims: Value) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_owned());
    let pem = fixture(key);
    let key = match alg {
        Algorithm::ES256 => EncodingKey::from_ec_pem(&pem).unwrap(),
        _ => EncodingKey::from_rsa_pem(&pem).unwrap(),
    };
    jsonwebtoken::encode(&header, &claims, &key).unwrap()
}

impl Setup {
    fn claims(&self) -> Value {
        json!({"iss": self.url, "sub": "user-1", "aud": AUDIENCE, "exp": now() + 600, "name": "Ana", "locale": "es"})
    }

    fn token(&self, change: impl FnOnce(&mut Value)) -> String {
        let mut claims = self.claims();
        change(&mut claims);
        sign(Algorithm::RS256, "test-rsa-1", "rsa-private.pem", claims)
    }

    fn fetches(&self) -> u64 {
        self.issuer.requests.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn valid_rsa_and_ec_tokens_give_their_claims() {
    let setup = setup().await;
    let claims = setup.verifier.verify(&setup.token(|_| {})).await.unwrap();
    assert_eq!(claims.sub, "user-1");
    assert_eq!(claims.name.as_deref(), Some("Ana"));
    assert_eq!(claims.locale.as_deref(), Some("es"));
    let ec = sign(Algorithm::ES256, "test-ec-1", "ec-private.pem", setup.claims());
    assert_eq!(setup.verifier.verify(&ec).await.unwrap().sub, "user-1");
    assert_eq!(setup.fetches(), 1, "the key set is cached");
    // A Cognito access token names its client in `client_id` instead of `aud`.
    let access = setup.token(|claims| {
        claims.as_object_mut().unwrap().remove("aud");
        claims["client_id"] = json!(AUDIENCE);
    });
    assert!(setup.verifier.verify(&access).await.is_ok());
    let other_client = setup.token(|claims| {
        claims.as_object_mut().unwrap().remove("aud");
        claims["client_id"] = json!("other");
    });
    assert_eq!(setup.verifier.verify(&other_client).await, Err(JwtError::WrongAudience));
}

#[tokio::test]
async fn every_claim_is_checked() {
    let setup = &setup().await;
    let verify = |token: String| async move { setup.verifier.verify(&token).await.map(|claims| claims.sub) };
    assert_eq!(verify(setup.token(|c| c["exp"] = json!(now() - 120))).await, Err(JwtError::Expired));
    assert_eq!(verify(setup.token(|c| c["nbf"] = json!(now() + 600))).await, Err(JwtError::NotYetValid));
    assert_eq!(verify(setup.token(|c| c["iss"] = json!("https://evil.example"))).await, Err(JwtError::WrongIssuer));
    assert_eq!(verify(setup.token(|c| c["aud"] = json!("another-app"))).await, Err(JwtError::WrongAudience));
    assert_eq!(verify(setup.token(|c| c["aud"] = json!(["x", AUDIENCE]))).await, Ok("user-1".to_owned()));
    let no_sub = setup.token(|c| {
        c.as_object_mut().unwrap().remove("sub");
    });
    assert_eq!(verify(no_sub).await, Err(JwtError::MissingSubject));
    assert_eq!(verify(setup.token(|c| c["sub"] = json!(""))).await, Err(JwtError::MissingSubject));
    // Inside the leeway, a just-expired token still passes.
    assert!(verify(setup.token(|c| c["exp"] = json!(now() - 10))).await.is_ok());
}

#[tokio::test]
async fn forged_and_confused_tokens_are_refused() {
    let setup = setup().await;
    // Signed by another key under a known key id.
    let forged = sign(Algorithm::RS256, "test-rsa-1", "rsa-other-private.pem", setup.claims());
    assert_eq!(setup.verifier.verify(&forged).await, Err(JwtError::BadSignature));
    // `alg: none`, and HS256 keyed with the public key's bytes (algorithm confusion).
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let payload = engine.encode(setup.claims().to_string());
    let none = format!("{}.{payload}.", engine.encode(r#"{"alg":"none","kid":"test-rsa-1"}"#));
    assert_eq!(setup.verifier.verify(&none).await, Err(JwtError::Malformed));
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("test-rsa-1".to_owned());
    let public = jwks("jwks.json")["keys"][0]["n"].as_str().unwrap().to_owned();
    let confused =
        jsonwebtoken::encode(&header, &setup.claims(), &EncodingKey::from_secret(public.as_bytes())).unwrap();
    assert_eq!(setup.verifier.verify(&confused).await, Err(JwtError::UnsupportedAlgorithm));
    // An RSA key id under an EC algorithm.
    let mixed = sign(Algorithm::ES256, "test-rsa-1", "ec-private.pem", setup.claims());
    assert_eq!(setup.verifier.verify(&mixed).await, Err(JwtError::UnsupportedAlgorithm));
    // Too long: refused before any parsing or fetching.
    let fetched = setup.fetches();
    assert_eq!(setup.verifier.verify(&"a".repeat(MAX_TOKEN_BYTES + 1024)).await, Err(JwtError::Malformed));
    assert_eq!(setup.verifier.verify("not.a.token").await, Err(JwtError::Malformed));
    assert_eq!(setup.fetches(), fetched);
}

#[tokio::test]
async fn rotation_is_followed_and_unknown_key_ids_are_rate_limited() {
    let setup = setup().await;
    assert!(setup.verifier.verify(&setup.token(|_| {})).await.is_ok());
    assert_eq!(setup.fetches(), 1);
    // Tokens with made-up key ids: at most one extra fetch within the interval.
    for n in 0..20 {
        let token = sign(Algorithm::RS256, &format!("random-{n}"), "rsa-private.pem", setup.claims());
        assert_eq!(setup.verifier.verify(&token).await, Err(JwtError::UnknownKey));
    }
    assert_eq!(setup.fetches(), 1, "no refetch within the interval of the last fetch");
    // A new key published by the issuer is used once a refetch is allowed.
    let mut config = JwtConfig::from_lookup(|name| match name {
        "JWT_ISSUER" => Some(setup.url.clone()),
        "JWT_AUDIENCE" => Some(AUDIENCE.to_owned()),
        _ => None,
    })
    .unwrap();
    config.refetch_interval = Duration::from_millis(200);
    let fresh = JwtVerifier::new(config, reqwest::Client::new());
    assert!(fresh.verify(&setup.token(|_| {})).await.is_ok());
    let mut rotated = jwks("jwks.json");
    let added = jwks("jwks-rotated.json")["keys"][0].clone();
    rotated["keys"].as_array_mut().unwrap().push(added);
    *setup.issuer.keys.lock().unwrap() = rotated;
    let new_key = sign(Algorithm::RS256, "test-rsa-2", "rsa-other-private.pem", setup.claims());
    let before = setup.fetches();
    assert_eq!(fresh.verify(&new_key).await, Err(JwtError::UnknownKey), "too soon to refetch");
    assert_eq!(setup.fetches(), before);
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(fresh.verify(&new_key).await.unwrap().sub, "user-1");
    assert_eq!(setup.fetches(), before + 1);
}

#[tokio::test]
async fn an_unreachable_issuer_is_a_503_unless_keys_are_cached() {
    let setup = setup().await;
    setup.issuer.down.store(true, Ordering::SeqCst);
    let error = setup.verifier.verify(&setup.token(|_| {})).await.unwrap_err();
    assert_eq!(error, JwtError::KeysUnavailable);
    assert_eq!(error.status(), 503);
    // Back up: with nothing cached the next verification fetches again (one at a time).
    setup.issuer.down.store(false, Ordering::SeqCst);
    let cached = &setup.verifier;
    assert!(cached.verify(&setup.token(|_| {})).await.is_ok());
    setup.issuer.down.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(cached.verify(&setup.token(|_| {})).await.is_ok(), "cached keys keep working");
    assert_eq!(JwtError::BadSignature.status(), 401);
}
