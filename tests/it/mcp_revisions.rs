//! The planner's experts at MCP 2026-07-28 and 2025-06-18, served by the MCP Python SDK
//! (`shared/local-stack/expert_server.py`), through the compiled `http-turn` function: both eras in
//! one turn, the lists kept across turns as the server allows and never across tenants, a long call
//! run as a task, and an elicitation asked as the planner's clarification and answered next turn.

use local_stack::experts::{ExpertOptions, ExpertServer};
use local_stack::lambda::{Function, Invocation};
use local_stack::model_server::Reply;
use local_stack::stack::{status_and_body, system_of, tool_results, turn_event, Stack};
use serde_json::{json, Value};

const USER: &str = "user-m";

fn structured(value: Value) -> Reply {
    Reply::Text(value.to_string())
}

fn plan(tasks: &[(&str, &str)]) -> Reply {
    let tasks: Vec<Value> = tasks.iter().map(|(expert, task)| json!({"expert": expert, "task": task})).collect();
    structured(json!({"decision": "replace", "plan": tasks, "next_task": 0, "clarification": null}))
}

/// Discovery finds no prompt worth using.
fn no_prompt() -> Reply {
    structured(json!({"prompts": []}))
}

fn assessed(done: bool) -> Reply {
    structured(json!({"is_completed": done, "explanation": "checked", "confidence": 0.9}))
}

async fn planner_function(stack: &Stack, experts: &[(&str, &str)], extra: &[(&str, &str)]) -> Function {
    let servers: serde_json::Map<String, Value> = experts
        .iter()
        .map(|(name, url)| (name.to_string(), json!({"url": url, "description": format!("The {name} expert")})))
        .collect();
    let config = json!({ "mcpServers": servers }).to_string();
    let mut env =
        vec![("AGENT_STRATEGY", "planner"), ("EXPERTS_CONFIG", config.as_str()), ("EXPERT_TIMEOUT_SECS", "5")];
    env.extend_from_slice(extra);
    stack.http(&env).await
}

async fn turn(function: &Function, user: &str, session: &str, message: &str) -> (u16, Value) {
    status_and_body(&function.call(turn_event(Some(user), session, json!({ "message": message }))).await)
}

#[tokio::test]
async fn one_turn_uses_an_expert_of_each_revision() {
    let modern = ExpertServer::start_with(&ExpertOptions::default().record());
    let legacy = ExpertServer::start_with(&ExpertOptions::default().record().revision_2025_06_18());
    let stack = Stack::new().await;
    stack.model.push([
        plan(&[("modern", "Add the first pair"), ("legacy", "Add the second pair")]),
        no_prompt(),
        Reply::tool("modern__add", json!({"a": 2, "b": 3})),
        Reply::text("The first sum is 5."),
        assessed(true),
        no_prompt(),
        Reply::tool("legacy__add", json!({"a": 10, "b": 20})),
        Reply::text("The second sum is 30."),
        assessed(true),
        Reply::text("5 and 30."),
    ]);
    let http = planner_function(&stack, &[("modern", &modern.url), ("legacy", &legacy.url)], &[]).await;
    let (status, body) = turn(&http, USER, "eras", "Add 2 and 3, then 10 and 20").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "5 and 30.");
    let requests = stack.model.requests();
    assert_eq!(tool_results(&requests[3]), ["5"]);
    assert_eq!(tool_results(&requests[7]), ["30"]);

    // The 2026 expert: single POSTs, no handshake and no session, the routing headers and the
    // `_meta` envelope on every request.
    let seen = modern.requests();
    let methods: Vec<&str> = seen.iter().filter_map(|r| r["method"].as_str()).collect();
    assert_eq!(methods[0], "server/discover", "{methods:?}");
    assert!(!methods.contains(&"initialize"), "{methods:?}");
    assert!(methods.contains(&"prompts/list") && methods.contains(&"tools/list") && methods.contains(&"tools/call"));
    for request in &seen {
        assert_eq!((request["http"].as_str(), request["version"].as_str()), (Some("POST"), Some("2026-07-28")));
        assert!(request["session"].is_null(), "{request}");
        assert_eq!(request["mcp_method"], request["method"], "{request}");
        assert_eq!(request["meta"], true, "{request}");
    }
    let call = seen.iter().find(|r| r["method"] == "tools/call").unwrap();
    assert_eq!(call["mcp_name"], "add");

    // The 2025-06-18 expert: the probe it refuses, then the handshake and its session, as before.
    let seen = legacy.requests();
    let posts: Vec<&Value> = seen.iter().filter(|r| r["http"] == "POST").collect();
    assert_eq!(
        (posts[0]["method"].as_str(), posts[1]["method"].as_str()),
        (Some("server/discover"), Some("initialize"))
    );
    let call = posts.iter().find(|r| r["method"] == "tools/call").unwrap();
    assert_eq!(call["version"], "2025-06-18");
    assert!(call["session"].is_string(), "{call}");
    assert!(seen.iter().any(|r| r["http"] == "DELETE"), "the session is closed at the end of the turn");
}

/// A turn whose one task runs on `expert` without a prompt or a tool call.
fn quiet_turn(stack: &Stack, expert: &str) {
    stack.model.push([
        plan(&[(expert, "Say hello")]),
        no_prompt(),
        Reply::text("Hello."),
        assessed(true),
        Reply::text("Hello there."),
    ]);
}

