//! Streamed turns through the compiled `stream-turn` function, run in Lambda's streaming response
//! mode by the emulator: events arrive while the turn runs and in order, `turn.completed` is what
//! was committed, each model call says its prompt state and each tool event its arguments or result, a client that disconnects still gets its turn committed, a model failure before
//! the first delta is retried and one after it fails the turn and changes nothing, and the caller's
//! JWT is verified against the issuer's JWKS; the prelude and its delimiter are not held apart by TCP.

use std::time::{Duration, Instant};

use local_stack::identity::IdentityProvider;
use local_stack::lambda::{Function, SseEvent, StreamedResponse};
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, repo_root, sample_event, status_and_body, tool_names, tool_results, Stack};
use serde_json::{json, Value};

const USER: &str = "user-stream";
const BUDGET: Duration = Duration::from_secs(120);

/// A Function URL event for `POST /sessions/{session}/turns` with `token` as the bearer token.
pub(crate) fn stream_event(token: Option<&str>, session: &str, body: Value, events: bool) -> Value {
    let mut event = sample_event("stream-turn.json");
    event["rawPath"] = json!(format!("/sessions/{session}/turns"));
    event["requestContext"]["http"]["path"] = json!(format!("/sessions/{session}/turns"));
    event["body"] = Value::String(body.to_string());
    let headers = event["headers"].as_object_mut().expect("headers");
    match token {
        Some(token) => headers.insert("authorization".into(), json!(format!("Bearer {token}"))),
        None => headers.remove("authorization"),
    };
    if !events {
        headers.insert("accept".into(), json!("application/json"));
    }
    event
}

struct Streaming {
    stack: Stack,
    identity: IdentityProvider,
    function: Function,
}

impl Streaming {
    async fn start() -> Streaming {
        let stack = Stack::new().await;
        let identity = IdentityProvider::start().await;
        let function = Function::start("stream-turn", &stack.env(&identity.env())).await;
        Streaming { stack, identity, function }
    }

    async fn post(&self, session: &str, body: Value) -> StreamedResponse {
        let event = stream_event(Some(&self.identity.token(USER)), session, body, true);
        self.function.invoke_streaming(event, BUDGET).await
    }

    /// The stored session as its owner reads it through the HTTP API.
    async fn stored(&self, session: &str) -> (u16, Value) {
        let http = self.stack.http(&[]).await;
        status_and_body(&http.call(get_event(Some(USER), session)).await)
    }
}

pub(crate) async fn all_events(stream: &mut StreamedResponse) -> Vec<SseEvent> {
    let mut events = Vec::new();
    while let Some(event) = stream.next_event().await {
        events.push(event);
    }
    events
}

pub(crate) fn names(events: &[SseEvent]) -> Vec<&str> {
    events.iter().map(|event| event.name.as_str()).collect()
}

