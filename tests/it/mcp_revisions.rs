//! The planner's experts at MCP 2026-07-28 and 2025-06-18, served by the MCP Python SDK.
