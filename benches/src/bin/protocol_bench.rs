//! The protocols' benchmark: what AG-UI and A2A cost per turn next to our own Server-Sent Events.
//!
//! 1. The layers alone, in process: one recorded turn's events (7 model calls, 6 tool calls and
//!    their results, a skill loaded, a file written, a subagent with its own call, 60 text deltas)
//!    and its end, written as our SSE (as stream-turn writes them), as AG-UI events
//!    (`agent_app::agui::translate_turn`) and as A2A 1.0 stream responses
//!    (`agent_app::a2a::encode_turn`): CPU and bytes per turn.
//! 2. The whole function: the release `stream-turn` behind the Lambda Runtime API emulator, on
//!    moto, with a zero-latency scripted model (3 calls: two tool calls and a 20-chunk answer), a
//!    fresh session per turn, the three routes taken in turn: the CPU of the function's process per
//!    warm turn (its threads' on-CPU time from `/proc/{pid}/task/*/schedstat`).
//!
//! Run with `cargo xtask bench`, or alone with `cargo build --release -p stream-turn && cargo run
//! --release -p benches --bin protocol-bench`. `PROTOCOL_BENCH_TURNS` (40) sets the warm turns per
//! route of section 2.

use std::time::{Duration, Instant};

use agent_app::a2a::{encode_turn, Dialect, TaskId, TurnEnd};
use agent_app::agui::{translate_turn, AgentState};
use agent_core::turn::TurnReply;
use agent_core::{SessionId, TurnEvent, Usage};
use benches::{cpu_time, process_cpu};
use local_stack::identity::IdentityProvider;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{sample_event, Stack};
use serde_json::{json, Value};

/// One way of writing a turn's events: its name and what it writes.
type Encoding<'a> = (&'static str, Box<dyn Fn() -> Vec<u8> + 'a>);

/// Iterations of section 1 per encoding.
const LAYER_TURNS: u32 = 3_000;

fn main() {
    let turns = std::env::var("PROTOCOL_BENCH_TURNS").ok().and_then(|n| n.parse().ok()).unwrap_or(40);
    println!("protocol-bench: load average before: {}", load_average());
    layers();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    runtime.block_on(function(turns));
    println!("protocol-bench: load average after: {}", load_average());
}

/// Section 1.
fn layers() {
    let events = recorded_turn();
    let reply_json = reply_json();
    let reply: TurnReply = serde_json::from_value(reply_json.clone()).expect("a reply");
    let session = SessionId::parse("bench").expect("a session id");
    let task = TaskId::new(session, "ab".repeat(32));
    let encodings: [Encoding; 3] = [
        ("our SSE", Box::new(|| sse(&events, &reply))),
        ("AG-UI", Box::new(|| translate_turn("bench", "run-1", AgentState::default(), &events, Ok(&reply)))),
        (
            "A2A 1.0 stream",
            Box::new(|| encode_turn(json!(1), task.clone(), Dialect::V1, &events, TurnEnd::Replied(&reply_json))),
        ),
    ];
    println!(
        "\n1. the layers alone: one turn of {} events (7 model calls, 6 tool calls, a subagent, 60 deltas), {LAYER_TURNS} times each",
        events.len()
    );
    println!("{:<18} {:>14} {:>14}", "encoding", "CPU per turn", "bytes");
    for (name, encode) in &encodings {
        let bytes = encode().len();
        let before = cpu_time();
        for _ in 0..LAYER_TURNS {
            std::hint::black_box(encode());
        }
        let per_turn = (cpu_time() - before) / LAYER_TURNS;
        println!("{name:<18} {:>11.1} µs {bytes:>14}", per_turn.as_secs_f64() * 1e6);
    }
}

/// Our own SSE, as stream-turn's observer writes it: one block per event, then `turn.completed`.
fn sse(events: &[TurnEvent], reply: &TurnReply) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 * (events.len() + 1));
    for event in events {
        let data = serde_json::to_value(event).unwrap_or(Value::Null);
        out.extend_from_slice(format!("event: {}\ndata: {data}\n\n", event.name()).as_bytes());
    }
    let body = serde_json::to_value(reply).unwrap_or(Value::Null);
    out.extend_from_slice(format!("event: turn.completed\ndata: {body}\n\n").as_bytes());
    out
}

