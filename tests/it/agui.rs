//! AG-UI through the compiled stream-turn, driven by `@ag-ui/client`'s HttpAgent (Node, in
//! `tests/clients`) over a loopback Function URL: every event is checked against `@ag-ui/core`'s
//! schemas and by the client's own enforcement and verifier (order, pairing, subagents), and the
//! client's state is what the deltas built. A turn with a tool call, todos, a skill and a file; a
//! subagent whose call waits as an interrupt that the next run's `resume` answers, the call running
//! once; a retried run id replayed, never run twice; the planner's plan as state; another user's
//! thread never read or changed; bad input refused before any stream.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use local_stack::function_url::FunctionUrl;
use local_stack::identity::IdentityProvider;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, repo_root, sample_event, status_and_body, Stack};
use serde_json::{json, Value};

const USER: &str = "user-agui";

struct World {
    stack: Stack,
    identity: IdentityProvider,
    function: Arc<Function>,
    url: FunctionUrl,
}

impl World {
    async fn start(extra: &[(&str, &str)]) -> World {
        let stack = Stack::new().await;
        let identity = IdentityProvider::start().await;
        let mut env = identity.env();
        env.extend_from_slice(extra);
        let function = Arc::new(Function::start("stream-turn", &stack.env(&env)).await);
        let url = FunctionUrl::start(function.clone()).await;
        World { stack, identity, function, url }
    }

    /// Runs `runs` of `thread` as `user` with the AG-UI client and returns what it reported.
    async fn runs(&self, user: &str, thread: &str, runs: Value) -> Value {
        let plan = json!({"url": self.url.url("/ag-ui"), "token": self.identity.token(user), "threadId": thread,
                          "runs": runs});
        let output = tokio::time::timeout(
            Duration::from_secs(300),
            tokio::process::Command::new("node")
                .arg("agui-run.mjs")
                .arg(plan.to_string())
                .current_dir(clients())
                .output(),
        )
        .await
        .expect("the AG-UI client finished")
        .expect("node runs (install Node.js 20 or later)");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "the AG-UI client failed: {stderr}");
        let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| panic!("{err}: {stderr}"));
        assert_eq!(report["warnings"], json!([]), "the client stripped or could not use something");
        report
    }

    /// The stored session as its owner reads it through the HTTP API.
    async fn stored(&self, user: &str, session: &str) -> (u16, Value) {
        let http = self.stack.http(&[]).await;
        status_and_body(&http.call(get_event(Some(user), session)).await)
    }
}

/// The client folder, with its packages installed (`cargo xtask test` runs `npm ci` there).
fn clients() -> PathBuf {
    let folder = repo_root().join("tests/clients");
    assert!(
        folder.join("node_modules/@ag-ui/client/package.json").exists(),
        "tests/clients has no node_modules: run `npm ci` there (`cargo xtask test` does it first)"
    );
    folder
}

/// A run the client completed: no error, every event valid by the schemas and passed by the
/// verifier, none dropped. Its events' types.
fn valid(run: &Value) -> Vec<String> {
    assert!(run["error"].is_null(), "the run failed: {}", run["error"]);
    assert_eq!(run["schemaErrors"], json!([]), "events the schemas refuse");
    let types: Vec<String> =
        run["events"].as_array().unwrap().iter().map(|event| event["type"].as_str().unwrap().to_owned()).collect();
    assert_eq!(run["verified"], json!(types), "the client's pipeline did not pass every event");
    types
}

fn of_type<'a>(run: &'a Value, kind: &str) -> Vec<&'a Value> {
    run["events"].as_array().unwrap().iter().filter(|event| event["type"] == kind).collect()
}

