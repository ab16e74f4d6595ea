//! The one integration-test binary.

mod aws_store;
mod background;
mod bedrock;
mod bounds;
mod catalog;
mod context_budget;
mod exactly_once;
mod faults;
mod forced;
mod http;
mod http_files;
mod long_sessions;
mod metrics;
mod planner;
mod queue;
mod sandbox;
mod sandbox_agentcore;
mod sandbox_lambda;
mod secrets;
mod sessions_list;
mod storage_floor;
mod streaming;
mod template;
mod traces;
mod turn_logs;
mod usage;
