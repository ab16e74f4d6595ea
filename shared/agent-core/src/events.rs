//! What a running turn reports as it goes (streamed to clients as Server-Sent Events): the
//! model's text as it arrives, skills loaded, tool calls and their results.

use serde::Serialize;
use serde_json::Value;

use crate::model::DeltaSink;

/// Longest argument or result summary carried by a tool event, in bytes.
pub const MAX_SUMMARY_BYTES: usize = 200;
/// Longest single argument value shown in a tool-call summary, in bytes.
const MAX_SUMMARY_VALUE_BYTES: usize = 60;

/// One event of a running turn. Its JSON (the variant's fields) is the event's data; its
/// [`TurnEvent::name`] is the SSE event name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum TurnEvent {
    /// The turn was accepted and is running.
    Started { session_id: String },
    /// A piece of the model's text, in order.
    MessageDelta { text: String },
    /// A skill became current: loaded by the model, or forced by a slash command.
    SkillLoaded { skill: String, forced: bool },
    /// The model asked for a tool; `summary` is a short, cut rendering of the arguments.
    ToolCall { id: String, name: String, summary: String },
    /// A tool call finished; `ok` is false for an error result, `summary` is its first line, cut.
    ToolResult { id: String, name: String, ok: bool, bytes: usize, summary: String },
    /// A file of the workspace was created or changed (by a file tool or a command), as it happens;
    /// `path` is its `/workspace` path, downloadable from `GET /sessions/{id}/files/{path}` once the
    /// turn is committed.
    FileWritten { path: String, size: u64 },
}

impl TurnEvent {
    /// The SSE event name.
    pub fn name(&self) -> &'static str {
        match self {
            TurnEvent::Started { .. } => "turn.started",
            TurnEvent::MessageDelta { .. } => "message.delta",
            TurnEvent::SkillLoaded { .. } => "skill.loaded",
            TurnEvent::ToolCall { .. } => "tool.call",
            TurnEvent::ToolResult { .. } => "tool.result",
            TurnEvent::FileWritten { .. } => "file.written",
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
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
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
        filtered.event(TurnEvent::SkillLoaded { skill: "a/b".into(), forced: false });
        assert!(!filtered.wants_deltas());
        assert_eq!(collect.0.lock().unwrap().len(), 1);
        assert_eq!(TurnEvent::SkillLoaded { skill: "a/b".into(), forced: false }.name(), "skill.loaded");
        assert_eq!(
            serde_json::to_value(TurnEvent::ToolResult {
                id: "c".into(),
                name: "ls".into(),
                ok: true,
                bytes: 3,
                summary: "a".into()
            })
            .unwrap(),
            json!({"id": "c", "name": "ls", "ok": true, "bytes": 3, "summary": "a"})
        );
    }
}
