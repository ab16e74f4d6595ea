//! The sandbox the `execute` tool runs commands in: the JSON of one call ([`wire`]), the code that
//! runs one command in isolation ([`handler`], shared by the Lambda function and the local
//! backend) and the local backend itself ([`LocalSandbox`]); [`bundles`]: where a backend reads a
//! skill's bundle that its sandbox lacks.

#[cfg(feature = "agentcore-client")]
pub mod agentcore;
pub mod bundles;
pub mod handler;
pub mod lambda;
pub mod local;
pub mod wire;

#[cfg(feature = "agentcore-client")]
pub use agentcore::AgentCoreSandbox;
pub use bundles::BundleSource;
pub use handler::{Config, HandlerError, Isolation, Limits};
#[cfg(feature = "lambda-client")]
pub use lambda::LambdaSandbox;
pub use local::LocalSandbox;
pub use wire::{WireBundle, WireBundlePart, WireError, WireFile, WirePartAnswer, WireRequest, WireResponse, WireSkill};
