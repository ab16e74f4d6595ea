//! What the functions share: the agent's settings from the environment ([`config`]), the turn
//! service built once per process ([`app`]), the logs ([`logs`], [`metrics`], [`traces`]), a turn's
//! span and its one traced run ([`turn`]), and the HTTP API ([`api`], [`routes`]).

pub mod a2a;
pub mod agui;
pub mod api;
pub mod app;
pub mod bundle_key;
pub mod config;
pub mod cursor_key;
pub mod jwt;
pub mod logs;
pub mod metrics;
pub mod model_key;
pub mod poll;
pub mod queue;
pub mod routes;
pub mod secret_key;
pub mod traces;
pub mod turn;
pub mod webhooks;

pub use app::{app_from_env, sandbox_from_env, App};
pub use aws_store::CallCounter;
pub use config::{agent_config, ConfigError};
pub use jwt::{bearer_token, JwtConfig, JwtError, JwtVerifier, VerifiedClaims};
pub use logs::{init_logging, with_request_log};
pub use metrics::operations_since;
pub use turn::{deadline_from_epoch_millis, tenant_tag};

/// Every function links this crate, so this is their allocator: a turn allocates and frees many
/// small strings and JSON values, where glibc's malloc took about an eighth of a warm turn's CPU
/// (process-bench's profile in docs/performance-process.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
