//! `GET /webhooks/secret`: the caller's own webhook signing key, `whsec_` and its base64, as any
//! Standard Webhooks library takes it to verify the webhooks of the caller's background turns. The
//! key is derived from the deployment's secret and the caller's id, so it verifies no other
//! tenant's webhooks; it is never stored, and the answer is not to be cached.

use agent_core::UserId;
use serde_json::json;

use super::message::{Answer, Payload};
use crate::api::ApiError;

/// The caller's key, or 404 when this deployment sends no webhooks.
pub(super) async fn tenant_secret(user: &UserId) -> Result<String, ApiError> {
    let key = crate::webhooks::signing_key()
        .await?
        .ok_or_else(|| ApiError::not_found("this deployment sends no webhooks (it has no signing key)"))?;
    Ok(key.tenant(user).whsec())
}

/// `200 {"secret": "whsec_...", "scheme": "standard-webhooks"}`, never cached.
pub(super) fn secret_answer(secret: String) -> Answer {
    Answer {
        status: 200,
        body: Payload::Json(json!({"secret": secret, "scheme": "standard-webhooks"})),
        headers: vec![("cache-control", "no-store".to_owned())],
    }
}
