//! The one integration-test binary.

mod aws_store;
mod http;
mod queue;
