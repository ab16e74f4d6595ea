//! What a running turn reports as it goes (streamed to clients as Server-Sent Events): each model
//! call with the prompt state it is made in, the model's text as it arrives, skills loaded, tool
//! calls with their arguments and their results.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::Usage;
use crate::model::DeltaSink;
use crate::store::SessionState;

/// Longest argument or result summary carried by a tool event, in bytes.
pub const MAX_SUMMARY_BYTES: usize = 200;
/// Longest single argument value shown in a tool-call summary, in bytes.
const MAX_SUMMARY_VALUE_BYTES: usize = 60;
/// Longest tool result text carried by a `tool.result` event, in bytes (16 KiB); the history keeps
/// up to [`crate::agent::MAX_TOOL_RESULT_BYTES`].
pub const MAX_EVENT_CONTENT_BYTES: usize = 16 * 1024;

/// One event of a running turn. Its JSON (the variant's fields) is the event's data; its
/// [`TurnEvent::name`] is the SSE event name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum TurnEvent {
    /// The turn was accepted and is running.
    Started { session_id: String },
    /// A model call of the loop is about to be made; sent after the context budget has fitted the
    /// request, so it describes the request as sent. Only turns whose environment knows its prompt
    /// state send it (the skills strategy); the planner's expert rounds do not.
    ModelCall {
        /// The call's number within the turn, from 1.
        step: u32,
        /// 1: no skill is current (the base prompt with the skill listing); 2: a skill is current
        /// (its SKILL.md is in the prompt).
        state: u8,
        /// The current skill's path in state 2, else `None` (JSON `null`).
        skill: Option<String>,
        /// Whether the current skill was forced by a slash command (false in state 1).
        forced: bool,
        /// The skill listing in the prompt, in state 1 only (else `null`).
        listing: Option<ListingShown>,
        /// The names of the tools offered in this request, in order.
        tools: Vec<String>,
        /// The request's input tokens as [`crate::budget::estimate_request`] estimates them (the
        /// same pessimistic estimate the context budget fits against), after any trims.
        prompt_tokens: usize,
    },
    /// A piece of the model's text, in order.
    MessageDelta { text: String },
    /// A skill became current: loaded by the model, or forced by a slash command.
    SkillLoaded {
        skill: String,
        forced: bool,
        /// The published version loaded; absent for a skill served from its folder.
        #[serde(skip_serializing_if = "Option::is_none")]
        version: Option<u32>,
    },
    /// The model asked for a tool. `arguments` is the call's whole arguments JSON as it is run and
    /// stored: arguments over the loop's bounds were already replaced by `{"_omitted_bytes": n}`.
    /// `summary` is a short, cut, one-line rendering of them.
    ToolCall { id: String, name: String, arguments: Value, summary: String },
    /// A tool call finished; `ok` is false for an error result. `bytes` is the size of the result
    /// as stored in the history, `content` that text cut to at most [`MAX_EVENT_CONTENT_BYTES`] at
    /// a character boundary, with `truncated` true when it was cut; `summary` is its first line, cut.
    ToolResult { id: String, name: String, ok: bool, bytes: usize, summary: String, content: String, truncated: bool },
    /// A file of the workspace was created or changed (by a file tool or a command), as it happens;
    /// `path` is its `/workspace` path, downloadable from `GET /sessions/{id}/files/{path}` once the
    /// turn is committed.
    FileWritten { path: String, size: u64 },
    /// An image or a PDF was shown to the model: `attached` to the user's message, or returned by a
    /// tool (`read_file`). `media_type`, `size` and `sha256` describe the bytes the model is sent
    /// (checked, and downscaled where a bound asked); `GET /sessions/{id}/shown/{sha256}` serves them.
    FileShown { path: String, media_type: String, size: u64, sha256: String, attached: bool },
    /// A `task` call started a subagent. `subagent` is its id within the turn (`sa-1`, `sa-2`...),
    /// `parent` the id of the subagent that called `task` (`null` for the turn's own agent),
    /// `call_id` that call's id, `agent_type` the subagent's type, `description` the task as given,
    /// cut to [`MAX_SUMMARY_BYTES`], and `depth` its level (1 for the turn's own agent's subagents).
    SubagentStarted {
        subagent: String,
        parent: Option<String>,
        call_id: String,
        agent_type: String,
        description: String,
        depth: u32,
    },
    /// A subagent finished: how its loop ended (`answered`, `step_limit`, `deadline`, `aborted`,
    /// `context_full`, or `failed` when its model failed), its model calls, and the first line of the
    /// answer returned as the `task` call's result, cut, and the tokens of its model calls and its
    /// own subagents' (split as the provider counted them; the turn's `usage` includes them too).
    SubagentCompleted { subagent: String, ending: String, steps: u32, ok: bool, summary: String, usage: Usage },
    /// The turn stopped before running tool calls that need a person's approval: each call's id,
    /// tool, whole arguments and their one-line summary. The turn ends `awaiting_approval`; the
    /// next turn request answers them.
    ApprovalRequested { calls: Vec<ApprovalCall> },
    /// An event of a subagent's own loop (its model calls, tool calls and results, skills loaded,
    /// files written), tagged with the subagent's id; its name and fields are the inner event's.
    #[serde(serialize_with = "serialize_nested")]
    Nested { subagent: String, event: Box<TurnEvent> },
}

