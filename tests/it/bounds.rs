//! Hostile model output through the compiled function: patterns that used to panic the runtime,
//! too many tool calls in one reply, oversized arguments and an oversized reply. Each is a tool
//! error result or a cut, the turn commits, and the same process answers the next turn.

use local_stack::model_server::Reply;
use local_stack::stack::{get_event, status_and_body, tool_results, turn_event, Stack};
use serde_json::{json, Value};

const USER: &str = "user-bounds";

async fn turn(http: &local_stack::lambda::Function, session: &str) -> (u16, Value) {
    status_and_body(&http.call(turn_event(Some(USER), session, json!({"message": "Adelante"}))).await)
}

#[tokio::test]
async fn a_200_kb_pattern_is_a_tool_error_and_the_runtime_survives() {
    let stack = Stack::new().await;
    // Under the argument bound (256 KiB a call), far over the pattern bounds.
    let huge = "a".repeat(200 * 1024);
    stack.model.push([
        Reply::Tools(vec![
            ("glob".into(), json!({"pattern": huge})),
            ("grep".into(), json!({"pattern": huge})),
            ("grep".into(), json!({"pattern": "x", "glob": format!("{}a{}", "{a,".repeat(20), "}".repeat(20))})),
        ]),
        Reply::text("Hecho."),
        // The 400 KB of stored arguments pass the summary threshold: the next turn summarises first.
        Reply::text("Resumen: patrones inválidos."),
        Reply::text("Sigo aquí."),
    ]);
    let http = stack.http(&[]).await;
    let pid = http.pid();
    let (status, body) = turn(&http, "p1").await;
    assert_eq!(status, 200, "{body}");
    let results = tool_results(&stack.model.requests()[1]);
    assert!(
        results[0].starts_with("Error: Invalid glob pattern: the pattern is longer than 1024 bytes"),
        "{}",
        results[0]
    );
    assert!(results[1].starts_with("Error: argument 'pattern' of grep is longer than 4096 bytes"), "{}", results[1]);
    assert!(results[2].starts_with("Error: Invalid glob pattern: alternatives nest deeper"), "{}", results[2]);
    let (status, body) = turn(&http, "p1").await;
    assert_eq!((status, body["reply"].as_str()), (200, Some("Sigo aquí.")), "{body}");
    assert_eq!(http.pid(), pid, "the same process answered");
    assert!(!http.logs().iter().any(|line| line.contains("panicked")), "no panic on the way");
}

#[tokio::test]
async fn calls_past_the_per_reply_cap_and_oversized_arguments_are_not_run() {
    let stack = Stack::new().await;
    let many: Vec<(String, Value)> = (0..20)
        .map(|i| ("write_file".to_owned(), json!({"file_path": format!("/workspace/f{i}.txt"), "content": "x"})))
        .collect();
    let oversized = "y".repeat(300 * 1024);
    stack.model.push([
        Reply::Tools(many),
        Reply::tool("write_file", json!({"file_path": "/workspace/big.txt", "content": oversized})),
        Reply::Text("z".repeat(1024 * 1024)),
    ]);
    let http = stack.http(&[]).await;
    let (status, body) = turn(&http, "caps").await;
    assert_eq!(status, 200, "{body}");
    let requests = stack.model.requests();
    let first = tool_results(&requests[1]);
    assert_eq!(first.len(), 20, "every call has a result");
    assert!(first[..16].iter().all(|result| result.starts_with("Updated file")), "{first:?}");
    assert!(first[16..].iter().all(|result| result.starts_with("Error: at most 16 tool calls")), "{first:?}");
    let second = tool_results(&requests[2]);
    assert!(second[20].starts_with("Error: the arguments of this call are"), "{}", second[20]);

    // The reply is cut and marked; the stored turn is bounded and the oversized arguments are not stored.
    let reply = body["reply"].as_str().unwrap();
    assert!(
        reply.len() < 256 * 1024 + 200 && reply.ends_with("[reply cut: it was longer than the limit of one reply]")
    );
    let (status, session) = status_and_body(&http.call(get_event(Some(USER), "caps")).await);
    assert_eq!(status, 200);
    assert_eq!(session["workspace"].as_array().unwrap().len(), 16);
    let stored_call = session["history"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|message| message["tool_calls"].as_array().cloned().unwrap_or_default())
        .find(|call| call["arguments"].get("_omitted_bytes").is_some())
        .expect("the oversized call is stored without its arguments");
    assert!(stored_call["arguments"]["_omitted_bytes"].as_u64().unwrap() > 300 * 1024);
}

#[tokio::test]
async fn large_tool_results_are_kept_by_reference_in_the_stored_history() {
    let stack = Stack::new().await;
    let line = "Una línea del borrador con bastante texto para ocupar sitio.\n";
    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/borrador.md", "content": line.repeat(800)})),
        // All 800 lines (read_file shows 100 by default).
        Reply::tool("read_file", json!({"file_path": "/workspace/borrador.md", "limit": 800})),
        Reply::text("Leído."),
        Reply::text("Sigo."),
    ]);
    // A context large enough that the next turn carries the history itself, not a summary of it.
    let http = stack.http(&[("LLM_CONTEXT_TOKENS", "200000"), ("HISTORY_SUMMARY_TOKENS", "100000")]).await;
    assert_eq!(turn(&http, "refs").await.0, 200);
    // Within the turn the model saw the result (as much of it as its context budget allowed).
    let within = tool_results(&stack.model.requests()[2]);
    assert!(within[1].len() > 16 * 1024, "{}", within[1].len());

    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "refs")).await);
    let stored = session["history"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").nth(1).unwrap().clone();
    let content = stored["content"].as_str().unwrap();
    assert!(content.len() < 5_000, "{}", content.len());
    let sha = content.rsplit("Stored as result ").next().unwrap().trim_end_matches(']');
    let object = stack.get(&format!("{USER}/sessions/refs/results/{sha}")).await.expect("the full result is stored");
    assert!(object.len() >= within[1].len() && object.len() > 45_000, "{}", object.len());

    // The next turn sends the preview, not the whole result.
    assert_eq!(turn(&http, "refs").await.0, 200);
    let next = tool_results(stack.model.requests().last().unwrap());
    assert_eq!(next[1], content);
}
