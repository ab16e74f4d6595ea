//! The translator's tests: a turn's events in, the AG-UI events written out, in order.

use agent_core::events::ApprovalCall;
use agent_core::message::Usage;
use agent_core::turn::TurnReply;
use agent_core::TurnEvent;
use serde_json::{json, Value};

use super::translate::{translate_turn, Translator};
use super::AgentState;
use crate::api::ApiError;

/// The events of a run's bytes, each checked to be one `data:` block.
fn parsed(bytes: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(bytes).unwrap();
    assert!(text.ends_with("\n\n"));
    text.trim_end()
        .split("\n\n")
        .map(|block| serde_json::from_str(block.strip_prefix("data: ").expect("a data line")).unwrap())
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|event| event["type"].as_str().unwrap()).collect()
}

fn reply(text: &str, ending: &str, pending: Value) -> TurnReply {
    serde_json::from_value(json!({
        "session_id": "t-1", "reply": text, "current_skill": null, "forced_skill": null,
        "refused_tool_calls": 0, "steps": 1, "usage": Usage::new(100, 20), "ending": ending,
        "version": 3, "pending_approval": pending
    }))
    .unwrap()
}

fn call(id: &str, name: &str, arguments: Value) -> TurnEvent {
    TurnEvent::ToolCall { id: id.into(), name: name.into(), arguments, summary: String::new() }
}

fn result(id: &str, name: &str, content: &str) -> TurnEvent {
    TurnEvent::ToolResult {
        id: id.into(),
        name: name.into(),
        ok: !content.starts_with("Error"),
        bytes: content.len(),
        summary: content.into(),
        content: content.into(),
        truncated: false,
    }
}

fn model_call(step: u32) -> TurnEvent {
    TurnEvent::ModelCall {
        step,
        state: 1,
        skill: None,
        forced: false,
        listing: None,
        tools: Vec::new(),
        prompt_tokens: 10,
    }
}

fn delta(text: &str) -> TurnEvent {
    TurnEvent::MessageDelta { text: text.into() }
}

#[test]
fn a_turn_streams_text_tool_calls_state_changes_and_files_in_order() {
    let todos = json!({"todos": [{"content": "Redactar", "status": "in_progress"}]});
    let turn = [
        TurnEvent::Started { session_id: "t-1".into() },
        model_call(1),
        delta("Voy "),
        delta("a ello."),
        call("c1", "load_skill", json!({"skill_path": "a/b"})),
        result("c1", "load_skill", "Skill a/b loaded."),
        TurnEvent::SkillLoaded { skill: "a/b".into(), forced: false, version: None },
        model_call(2),
        call("c2", "todowrite", todos),
        call("c3", "write_file", json!({"file_path": "/workspace/a.md", "content": "Hola"})),
        result("c2", "todowrite", "Todo list updated: 1 items."),
        result("c3", "write_file", "Created /workspace/a.md"),
        TurnEvent::FileWritten { path: "/workspace/a.md".into(), size: 4 },
        model_call(3),
        delta("Listo."),
    ];
    let end = reply("Listo.", "answered", json!([]));
    let events = parsed(&translate_turn("t-1", "r-1", AgentState::default(), &turn, Ok(&end)));
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "STATE_SNAPSHOT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "STATE_DELTA",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "STATE_DELTA",
            "TOOL_CALL_RESULT",
            "CUSTOM",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED",
        ]
    );
    assert_eq!(events[0]["threadId"], "t-1");
    assert_eq!(events[0]["protocolVersion"], "1.0");
    assert_eq!(events[1]["snapshot"], json!({"skill": null, "todos": [], "plan": null}));
    // The first call belongs to the message whose text preceded it; the second step's to a new one.
    assert_eq!(events[6]["parentMessageId"], events[2]["messageId"]);
    assert_eq!(events[7]["delta"], r#"{"skill_path":"a/b"}"#);
    assert_eq!(events[10]["delta"], json!([{"op": "replace", "path": "/skill", "value": "a/b"}]));
    assert_ne!(events[11]["parentMessageId"], events[2]["messageId"]);
    assert_eq!(events[11]["parentMessageId"], events[14]["parentMessageId"]);
    assert_eq!(
        events[18]["delta"],
        json!([{"op": "replace", "path": "/todos", "value": [{"content": "Redactar", "status": "in_progress"}]}])
    );
    assert_eq!(
        events[20],
        json!({"type": "CUSTOM", "name": "file.written", "value": {"path": "/workspace/a.md", "size": 4}})
    );
    assert_ne!(events[21]["messageId"], events[2]["messageId"]);
    let finished = &events[24];
    assert_eq!(finished["outcome"], json!({"type": "success"}));
    assert_eq!(finished["result"]["version"], 3);
    assert_eq!(
        finished["usage"],
        json!([{"inputTokens": 100, "outputTokens": 20, "totalTokens": 120, "cachedInputTokens": 0,
                "cacheWriteInputTokens": 0}])
    );
}

