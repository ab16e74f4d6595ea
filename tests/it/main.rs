//! The one integration-test binary.

mod aws_store;
mod catalog;
mod forced;
mod http;
mod planner;
mod queue;
