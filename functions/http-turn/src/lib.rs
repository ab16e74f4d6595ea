//! The HTTP API behind API Gateway (payload 2.0): the event becomes a request of agent-app's
//! `routes` (its path after the stage, its query, and the caller the authorizer verified), and the
//! answer becomes the response.

use agent_app::api::ApiError;
use agent_app::queue::TurnQueue;
use agent_app::routes::{Answer, Caller, Payload, Request};
use agent_app::App;
use agent_core::turn::UserProfile;
use agent_core::UserId;
use aws_lambda_events::apigw::{ApiGatewayV2httpRequest, ApiGatewayV2httpResponse};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::{HeaderMap, HeaderValue};
use tokio::time::Instant;

/// Handles one API Gateway (HTTP API, payload 2.0) event. Never fails: every error becomes a
/// response. With `queue`, a turn sent with `Prefer: respond-async` runs in the background.
pub async fn handle(
    app: &App,
    event: ApiGatewayV2httpRequest,
    deadline: Option<Instant>,
    queue: Option<&dyn TurnQueue>,
) -> ApiGatewayV2httpResponse {
    let request = Request {
        method: event.request_context.http.method.clone(),
        path: after_stage(event.raw_path.as_deref().unwrap_or(""), event.request_context.stage.as_deref()),
        headers: &event.headers,
        query: event.query_string_parameters.iter().collect(),
        body: event.body.as_deref(),
        base64: event.is_base64_encoded,
        request_id: event.request_context.request_id.as_deref().unwrap_or(""),
        caller: caller(&event),
    };
    respond(agent_app::routes::serve(app, request, deadline, queue).await)
}

/// The raw path without the stage name, when the API has a named stage (`/prod/skills`): routing
/// then sees exactly the documented paths.
fn after_stage<'a>(path: &'a str, stage: Option<&str>) -> &'a str {
    let Some(stage) = stage.filter(|stage| !stage.is_empty() && *stage != "$default") else { return path };
    match path.strip_prefix('/').and_then(|rest| rest.strip_prefix(stage)) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => path,
    }
}

/// The caller from the JWT claims API Gateway's authorizer verified; the body is never consulted.
fn caller(event: &ApiGatewayV2httpRequest) -> Result<Caller, ApiError> {
    let unauthorized = |message: &str| ApiError::new(401, "unauthorized", message);
    let claims = event.request_context.authorizer.as_ref().and_then(|a| a.jwt.as_ref()).map(|jwt| &jwt.claims);
    let claim = |name: &str| claims.and_then(|c| c.get(name)).filter(|v| !v.trim().is_empty()).cloned();
    let sub = claims
        .and_then(|claims| claims.get("sub"))
        .filter(|sub| !sub.is_empty())
        .ok_or_else(|| unauthorized("no authenticated user"))?;
    let user = UserId::parse(sub.as_str()).map_err(|_| unauthorized("the authenticated user id is not supported"))?;
    let profile = UserProfile { name: claim("name"), language: claim("locale"), description: claim("profile") };
    Ok(Caller { user, profile })
}

/// The answer as API Gateway sends it: JSON as text, a file's bytes base64-encoded (API Gateway
/// decodes them and sets `Content-Length`; the answer's headers say what they are).
fn respond(answer: Answer) -> ApiGatewayV2httpResponse {
    let mut response = ApiGatewayV2httpResponse::default();
    response.status_code = i64::from(answer.status);
    match answer.body {
        Payload::Json(body) => {
            let mut headers = HeaderMap::new();
            headers.insert("content-type", HeaderValue::from_static("application/json"));
            response.headers = headers;
            response.body = Some(Body::Text(body.to_string()));
        }
        Payload::Bytes(bytes) => {
            response.body = Some(Body::Binary(bytes));
            response.is_base64_encoded = true;
        }
    }
    for (name, value) in answer.headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers.insert(name, value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_name_is_left_out_of_the_path() {
        assert_eq!(after_stage("/prod/skills", Some("prod")), "/skills");
        assert_eq!(after_stage("/prod", Some("prod")), "");
        assert_eq!(after_stage("/production/skills", Some("prod")), "/production/skills");
        assert_eq!(after_stage("/skills", Some("$default")), "/skills");
        assert_eq!(after_stage("/skills", None), "/skills");
    }
}
