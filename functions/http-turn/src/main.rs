//! Lambda entry point of `http-turn`: builds the clients once, then serves API Gateway events.

use std::sync::Arc;

use agent_app::queue::{SqsTurnQueue, TurnQueue};
use aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use lambda_runtime::{service_fn, Error, LambdaEvent};

// One thread: a Lambda execution environment serves one event at a time, and on a fraction of a vCPU
// a multi-threaded runtime's wake-ups between its workers cost a quarter of a warm turn's CPU
// (process-bench: 8.2–8.7 ms → 6.0–6.4 ms per warm turn, docs/performance-process.md).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    agent_app::init_logging();
    let app = agent_app::app_from_env().await?;
    // The `GET /sessions` cursor key, from its secret once per process (else see agent-app's `routes`).
    if let Some(key) = agent_app::cursor_key::cursor_signing_key_from_env().await? {
        agent_app::routes::set_cursor_key(key);
    }
    // Background turns' webhook settings, checked at cold start so that a bad allow-list or an
    // unreadable signing key fails the first invocation, not one request later (the reason is logged).
    agent_app::webhooks::policy().map_err(|_| "the webhook settings are invalid; the line above says why")?;
    agent_app::webhooks::signing_key().await.map_err(|_| "the webhook signing key could not be read")?;
    // `Prefer: respond-async` turns go to the turn queue when there is one.
    let queue: Option<Arc<dyn TurnQueue>> =
        SqsTurnQueue::from_env().await.map(|queue| Arc::new(queue) as Arc<dyn TurnQueue>);
    lambda_runtime::run(service_fn(|event: LambdaEvent<ApiGatewayV2httpRequest>| {
        let (app, queue) = (app.clone(), queue.clone());
        async move {
            let deadline = agent_app::deadline_from_epoch_millis(event.context.deadline);
            // The storage requests are logged before the response is posted.
            let response = agent_app::with_request_log(
                &app.storage_requests,
                http_turn::handle(&app, event.payload, deadline, queue.as_deref()),
            )
            .await;
            // The turn's spans leave before the response: Lambda freezes the process after it.
            agent_app::traces::flush().await;
            Ok::<_, Error>(response)
        }
    }))
    .await
}