pub(crate) fn deltas(events: &[SseEvent]) -> String {
    events.iter().filter(|e| e.name == "message.delta").map(|e| e.data["text"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn events_arrive_while_the_turn_runs_in_order_and_completed_is_what_was_committed() {
    let streaming = Streaming::start().await;
    streaming.stack.upload_example_skills(USER).await;
    let delay = Duration::from_millis(250);
    streaming.stack.model.set_chunk_delay(delay);
    streaming.stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "escrituras/compraventa"})),
        Reply::tool("write_file", json!({"file_path": "/workspace/borrador.md", "content": "Borrador"})),
        Reply::Chunks(["Listo: ", "el ", "borrador ", "está ", "en ", "/workspace."].map(String::from).to_vec()),
    ]);
    let sent = Instant::now();
    let mut stream = streaming.post("s1", json!({"message": "Prepara una compraventa"})).await;
    let prelude = stream.prelude().await;
    assert_eq!(prelude["statusCode"], 200, "{prelude}");
    assert_eq!(prelude["headers"]["content-type"], "text/event-stream; charset=utf-8");
    let events = all_events(&mut stream).await;
    assert_eq!(
        names(&events),
        [
            "turn.started",
            "model.call",
            "tool.call",
            "tool.result",
            "skill.loaded",
            "model.call",
            "tool.call",
            "tool.result",
            "file.written",
            "model.call",
            "message.delta",
            "message.delta",
            "message.delta",
            "message.delta",
            "message.delta",
            "message.delta",
            "turn.completed",
        ]
    );
    assert_eq!(events[2].data["name"], "load_skill");
    assert_eq!(events[2].data["summary"], "skill_path=escrituras/compraventa");
    assert_eq!(events[3].data["ok"], true);
    assert_eq!(events[4].data, json!({"skill": "escrituras/compraventa", "forced": false}));
    assert_eq!(events[6].data["summary"], "content=Borrador file_path=/workspace/borrador.md");
    assert_eq!(events[7].data["ok"], true, "{}", events[7].data);
    assert_eq!(events[8].data, json!({"path": "/workspace/borrador.md", "size": 8}));

    // The first delta reached the client while five more chunks were still to come from the model.
    let first_delta = events.iter().find(|e| e.name == "message.delta").unwrap().at;
    let completed = events.last().unwrap();
    assert!(completed.at.duration_since(first_delta) >= delay * 4, "the deltas were not streamed");
    assert!(first_delta.duration_since(sent) < BUDGET);

    let reply = &completed.data;
    assert_eq!(reply["reply"], "Listo: el borrador está en /workspace.");
    assert_eq!(deltas(&events), reply["reply"].as_str().unwrap());
    assert_eq!(reply["current_skill"], "escrituras/compraventa");
    assert_eq!(reply["version"], 1);
    assert_eq!(reply["ending"], "answered");
    assert_eq!(reply["files"], json!([{"path": "/workspace/borrador.md", "size": 8}]));
    assert!(stream.error_trailer().await.is_none());

    let (status, stored) = streaming.stored("s1").await;
    assert_eq!(status, 200, "{stored}");
    assert_eq!(stored["version"], reply["version"]);
    let last = stored["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"], reply["reply"], "{last}");
    // Every model call of the turn asked for a stream.
    assert!(streaming.stack.model.requests().iter().all(|request| request["stream"] == true));
}

/// The skills under `examples/skills`, counted by their SKILL.md files.
fn example_skill_count() -> usize {
    fn count(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir)
            .expect("read examples/skills")
            .map(|entry| entry.expect("a directory entry").path())
            .map(|path| match path.is_dir() {
                true => count(&path),
                false => usize::from(path.file_name().is_some_and(|name| name == "SKILL.md")),
            })
            .sum()
    }
    count(&repo_root().join("examples/skills"))
}

