//! The translator: a turn's [`TurnEvent`]s, and its end (the [`TurnReply`] or the [`ApiError`]), as
//! AG-UI events written to a buffer. Pure: the stream-turn function sends what it writes, and a
//! benchmark drives it with a list of events ([`translate_turn`]).
//!
//! Its invariants, which `@ag-ui/client`'s verifier checks: `RUN_STARTED` first and one terminal
//! event last; a text message is closed before anything else is sent; a tool call's start, its
//! arguments and its end go out together; every subagent started is finished (a paused one as
//! `suspended`) before the run finishes; ids are unique within a run.

use std::collections::HashSet;

use agent_core::agent::{Ending, SUBAGENT_CALL_SEPARATOR};
use agent_core::events::ApprovalCall;
use agent_core::tool_names::TODO_WRITE;
use agent_core::turn::TurnReply;
use agent_core::TurnEvent;
use serde_json::{json, Value};

use super::state::{todos_of, AgentState, Member};
use super::wire::{write, Event, Interrupt, Outcome, PatchOperation, SubagentOutcome, TokenUsage, PROTOCOL_VERSION};
use crate::api::ApiError;

/// The `reason` of an approval's interrupt.
pub const APPROVAL_REASON: &str = "tool_approval";

/// A run's translation state. Write [`Translator::start`] first, each event as it comes, and
/// [`Translator::finish`] last.
pub struct Translator {
    thread_id: String,
    run_id: String,
    state: AgentState,
    /// Whether the state's `STATE_SNAPSHOT` went out: no delta is sent before it.
    snapshot_sent: bool,
    /// Tool calls the client holds already (the calls `resume` answers, those of the input's
    /// messages): the turn may run them now, but their starts are not sent again.
    known: HashSet<String>,
    /// The open text message.
    text: Option<String>,
    /// Whether any of the model's text was streamed in this run.
    text_streamed: bool,
    /// The assistant message of the current model call, which holds its tool calls.
    step_message: Option<String>,
    messages_minted: u32,
    /// Tool calls shown (start, arguments, end) in this run.
    shown: HashSet<String>,
    /// `todowrite` calls waiting for their result, with the list each sets.
    todo_calls: Vec<(String, Value)>,
    /// Subagents started and not yet finished.
    open_subagents: Vec<String>,
    /// Subagents paused on an approval, finished as `suspended` once the calls waiting are known.
    suspended: Vec<String>,
}

impl Translator {
    /// A run of `thread_id` with id `run_id`, to a client that holds the tool calls `known` already.
    pub fn new(thread_id: &str, run_id: &str, known: impl IntoIterator<Item = String>) -> Self {
        Self {
            thread_id: thread_id.to_owned(),
            run_id: run_id.to_owned(),
            state: AgentState::default(),
            snapshot_sent: false,
            known: known.into_iter().collect(),
            text: None,
            text_streamed: false,
            step_message: None,
            messages_minted: 0,
            shown: HashSet::new(),
            todo_calls: Vec::new(),
            open_subagents: Vec::new(),
            suspended: Vec::new(),
        }
    }

    /// `RUN_STARTED`.
    pub fn start(&mut self, out: &mut Vec<u8>) {
        write(
            out,
            &Event::RunStarted { thread_id: &self.thread_id, run_id: &self.run_id, protocol_version: PROTOCOL_VERSION },
        );
    }

    /// The state the turn starts from (the session as it loaded it), as `STATE_SNAPSHOT`.
    pub fn loaded(&mut self, state: AgentState, out: &mut Vec<u8>) {
        self.state = state;
        self.snapshot_sent = true;
        write(out, &Event::StateSnapshot { snapshot: &self.state.snapshot() });
    }

    /// The AG-UI events of one of the turn's events.
    pub fn event(&mut self, event: &TurnEvent, out: &mut Vec<u8>) {
        if let TurnEvent::MessageDelta { text } = event {
            self.delta(text, out);
            return;
        }
        // A text segment ends where anything else happens: before a tool call above all.
        self.close_text(out);
        self.other(event, None, out);
    }

