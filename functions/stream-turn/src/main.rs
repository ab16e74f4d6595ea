//! Lambda entry point of `stream-turn`: builds the clients, the JWT verifier and the turn queue
//! once, then streams the turns of Function URL requests.

use std::sync::Arc;

use agent_app::jwt::{JwtConfig, JwtVerifier};
use agent_app::queue::SqsTurnQueue;
use aws_lambda_events::lambda_function_urls::LambdaFunctionUrlRequest;
use lambda_runtime::{service_fn, Error, LambdaEvent};

// One thread, as in http-turn: an execution environment serves one event at a time, and tokio's
// workers only add wake-ups between threads (docs/performance-process.md).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    agent_app::init_logging();
    let app = agent_app::app_from_env().await?;
    // The Function URL has no authorizer in front: the caller's identity is verified here.
    let verifier = Arc::new(JwtVerifier::new(JwtConfig::from_env()?, reqwest_client()?));
    // A2A's non-blocking sends go to the turn queue when there is one.
    if let Some(queue) = SqsTurnQueue::from_env().await {
        stream_turn::a2a::set_turn_queue(Arc::new(queue));
    }
    let runtime_api = stream_turn::nodelay::runtime_api_addresses();
    lambda_runtime::run(service_fn(|event: LambdaEvent<LambdaFunctionUrlRequest>| {
        let (app, verifier) = (app.clone(), verifier.clone());
        // Before the response is posted: its prelude must not wait for a delayed ACK.
        runtime_connection_nodelay(&runtime_api);
        async move {
            let deadline = agent_app::deadline_from_epoch_millis(event.context.deadline);
            Ok::<_, Error>(stream_turn::handle(&app, &verifier, event.payload, deadline).await)
        }
    }))
    .await
}

/// Sets `TCP_NODELAY` on the runtime's connection to the Runtime API; says once if it cannot.
fn runtime_connection_nodelay(runtime_api: &[std::net::SocketAddr]) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let problem = match stream_turn::nodelay::set_on_connections_to(runtime_api) {
        Ok(0) => "no connection to the Runtime API was found".to_owned(),
        Ok(_) => return,
        Err(err) => err.to_string(),
    };
    WARNED.call_once(|| {
        tracing::warn!(
            problem,
            "could not set TCP_NODELAY on the runtime's connection; streamed responses may start late"
        )
    });
}

fn reqwest_client() -> Result<reqwest::Client, Error> {
    Ok(reqwest::Client::builder().build()?)
}
