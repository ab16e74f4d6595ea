//! The experts crate's integration tests, one binary: the MCP client and the agent's expert session
//! against the official Python SDK's server (local-stack's `ExpertServer`, needs `pip install mcp`).

mod experts_session;
mod mcp_client;
mod revisions;

use experts::Expert;
use local_stack::experts::ExpertServer;

/// The expert `name` served by `server`.
fn expert(server: &ExpertServer, name: &str) -> Expert {
    Expert::new(name, &server.url).unwrap()
}