/// A turn's events as the loop reports them.
fn recorded_turn() -> Vec<TurnEvent> {
    let tools: Vec<String> =
        ["load_skill", "ls", "read_file", "write_file", "edit_file", "todowrite", "task", "execute"]
            .map(String::from)
            .into();
    let model_call = |step: u32, skill: Option<&str>| TurnEvent::ModelCall {
        step,
        state: if skill.is_some() { 2 } else { 1 },
        skill: skill.map(str::to_owned),
        forced: false,
        listing: None,
        tools: tools.clone(),
        prompt_tokens: 4_000 + 300 * step as usize,
    };
    let call = |id: &str, name: &str, arguments: Value| TurnEvent::ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        summary: agent_core::events::summarise_arguments(&arguments),
        arguments,
    };
    let result = |id: &str, name: &str, content: String| TurnEvent::ToolResult {
        id: id.to_owned(),
        name: name.to_owned(),
        ok: true,
        bytes: content.len(),
        summary: content.lines().next().unwrap_or_default().to_owned(),
        content,
        truncated: false,
    };
    let deltas = |count: usize| (0..count).map(|n| TurnEvent::MessageDelta { text: format!("palabra{n} ") });
    let skill = "escrituras/compraventa";
    let draft = "Cláusula de la escritura, con su texto de longitud ordinaria.\n".repeat(8);
    let mut events = vec![TurnEvent::Started { session_id: "bench".into() }, model_call(1, None)];
    events.extend(deltas(10));
    events.push(call("call_1", "load_skill", json!({"skill_path": skill})));
    events.push(TurnEvent::SkillLoaded { skill: skill.into(), forced: false, version: None });
    events.push(result("call_1", "load_skill", format!("Loaded {skill}.\n{draft}")));
    events.push(model_call(2, Some(skill)));
    events.push(call("call_2", "read_file", json!({"file_path": "/skills/compraventa/SKILL.md", "limit": 40})));
    events.push(result("call_2", "read_file", draft.clone()));
    events.push(model_call(3, Some(skill)));
    events.push(call(
        "call_3",
        "todowrite",
        json!({"todos": [{"content": "Leer la nota simple", "status": "completed"},
                         {"content": "Redactar el borrador", "status": "in_progress"}]}),
    ));
    events.push(result("call_3", "todowrite", "Updated the todo list.".into()));
    events.push(model_call(4, Some(skill)));
    events.push(call(
        "call_4",
        "task",
        json!({"description": "Revisa las cargas de la finca", "subagent_type": "general-purpose"}),
    ));
    events.push(TurnEvent::SubagentStarted {
        subagent: "sa-1".into(),
        parent: None,
        call_id: "call_4".into(),
        agent_type: "general-purpose".into(),
        description: "Revisa las cargas de la finca".into(),
        depth: 1,
    });
    let nested = |event: TurnEvent| TurnEvent::Nested { subagent: "sa-1".into(), event: Box::new(event) };
    events.push(nested(model_call(1, None)));
    events.push(nested(call("call_1", "read_file", json!({"file_path": "/ticket/nota_simple.pdf"}))));
    events.push(nested(result("call_1", "read_file", draft.clone())));
    events.push(TurnEvent::SubagentCompleted {
        subagent: "sa-1".into(),
        ending: "answered".into(),
        steps: 2,
        ok: true,
        summary: "La finca está libre de cargas.".into(),
        usage: Usage::new(9_000, 300),
    });
    events.push(result("call_4", "task", "La finca está libre de cargas.".into()));
    events.push(model_call(5, Some(skill)));
    events.push(call("call_5", "write_file", json!({"file_path": "/workspace/borrador.md", "content": draft})));
    events.push(TurnEvent::FileWritten { path: "/workspace/borrador.md".into(), size: 520 });
    events.push(result("call_5", "write_file", "Created /workspace/borrador.md".into()));
    events.push(model_call(6, Some(skill)));
    events.push(call(
        "call_6",
        "edit_file",
        json!({"file_path": "/workspace/borrador.md", "old_string": "ordinaria", "new_string": "habitual"}),
    ));
    events.push(TurnEvent::FileWritten { path: "/workspace/borrador.md".into(), size: 519 });
    events.push(result("call_6", "edit_file", "Edited /workspace/borrador.md".into()));
    events.push(model_call(7, Some(skill)));
    events.extend(deltas(50));
    events
}

fn reply_json() -> Value {
    json!({
        "session_id": "bench",
        "reply": "Listo: el borrador está en /workspace/borrador.md.",
        "current_skill": "escrituras/compraventa",
        "forced_skill": null,
        "refused_tool_calls": 0,
        "steps": 7,
        "usage": {"input_tokens": 38_000, "output_tokens": 900, "cache_read_tokens": 30_000, "cache_write_tokens": 4_000},
        "cost": {"usd": 0.0312},
        "ending": "answered",
        "version": 4,
        "files": [{"path": "/workspace/borrador.md", "size": 519}],
        "executions": 0
    })
}

