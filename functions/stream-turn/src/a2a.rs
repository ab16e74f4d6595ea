//! A2A over the Function URL: the agent card and the JSON-RPC endpoint.

use agent_app::api::ApiError;
use agent_app::jwt::JwtVerifier;
use agent_app::App;
use aws_lambda_events::lambda_function_urls::LambdaFunctionUrlRequest;
use lambda_runtime::StreamResponse;
use tokio::time::Instant;

use crate::BodyStream;

/// The route this module answers.
pub const PATH: &str = "/a2a";
/// The agent card's well-known path.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// Answers one request of this route. Never fails: every error becomes a response.
pub async fn handle(
    _app: &App,
    _verifier: &JwtVerifier,
    _event: LambdaFunctionUrlRequest,
    _deadline: Option<Instant>,
) -> StreamResponse<BodyStream> {
    crate::error_response(&ApiError::not_found("not served yet"))
}
