//! Lambda entry point of `sandbox`: reads its configuration once, then runs one command per
//! invocation (see the crate's documentation for the contract).

use std::sync::Arc;

use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    sandbox_function::init_logging();
    let config = Arc::new(sandbox_function::config_from_env(|name| std::env::var(name).ok())?);
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| {
        let config = Arc::clone(&config);
        async move {
            let tenant = event.context.tenant_id.as_deref();
            Ok::<_, Error>(sandbox_function::handle(&config, event.payload, tenant).await)
        }
    }))
    .await
}