#[tokio::test]
async fn lists_are_reused_across_turns_as_allowed_and_never_across_tenants() {
    let private = ExpertServer::start_with(&ExpertOptions::default().record().cache(60_000, "private"));
    let public = ExpertServer::start_with(&ExpertOptions::default().record().cache(60_000, "public"));
    let legacy = ExpertServer::start_with(&ExpertOptions::default().record().revision_2025_06_18());
    let stack = Stack::new().await;
    let http =
        planner_function(&stack, &[("private", &private.url), ("public", &public.url), ("legacy", &legacy.url)], &[])
            .await;
    let lists = |server: &ExpertServer| (server.count("tools/list"), server.count("prompts/list"));

    for (user, session) in [("tenant-a", "c1"), ("tenant-a", "c2")] {
        for expert in ["private", "public", "legacy"] {
            quiet_turn(&stack, expert);
            let (status, body) = turn(&http, user, session, "Say hello").await;
            assert_eq!((status, body["reply"].as_str()), (200, Some("Hello there.")), "{body}");
        }
    }
    assert_eq!(lists(&private), (1, 1), "the second turn reused the first's lists");
    assert_eq!(lists(&public), (1, 1));
    assert_eq!(lists(&legacy), (2, 2), "a 2025 server gives no ttl: listed every turn");

    // Another tenant: the private lists are listed again for it, the public ones are shared.
    for expert in ["private", "public"] {
        quiet_turn(&stack, expert);
        let (status, _) = turn(&http, "tenant-b", "c1", "Say hello").await;
        assert_eq!(status, 200);
    }
    assert_eq!(lists(&private), (2, 2), "tenant-b never gets tenant-a's private lists");
    assert_eq!(lists(&public), (1, 1), "a public list of a deployment expert is shared");
}

#[tokio::test]
async fn a_long_call_runs_as_a_task_and_is_cancelled_at_the_deadline() {
    let reports = ExpertServer::start_with(&ExpertOptions::default().record().modern_tools());
    let stack = Stack::new().await;
    stack.model.push([
        plan(&[("reports", "Write the sales report")]),
        no_prompt(),
        // Two seconds, past the one-second request timeout: only a task can finish it.
        Reply::tool("reports__long_report", json!({"topic": "sales", "seconds": 2})),
        Reply::text("The report is written."),
        assessed(true),
        Reply::text("Your sales report is ready."),
    ]);
    let http = planner_function(&stack, &[("reports", &reports.url)], &[("EXPERT_TIMEOUT_SECS", "1")]).await;
    let (status, body) = turn(&http, USER, "task", "Write the sales report").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "Your sales report is ready.");
    assert_eq!(tool_results(&stack.model.requests()[3]), ["The report on sales is ready."]);
    assert!(reports.count("tasks/get") >= 1, "the task was polled");

    // A report longer than the invocation: the task is cancelled before the deadline.
    stack.model.push([
        plan(&[("reports", "Write the yearly report")]),
        no_prompt(),
        Reply::tool("reports__long_report", json!({"topic": "the year", "seconds": 60})),
    ]);
    let event = turn_event(Some(USER), "cut", json!({"message": "Write the yearly report"}));
    let started = std::time::Instant::now();
    let response = match http.invoke_with_budget(event, std::time::Duration::from_secs(6)).await {
        Invocation::Response(value) => value,
        other => panic!("{other:?}"),
    };
    assert!(started.elapsed() < std::time::Duration::from_secs(6), "answered before the deadline");
    let (status, body) = status_and_body(&response);
    assert_eq!((status, body["ending"].as_str()), (200, Some("plan_continues")), "{body}");
    assert_eq!(reports.count("tasks/cancel"), 1, "the expert's task was cancelled");
}

#[tokio::test]
async fn an_elicitation_is_the_clarification_and_the_answer_completes_the_call() {
    let travel = ExpertServer::start_with(&ExpertOptions::default().modern_tools());
    let stack = Stack::new().await;
    stack.model.push([
        plan(&[("travel", "Book the trip to Lima")]),
        no_prompt(),
        Reply::tool("travel__book_trip", json!({"destination": "Lima"})),
    ]);
    let http = planner_function(&stack, &[("travel", &travel.url)], &[]).await;
    let (status, body) = turn(&http, USER, "trip", "Book my trip to Lima").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ending"], "awaiting_clarification");
    let question = body["reply"].as_str().unwrap();
    assert!(question.contains("The expert travel needs your answer"), "{question}");
    assert!(question.contains("Which seat for the trip to Lima?"), "{question}");
    assert!(question.contains("- seat (one of: window, aisle): Where to sit."), "{question}");
    assert_eq!(stack.model.requests().len(), 3, "plan, discovery, the round that made the call");
    let stored = stack.session_item(USER, "trip").await.unwrap()["plan"].clone();
    let pending = stored.as_m().unwrap().get("pending_input").expect("the call waits in the plan");
    assert!(pending.as_m().is_ok_and(|m| m.contains_key("request")), "{pending:?}");

    // An answer the question does not allow is asked again, without a model call.
    let (_, body) = turn(&http, USER, "trip", "middle").await;
    assert_eq!(body["ending"], "awaiting_clarification");
    assert!(body["reply"].as_str().unwrap().starts_with("`middle` is not one of window, aisle"), "{body}");
    assert_eq!(stack.model.requests().len(), 3);

    // The answer goes back on the same call with the expert's state; its result leads the next round.
    stack.model.push([Reply::text("Booked, window seat."), assessed(true), Reply::text("Your trip is booked.")]);
    let (status, body) = turn(&http, USER, "trip", "Window").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["reply"].as_str(), body["ending"].as_str()), (Some("Your trip is booked."), Some("answered")));
    let requests = stack.model.requests();
    assert_eq!(requests.len(), 6, "no new planning: the round, the assessment, the response");
    let round = system_of(&requests[3]);
    assert!(round.contains("Booked the trip to Lima with a window seat."), "{round}");
}
