//! Builds the process-wide [`TurnService`] from the environment: storage adapters, the model
//! provider and the agent's settings. The functions call this once at cold start, and wrap each
//! invocation in [`with_request_log`] so its storage requests are logged.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agent_core::prompt::SkillPromptMode;
use agent_core::turn::{AgentConfig, TurnService};
use thiserror::Error;

pub mod api;
pub mod bundle_key;
pub mod cursor_key;
pub mod jwt;
pub mod metrics;
pub mod model_key;
pub mod queue;
pub mod traces;

pub use aws_store::CallCounter;
pub use jwt::{bearer_token, JwtConfig, JwtError, JwtVerifier, VerifiedClaims};

/// A configuration problem found at start-up; the message names the variable.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{name} is invalid: {reason}")]
    Invalid { name: &'static str, reason: String },
    #[error("storage configuration: {0}")]
    Storage(String),
    #[error(transparent)]
    Model(#[from] agent_core::ModelError),
}

/// Reads the agent settings (`MAX_STEPS`, `SKILL_PROMPT_MODE`, `DEADLINE_RESERVE_MS`,
/// `DEFAULT_LANGUAGE`) through `lookup`, so tests need not touch the process environment.
pub fn agent_config(lookup: impl Fn(&str) -> Option<String>) -> Result<AgentConfig, ConfigError> {
    let mut config = AgentConfig::default();
    if let Some(value) = lookup("MAX_STEPS") {
        config.max_steps = match value.trim().parse::<u32>() {
            Ok(steps) if (1..=200).contains(&steps) => steps,
            _ => {
                return Err(ConfigError::Invalid {
                    name: "MAX_STEPS",
                    reason: format!("expected a whole number from 1 to 200, got `{value}`"),
                })
            }
        };
    }
    let count = |name: &'static str, range: std::ops::RangeInclusive<u32>, default: u32| -> Result<u32, ConfigError> {
        match lookup(name).filter(|v| !v.trim().is_empty()) {
            None => Ok(default),
            Some(value) => match value.trim().parse::<u32>() {
                Ok(number) if range.contains(&number) => Ok(number),
                _ => Err(ConfigError::Invalid {
                    name,
                    reason: format!("expected a whole number from {} to {}, got `{value}`", range.start(), range.end()),
                }),
            },
        }
    };
    let defaults = config.subagents;
    config.subagents.max_depth = count("SUBAGENT_MAX_DEPTH", 0..=4, defaults.max_depth)?;
    config.subagents.per_turn = count("SUBAGENTS_PER_TURN", 1..=64, defaults.per_turn)?;
    config.subagents.max_steps = count("SUBAGENT_MAX_STEPS", 1..=200, defaults.max_steps)?;
    let ask = lookup("APPROVAL_REQUIRED").unwrap_or_default();
    let allow = lookup("APPROVAL_ALLOW").unwrap_or_default();
    config.approvals = agent_core::tools::ApprovalPolicy::parse(&ask, &allow)
        .map_err(|reason| ConfigError::Invalid { name: "APPROVAL_REQUIRED/APPROVAL_ALLOW", reason })?;
    if let Some(value) = lookup("SKILL_PROMPT_MODE") {
        config.prompt_mode = value
            .parse::<SkillPromptMode>()
            .map_err(|reason| ConfigError::Invalid { name: "SKILL_PROMPT_MODE", reason })?;
    }
    if let Some(value) = lookup("DEADLINE_RESERVE_MS") {
        let millis = value.trim().parse::<u64>().map_err(|_| ConfigError::Invalid {
            name: "DEADLINE_RESERVE_MS",
            reason: format!("expected milliseconds, got `{value}`"),
        })?;
        config.deadline_reserve = Duration::from_millis(millis);
    }
    if let Some(value) = lookup("DEFAULT_LANGUAGE").filter(|v| !v.trim().is_empty()) {
        config.default_language = value;
    }
    let tokens = |name: &'static str, min: usize| -> Result<Option<usize>, ConfigError> {
        match lookup(name).filter(|v| !v.trim().is_empty()) {
            None => Ok(None),
            Some(value) => match value.trim().parse::<usize>() {
                Ok(count) if count >= min => Ok(Some(count)),
                _ => Err(ConfigError::Invalid {
                    name,
                    reason: format!("expected a token count of at least {min}, got `{value}`"),
                }),
            },
        }
    };
    let model = lookup("LLM_MODEL").unwrap_or_default();
    config.context_tokens =
        tokens("LLM_CONTEXT_TOKENS", 2048)?.unwrap_or_else(|| agent_core::budget::default_context_tokens(&model));
    if let Some(output) = tokens("LLM_MAX_TOKENS", 1)? {
        config.output_tokens = output;
    }
    config.summary_threshold = tokens("HISTORY_SUMMARY_TOKENS", 256)?;
    config.skill_listing_tokens = tokens("SKILL_LISTING_TOKENS", 200)?;
    // The label the configured model's calls are counted under in each tenant's usage.
    config.model_id = model.trim().to_owned();
    config.daily_token_budget = daily_token_budget(&lookup)?;

    if let Some(value) = lookup("AGENT_STRATEGY") {
        config.strategy = value.parse().map_err(|reason| ConfigError::Invalid { name: "AGENT_STRATEGY", reason })?;
    }
    let model = |name: &str| lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    config.planner.planner_model = model("PLANNER_MODEL");
    config.planner.discovery_model = model("DISCOVERY_MODEL");
    config.planner.assessment_model = model("ASSESSMENT_MODEL");
    config.planner.response_model = model("RESPONSE_MODEL");
    let threshold = |name: &'static str, default: f64| -> Result<f64, ConfigError> {
        match lookup(name).filter(|v| !v.trim().is_empty()) {
            None => Ok(default),
            Some(value) => match value.trim().parse::<f64>() {
                Ok(number) if (0.0..=1.0).contains(&number) => Ok(number),
                _ => {
                    Err(ConfigError::Invalid { name, reason: format!("expected a number from 0 to 1, got `{value}`") })
                }
            },
        }
    };
    config.planner.prompt_confidence_threshold =
        threshold("PROMPT_CONFIDENCE_THRESHOLD", config.planner.prompt_confidence_threshold)?;
    config.planner.prompt_suggestion_threshold =
        threshold("PROMPT_SUGGESTION_THRESHOLD", config.planner.prompt_suggestion_threshold)?;
    config.planner.task_completion_threshold =
        threshold("TASK_COMPLETION_THRESHOLD", config.planner.task_completion_threshold)?;
    if config.planner.prompt_suggestion_threshold > config.planner.prompt_confidence_threshold {
        return Err(ConfigError::Invalid {
            name: "PROMPT_SUGGESTION_THRESHOLD",
            reason: "must not be above PROMPT_CONFIDENCE_THRESHOLD".to_owned(),
        });
    }
    Ok(config)
}