#[tokio::test]
async fn model_calls_say_their_prompt_state_and_tool_events_carry_arguments_and_results() {
    let streaming = Streaming::start().await;
    streaming.stack.upload_example_skills(USER).await;
    // 400 lines of 100 bytes: the whole file is the call's argument, and reading it back gives a
    // result over the 16 KiB an event carries.
    let long: String = (0..400).map(|n| format!("{n:03} {}\n", "x".repeat(95))).collect();
    let write = json!({"file_path": "/workspace/largo.md", "content": long});
    streaming.stack.model.push([
        Reply::tool("write_file", write.clone()),
        Reply::tool("load_skill", json!({"skill_path": "escrituras/compraventa"})),
        Reply::tool("read_file", json!({"file_path": "/workspace/largo.md", "limit": 1000})),
        Reply::text("Listo."),
    ]);
    let events = all_events(&mut streaming.post("s8", json!({"message": "Prepara una compraventa"})).await).await;
    let timeline: Vec<&str> = names(&events).into_iter().filter(|name| *name != "message.delta").collect();
    assert_eq!(
        timeline,
        [
            "turn.started",
            "model.call",
            "tool.call",
            "tool.result",
            "file.written",
            "model.call",
            "tool.call",
            "tool.result",
            "skill.loaded",
            "model.call",
            "tool.call",
            "tool.result",
            "model.call",
            "turn.completed",
        ]
    );
    let requests = streaming.stack.model.requests();
    let of = |name: &str| events.iter().filter(|e| e.name == name).map(|e| e.data.clone()).collect::<Vec<Value>>();
    let (calls, tool_calls, tool_results_sent) = (of("model.call"), of("tool.call"), of("tool.result"));
    assert_eq!(calls.len(), requests.len());

    // State 1: the listing of every example skill, as chosen; the tools of the request sent.
    let skills = example_skill_count();
    let first = &calls[0];
    assert_eq!(first["step"], 1);
    assert_eq!(first["state"], 1, "{first}");
    assert_eq!(first["skill"], Value::Null);
    assert_eq!(first["forced"], false);
    assert_eq!(first["listing"], json!({"total": skills, "shown_in_full": skills, "search": false, "tier": 0}));
    let mut offered: Vec<String> = serde_json::from_value(first["tools"].clone()).unwrap();
    assert_eq!(offered[0], "load_skill");
    offered.sort();
    assert_eq!(offered, tool_names(&requests[0]));
    assert!(first["prompt_tokens"].as_u64().unwrap() > 100, "{first}");
    assert_eq!(calls[1]["state"], 1);

    // State 2 from the call after load_skill, with the skill and no listing.
    for (step, call) in calls.iter().enumerate().skip(2) {
        assert_eq!(call["step"], step + 1);
        assert_eq!(call["state"], 2, "{call}");
        assert_eq!(call["skill"], "escrituras/compraventa");
        assert_eq!(call["forced"], false);
        assert_eq!(call["listing"], Value::Null);
    }

    // tool.call carries the whole arguments (its summary stays short).
    assert_eq!(tool_calls[0]["arguments"], write);
    assert!(tool_calls[0]["summary"].as_str().unwrap().len() <= 200);
    assert_eq!(tool_calls[1]["arguments"], json!({"skill_path": "escrituras/compraventa"}));

    // tool.result carries the text the model was shown, cut to 16 KiB when longer.
    let shown = tool_results(&requests[3]);
    assert_eq!(tool_results_sent[1]["content"], shown[1]);
    assert_eq!(tool_results_sent[1]["truncated"], false);
    assert!(shown[1].starts_with("Skill escrituras/compraventa loaded."), "{}", shown[1]);
    let read = &tool_results_sent[2];
    assert_eq!(read["truncated"], true);
    assert_eq!(read["bytes"], shown[2].len());
    assert!(shown[2].len() > 16 * 1024);
    assert_eq!(read["content"], shown[2][..16 * 1024]);
    assert_eq!(events.last().unwrap().data["reply"], "Listo.");
}