/// A nested event's JSON: the inner event's fields with `subagent` added. Written by hand, as
/// `#[serde(flatten)]` of the enum within itself would never finish instantiating.
fn serialize_nested<S: serde::Serializer>(subagent: &str, event: &TurnEvent, serializer: S) -> Result<S::Ok, S::Error> {
    let mut value = serde_json::to_value(event).map_err(serde::ser::Error::custom)?;
    if let Value::Object(fields) = &mut value {
        fields.insert("subagent".to_owned(), Value::String(subagent.to_owned()));
    }
    value.serialize(serializer)
}

/// A tool call waiting for approval, as the turn's event and its reply show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalCall {
    /// What a decision names: the call's id, `{subagent}/{call id}` for a subagent's call.
    pub id: String,
    pub name: String,
    pub arguments: Value,
    pub summary: String,
    /// The subagent (`sa-1`...) that made the call; absent for the turn's own agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<String>,
}

impl ApprovalCall {
    /// `call` as it waits; `subagent` made it, or the turn's own agent when `None`.
    pub fn of(call: &crate::message::ToolCall, subagent: Option<&str>) -> Self {
        Self {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            summary: summarise_arguments(&call.arguments),
            subagent: subagent.map(str::to_owned),
        }
    }
}

/// The skill listing a state-1 model call shows: the counts of the listing as chosen for the turn
/// ([`crate::skills::Listing`]) and how far the context budget shrank it for this call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListingShown {
    /// Skills of the account.
    pub total: usize,
    /// Skills the chosen listing shows with their whole description.
    pub shown_in_full: usize,
    /// Whether `find_skills` is offered because not every skill is shown in full.
    pub search: bool,
    /// 0 for the listing as chosen; n when the context budget replaced it by its n-th smaller tier
    /// for this call (the counts above still describe the chosen listing).
    pub tier: usize,
}

impl TurnEvent {
    /// The SSE event name.
    pub fn name(&self) -> &'static str {
        match self {
            TurnEvent::Started { .. } => "turn.started",
            TurnEvent::ModelCall { .. } => "model.call",
            TurnEvent::MessageDelta { .. } => "message.delta",
            TurnEvent::SkillLoaded { .. } => "skill.loaded",
            TurnEvent::ToolCall { .. } => "tool.call",
            TurnEvent::ToolResult { .. } => "tool.result",
            TurnEvent::FileWritten { .. } => "file.written",
            TurnEvent::FileShown { .. } => "file.shown",
            TurnEvent::SubagentStarted { .. } => "subagent.started",
            TurnEvent::SubagentCompleted { .. } => "subagent.completed",
            TurnEvent::ApprovalRequested { .. } => "approval.requested",
            TurnEvent::Nested { event, .. } => event.name(),
        }
    }
}

/// Receives a turn's events. Called from the turn's own task, so implementations must not block.
pub trait TurnObserver: Send + Sync {
    fn event(&self, event: TurnEvent);