/// `DAILY_TOKEN_BUDGET`: the tokens (input and output) a tenant may use a UTC day unless an
/// operator set its own; unset, empty or 0 for no budget.
fn daily_token_budget(lookup: &impl Fn(&str) -> Option<String>) -> Result<Option<u64>, ConfigError> {
    match lookup("DAILY_TOKEN_BUDGET").map(|value| value.trim().to_owned()).filter(|value| !value.is_empty()) {
        None => Ok(None),
        Some(value) => match value.parse::<u64>() {
            Ok(0) => Ok(None),
            Ok(tokens) => Ok(Some(tokens)),
            Err(_) => Err(ConfigError::Invalid {
                name: "DAILY_TOKEN_BUDGET",
                reason: format!("expected a whole number of tokens (0 for no budget), got `{value}`"),
            }),
        },
    }
}

fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// What a function builds once per process: the turn service, and the counter of the storage
/// requests its clients make (for [`with_request_log`]).
#[derive(Clone)]
pub struct App {
    pub service: Arc<TurnService>,
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
    let _ = STRATEGY.set(match config.strategy {
        agent_core::turn::Strategy::Skills => "skills",
        agent_core::turn::Strategy::Planner => "planner",
    });
    let stores = aws_store::AwsStores::from_env(Some(storage_requests.clone()))
        .await
        .map_err(|err| ConfigError::Storage(err.to_string()))?;
    let sandbox = sandbox_from_env(env_lookup, stores.objects.clone(), secrets.as_ref()).await?;
    let experts = Arc::new(experts::McpExperts::from_env_with_resolver(stores.objects.clone(), secrets));
    let mut service = TurnService::new(stores.sessions, stores.objects, model, config)
        .with_experts(experts)
        // An operator's unusable item becomes a `BudgetConfigErrors` count an alarm watches.
        .with_config_alarm(Arc::new(|name: &str| metrics::put_count(name, 1)));
    if let Some(sandbox) = sandbox {
        tracing::info!(sandbox = sandbox.name(), "execute runs commands in this sandbox");
        service = service.with_sandbox(sandbox);
    }
    Ok(App { service: Arc::new(service), storage_requests })
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
            let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
            let lambda = sandbox::LambdaSandbox::from_lookup(&sdk, &lookup)
                .map_err(|reason| ConfigError::Invalid { name: sandbox::lambda::SANDBOX_FUNCTION_ENV, reason })?;
            tracing::info!(function = lambda.function(), "execute invokes the sandbox function");
            let bundles = bundle_key::bundle_source(&lookup, objects, secrets).await?;
            Ok(Some(Arc::new(lambda.with_bundles(bundles))))
        }
        "agentcore" => {
            // The SDK takes the endpoint from AWS_ENDPOINT_URL_BEDROCK_AGENTCORE or AWS_ENDPOINT_URL.
            let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
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

/// Awaits `fut` (one invocation's handler), then logs one info event `storage requests` with
/// `storage_requests` (the number of requests `counter` saw meanwhile) and `storage_operations`
/// (those requests per operation, as a compact JSON object such as
/// `{"DynamoDB.Query":1,"S3.GetObject":1}`). The Lambda runtime runs one invocation at a time
/// per process, so the difference is exactly the invocation's requests. Wrap the handler, not
/// the runtime, so the line is written before the response is posted.
pub async fn with_request_log<F: Future>(counter: &CallCounter, fut: F) -> F::Output {
    let before = counter.operations();
    let output = fut.await;
    let operations = operations_since(&before, &counter.operations());
    let total: u64 = operations.values().sum();
    let operations = serde_json::to_string(&operations).unwrap_or_default();
    tracing::info!(storage_requests = total, storage_operations = %operations, "storage requests");
    output
}

/// The per-operation requests made between two [`CallCounter::operations`] snapshots, without
/// the operations that made none.
pub fn operations_since(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(operation, &count)| {
            let made = count.saturating_sub(before.get(operation).copied().unwrap_or(0));
            (made > 0).then(|| (operation.clone(), made))
        })
        .collect()
}

