//! AG-UI over the Function URL: `POST /ag-ui` with a `RunAgentInput`, answered with AG-UI events.

use agent_app::api::ApiError;
use agent_app::jwt::JwtVerifier;
use agent_app::App;
use aws_lambda_events::lambda_function_urls::LambdaFunctionUrlRequest;
use lambda_runtime::StreamResponse;
use tokio::time::Instant;

use crate::BodyStream;

/// The route this module answers.
pub const PATH: &str = "/ag-ui";

/// Answers one request of this route. Never fails: every error becomes a response.
pub async fn handle(
    _app: &App,
    _verifier: &JwtVerifier,
    _event: LambdaFunctionUrlRequest,
    _deadline: Option<Instant>,
) -> StreamResponse<BodyStream> {
    crate::error_response(&ApiError::not_found("not served yet"))
}