#[test]
fn a_subagents_paused_call_is_an_interrupt_and_the_subagent_is_suspended() {
    let nested = |event| TurnEvent::Nested { subagent: "sa-1".into(), event: Box::new(event) };
    let waiting = ApprovalCall {
        id: "sa-1/call_9".into(),
        name: "write_file".into(),
        arguments: json!({"file_path": "/workspace/b.md", "content": "B"}),
        summary: "content=B file_path=/workspace/b.md".into(),
        subagent: Some("sa-1".into()),
    };
    let turn = [
        model_call(1),
        call("call_1", "task", json!({"description": "Escribe b.md", "subagent_type": "general-purpose"})),
        TurnEvent::SubagentStarted {
            subagent: "sa-1".into(),
            parent: None,
            call_id: "call_1".into(),
            agent_type: "general-purpose".into(),
            description: "Escribe b.md".into(),
            depth: 1,
        },
        nested(model_call(1)),
        nested(call("call_8", "read_file", json!({"file_path": "/workspace/a.md"}))),
        nested(result("call_8", "read_file", "Hola")),
        TurnEvent::SubagentCompleted {
            subagent: "sa-1".into(),
            ending: "awaiting_approval".into(),
            steps: 2,
            ok: true,
            summary: "waits for a person's approval".into(),
            usage: Usage::default(),
        },
        TurnEvent::ApprovalRequested { calls: vec![waiting.clone()] },
    ];
    let end = reply("", "awaiting_approval", json!([waiting]));
    let events = parsed(&translate_turn("t-1", "r-1", AgentState::default(), &turn, Ok(&end)));
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "STATE_SNAPSHOT",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "SUBAGENT_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "SUBAGENT_FINISHED",
            "RUN_FINISHED",
        ]
    );
    assert_eq!(events[5]["subagentRunId"], "sa-1");
    assert_eq!(events[5]["parentToolCallId"], "call_1");
    assert_eq!(events[6]["toolCallId"], "sa-1/call_8");
    assert_eq!(events[6]["subagentRunId"], "sa-1");
    assert!(events[6].get("parentMessageId").is_none());
    assert_eq!(events[9]["subagentRunId"], "sa-1");
    assert_eq!(events[10]["toolCallId"], "sa-1/call_9");
    assert_eq!(events[13]["outcome"], json!({"type": "suspended", "interruptIds": ["sa-1/call_9"]}));
    let interrupts = &events[14]["outcome"]["interrupts"];
    assert_eq!(events[14]["outcome"]["type"], "interrupt");
    assert_eq!(interrupts[0]["id"], "sa-1/call_9");
    assert_eq!(interrupts[0]["toolCallId"], "sa-1/call_9");
    assert_eq!(interrupts[0]["reason"], "tool_approval");
    assert_eq!(interrupts[0]["subagentRunId"], "sa-1");
    assert_eq!(interrupts[0]["metadata"]["tool"], "write_file");
}

