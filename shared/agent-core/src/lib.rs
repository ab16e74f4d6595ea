//! The agent's core: skills, the two-state prompt, the virtual filesystem, tools and the
//! bounded ReAct loop. It does no I/O of its own: storage and the model sit behind traits.

pub mod agent;
pub mod budget;
pub mod events;
pub mod files;
pub mod permissions;
pub mod planner;
pub mod pricing;
pub mod prompt;
pub mod skills;
pub mod telemetry;
pub mod tool_names;
pub mod tools;
pub mod transcript;
pub mod turn;
pub mod vfs;

// The ports, whole: the traits and plain types the adapters implement live in `agent-ports`, so
// that adapters compile against them alone; `agent_core::store` and the rest still name them.
pub use agent_ports::{expert, ids, keys, message, model, net, sandbox, store};

pub use events::{NoObserver, TurnEvent, TurnObserver};
pub use ids::{InvalidId, MemoryPath, SessionId, SkillPath, TicketId, UserId};
pub use message::{ChatRequest, ChatResponse, JsonSchemaFormat, Message, StopReason, ToolCall, ToolSpec, Usage};
pub use model::{complete_as_one_delta, ChatModel, DeltaSink, ModelError};
pub use store::{
    Accepted, Claim, CommitKey, HistoryPage, HistorySummary, IdempotencyKey, Object, ObjectMeta, ObjectStore, Session,
    SessionState, SessionStore, StoreError, TodoItem, TodoStatus, TurnCommit, TurnStatus, WorkspaceFile,
};
