//! Lambda entry point of `queue-turn`: builds the clients once, then serves SQS batches.

use aws_lambda_events::sqs::SqsEvent;
use lambda_runtime::{service_fn, Error, LambdaEvent};
use queue_turn::{SqsTurnQueue, TurnQueue};

// One thread, as in http-turn: an execution environment serves one event at a time, and tokio's
// workers only add wake-ups between threads (docs/performance-process.md).
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    agent_app::init_logging();
    let app = agent_app::app_from_env().await?;
    // A plan that does not fit one invocation re-enqueues itself when the queue is known.
    let continuations: Option<std::sync::Arc<dyn TurnQueue>> =
        SqsTurnQueue::from_env().await.map(|queue| std::sync::Arc::new(queue) as std::sync::Arc<dyn TurnQueue>);
    // The queue's maxReceiveCount: on the last delivery a background turn's failure is final.
    let max_receives = match std::env::var("TURN_MAX_RECEIVE_COUNT") {
        Ok(count) => {
            count.parse().map_err(|_| format!("TURN_MAX_RECEIVE_COUNT must be a whole number, not {count:?}"))?
        }
        Err(_) => 5,
    };
    // Background turns' webhooks: the allow-list, the signing key and the webhook queue, once.
    let webhooks = std::sync::Arc::new(agent_app::webhooks::Webhooks::from_env().await?);
    lambda_runtime::run(service_fn(|event: LambdaEvent<SqsEvent>| {
        let (app, continuations, webhooks) = (app.clone(), continuations.clone(), webhooks.clone());
        async move {
            let deadline = agent_app::deadline_from_epoch_millis(event.context.deadline);
            // The storage requests are logged before the response is posted.
            let handled = queue_turn::handle(
                &app.service,
                event.payload,
                deadline,
                continuations.as_deref(),
                max_receives,
                &webhooks,
            );
            let response = agent_app::with_request_log(&app.storage_requests, handled).await;
            // The batch's spans leave before the response: Lambda freezes the process after it.
            agent_app::traces::flush().await;
            Ok::<_, Error>(response)
        }
    }))
    .await
}
