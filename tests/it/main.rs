//! The one integration-test binary.

mod aws_store;
mod forced;
mod http;
mod planner;
mod queue;