    /// Sets the plan shown (the planner's, read after its turn) and sends the change.
    pub fn plan(&mut self, plan: Value, out: &mut Vec<u8>) {
        self.change(Member::Plan, plan, out);
    }

    /// The run's end: any text closed, the calls an approval waits on shown, and `RUN_FINISHED`
    /// (with an interrupt outcome when the turn waits for approval) or `RUN_ERROR`.
    pub fn finish(&mut self, end: Result<&TurnReply, &ApiError>, out: &mut Vec<u8>) {
        self.close_text(out);
        let reply = match end {
            Ok(reply) => reply,
            Err(err) => {
                write(out, &Event::RunError { message: &err.message, code: err.code });
                return;
            }
        };
        // A replayed reply (and any turn whose text was not streamed) still shows its text.
        if !self.text_streamed && !reply.reply.is_empty() {
            self.delta(&reply.reply, out);
            self.close_text(out);
        }
        let interrupts: Vec<Interrupt> = match reply.ending {
            Ending::AwaitingApproval => {
                for call in &reply.pending_approval {
                    self.show_waiting(call, out);
                }
                self.finish_suspended(&reply.pending_approval, out);
                reply.pending_approval.iter().map(interrupt).collect()
            }
            _ => Vec::new(),
        };
        for subagent in std::mem::take(&mut self.open_subagents) {
            write(
                out,
                &Event::SubagentFinished {
                    subagent_run_id: &subagent,
                    result: None,
                    outcome: SubagentOutcome::Success,
                },
            );
        }
        let outcome = match interrupts.is_empty() {
            true => Outcome::Success,
            false => Outcome::Interrupt { interrupts: &interrupts },
        };
        let usage = &reply.usage;
        let usage = TokenUsage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            total_tokens: usage.input_tokens + usage.output_tokens,
            cached_input_tokens: usage.cache_read_tokens,
            cache_write_input_tokens: usage.cache_write_tokens,
        };
        write(
            out,
            &Event::RunFinished {
                thread_id: &self.thread_id,
                run_id: &self.run_id,
                result: serde_json::to_value(reply).ok(),
                outcome,
                usage: Some([usage]),
            },
        );
    }

    fn delta(&mut self, text: &str, out: &mut Vec<u8>) {
        if text.is_empty() {
            return;
        }
        if self.text.is_none() {
            let id = self.mint_message();
            write(out, &Event::TextMessageStart { message_id: &id, role: "assistant" });
            self.step_message = Some(id.clone());
            self.text = Some(id);
        }
        self.text_streamed = true;
        if let Some(id) = &self.text {
            write(out, &Event::TextMessageContent { message_id: id, delta: text });
        }
    }

    fn close_text(&mut self, out: &mut Vec<u8>) {
        if let Some(id) = self.text.take() {
            write(out, &Event::TextMessageEnd { message_id: &id });
        }
    }

    fn mint_message(&mut self) -> String {
        self.messages_minted += 1;
        format!("{}:m{}", self.run_id, self.messages_minted)
    }

    /// Every event but text; `subagent` is the subagent whose loop sent it (`None`: the turn's own).
    fn other(&mut self, event: &TurnEvent, subagent: Option<&str>, out: &mut Vec<u8>) {
        match event {
            TurnEvent::Started { .. } | TurnEvent::MessageDelta { .. } => {}
            // A new model call is a new assistant message; a subagent's calls hold no text.
            TurnEvent::ModelCall { .. } => {
                if subagent.is_none() {
                    self.step_message = None;
                }
            }
            TurnEvent::SkillLoaded { skill, .. } => {
                if subagent.is_none() {
                    self.change(Member::Skill, Value::String(skill.clone()), out);
                }
            }
            TurnEvent::ToolCall { id, name, arguments, .. } => {
                let id = scoped(subagent, id);
                if subagent.is_none() && name == TODO_WRITE {
                    if let Some(todos) = todos_of(arguments) {
                        self.todo_calls.push((id.clone(), todos));
                    }
                }
                self.show_call(&id, name, arguments, subagent, out);
            }
            TurnEvent::ToolResult { id, content, ok, .. } => {
                let id = scoped(subagent, id);
                let message_id = format!("{id}:result");
                write(
                    out,
                    &Event::ToolCallResult {
                        message_id: &message_id,
                        tool_call_id: &id,
                        content,
                        role: "tool",
                        subagent_run_id: subagent,
                    },
                );
                if let Some(index) = self.todo_calls.iter().position(|(call, _)| *call == id) {
                    let (_, todos) = self.todo_calls.swap_remove(index);
                    if *ok {
                        self.change(Member::Todos, todos, out);
                    }
                }
            }
            TurnEvent::FileWritten { path, size } => {
                let value = json!({"path": path, "size": size});
                write(out, &Event::Custom { name: "file.written", value, subagent_run_id: subagent });
            }
            TurnEvent::FileShown { path, media_type, size, sha256, attached } => {
                let value = json!({"path": path, "media_type": media_type, "size": size, "sha256": sha256, "attached": attached});
                write(out, &Event::Custom { name: "file.shown", value, subagent_run_id: subagent });
            }
            TurnEvent::SubagentStarted { subagent: id, parent, call_id, agent_type, description, .. } => {
                let parent_call = scoped(parent.as_deref(), call_id);
                write(
                    out,
                    &Event::SubagentStarted {
                        subagent_run_id: id,
                        name: agent_type,
                        description,
                        parent_subagent_run_id: parent.as_deref(),
                        parent_tool_call_id: &parent_call,
                    },
                );
                self.open_subagents.push(id.clone());
            }
            TurnEvent::SubagentCompleted { subagent: id, ending, steps, summary, .. } => {
                self.open_subagents.retain(|open| open != id);
                match ending.as_str() {
                    "awaiting_approval" => self.suspended.push(id.clone()),
                    "failed" => {
                        let message = if summary.is_empty() { "the subagent failed" } else { summary.as_str() };
                        write(out, &Event::SubagentError { subagent_run_id: id, message, code: "subagent_failed" });
                    }
                    _ => {
                        let result = json!({"ending": ending, "steps": steps, "summary": summary});
                        write(
                            out,
                            &Event::SubagentFinished {
                                subagent_run_id: id,
                                result: Some(result),
                                outcome: SubagentOutcome::Success,
                            },
                        );
                    }
                }
            }
            TurnEvent::ApprovalRequested { calls } => {
                for call in calls {
                    self.show_waiting(call, out);
                }
                self.finish_suspended(calls, out);
            }
            TurnEvent::Nested { subagent, event } => self.other(event, Some(subagent), out),
        }
    }

    /// A call waiting for approval, shown unless it already was: its id is the one decisions name.
    fn show_waiting(&mut self, call: &ApprovalCall, out: &mut Vec<u8>) {
        if !self.shown.contains(&call.id) {
            self.show_call(&call.id, &call.name, &call.arguments, call.subagent.as_deref(), out);
        }
    }

    /// A tool call's start, arguments and end, unless the client holds it already (a run that
    /// paused on it sent them).
    fn show_call(&mut self, id: &str, name: &str, arguments: &Value, subagent: Option<&str>, out: &mut Vec<u8>) {
        if self.known.contains(id) || !self.shown.insert(id.to_owned()) {
            return;
        }
        let parent = match subagent {
            Some(_) => None,
            None => Some(match &self.step_message {
                Some(message) => message.clone(),
                None => {
                    let message = self.mint_message();
                    self.step_message = Some(message.clone());
                    message
                }
            }),
        };
        write(
            out,
            &Event::ToolCallStart {
                tool_call_id: id,
                tool_call_name: name,
                parent_message_id: parent.as_deref(),
                subagent_run_id: subagent,
            },
        );
        let arguments = arguments.to_string();
        write(out, &Event::ToolCallArgs { tool_call_id: id, delta: &arguments, subagent_run_id: subagent });
        write(out, &Event::ToolCallEnd { tool_call_id: id, subagent_run_id: subagent });
    }

    /// The subagents paused on an approval, finished as `suspended` with the interrupts that are
    /// their own calls (a subagent paused only because one of its own subagents was has none).
    fn finish_suspended(&mut self, calls: &[ApprovalCall], out: &mut Vec<u8>) {
        for subagent in std::mem::take(&mut self.suspended) {
            let ids: Vec<&str> = calls
                .iter()
                .filter(|call| call.subagent.as_deref() == Some(subagent.as_str()))
                .map(|call| call.id.as_str())
                .collect();
            write(
                out,
                &Event::SubagentFinished {
                    subagent_run_id: &subagent,
                    result: None,
                    outcome: SubagentOutcome::Suspended { interrupt_ids: &ids },
                },
            );
        }
    }

    /// Sets a member of the state and sends the change when there is one.
    fn change(&mut self, member: Member, value: Value, out: &mut Vec<u8>) {
        // A delta patches a snapshot the client holds: a run whose session was never loaded sends
        // the state it assumes first.
        if !self.snapshot_sent {
            let assumed = self.state.clone();
            self.loaded(assumed, out);
        }
        if self.state.set(member, value) {
            let operation = PatchOperation { op: "replace", path: member.path(), value: self.state.get(member) };
            write(out, &Event::StateDelta { delta: std::slice::from_ref(&operation) });
        }
    }
}

