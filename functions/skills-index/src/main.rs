//! Lambda entry point of `skills-index`: builds the S3 client once, then serves S3 events (from
//! EventBridge or as notifications) and manual rebuild requests.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    agent_app::init_logging();
    let storage_requests = agent_app::CallCounter::new();
    let objects = aws_store::S3ObjectStore::from_env(Some(storage_requests.clone())).await?;
    // The turns' listing budget, from the settings they read (LLM_MODEL, LLM_CONTEXT_TOKENS,
    // SKILL_LISTING_TOKENS), so the index keeps their listing rendered.
    let listing_budget = agent_app::agent_config(|name| std::env::var(name).ok()).ok().map(|c| c.listing_tokens());
    // In the sandbox image: skills' declared requirements become bundles (SKILLS_BUNDLES=pip),
    // signed with the bundle key read once here.
    let lookup = |name: &str| std::env::var(name).ok();
    let key = match skills_index::bundles::wanted(lookup)? {
        true => agent_app::bundle_key::bundle_signing_key_from_env().await?,
        false => None,
    };
    let bundler = skills_index::bundles::Bundler::from_env(lookup, key)?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| {
        let (objects, storage_requests, bundler) = (&objects, &storage_requests, bundler.as_ref());
        async move {
            let outcome = agent_app::with_request_log(
                storage_requests,
                skills_index::handle(objects, event.payload, listing_budget, bundler),
            );
            let outcome = outcome.await;
            // Indexes built from a listing (none, or an older format, was found), as a metric.
            if let Some(rebuilt) = outcome.as_ref().ok().and_then(|done| done["rebuilt"].as_u64()).filter(|&n| n > 0) {
                agent_app::metrics::put_count("CatalogIndexRebuilds", rebuilt);
            }
            outcome.map_err(Error::from)
        }
    }))
    .await
}
