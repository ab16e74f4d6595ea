//! A2A: the agent card, and the JSON-RPC methods that run turns as A2A tasks (docs/a2a.md).
//!
//! A context is a session, a message's id is its turn's idempotency key (a message sent again
//! replays its turn), and a task is one turn — with the turns that answered its approval pauses,
//! whose keys derive from it ([`task::TaskId::resume_key`]). The caller is the token's subject,
//! never anything in a body. Version 1.0 is served under its method names and 0.3 under its own
//! (`message/send`...), each answered in its version's shapes ([`Dialect`]).
//!
//! The pure parts: [`rpc`] (the envelope, the methods, the error codes), [`params`], [`card`],
//! [`task`] and [`wire`] (a turn's end as a task, in either version), and [`stream`], whose
//! [`stream::encode_turn`] turns a `Vec<TurnEvent>` and an end into the bytes of a stream (the
//! benchmark's entry). [`serve`] runs the methods over the turn service.

pub mod card;
pub mod params;
pub mod rpc;
pub mod serve;
pub mod stream;
pub mod task;
pub mod task_id;
pub mod wire;

pub use card::{agent_card, AgentInfo};
pub use rpc::{Method, RpcError, RpcRequest};
pub use stream::{encode_turn, StreamEncoder};
pub use task::{TaskId, TurnEnd};

/// The protocol version the card's interface declares.
pub const PROTOCOL_VERSION: &str = "1.0";

/// Which version of the protocol a request speaks (told by its method's name), and so the shapes
/// of its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// A2A 1.0: `SendMessage`, `TASK_STATE_COMPLETED`, `{"task": {...}}`.
    V1,
    /// A2A 0.3: `message/send`, `completed`, `{"kind": "task", ...}`.
    V03,
}

impl Dialect {
    /// An object's `kind` tag: 0.3 names every object's kind, 1.0 none.
    pub fn kind(self, kind: &'static str) -> Option<&'static str> {
        match self {
            Dialect::V1 => None,
            Dialect::V03 => Some(kind),
        }
    }
}