    /// Whether the model's text is wanted as it arrives; when false the loop makes buffered model
    /// calls and sends no [`TurnEvent::MessageDelta`].
    fn wants_deltas(&self) -> bool {
        true
    }

    /// The session's state as the turn found it, once it is loaded and before any model call: what
    /// a protocol that shows the agent's state (AG-UI) starts from, without a read of its own. Not
    /// called for a replayed turn. Our own events say nothing of it.
    fn session_loaded(&self, _state: &SessionState) {}

    /// The planner's plan as the turn committed it (after the commit succeeded).
    fn plan_committed(&self, _plan: Option<&Value>) {}
}

/// The observer of a turn nobody watches: buffered model calls, no events.
pub struct NoObserver;

impl TurnObserver for NoObserver {
    fn event(&self, _event: TurnEvent) {}

    fn wants_deltas(&self) -> bool {
        false
    }
}

/// Forwards tool and skill events but not the model's text: for model calls whose text is not the
/// reply (the planner's expert rounds).
pub struct WithoutDeltas<'a>(pub &'a dyn TurnObserver);

impl TurnObserver for WithoutDeltas<'_> {
    fn event(&self, event: TurnEvent) {
        if !matches!(event, TurnEvent::MessageDelta { .. }) {
            self.0.event(event);
        }
    }

    fn wants_deltas(&self) -> bool {
        false
    }
}

/// Turns a model's deltas into [`TurnEvent::MessageDelta`], up to `limit` bytes of text (the
/// part of a reply that is kept), so a runaway reply cannot flood the client.
pub(crate) struct DeltaEvents<'a> {
    observer: &'a dyn TurnObserver,
    limit: usize,
    sent: std::sync::atomic::AtomicUsize,
}

impl<'a> DeltaEvents<'a> {
    pub(crate) fn new(observer: &'a dyn TurnObserver, limit: usize) -> Self {
        Self { observer, limit, sent: std::sync::atomic::AtomicUsize::new(0) }
    }
}

impl DeltaSink for DeltaEvents<'_> {
    fn delta(&self, text: &str) {
        use std::sync::atomic::Ordering;
        let sent = self.sent.load(Ordering::Relaxed);
        let room = self.limit.saturating_sub(sent);
        if text.is_empty() || room == 0 {
            return;
        }
        let text = cut(text, room);
        self.sent.store(sent + text.len(), Ordering::Relaxed);
        self.observer.event(TurnEvent::MessageDelta { text: text.to_owned() });
    }
}