#[test]
fn a_resumed_run_sends_only_the_result_of_the_call_it_answers() {
    let mut translator = Translator::new("t-1", "r-2", vec!["call_1".to_owned()]);
    let mut out = Vec::new();
    translator.start(&mut out);
    translator.loaded(AgentState::default(), &mut out);
    for event in [
        call("call_1", "write_file", json!({"file_path": "/workspace/a.md", "content": "Hola"})),
        result("call_1", "write_file", "Created /workspace/a.md"),
        model_call(2),
        delta("Escrito."),
    ] {
        translator.event(&event, &mut out);
    }
    translator.finish(Ok(&reply("Escrito.", "answered", json!([]))), &mut out);
    let events = parsed(&out);
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "STATE_SNAPSHOT",
            "TOOL_CALL_RESULT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(events[2]["toolCallId"], "call_1");
}

#[test]
fn a_replayed_reply_shows_its_text_and_a_failure_is_a_run_error() {
    let end = reply("Hecho antes.", "answered", json!([]));
    let events = parsed(&translate_turn("t-1", "r-1", AgentState::default(), &[], Ok(&end)));
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "STATE_SNAPSHOT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(events[3]["delta"], "Hecho antes.");

    let failed = ApiError::new(502, "model_provider_failed", "the model provider failed to answer; nothing was saved");
    let events = parsed(&translate_turn("t-1", "r-1", AgentState::default(), &[delta("Emp")], Err(&failed)));
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "STATE_SNAPSHOT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_ERROR"
        ]
    );
    assert_eq!(events[5]["code"], "model_provider_failed");
}

#[test]
fn a_failed_subagent_is_a_subagent_error_and_a_plan_change_a_delta() {
    let turn = [
        TurnEvent::SubagentStarted {
            subagent: "sa-1".into(),
            parent: None,
            call_id: "call_1".into(),
            agent_type: "general-purpose".into(),
            description: "x".into(),
            depth: 1,
        },
        TurnEvent::SubagentCompleted {
            subagent: "sa-1".into(),
            ending: "failed".into(),
            steps: 0,
            ok: false,
            summary: "Error: the subagent stopped".into(),
            usage: Usage::default(),
        },
    ];
    let mut translator = Translator::new("t-1", "r-1", Vec::new());
    let mut out = Vec::new();
    translator.start(&mut out);
    translator.loaded(AgentState::default(), &mut out);
    for event in &turn {
        translator.event(event, &mut out);
    }
    translator.plan(json!({"request": "r", "tasks": [], "position": 0}), &mut out);
    translator.plan(json!({"request": "r", "tasks": [], "position": 0}), &mut out);
    translator.finish(Ok(&reply("Ok", "answered", json!([]))), &mut out);
    let events = parsed(&out);
    assert_eq!(events[3]["type"], "SUBAGENT_ERROR");
    assert_eq!(events[3]["message"], "Error: the subagent stopped");
    assert_eq!(events[4]["type"], "STATE_DELTA");
    assert_eq!(events[4]["delta"][0]["path"], "/plan");
    assert_eq!(events[5]["type"], "TEXT_MESSAGE_START", "the second, unchanged plan sent nothing");
}

#[test]
fn a_change_before_the_session_loaded_sends_the_assumed_snapshot_first() {
    let mut translator = Translator::new("t-1", "r-1", Vec::new());
    let mut out = Vec::new();
    translator.start(&mut out);
    translator.plan(json!({"request": "r", "tasks": [], "position": 0}), &mut out);
    let events = parsed(&out);
    assert_eq!(types(&events), ["RUN_STARTED", "STATE_SNAPSHOT", "STATE_DELTA"]);
    assert_eq!(events[1]["snapshot"], json!({"skill": null, "todos": [], "plan": null}));
}