/// JSON logs when Lambda asks for them (`AWS_LAMBDA_LOG_FORMAT=JSON`), text otherwise; `RUST_LOG` filters.
/// Each JSON line lists its spans (`spans`): the runtime's invocation span with `requestId`, and a
/// turn's [`turn_span`] with `turnId`. When the deployment names an OTLP endpoint, the spans are
/// also exported as traces ([`traces`]).
pub fn init_logging() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|format| format.eq_ignore_ascii_case("json"));
    let fmt = tracing_subscriber::fmt::layer().with_target(false).without_time();
    let fmt = if json { fmt.json().with_current_span(false).boxed() } else { fmt.boxed() };
    // A configuration the traces cannot follow leaves them off; it is logged once the logs work.
    let (traces, traces_error) = match traces::layer() {
        Ok(layer) => (layer, None),
        Err(err) => (None, Some(err)),
    };
    // The filter is global, so every layer sees what `RUST_LOG` lets through, and nothing else.
    let result = tracing_subscriber::registry().with(filter).with(fmt).with(traces).with(metrics::layer()).try_init();
    // A second initialisation (tests) keeps the first subscriber.
    if result.is_ok() {
        if let Some(err) = traces_error {
            tracing::error!(error = %err, "traces are off: the OpenTelemetry settings cannot be followed");
        }
    }
}

/// A turn's id in the logs: `{session}/{k}` where `k` is the first 16 hex digits of the hash of
/// the turn's idempotency key when it has one (the `Idempotency-Key` header, or a queue record's key
/// or message id), so every delivery and replay of one turn, in any function, logs the same id;
/// without a key the turn is one invocation and `k` is `request_id` (the API Gateway or Function
/// URL request id of the event).
pub fn turn_id(request: &agent_core::turn::TurnRequest, request_id: &str) -> String {
    match &request.idempotency {
        Some(key) => format!("{}/{}", request.session, &key.key_hash[..key.key_hash.len().min(16)]),
        None => format!("{}/{request_id}", request.session),
    }
}

