//! Lambda entry point of `queue-turn`: builds the clients once, then serves SQS batches.

use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    agent_app::init_logging();
    let service = agent_app::service_from_env().await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| {
        let service = service.clone();
        async move {
            let deadline = agent_app::deadline_from_epoch_millis(event.context.deadline);
            Ok::<_, Error>(queue_turn::handle(&service, event.payload, deadline).await)
        }
    }))
    .await
}
