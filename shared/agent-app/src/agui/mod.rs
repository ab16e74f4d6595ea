//! AG-UI: a turn offered as an AG-UI 1.0 event stream (`RunAgentInput` in, AG-UI events out), the
//! pure part. [`input`] makes a `RunAgentInput` into the turn it asks for; [`translate`] turns the
//! turn's events and its end into AG-UI events ([`Translator`], and [`translate_turn`] for a whole
//! run at once); [`state`] is the agent state those events show; [`wire`] is the events' JSON and
//! their SSE framing. The stream-turn function does the I/O (`docs/ag-ui.md`).

pub mod input;
pub mod state;
pub mod translate;
pub mod wire;

#[cfg(test)]
mod tests;

pub use input::{parse_run_input, RunInput};
pub use state::{plan_view, AgentState};
pub use translate::{translate_turn, Translator};
