//! The core's unit tests take their fake model from `agent_ports::testing` (a dev-dependency with
//! its `test-support` feature); the tools' tests still name it here.

pub use agent_ports::testing::ScriptedModel;