#[tokio::test]
async fn a_client_that_disconnects_still_gets_its_turn_committed() {
    let streaming = Streaming::start().await;
    streaming.stack.model.set_chunk_delay(Duration::from_millis(200));
    let words: Vec<String> = (1..=10).map(|n| format!("palabra{n} ")).collect();
    streaming.stack.model.push([Reply::Chunks(words.clone())]);
    let mut stream = streaming.post("s2", json!({"message": "Escribe diez palabras"})).await;
    loop {
        let event = stream.next_event().await.expect("a delta before the end");
        if event.name == "message.delta" {
            break;
        }
    }
    drop(stream);
    // The turn goes on without a reader and commits; poll its session until it appears.
    let waited = Instant::now();
    let stored = loop {
        let (status, stored) = streaming.stored("s2").await;
        if status == 200 {
            break stored;
        }
        assert_eq!(status, 404, "{stored}");
        assert!(waited.elapsed() < Duration::from_secs(30), "the turn was never committed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(stored["version"], 1);
    let last = stored["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"], words.concat(), "{last}");
}

#[tokio::test]
async fn a_model_failure_before_the_first_delta_is_retried() {
    let streaming = Streaming::start().await;
    streaming.stack.model.push([Reply::Status(503), Reply::Chunks(vec!["Hola ".into(), "de nuevo.".into()])]);
    let mut stream = streaming.post("s3", json!({"message": "Hola"})).await;
    let events = all_events(&mut stream).await;
    // One model call of the loop, whatever the client retried under it.
    assert_eq!(names(&events), ["turn.started", "model.call", "message.delta", "message.delta", "turn.completed"]);
    assert_eq!(events[4].data["reply"], "Hola de nuevo.");
    assert_eq!(streaming.stack.model.requests().len(), 2);
}

#[tokio::test]
async fn a_model_failure_after_a_delta_fails_the_turn_and_changes_nothing() {
    let streaming = Streaming::start().await;
    streaming.stack.model.push([Reply::text("Primera respuesta.")]);
    let mut first = streaming.post("s4", json!({"message": "Uno"})).await;
    assert_eq!(all_events(&mut first).await.last().unwrap().name, "turn.completed");
    let (_, before) = streaming.stored("s4").await;

    streaming.stack.model.push([Reply::BrokenAfter(vec!["Empiezo ".into(), "a ".into()]), Reply::text("never")]);
    let mut stream = streaming.post("s4", json!({"message": "Dos"})).await;
    let events = all_events(&mut stream).await;
    let failed = events.last().unwrap();
    assert_eq!(failed.name, "turn.failed", "{:?}", names(&events));
    assert_eq!(failed.data["error"]["code"], "model_provider_failed", "{}", failed.data);
    assert!(deltas(&events).starts_with("Empiezo "), "{:?}", names(&events));
    assert_eq!(streaming.stack.model.requests().len(), 2, "the broken stream was not retried");
    let (_, after) = streaming.stored("s4").await;
    assert_eq!(after, before, "the failed turn changed the session");
}

#[tokio::test]
async fn without_event_stream_the_answer_is_the_json_body_and_keys_replay() {
    let streaming = Streaming::start().await;
    streaming.stack.model.push([Reply::text("Respuesta."), Reply::text("never sent")]);
    let token = streaming.identity.token(USER);
    let mut event = stream_event(Some(&token), "s5", json!({"message": "Hola"}), false);
    event["headers"]["idempotency-key"] = json!("key-5");
    let mut plain = streaming.function.invoke_streaming(event.clone(), BUDGET).await;
    assert_eq!(plain.status().await, 200);
    let body: Value = serde_json::from_str(&plain.body_text().await).unwrap();
    assert_eq!(body["reply"], "Respuesta.");
    assert_eq!(body["version"], 1);

    // The same key again, now asking for events: the committed reply, replayed without a model call.
    event["headers"]["accept"] = json!("text/event-stream");
    let mut replay = streaming.function.invoke_streaming(event, BUDGET).await;
    let events = all_events(&mut replay).await;
    assert_eq!(names(&events), ["turn.started", "turn.completed"]);
    assert_eq!(events[1].data, body);
    assert_eq!(streaming.stack.model.requests().len(), 1);
}

#[tokio::test]
async fn only_a_verified_token_names_the_user() {
    let streaming = Streaming::start().await;
    let post = |token: Option<String>| {
        let event = stream_event(token.as_deref(), "s6", json!({"message": "Hola"}), true);
        streaming.function.invoke_streaming(event, BUDGET)
    };
    let refused = |mut stream: StreamedResponse| async move {
        let status = stream.status().await;
        let body: Value = serde_json::from_str(&stream.body_text().await).unwrap();
        (status, body)
    };
    let (status, body) = refused(post(None).await).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "unauthorized");

    let mut forged = streaming.identity.token(USER);
    forged.replace_range(forged.len() - 4.., "AAAA");
    assert_eq!(refused(post(Some(forged)).await).await.0, 401);
    assert_eq!(refused(post(Some(streaming.identity.token_for_audience(USER, "another-app"))).await).await.0, 401);
    assert_eq!(refused(post(Some(streaming.identity.expired_token(USER))).await).await.0, 401);
    assert!(streaming.stack.model.requests().is_empty(), "a refused request reached the model");

    // The owner's turn is invisible to another verified user, whatever the session id.
    streaming.stack.model.push([Reply::text("Solo para ti.")]);
    let mut stream = post(Some(streaming.identity.token(USER))).await;
    assert_eq!(all_events(&mut stream).await.last().unwrap().name, "turn.completed");
    let http = streaming.stack.http(&[]).await;
    let (status, _) = status_and_body(&http.call(get_event(Some("user-other"), "s6")).await);
    assert_eq!(status, 404);

    // Routing is on the raw path and method.
    let mut event = stream_event(Some(&streaming.identity.token(USER)), "s6", json!({"message": "x"}), true);
    event["rawPath"] = json!("/admin/sessions/s6/turns");
    assert_eq!(refused(streaming.function.invoke_streaming(event.clone(), BUDGET).await).await.0, 404);
    event["rawPath"] = json!("/sessions/s6/turns");
    event["requestContext"]["http"]["method"] = json!("GET");
    assert_eq!(refused(streaming.function.invoke_streaming(event, BUDGET).await).await.0, 405);
}

