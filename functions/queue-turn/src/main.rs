//! Lambda entry point of `queue-turn`: builds the clients once, then serves SQS batches.

use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use queue_turn::{Continuations, SqsContinuations};

#[tokio::main]
async fn main() -> Result<(), Error> {
    agent_app::init_logging();
    let app = agent_app::app_from_env().await?;
    // A plan that does not fit one invocation re-enqueues itself when the queue is known.
    let continuations: Option<std::sync::Arc<dyn Continuations>> = match std::env::var("TURN_QUEUE_URL") {
        Ok(url) if !url.is_empty() => {
            let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            Some(std::sync::Arc::new(SqsContinuations::new(aws_sdk_sqs::Client::new(&config), url)))
        }
        _ => None,
    };
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| {
        let (app, continuations) = (app.clone(), continuations.clone());
        async move {
            let deadline = agent_app::deadline_from_epoch_millis(event.context.deadline);
            // The storage requests are logged before the response is posted.
            let handled = queue_turn::handle(&app.service, event.payload, deadline, continuations.as_deref());
            Ok::<_, Error>(agent_app::with_request_log(&app.storage_requests, handled).await)
        }
    }))
    .await
}