#[tokio::test]
async fn a_turn_with_tool_calls_todos_a_skill_and_a_file_is_a_valid_agui_run() {
    let world = World::start(&[]).await;
    world.stack.upload_example_skills(USER).await;
    let todos = json!({"todos": [{"content": "Redactar el borrador", "status": "in_progress"}]});
    world.stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "escrituras/compraventa"})),
        Reply::tool("todowrite", todos),
        Reply::tool("write_file", json!({"file_path": "/workspace/borrador.md", "content": "Borrador"})),
        Reply::Chunks(["Listo: ", "el borrador ", "está escrito."].map(String::from).to_vec()),
        Reply::text("Sigo aquí."),
    ]);
    let report = world
        .runs(
            USER,
            "hilo-1",
            json!([
                {"runId": "run-1", "message": "Prepara una compraventa"},
                {"runId": "run-2", "message": "¿Sigues?"},
                {"runId": "run-1", "retry": true}
            ]),
        )
        .await;
    let run = &report["runs"][0];
    let tool_call = ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"];
    let mut expected = vec!["RUN_STARTED", "STATE_SNAPSHOT"];
    expected.extend(tool_call);
    expected.push("STATE_DELTA");
    expected.extend(tool_call);
    expected.push("STATE_DELTA");
    expected.extend(tool_call);
    expected.extend(["CUSTOM", "TEXT_MESSAGE_START"]);
    expected.extend(["TEXT_MESSAGE_CONTENT"; 3]);
    expected.extend(["TEXT_MESSAGE_END", "RUN_FINISHED"]);
    assert_eq!(valid(run), expected);
    let events = run["events"].as_array().unwrap();
    assert_eq!((events[0]["threadId"].as_str(), events[0]["runId"].as_str()), (Some("hilo-1"), Some("run-1")));
    assert_eq!(events[1]["snapshot"], json!({"skill": null, "todos": [], "plan": null}));
    assert_eq!(events[3]["delta"], r#"{"skill_path":"escrituras/compraventa"}"#);
    let file = &of_type(run, "CUSTOM")[0];
    assert_eq!(
        (file["name"].clone(), file["value"].clone()),
        (json!("file.written"), json!({"path": "/workspace/borrador.md", "size": 8}))
    );
    let finished = events.last().unwrap();
    assert_eq!(finished["outcome"], json!({"type": "success"}));
    assert_eq!(finished["result"]["reply"], "Listo: el borrador está escrito.");
    // The client's state is what the snapshot and the deltas built.
    let todo_list = json!([{"content": "Redactar el borrador", "status": "in_progress"}]);
    assert_eq!(run["state"], json!({"skill": "escrituras/compraventa", "todos": todo_list, "plan": null}));
    // And its messages: the calls in assistant messages, their results, the reply.
    let messages = run["messages"].as_array().unwrap();
    let calls: Vec<String> = messages
        .iter()
        .flat_map(|message| message["toolCalls"].as_array().cloned().unwrap_or_default())
        .map(|call| call["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(calls, ["load_skill", "todowrite", "write_file"]);
    assert_eq!(messages.last().unwrap()["content"], "Listo: el borrador está escrito.");

    // The next run starts from the stored session: its todo list was kept, no skill is current.
    let next = &report["runs"][1];
    valid(next);
    assert_eq!(next["events"][1]["snapshot"], json!({"skill": null, "todos": todo_list, "plan": null}));
    assert_eq!(world.stack.model.requests().len(), 5);

    // A client retrying run-1 gets its reply again: nothing is run or stored twice (and, as no
    // session is loaded for a replay, no snapshot is sent: the client keeps the state it has).
    let retried = &report["runs"][2];
    assert_eq!(
        valid(retried),
        ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"]
    );
    assert_eq!(retried["events"][2]["delta"], "Listo: el borrador está escrito.");
    assert_eq!(retried["events"][4]["result"]["version"], 1);
    assert_eq!(world.stack.model.requests().len(), 5, "the retried run reached the model");
    let (status, stored) = world.stored(USER, "hilo-1").await;
    assert_eq!((status, stored["version"].as_u64()), (200, Some(2)), "{stored}");
}

fn task(description: &str) -> (String, Value) {
    ("task".to_owned(), json!({"description": description, "subagent_type": "general-purpose"}))
}

#[tokio::test]
async fn a_subagents_call_waits_as_an_interrupt_that_the_next_runs_resume_answers_once() {
    let world = World::start(&[("APPROVAL_REQUIRED", "write_file")]).await;
    world.stack.model.push([Reply::Tools(vec![task("Draft the letter to the client.")])]);
    world.stack.model.push_for(
        "Draft the letter",
        [
            Reply::tool("write_file", json!({"file_path": "/workspace/carta.md", "content": "Estimada Ana"})),
            Reply::text("Draft written to /workspace/carta.md."),
        ],
    );
    world.stack.model.push([Reply::text("La carta está lista.")]);
    let report = world
        .runs(
            USER,
            "hilo-2",
            json!([
                {"runId": "run-1", "message": "Prepara la carta"},
                {"runId": "run-2", "resume": "approve"},
                {"runId": "run-2", "retry": true}
            ]),
        )
        .await;

    // The first run: the task call, the subagent, its call shown and then suspended on, and the run
    // finished with the call's interrupt.
    let paused = &report["runs"][0];
    let tool_call = ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"];
    let mut expected = vec!["RUN_STARTED", "STATE_SNAPSHOT"];
    expected.extend(tool_call);
    expected.push("SUBAGENT_STARTED");
    expected.extend(tool_call);
    expected.extend(["SUBAGENT_FINISHED", "RUN_FINISHED"]);
    assert_eq!(valid(paused), expected);
    let events = paused["events"].as_array().unwrap();
    let task_call = events[2]["toolCallId"].as_str().unwrap();
    assert_eq!(events[2]["toolCallName"], "task");
    assert_eq!(events[5]["subagentRunId"], "sa-1");
    assert_eq!(events[5]["parentToolCallId"], task_call);
    let waiting = events[6]["toolCallId"].as_str().unwrap();
    assert!(waiting.starts_with("sa-1/"), "{waiting}");
    assert_eq!(
        (events[6]["toolCallName"].as_str(), events[6]["subagentRunId"].as_str()),
        (Some("write_file"), Some("sa-1"))
    );
    assert_eq!(events[9]["outcome"], json!({"type": "suspended", "interruptIds": [waiting]}));
    let interrupts = &events[10]["outcome"]["interrupts"];
    assert_eq!(events[10]["outcome"]["type"], "interrupt");
    assert_eq!(interrupts.as_array().unwrap().len(), 1);
    assert_eq!((interrupts[0]["id"].as_str(), interrupts[0]["toolCallId"].as_str()), (Some(waiting), Some(waiting)));
    assert_eq!(interrupts[0]["reason"], "tool_approval");
    assert_eq!(interrupts[0]["subagentRunId"], "sa-1");
    assert_eq!(paused["pendingInterrupts"], *interrupts, "the client holds the interrupt for the next run");

    // The run answering it: the approved call runs (its result, no second start), the subagent
    // answers, the task call's result, the reply.
    let resumed = &report["runs"][1];
    let types = valid(resumed);
    let timeline: Vec<&str> = types.iter().map(String::as_str).filter(|kind| *kind != "TEXT_MESSAGE_CONTENT").collect();
    assert_eq!(
        timeline,
        [
            "RUN_STARTED",
            "STATE_SNAPSHOT",
            "SUBAGENT_STARTED",
            "TOOL_CALL_RESULT",
            "CUSTOM",
            "SUBAGENT_FINISHED",
            "TOOL_CALL_RESULT",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ],
        "the calls the client holds (the approved one, the task around it) are not started again"
    );
    assert_eq!(of_type(resumed, "SUBAGENT_STARTED")[0]["subagentRunId"], "sa-1", "the same invocation goes on");
    assert_eq!(of_type(resumed, "TOOL_CALL_RESULT")[1]["toolCallId"], task_call);
    let results = of_type(resumed, "TOOL_CALL_RESULT");
    let approved: Vec<&&Value> = results.iter().filter(|result| result["toolCallId"] == waiting).collect();
    assert_eq!(approved.len(), 1, "{types:?}");
    assert!(approved[0]["content"].as_str().unwrap().contains("/workspace/carta.md"), "{}", approved[0]);
    let file = of_type(resumed, "CUSTOM");
    assert_eq!(file.len(), 1);
    assert_eq!(file[0]["subagentRunId"], "sa-1");
    assert_eq!(file[0]["value"]["path"], "/workspace/carta.md");
    let finished = resumed["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(finished["outcome"], json!({"type": "success"}));
    assert_eq!(finished["result"]["reply"], "La carta está lista.");
    assert_eq!(resumed["pendingInterrupts"], json!([]));
    assert_eq!(world.stack.model.requests().len(), 4, "the parent, the subagent twice, the parent");

    // The answering run retried: replayed, the call not run again.
    let retried = &report["runs"][2];
    valid(retried);
    assert_eq!(retried["events"].as_array().unwrap().last().unwrap()["result"]["reply"], "La carta está lista.");
    assert_eq!(world.stack.model.requests().len(), 4);
    let (_, stored) = world.stored(USER, "hilo-2").await;
    assert_eq!(stored["version"], 2, "{stored}");
}

#[tokio::test]
async fn another_users_thread_is_never_read_or_changed() {
    let world = World::start(&[]).await;
    world.stack.model.push([Reply::text("El secreto de Ana es 4711.")]);
    let owner =
        world.runs("user-ana", "hilo-compartido", json!([{"runId": "a-1", "message": "Guarda mi secreto"}])).await;
    valid(&owner["runs"][0]);
    let (_, before) = world.stored("user-ana", "hilo-compartido").await;

    world.stack.model.push([Reply::text("No sé nada de eso.")]);
    let other =
        world.runs("user-bea", "hilo-compartido", json!([{"runId": "b-1", "message": "¿Cuál es el secreto?"}])).await;
    let run = &other["runs"][0];
    valid(run);
    assert_eq!(run["events"][1]["snapshot"], json!({"skill": null, "todos": [], "plan": null}));
    assert!(!run.to_string().contains("4711"), "the other user's history reached the caller: {run}");
    let asked = world.stack.model.requests().last().unwrap().to_string();
    assert!(!asked.contains("4711") && !asked.contains("Guarda mi secreto"), "the model saw Ana's history: {asked}");
    let (_, after) = world.stored("user-ana", "hilo-compartido").await;
    assert_eq!(after, before, "the owner's session changed");
    let (_, own) = world.stored("user-bea", "hilo-compartido").await;
    assert_eq!(own["version"], 1, "the caller's turn is in the caller's own session: {own}");
}

/// A Function URL event for `POST /ag-ui` with `body` and `token`.
fn agui_event(token: Option<&str>, body: &str) -> Value {
    let mut event = sample_event("stream-turn.json");
    event["rawPath"] = json!("/ag-ui");
    event["requestContext"]["http"]["path"] = json!("/ag-ui");
    event["body"] = json!(body);
    match token {
        Some(token) => event["headers"]["authorization"] = json!(format!("Bearer {token}")),
        None => drop(event["headers"].as_object_mut().unwrap().remove("authorization")),
    }
    event
}

#[tokio::test]
async fn bad_input_is_refused_with_a_precise_status_before_any_stream() {
    let world = World::start(&[]).await;
    // The client without a token: its HTTP error, no run.
    let report = world.runs(USER, "hilo-3", json!([{"runId": "r-1", "message": "Hola", "token": null}])).await;
    let refused = &report["runs"][0];
    assert_eq!(refused["error"]["status"], 401, "{refused}");
    assert_eq!(refused["error"]["payload"]["error"]["code"], "unauthorized");
    assert_eq!(refused["events"], json!([]));

    let token = world.identity.token(USER);
    let function = &world.function;
    let refuse = |event: Value| async move {
        let mut response = function.invoke_streaming(event, Duration::from_secs(60)).await;
        let status = response.status().await;
        let prelude = response.prelude().await;
        assert_eq!(prelude["headers"]["content-type"], "application/json", "{prelude}");
        let body: Value = serde_json::from_str(&response.body_text().await).unwrap();
        (status, body)
    };
    let good =
        json!({"threadId": "hilo-3", "runId": "r-2", "messages": [{"id": "1", "role": "user", "content": "Hola"}]});
    let (status, body) = refuse(agui_event(None, &good.to_string())).await;
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("unauthorized")));
    let (status, body) = refuse(agui_event(Some(&token), "{\"threadId\": ")).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("not valid JSON"), "{body}");
    let (status, body) = refuse(agui_event(Some(&token), &json!({"threadId": "hilo-3"}).to_string())).await;
    assert_eq!(status, 400, "{body}");
    let mut other = good.clone();
    other["threadId"] = json!("user-ana/hilo");
    let (status, body) = refuse(agui_event(Some(&token), &other.to_string())).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().starts_with("`threadId`"), "{body}");
    let mut assistant_last = good.clone();
    assistant_last["messages"] =
        json!([{"id": "1", "role": "user", "content": "Hola"}, {"id": "2", "role": "assistant", "content": "Hola"}]);
    let (status, body) = refuse(agui_event(Some(&token), &assistant_last.to_string())).await;
    assert_eq!(status, 400, "{body}");
    let mut unknown = good.clone();
    unknown["resume"] = json!([{"interruptId": "call_9", "status": "resolved", "payload": {"decision": "approve"}}]);
    // A resume when nothing waits is the turn's to refuse: the stream has started, so it ends with
    // RUN_ERROR.
    let mut stream =
        world.function.invoke_streaming(agui_event(Some(&token), &unknown.to_string()), Duration::from_secs(60)).await;
    assert_eq!(stream.status().await, 200);
    let body = stream.body_text().await;
    let last = body.trim_end().rsplit("\n\n").next().unwrap();
    let last: Value = serde_json::from_str(last.strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!((last["type"].as_str(), last["code"].as_str()), (Some("RUN_ERROR"), Some("not_pending")), "{body}");
    let mut get = agui_event(Some(&token), &good.to_string());
    get["requestContext"]["http"]["method"] = json!("GET");
    assert_eq!(refuse(get).await.0, 405);
    assert!(world.stack.model.requests().is_empty(), "a refused request reached the model");
}