/// The span a turn runs in: every line it logs carries its `turnId` ([`turn_id`]) next to the
/// Lambda runtime's `requestId` of the invocation span it is created in. A turn that runs in a
/// task of its own must be instrumented with this span, or its lines lose both.
pub fn turn_span(request: &agent_core::turn::TurnRequest, request_id: &str) -> tracing::Span {
    let span = unnamed_turn_span();
    name_turn(&span, request, request_id);
    span
}

/// A turn span whose turn is not known yet (a queue record before its body is read):
/// [`name_turn`] gives it its `turnId`.
pub fn unnamed_turn_span() -> tracing::Span {
    use tracing::field::Empty;
    // The outcome fields are recorded by the function with [`metrics::record_turn`].
    let span = tracing::info_span!(
        "turn",
        turnId = Empty,
        sessionId = Empty,
        strategy = STRATEGY.get().copied().unwrap_or("skills"),
        tenant = Empty,
        status = Empty,
        errorCode = Empty,
        ending = Empty,
        steps = Empty,
        replayed = Empty,
    );
    // Exported traces join the invocation's X-Ray trace; HTTP functions then offer a `traceparent`.
    traces::set_incoming_parent(&span, None);
    span
}

/// Names the turn of a span from [`unnamed_turn_span`], as [`turn_span`] would have.
pub fn name_turn(span: &tracing::Span, request: &agent_core::turn::TurnRequest, request_id: &str) {
    span.record("turnId", turn_id(request, request_id));
    span.record("sessionId", request.session.as_str());
    span.record("tenant", tenant_tag(request.user.as_str()));
}

/// The strategy of this process's turns (`AGENT_STRATEGY`), set when the app is built.
static STRATEGY: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// How a tenant appears in the logs: the first 16 hex digits of SHA-256 over the deployment's
/// `LOG_TENANT_SALT` followed by the user id. An operator who knows a user id (and the salt) finds
/// that tenant's lines; the lines themselves spread no identity (user ids are often e-mail
/// addresses or directory ids), and without the salt the tag cannot be reversed by hashing guesses.
pub fn tenant_tag(user_id: &str) -> String {
    use sha2::Digest;
    static SALT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let salt = SALT.get_or_init(|| std::env::var("LOG_TENANT_SALT").unwrap_or_default());
    let digest = sha2::Sha256::new().chain_update(salt.as_bytes()).chain_update(user_id.as_bytes()).finalize();
    hex::encode(&digest[..8])
}

/// Deadlines below this many milliseconds cannot be epoch times (it is September 2001): they are
/// durations, as `cargo lambda watch` sends them (`600000`).
const EPOCH_MILLIS_FLOOR: u64 = 1_000_000_000_000;

