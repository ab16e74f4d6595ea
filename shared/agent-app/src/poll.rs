//! What a background turn's poll shows, `GET /sessions/{id}/turns/{turn_id}`: the route answers with
//! it and a webhook carries it, so both say the same thing of a turn.

use agent_core::TurnStatus;
use serde_json::{json, Value};

use crate::api::ApiError;

/// `GET /sessions/{id}/turns/{turn_id}`: pending, completed with the synchronous turn's fields, or
/// failed with its error; 404 for a turn the caller does not own or that never was.
pub fn status_view(turn_id: &str, status: Option<TurnStatus>) -> Result<Value, ApiError> {
    let status = status.ok_or_else(|| ApiError::not_found(format!("no turn `{turn_id}`")))?;
    Ok(match status {
        TurnStatus::Queued | TurnStatus::Running => json!({"turn_id": turn_id, "status": "pending"}),
        TurnStatus::Committed { reply } => {
            let mut body = json!({"turn_id": turn_id, "status": "completed"});
            if let (Some(fields), Value::Object(reply)) = (body.as_object_mut(), reply) {
                fields.extend(reply);
            }
            body
        }
        TurnStatus::Failed { error } => json!({"turn_id": turn_id, "status": "failed", "error": error}),
    })
}