/// A one-line rendering of a tool call's arguments: `key=value` pairs, each value cut.
pub fn summarise_arguments(arguments: &Value) -> String {
    let summary = match arguments {
        Value::Object(fields) => fields
            .iter()
            .map(|(key, value)| {
                let value = match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                format!("{}={}", cut(key, MAX_SUMMARY_VALUE_BYTES), one_line(cut(&value, MAX_SUMMARY_VALUE_BYTES)))
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => one_line(cut(&other.to_string(), MAX_SUMMARY_VALUE_BYTES)),
    };
    cut(&summary, MAX_SUMMARY_BYTES).to_owned()
}

/// A tool result's text for its event: cut to at most [`MAX_EVENT_CONTENT_BYTES`] at a character
/// boundary, and whether it was cut.
pub fn event_content(content: &str) -> (String, bool) {
    let shown = cut(content, MAX_EVENT_CONTENT_BYTES);
    (shown.to_owned(), shown.len() < content.len())
}

/// The first line of a tool result, cut.
pub fn summarise_result(content: &str) -> String {
    let first = content.lines().next().unwrap_or("");
    cut(first, MAX_SUMMARY_BYTES).to_owned()
}

/// Whether a tool result reports a failure: every tool starts its error results with `Error`.
pub fn is_error_result(content: &str) -> bool {
    content.starts_with("Error")
}

fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// The longest prefix of `text` of at most `max` bytes that ends at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Collect(Mutex<Vec<TurnEvent>>);

    impl TurnObserver for Collect {
        fn event(&self, event: TurnEvent) {
            self.0.lock().unwrap().push(event);
        }
    }

    #[test]
    fn summaries_are_short_single_lines() {
        let long = "x".repeat(500);
        let summary = summarise_arguments(&json!({"file_path": "/workspace/a.md", "content": format!("a\nb{long}")}));
        assert!(summary.len() <= MAX_SUMMARY_BYTES, "{summary}");
        assert!(summary.starts_with("content=a b"), "{summary}");
        assert!(summary.contains("file_path=/workspace/a.md"), "{summary}");
        assert!(!summary.contains('\n'));
        assert_eq!(summarise_result("Error: File not found: /x\nmore"), "Error: File not found: /x");
        assert_eq!(summarise_result(&"é".repeat(300)).len(), 200);
        assert!(is_error_result("Error: nope"));
        assert!(!is_error_result("Created /workspace/a.md"));
    }

    #[test]
    fn deltas_stop_at_the_limit_on_a_character_boundary() {
        let collect = Collect::default();
        let sink = DeltaEvents::new(&collect, 5);
        sink.delta("ab");
        sink.delta("");
        sink.delta("cdé");
        sink.delta("more");
        let texts: Vec<String> = collect
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|event| match event {
                TurnEvent::MessageDelta { text } => text.clone(),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(texts, ["ab", "cd", "m"]);
    }

    #[test]
    fn without_deltas_filters_only_text() {
        let collect = Collect::default();
        let filtered = WithoutDeltas(&collect);
        filtered.event(TurnEvent::MessageDelta { text: "hidden".into() });
        filtered.event(TurnEvent::SkillLoaded { skill: "a/b".into(), forced: false, version: None });
        assert!(!filtered.wants_deltas());
        assert_eq!(collect.0.lock().unwrap().len(), 1);
        assert_eq!(TurnEvent::SkillLoaded { skill: "a/b".into(), forced: false, version: None }.name(), "skill.loaded");
        assert_eq!(
            serde_json::to_value(TurnEvent::ToolResult {
                id: "c".into(),
                name: "ls".into(),
                ok: true,
                bytes: 3,
                summary: "a".into(),
                content: "a\nb".into(),
                truncated: false,
            })
            .unwrap(),
            json!({"id": "c", "name": "ls", "ok": true, "bytes": 3, "summary": "a", "content": "a\nb", "truncated": false})
        );
    }

    #[test]
    fn event_content_is_cut_at_16_kib_on_a_character_boundary() {
        assert_eq!(event_content("short"), ("short".to_owned(), false));
        let exact = "x".repeat(MAX_EVENT_CONTENT_BYTES);
        assert_eq!(event_content(&exact), (exact.clone(), false));
        // "é" is two bytes: 16 KiB - 1 of "x" then "é" crosses the limit, so "é" goes whole.
        let crossing = format!("{}é tail", "x".repeat(MAX_EVENT_CONTENT_BYTES - 1));
        let (shown, truncated) = event_content(&crossing);
        assert!(truncated);
        assert_eq!(shown.len(), MAX_EVENT_CONTENT_BYTES - 1);
        assert!(shown.chars().all(|c| c == 'x'));
    }

    #[test]
    fn model_call_and_tool_call_serialise_with_their_sse_names() {
        let call = TurnEvent::ModelCall {
            step: 1,
            state: 1,
            skill: None,
            forced: false,
            listing: Some(ListingShown { total: 12, shown_in_full: 10, search: true, tier: 0 }),
            tools: vec!["load_skill".into(), "ls".into()],
            prompt_tokens: 1234,
        };
        assert_eq!(call.name(), "model.call");
        assert_eq!(
            serde_json::to_value(&call).unwrap(),
            json!({"step": 1, "state": 1, "skill": null, "forced": false,
                   "listing": {"total": 12, "shown_in_full": 10, "search": true, "tier": 0},
                   "tools": ["load_skill", "ls"], "prompt_tokens": 1234})
        );
        let tool = TurnEvent::ToolCall {
            id: "c".into(),
            name: "ls".into(),
            arguments: json!({"path": "/workspace"}),
            summary: "path=/workspace".into(),
        };
        assert_eq!(tool.name(), "tool.call");
        assert_eq!(
            serde_json::to_value(&tool).unwrap(),
            json!({"id": "c", "name": "ls", "arguments": {"path": "/workspace"}, "summary": "path=/workspace"})
        );
    }
}
