//! Support for the integration tests: real protocol peers started on loopback.

pub mod agentcore;
pub mod bench;
pub mod experts;
pub mod faults;
pub mod identity;
pub mod image;
pub mod lambda;
pub mod lambda_invoke;
pub mod model_server;
pub mod moto;
pub mod otlp;
pub mod stack;
