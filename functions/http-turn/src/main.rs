//! Lambda entry point of `http-turn`: builds the clients once, then serves API Gateway events.

use aws_lambda_events::apigw::ApiGatewayV2httpRequest;
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    agent_app::init_logging();
    let service = agent_app::service_from_env().await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<ApiGatewayV2httpRequest>| {
        let service = service.clone();
        async move {
            let deadline = agent_app::deadline_from_epoch_millis(event.context.deadline);
            Ok::<_, Error>(http_turn::handle(&service, event.payload, deadline).await)
        }
    }))
    .await
}
