//! What a function builds once per process from the environment: the [`TurnService`] over the
//! storage adapters, the model provider, the sandbox and the agent's settings.

use std::sync::Arc;

use agent_core::store::ObjectStore;
use agent_core::turn::TurnService;
use aws_store::CallCounter;

use crate::config::{agent_config, env_lookup, ConfigError};
use crate::{bundle_key, metrics, model_key};

/// What a function builds once per process: the turn service, the object store it reads (the
/// routes of skills' versions work on it directly), and the counter of the storage requests its
/// clients make (for `logs::with_request_log`).
#[derive(Clone)]
pub struct App {
    pub service: Arc<TurnService>,
    pub objects: Arc<dyn ObjectStore>,
    pub storage_requests: CallCounter,
}

/// The production wiring: S3 and DynamoDB (honouring `AWS_ENDPOINT_URL`) with a [`CallCounter`]
/// attached, the provider named by `LLM_PROVIDER` (its key from `LLM_API_KEY_SECRET` or
/// `LLM_API_KEY`, see [`model_key`]), and the agent settings.
pub async fn app_from_env() -> Result<App, ConfigError> {
    let mut config = agent_config(env_lookup)?;
    // One resolver for the model key and the experts' secrets, so both share its cache.
    let secrets = Arc::new(experts::AwsSecretResolver::from_env());
    let llm_config = model_key::llm_config(env_lookup, secrets.as_ref()).await?;
    let model = llm::build(&llm_config).await?;
    config.model_provider = llm_config.provider.as_str().to_owned();
    let storage_requests = CallCounter::new();
    // Each turn's summary line names the storage requests it made.
    metrics::count_storage(&storage_requests);
    let stores = aws_store::AwsStores::from_env(Some(storage_requests.clone()))
        .await
        .map_err(|err| ConfigError::Storage(err.to_string()))?;
    let sandbox = sandbox_from_env(env_lookup, stores.objects.clone(), secrets.as_ref()).await?;
    let experts = Arc::new(experts::McpExperts::from_env_with_resolver(stores.objects.clone(), secrets));
    let objects = stores.objects.clone();
    let mut service = TurnService::new(stores.sessions, stores.objects, model, config)
        .with_experts(experts)
        // An operator's unusable item becomes a `BudgetConfigErrors` count an alarm watches.
        .with_config_alarm(Arc::new(|name: &str| metrics::put_count(name, 1)));
    if let Some(sandbox) = sandbox {
        tracing::info!(sandbox = sandbox.name(), "execute runs commands in this sandbox");
        service = service.with_sandbox(sandbox);
    }
    Ok(App { service: Arc::new(service), objects, storage_requests })
}

/// The sandbox named by `SANDBOX`: none (unset, empty or `none`: `execute` is not offered), `local`
/// (bubblewrap on this machine, for the demo, the local loop and the tests), `lambda` (the
/// `sandbox` function named by `SANDBOX_FUNCTION`, invoked with the tenant's id) or `agentcore`
/// (an AgentCore Code Interpreter session per agent session, `SANDBOX_CODE_INTERPRETER_ID`).
/// `local` and `lambda` read skills' bundles from `objects`, those signed with the bundle key
/// ([`bundle_key`], its secret read through `secrets`) only; AgentCore's interpreter installs none.
pub async fn sandbox_from_env(
    lookup: impl Fn(&str) -> Option<String>,
    objects: Arc<dyn agent_core::store::ObjectStore>,
    secrets: &dyn experts::secrets::SecretResolver,
) -> Result<Option<Arc<dyn agent_core::sandbox::Sandbox>>, ConfigError> {
    let kind = lookup("SANDBOX").map(|value| value.trim().to_ascii_lowercase()).unwrap_or_default();
    match kind.as_str() {
        "" | "none" => Ok(None),
        "local" => {
            let local =
                sandbox::LocalSandbox::from_env().map_err(|reason| ConfigError::Invalid { name: "SANDBOX", reason })?;
            local.check().map_err(|reason| ConfigError::Invalid { name: "SANDBOX", reason })?;
            let bundles = bundle_key::bundle_source(&lookup, objects, secrets).await?;
            Ok(Some(Arc::new(local.with_bundles(bundles))))
        }
        "lambda" => {
            // The SDK takes the endpoint from AWS_ENDPOINT_URL_LAMBDA or AWS_ENDPOINT_URL by itself.
            let sdk = aws_http::load_config().await;
            let lambda = sandbox::LambdaSandbox::from_lookup(&sdk, &lookup)
                .map_err(|reason| ConfigError::Invalid { name: sandbox::lambda::SANDBOX_FUNCTION_ENV, reason })?;
            tracing::info!(function = lambda.function(), "execute invokes the sandbox function");
            let bundles = bundle_key::bundle_source(&lookup, objects, secrets).await?;
            Ok(Some(Arc::new(lambda.with_bundles(bundles))))
        }
        "agentcore" => {
            // The SDK takes the endpoint from AWS_ENDPOINT_URL_BEDROCK_AGENTCORE or AWS_ENDPOINT_URL.
            let sdk = aws_http::load_config().await;
            let agentcore = sandbox::AgentCoreSandbox::from_lookup(&sdk, &lookup)
                .map_err(|reason| ConfigError::Invalid { name: "SANDBOX", reason })?;
            tracing::info!(
                interpreter = agentcore.interpreter(),
                "execute runs in AgentCore Code Interpreter sessions"
            );
            Ok(Some(Arc::new(agentcore)))
        }
        other => Err(ConfigError::Invalid {
            name: "SANDBOX",
            reason: format!("expected `none`, `local`, `lambda` or `agentcore`, got `{other}`"),
        }),
    }
}
