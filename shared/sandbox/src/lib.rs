//! The sandbox the `execute` tool runs commands in: the JSON of one call ([`wire`]), the code that
//! runs one command in isolation ([`handler`], shared by the Lambda function and the local
//! backend) and the local backend itself ([`LocalSandbox`]).

#[cfg(feature = "agentcore-client")]
pub mod agentcore;
pub mod handler;
pub mod local;
pub mod wire;

#[cfg(feature = "agentcore-client")]
pub use agentcore::AgentCoreSandbox;
pub use handler::{Config, HandlerError, Isolation, Limits};
pub use local::LocalSandbox;
pub use wire::{WireError, WireFile, WireRequest, WireResponse, WireSkill};
