//! The one integration-test binary.

mod aws_store;
mod background;
mod bedrock;
mod bounds;
mod catalog;
mod exactly_once;
mod faults;
mod forced;
mod http;
mod long_sessions;
mod planner;
mod queue;
mod secrets;
mod streaming;