#[tokio::test]
async fn the_prelude_and_its_delimiter_reach_the_client_together() {
    // A Function URL's client gets the status and headers, and then the body, only once the 8-byte
    // delimiter after the prelude has arrived. The runtime writes the two separately: with Nagle's
    // algorithm on its connection the delimiter waits for the prelude's acknowledgement, which
    // Linux's delayed ACK holds back 40 ms in about half of the turns (the others are answered in
    // quick-ACK mode). Without Nagle no turn waits; a few may stall on a loaded machine.
    const TURNS: usize = 20;
    let streaming = Streaming::start().await;
    streaming.stack.model.push([Reply::text("Calentando.")]);
    all_events(&mut streaming.post("s7", json!({"message": "Hola"})).await).await;
    let mut gaps = Vec::new();
    for turn in 0..TURNS {
        streaming.stack.model.push([Reply::text("Hola.")]);
        let mut stream = streaming.post("s7", json!({"message": format!("Turno {turn}")})).await;
        assert_eq!(stream.status().await, 200);
        gaps.push(stream.body_start().unwrap() - stream.first_byte().unwrap());
        assert_eq!(all_events(&mut stream).await.last().unwrap().name, "turn.completed");
    }
    let held = gaps.iter().filter(|gap| **gap >= Duration::from_millis(30)).count();
    assert!(held <= 3, "{held} of {TURNS} delimiters waited for the prelude's ACK: {gaps:?}");
}

#[tokio::test]
async fn a_streamed_turn_pauses_with_approval_requested_and_streams_the_calls_its_decisions_run() {
    let stack = Stack::new().await;
    let identity = IdentityProvider::start().await;
    let mut env = identity.env();
    env.push(("APPROVAL_REQUIRED", "write_file"));
    let function = Function::start("stream-turn", &stack.env(&env)).await;
    let streaming = Streaming { stack, identity, function };
    streaming.stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/a.md", "content": "Hola"})),
        Reply::text("Escrito."),
    ]);
    let mut stream = streaming.post("s9", json!({"message": "Escribe a.md"})).await;
    let events = all_events(&mut stream).await;
    assert_eq!(names(&events), ["turn.started", "model.call", "approval.requested", "turn.completed"]);
    let calls = &events[2].data["calls"];
    assert_eq!(calls[0]["name"], "write_file", "{calls}");
    assert_eq!(calls[0]["summary"], "content=Hola file_path=/workspace/a.md");
    assert_eq!(events[3].data["ending"], "awaiting_approval");
    assert_eq!(events[3].data["pending_approval"][0]["id"], calls[0]["id"]);

    let decisions = json!({"decisions": [{"call_id": calls[0]["id"], "decision": "approve"}]});
    let mut stream = streaming.post("s9", decisions).await;
    let events = all_events(&mut stream).await;
    assert_eq!(
        names(&events),
        ["turn.started", "tool.call", "tool.result", "file.written", "model.call", "message.delta", "turn.completed"]
    );
    assert_eq!(events[1].data["id"], calls[0]["id"]);
    assert_eq!(events[6].data["ending"], "answered");
    assert_eq!(events[6].data["reply"], "Escrito.");
}