/// Converts Lambda's deadline into a monotonic instant. The Runtime API sends milliseconds since
/// the Unix epoch; a value too small to be one is read as milliseconds from now, with a warning.
pub fn deadline_from_epoch_millis(deadline_ms: u64) -> Option<tokio::time::Instant> {
    if deadline_ms == 0 {
        return None;
    }
    if deadline_ms < EPOCH_MILLIS_FLOOR {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            tracing::warn!(
                deadline_ms,
                "the runtime's deadline is not an epoch time (cargo lambda sends a duration); reading it as relative"
            )
        });
        return Some(tokio::time::Instant::now() + Duration::from_millis(deadline_ms));
    }
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as u64;
    let remaining = Duration::from_millis(deadline_ms.saturating_sub(now_ms));
    Some(tokio::time::Instant::now() + remaining)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn deadlines_are_epoch_times_or_durations() {
        let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        let left = |deadline: tokio::time::Instant| deadline - tokio::time::Instant::now();
        let epoch = deadline_from_epoch_millis(now_ms + 30_000).unwrap();
        assert!(left(epoch) > Duration::from_secs(29) && left(epoch) <= Duration::from_secs(30));
        let relative = deadline_from_epoch_millis(600_000).unwrap();
        assert!(left(relative) > Duration::from_secs(599), "cargo lambda's duration is read as relative");
        let past = deadline_from_epoch_millis(now_ms - 5_000).unwrap();
        assert_eq!(left(past), Duration::ZERO);
        assert!(deadline_from_epoch_millis(0).is_none());
    }

    #[test]
    fn reads_and_validates_agent_settings() {
        let config = agent_config(|name| match name {
            "MAX_STEPS" => Some("3".into()),
            "SKILL_PROMPT_MODE" => Some("inject".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!((config.max_steps, config.prompt_mode), (3, SkillPromptMode::Inject));
        let config = agent_config(|name| (name == "LLM_MODEL").then(|| "gpt-4o".into())).unwrap();
        assert_eq!(config.context_tokens, 128_000);
        let config = agent_config(|name| match name {
            "AGENT_STRATEGY" => Some("planner".into()),
            "PLANNER_MODEL" => Some("big-model".into()),
            "TASK_COMPLETION_THRESHOLD" => Some("0.9".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(config.strategy, agent_core::turn::Strategy::Planner);
        assert_eq!(config.planner.planner_model.as_deref(), Some("big-model"));
        assert_eq!(config.planner.task_completion_threshold, 0.9);
        assert_eq!(config.planner.prompt_confidence_threshold, 0.7);
        let err = agent_config(|name| (name == "PROMPT_CONFIDENCE_THRESHOLD").then(|| "1.5".into())).unwrap_err();
        assert!(err.to_string().contains("PROMPT_CONFIDENCE_THRESHOLD"));
        let config = agent_config(|name| (name == "SKILL_LISTING_TOKENS").then(|| "1500".into())).unwrap();
        assert_eq!(config.listing_tokens(), 1500);
        assert_eq!(agent_config(|_| None).unwrap().listing_tokens(), 3584, "an eighth of 32,768 − 4,096");
        let err = agent_config(|name| (name == "SKILL_LISTING_TOKENS").then(|| "10".into())).unwrap_err();
        assert!(err.to_string().contains("SKILL_LISTING_TOKENS"));
        let err = agent_config(|name| (name == "LLM_CONTEXT_TOKENS").then(|| "12".into())).unwrap_err();
        assert!(err.to_string().contains("LLM_CONTEXT_TOKENS"));
        let err = agent_config(|name| (name == "MAX_STEPS").then(|| "zero".into())).unwrap_err();
        assert!(err.to_string().contains("MAX_STEPS"));
        let err = agent_config(|name| (name == "SKILL_PROMPT_MODE").then(|| "merge".into())).unwrap_err();
        assert!(err.to_string().contains("SKILL_PROMPT_MODE"));
    }

    #[test]
    fn a_daily_token_budget_is_a_positive_count_and_zero_or_unset_is_none() {
        let budget =
            |value: &'static str| agent_config(move |name| (name == "DAILY_TOKEN_BUDGET").then(|| value.into()));
        assert_eq!(budget("250000").unwrap().daily_token_budget, Some(250_000));
        for none in ["0", "", " "] {
            assert_eq!(budget(none).unwrap().daily_token_budget, None, "{none:?}");
        }
        assert_eq!(agent_config(|_| None).unwrap().daily_token_budget, None);
        let err = budget("1e6").unwrap_err();
        assert!(err.to_string().contains("DAILY_TOKEN_BUDGET"), "{err}");
        let config = agent_config(|name| (name == "LLM_MODEL").then(|| " gpt-4o ".into())).unwrap();
        assert_eq!(config.model_id, "gpt-4o");
    }

    #[test]
    fn operations_since_keeps_only_new_requests() {
        let map = |pairs: &[(&str, u64)]| pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>();
        let before = map(&[("DynamoDB.Query", 2), ("S3.GetObject", 1)]);
        let after = map(&[("DynamoDB.Query", 3), ("S3.GetObject", 1), ("S3.PutObject", 2)]);
        assert_eq!(operations_since(&before, &after), map(&[("DynamoDB.Query", 1), ("S3.PutObject", 2)]));
        assert!(operations_since(&after, &after).is_empty());
    }

    #[tokio::test]
    async fn with_request_log_passes_the_output_through() {
        let counter = CallCounter::new();
        assert_eq!(with_request_log(&counter, async { 7 }).await, 7);
    }
}
