//! Lambda entry point of `skills-index`: builds the S3 client once, then serves S3 events (from
//! EventBridge or as notifications) and manual rebuild requests.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    agent_app::init_logging();
    let storage_requests = agent_app::CallCounter::new();
    let objects = aws_store::S3ObjectStore::from_env(Some(storage_requests.clone())).await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| {
        let (objects, storage_requests) = (&objects, &storage_requests);
        async move {
            let outcome = agent_app::with_request_log(storage_requests, skills_index::handle(objects, event.payload));
            outcome.await.map_err(Error::from)
        }
    }))
    .await
}
