//! The ports: the traits the agent talks to storage, the model, the sandbox and the experts
//! through, and the plain types they carry. Adapters (llm, aws-store, local-store, experts,
//! sandbox) depend on this crate alone, never on `agent-core`, which re-exports it whole.

pub mod bundle;
pub mod expert;
pub mod ids;
pub mod keys;
pub mod message;
pub mod model;
pub mod net;
pub mod sandbox;
pub mod store;
// Its own tests build it too, with the dev-dependency on tokio.
#[cfg(any(test, feature = "test-support"))]
pub mod testing;

pub use ids::{AgentName, InvalidId, MemoryPath, SessionId, SkillPath, TicketId, UserId};
pub use message::{
    ChatRequest, ChatResponse, FileBytes, FileRef, JsonSchemaFormat, MediaType, Message, StablePrefix,
    StablePrefixHint, StopReason, ToolCall, ToolSpec, Usage,
};
pub use model::{complete_as_one_delta, model_name, ChatModel, DeltaSink, FileInput, ImageTokens, ModelError};
pub use store::{
    Accepted, Claim, CommitKey, HistoryPage, HistorySummary, IdempotencyKey, Object, ObjectMeta, ObjectStore,
    PausedSubagent, PendingApproval, PendingCall, Session, SessionState, SessionStore, StoreError, TodoItem,
    TodoStatus, TurnCommit, TurnStatus, WorkspaceFile,
};