#[tokio::test]
async fn the_planners_plan_is_state_the_client_is_sent() {
    let alpha = local_stack::experts::ExpertServer::start();
    let config = json!({"mcpServers": {"alpha": {"url": alpha.url, "description": "The alpha expert"}}}).to_string();
    let world =
        World::start(&[("AGENT_STRATEGY", "planner"), ("EXPERTS_CONFIG", &config), ("EXPERT_TIMEOUT_SECS", "5")]).await;
    let structured = |value: Value| Reply::Text(value.to_string());
    let prompt = |name: &str, confidence: f64, arguments: Value| json!({"name": name, "description": "", "match_confidence": confidence, "arguments": arguments});
    world.stack.model.push([
        structured(json!({"decision": "replace", "plan": [{"expert": "alpha", "task": "Help with the contract"}],
                          "next_task": 0, "clarification": null})),
        // Two prompts nearly as good: the planner asks which, and keeps its plan for the answer.
        structured(json!({"prompts": [
            prompt("draft_contract", 0.5, json!([{"name": "party_a", "value": "Ana"}, {"name": "party_b", "value": "Luis"}])),
            prompt("review_clause", 0.45, json!([{"name": "clause", "value": "pago aplazado"}]))
        ]})),
        Reply::text("The clause is risky."),
        structured(json!({"is_completed": true, "explanation": "complete", "confidence": 0.8})),
        Reply::text("Review done."),
    ]);
    let report = world
        .runs(
            USER,
            "hilo-plan",
            json!([
                {"runId": "p-1", "message": "Help me with my contract"},
                {"runId": "p-2", "message": "2"}
            ]),
        )
        .await;
    let asked = &report["runs"][0];
    let types = valid(asked);
    // The plan is read once the turn has committed; the question (not streamed) is the reply.
    assert_eq!(
        types,
        [
            "RUN_STARTED",
            "STATE_SNAPSHOT",
            "STATE_DELTA",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED"
        ]
    );
    let delta = &of_type(asked, "STATE_DELTA")[0]["delta"][0];
    assert_eq!((delta["op"].as_str(), delta["path"].as_str()), (Some("replace"), Some("/plan")));
    assert_eq!(asked["state"]["plan"]["tasks"][0]["task"], "Help with the contract", "{}", asked["state"]);
    assert_eq!(asked["state"]["plan"]["position"], 0);
    assert_eq!(of_type(asked, "RUN_FINISHED")[0]["result"]["ending"], "awaiting_choice");

    // The answer finishes the plan: the next run starts from it and ends without one.
    let answered = &report["runs"][1];
    valid(answered);
    assert_eq!(answered["events"][1]["snapshot"]["plan"], asked["state"]["plan"]);
    assert_eq!(
        of_type(answered, "STATE_DELTA")[0]["delta"],
        json!([{"op": "replace", "path": "/plan", "value": null}])
    );
    assert_eq!(answered["state"]["plan"], Value::Null);
}