/// A tool call's id in the stream: a subagent's calls are named as decisions name them
/// (`sa-1/call_1`), so two subagents' calls never share an id.
fn scoped(subagent: Option<&str>, id: &str) -> String {
    match subagent {
        Some(subagent) => format!("{subagent}{SUBAGENT_CALL_SEPARATOR}{id}"),
        None => id.to_owned(),
    }
}

/// The interrupt a call waiting for approval is: answered by a `resume` entry with its id.
fn interrupt(call: &ApprovalCall) -> Interrupt {
    Interrupt {
        id: call.id.clone(),
        reason: APPROVAL_REASON,
        message: format!("Approve the call of `{}` ({})?", call.name, call.summary),
        tool_call_id: call.id.clone(),
        response_schema: decision_schema(),
        subagent_run_id: call.subagent.clone(),
        metadata: json!({"tool": call.name, "arguments": call.arguments}),
    }
}

/// What a `resume` entry's payload is: one of the HTTP API's decisions.
fn decision_schema() -> Value {
    json!({
        "type": "object",
        "oneOf": [
            {"properties": {"decision": {"const": "approve"}}, "required": ["decision"]},
            {"properties": {"decision": {"const": "edit"}, "arguments": {"type": "object"}},
             "required": ["decision", "arguments"]},
            {"properties": {"decision": {"const": "reject"}, "message": {"type": "string"}},
             "required": ["decision"]}
        ]
    })
}

/// The bytes a whole run is sent as, from its state, its events and its end: what the stream-turn
/// function writes for the same turn, in one buffer (for benchmarks and tests).
pub fn translate_turn(
    thread_id: &str,
    run_id: &str,
    state: AgentState,
    events: &[TurnEvent],
    end: Result<&TurnReply, &ApiError>,
) -> Vec<u8> {
    let mut translator = Translator::new(thread_id, run_id, Vec::new());
    let mut out = Vec::with_capacity(256 * (events.len() + 4));
    translator.start(&mut out);
    translator.loaded(state, &mut out);
    for event in events {
        translator.event(event, &mut out);
    }
    translator.finish(end, &mut out);
    out
}
