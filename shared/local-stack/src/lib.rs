//! The loopback stand-ins every test, benchmark and local command runs against: moto, a scripted
//! model server, expert MCP servers, a Lambda Runtime API, an identity provider, AgentCore's code
//! interpreter, an OTLP collector and a fault-injecting proxy, each a real protocol peer.

pub mod agentcore;
mod eventstream;
pub mod experts;
pub mod faults;
pub mod function_url;
pub mod identity;
pub mod image;
pub mod lambda;
pub mod lambda_invoke;
pub mod model_server;
pub mod moto;
pub mod otlp;
pub mod stack;