/// One route of section 2: how a turn is asked for, and the text that says it completed.
struct Route {
    name: &'static str,
    completed: &'static str,
    event: fn(turn: usize, token: &str) -> Value,
}

const ROUTES: [Route; 3] = [
    Route { name: "our SSE", completed: "event: turn.completed", event: sse_event },
    Route { name: "AG-UI", completed: "\"RUN_FINISHED\"", event: agui_event },
    Route { name: "A2A 1.0 stream", completed: "TASK_STATE_COMPLETED", event: a2a_event },
];

fn function_event(path: &str, token: &str, body: Value) -> Value {
    let mut event = sample_event("stream-turn.json");
    event["rawPath"] = json!(path);
    event["requestContext"]["http"]["path"] = json!(path);
    event["headers"]["authorization"] = json!(format!("Bearer {token}"));
    event["headers"]["accept"] = json!("text/event-stream");
    event["body"] = json!(body.to_string());
    event
}

fn sse_event(turn: usize, token: &str) -> Value {
    function_event(&format!("/sessions/sse-{turn}/turns"), token, json!({"message": format!("Turno {turn}")}))
}

fn agui_event(turn: usize, token: &str) -> Value {
    let body = json!({
        "threadId": format!("agui-{turn}"), "runId": format!("run-{turn}"), "state": {}, "tools": [],
        "context": [], "forwardedProps": {},
        "messages": [{"id": format!("m-{turn}"), "role": "user", "content": format!("Turno {turn}")}],
    });
    function_event("/ag-ui", token, body)
}

fn a2a_event(turn: usize, token: &str) -> Value {
    let body = json!({
        "jsonrpc": "2.0", "id": turn, "method": "SendStreamingMessage",
        "params": {"message": {"messageId": format!("m-{turn}"), "contextId": format!("a2a-{turn}"),
                               "role": "ROLE_USER", "parts": [{"text": format!("Turno {turn}")}]}},
    });
    let mut event = function_event("/a2a", token, body);
    event["headers"]["a2a-version"] = json!("1.0");
    event
}

/// The model's replies for one turn: two tool calls, then a 20-chunk answer.
fn scripted_turn() -> [Reply; 3] {
    [
        Reply::tool("write_file", json!({"file_path": "/workspace/nota.md", "content": "Nota del turno."})),
        Reply::tool("read_file", json!({"file_path": "/workspace/nota.md"})),
        Reply::Chunks((0..20).map(|n| format!("palabra{n} ")).collect()),
    ]
}

/// Section 2.
async fn function(turns: usize) {
    let stack = Stack::new().await;
    let identity = IdentityProvider::start().await;
    let function = Function::start("stream-turn", &stack.env(&identity.env())).await;
    let pid = function.pid().expect("the function's pid");
    let token = identity.token("user-bench");
    let mut cpu = [Duration::ZERO; 3];
    let mut wall = [Duration::ZERO; 3];
    // One turn of each route first: the cold start and the JWKS fetch are not what is compared.
    for turn in 0..=turns {
        for (index, route) in ROUTES.iter().enumerate() {
            stack.model.push(scripted_turn());
            let event = (route.event)(turn, &token);
            let (before, started) = (process_cpu(pid), Instant::now());
            let mut stream = function.invoke_streaming(event, Duration::from_secs(60)).await;
            assert_eq!(stream.status().await, 200, "{} turn {turn}", route.name);
            let body = stream.body_text().await;
            assert!(body.contains(route.completed), "{} turn {turn} did not complete: {body}", route.name);
            if turn > 0 {
                cpu[index] += process_cpu(pid) - before;
                wall[index] += started.elapsed();
            }
        }
    }
    println!("\n2. the release stream-turn, {turns} warm turns per route (3 model calls each), routes taken in turn");
    println!("{:<18} {:>18} {:>14} {:>16}", "route", "process CPU/turn", "vs our SSE", "wall per turn");
    let base = cpu[0] / turns as u32;
    for (index, route) in ROUTES.iter().enumerate() {
        let per_turn = cpu[index] / turns as u32;
        let delta = per_turn.as_secs_f64() - base.as_secs_f64();
        println!(
            "{:<18} {:>15.2} ms {:>+11.0} µs {:>13.2} ms",
            route.name,
            per_turn.as_secs_f64() * 1e3,
            delta * 1e6,
            (wall[index] / turns as u32).as_secs_f64() * 1e3
        );
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
