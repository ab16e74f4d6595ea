//! An identity provider on loopback: serves a JWKS at `{issuer}/.well-known/jwks.json`, as Amazon
//! Cognito and other OIDC issuers do, and signs tokens with the matching (test-only) private key.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use crate::stack::repo_root;

/// The audience (app client id) tokens are issued for, and the one the functions accept.
pub const AUDIENCE: &str = "agent-test-client";

/// A running identity provider.
pub struct IdentityProvider {
    pub issuer: String,
    key: EncodingKey,
    kid: String,
    jwks_requests: Arc<AtomicU64>,
}

struct Keys {
    jwks: Value,
    requests: Arc<AtomicU64>,
}

impl IdentityProvider {
    pub async fn start() -> IdentityProvider {
        let fixtures = repo_root().join("shared/agent-app/tests/fixtures/jwt");
        let pem = std::fs::read(fixtures.join(RSA_PRIVATE_KEY)).expect("test RSA key");
        let jwks: Value =
            serde_json::from_slice(&std::fs::read(fixtures.join(JWKS)).expect("test JWKS")).expect("JWKS is JSON");
        let kid = jwks["keys"]
            .as_array()
            .and_then(|keys| keys.iter().find(|key| key["kty"] == "RSA"))
            .and_then(|key| key["kid"].as_str())
            .expect("an RSA key with a kid")
            .to_owned();
        let requests = Arc::new(AtomicU64::new(0));
        let state = Arc::new(Keys { jwks, requests: requests.clone() });
        let app = Router::new().route("/.well-known/jwks.json", get(serve_jwks)).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind identity provider");
        let address = listener.local_addr().expect("identity provider address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        IdentityProvider {
            issuer: format!("http://{address}"),
            key: EncodingKey::from_rsa_pem(&pem).expect("RSA PEM"),
            kid,
            jwks_requests: requests,
        }
    }

    /// What a function needs to verify this provider's tokens.
    pub fn env(&self) -> Vec<(&'static str, &str)> {
        vec![("JWT_ISSUER", self.issuer.as_str()), ("JWT_AUDIENCE", AUDIENCE)]
    }

    /// A valid token for `sub`, good for an hour.
    pub fn token(&self, sub: &str) -> String {
        self.sign(json!({"sub": sub, "aud": AUDIENCE, "exp": now() + 3600, "name": "Ana García", "locale": "es"}))
    }

    /// A valid token for `sub`, good for `seconds` (`cargo xtask local` hands out one for a working day).
    pub fn token_valid_for(&self, sub: &str, seconds: u64) -> String {
        self.sign(json!({"sub": sub, "aud": AUDIENCE, "exp": now() + seconds, "name": "Ana García", "locale": "es"}))
    }

    /// A token for `sub` issued to another application.
    pub fn token_for_audience(&self, sub: &str, audience: &str) -> String {
        self.sign(json!({"sub": sub, "aud": audience, "exp": now() + 3600}))
    }

    /// A token for `sub` that expired ten minutes ago.
    pub fn expired_token(&self, sub: &str) -> String {
        self.sign(json!({"sub": sub, "aud": AUDIENCE, "exp": now() - 600}))
    }

    /// How many times the JWKS was fetched.
    pub fn jwks_requests(&self) -> u64 {
        self.jwks_requests.load(Ordering::SeqCst)
    }

    fn sign(&self, mut claims: Value) -> String {
        claims["iss"] = json!(self.issuer);
        claims["iat"] = json!(now());
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, &claims, &self.key).expect("sign a token")
    }
}

async fn serve_jwks(State(keys): State<Arc<Keys>>) -> Json<Value> {
    keys.requests.fetch_add(1, Ordering::SeqCst);
    Json(keys.jwks.clone())
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs()
}

/// The fixture files (test-only keys) shared with `agent-app`'s verifier tests.
const RSA_PRIVATE_KEY: &str = "rsa-private.pem";
const JWKS: &str = "jwks.json";
