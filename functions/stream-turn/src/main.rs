//! Lambda entry point of `stream-turn`: builds the clients and the JWT verifier once, then streams
//! the turns of Function URL requests.

use std::sync::Arc;

use agent_app::jwt::{JwtConfig, JwtVerifier};
use aws_lambda_events::lambda_function_urls::LambdaFunctionUrlRequest;
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    agent_app::init_logging();
    let app = agent_app::app_from_env().await?;
    // The Function URL has no authorizer in front: the caller's identity is verified here.
    let verifier = Arc::new(JwtVerifier::new(JwtConfig::from_env()?, reqwest_client()?));
    lambda_runtime::run(service_fn(|event: LambdaEvent<LambdaFunctionUrlRequest>| {
        let (app, verifier) = (app.clone(), verifier.clone());
        async move {
            let deadline = agent_app::deadline_from_epoch_millis(event.context.deadline);
            Ok::<_, Error>(stream_turn::handle(&app, &verifier, event.payload, deadline).await)
        }
    }))
    .await
}

fn reqwest_client() -> Result<reqwest::Client, Error> {
    Ok(reqwest::Client::builder().build()?)
}
