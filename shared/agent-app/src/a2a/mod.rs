//! A2A: the agent card, and the JSON-RPC methods that run turns as A2A tasks.
