//! Subagents (`task`) through the compiled functions with the scripted model: a reply's `task` calls
//! run at the same time, each in a fresh context whose final message becomes the call's result; the
//! depth, per-turn and step bounds; a subagent's writes committed with the turn; and its events on the
//! parent's SSE, tagged with its id, in order, also when it stops for approval and goes on once approved.

use std::time::Duration;

use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{file_event, status_and_body, system_of, tool_names, tool_results, turn_event, Stack};
use serde_json::{json, Value};

const USER: &str = "user-sub";

async fn turn(function: &Function, session: &str, message: &str) -> (u16, Value) {
    status_and_body(&function.call(turn_event(Some(USER), session, json!({ "message": message }))).await)
}

fn task(description: &str) -> (String, Value) {
    ("task".to_owned(), json!({"description": description, "subagent_type": "general-purpose"}))
}

fn first_user(request: &Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    let user = messages.iter().find(|message| message["role"] == "user").unwrap();
    user["content"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn three_task_calls_in_one_reply_run_at_once_each_in_a_fresh_context() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    let latency = Duration::from_millis(1500);
    stack.model.push([Reply::Tools(vec![
        task("Research topic alpha and report."),
        task("Research topic beta and report."),
        task("Research topic gamma and report."),
    ])]);
    for name in ["alpha", "beta", "gamma"] {
        stack.model.push_for(
            &format!("topic {name}"),
            [Reply::Delayed(latency, Box::new(Reply::text(&format!("Findings on {name}."))))],
        );
    }
    stack.model.push([Reply::text("All three topics are researched.")]);
    let http = stack.http(&[]).await;
    let (status, body) = turn(&http, "s1", "Research alpha, beta and gamma in parallel.").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "All three topics are researched.");
    assert_eq!(body["steps"], 2, "the subagents' calls are not the parent's steps");
    assert_eq!(
        body["usage"]["input_tokens"],
        500,
        "five model calls, each counted once: {body} {:?}",
        tool_results(&stack.model.requests()[1])
    );

    let requests = stack.model.requests_with_arrivals();
    assert_eq!(requests.len(), 5);
    let (parent_first, _) = &requests[0];
    let subagents: Vec<&(Value, std::time::Instant)> = requests[1..4].iter().collect();
    let (parent_last, last_at) = &requests[4];
    assert_eq!(first_user(parent_last), first_user(parent_first), "the parent's conversation goes on");
    // Each subagent starts with its task alone: its instructions and the description, nothing of the
    // parent's conversation.
    let mut briefs: Vec<String> = subagents.iter().map(|(request, _)| first_user(request)).collect();
    briefs.sort();
    assert_eq!(
        briefs,
        ["Research topic alpha and report.", "Research topic beta and report.", "Research topic gamma and report."]
    );
    for (request, _) in &subagents {
        assert_eq!(request["messages"].as_array().unwrap().len(), 2, "system and the task: {request}");
        assert!(system_of(request).contains("<subagent>You are a subagent"), "told what it is");
        assert!(!request.to_string().contains("in parallel"), "none of the parent's words");
        assert!(tool_names(request).contains(&"task".to_owned()), "level 1 may still delegate");
    }
    // All three were asked before any answered (each takes 1.5 s), and the parent went on after about
    // the longest, not the sum.
    let first_at = subagents.iter().map(|(_, at)| *at).min().unwrap();
    let latest_at = subagents.iter().map(|(_, at)| *at).max().unwrap();
    assert!(latest_at - first_at < latency / 2, "the subagents ran one after another: {:?}", latest_at - first_at);
    assert!(*last_at - first_at < latency * 2, "the turn waited for the sum: {:?}", *last_at - first_at);
    // Each answer is its own call's result.
    let results = tool_results(parent_last);
    let calls = parent_last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|message| message["tool_calls"].as_array().cloned())
        .unwrap();
    for (call, result) in calls.iter().zip(&results) {
        let arguments: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        let topic = arguments["description"].as_str().unwrap().split(' ').nth(2).unwrap().to_owned();
        assert_eq!(result, &format!("Findings on {topic}."));
    }
}

#[tokio::test]
async fn subagents_stop_at_their_depth_their_number_and_their_steps() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    let settings = [("SUBAGENT_MAX_DEPTH", "2"), ("SUBAGENTS_PER_TURN", "4"), ("SUBAGENT_MAX_STEPS", "2")];
    // The parent starts one subagent, which starts one of its own (level 2, the deepest), which loops
    // on a tool until its steps run out. A second call of the parent's is past the turn's number.
    stack.model.push([Reply::tool(
        "task",
        json!({"description": "Level one: delegate.", "subagent_type": "general-purpose"}),
    )]);
    stack.model.push_for(
        "Level one",
        [
            Reply::tool("task", json!({"description": "Level two: keep reading.", "subagent_type": "general-purpose"})),
            Reply::text("Level one is done."),
        ],
    );
    stack.model.push_for(
        "Level two",
        [
            Reply::Tools(vec![(
                "write_file".to_owned(),
                json!({"file_path": "/workspace/deep.md", "content": "Deep notes."}),
            )]),
            Reply::tool("ls", json!({"path": "/workspace"})),
        ],
    );
    stack.model.push([Reply::Tools(vec![task("Extra one."), task("Extra two."), task("Extra three.")])]);
    stack.model.push_for("Extra one", [Reply::text("One.")]);
    stack.model.push_for("Extra two", [Reply::text("Two.")]);
    stack.model.push([Reply::text("Done with what could be started.")]);
    let http = stack.http(&settings).await;
    let (status, body) = turn(&http, "s2", "Go deep.").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(stack.model.remaining(), 0, "every scripted reply was asked for");

    let requests = stack.model.requests();
    let of = |key: &str| -> Vec<&Value> { requests.iter().filter(|r| first_user(r).contains(key)).collect() };
    let level_one = of("Level one");
    let level_two = of("Level two");
    assert!(tool_names(level_one[0]).contains(&"task".to_owned()), "level 1 is offered task");
    assert!(!tool_names(level_two[0]).contains(&"task".to_owned()), "level 2 is the deepest: no task");
    assert_eq!(level_two.len(), 2, "two steps, then the bound");
    // Level two stopped at its steps: level one got what it had with a note.
    let level_one_results = tool_results(level_one[1]);
    assert!(level_one_results[0].starts_with("[The subagent stopped before finishing: it reached its limit of 2 steps"));
    // The turn's fifth subagent is past SUBAGENTS_PER_TURN = 4 (level one, level two, extra one, extra two).
    let last = requests.last().unwrap();
    let results = tool_results(last);
    let extra = &results[results.len() - 3..];
    assert_eq!((extra[0].as_str(), extra[1].as_str()), ("One.", "Two."), "{results:?}");
    assert!(extra[2].starts_with("Error: this turn has started 4 subagents"), "{results:?}");
    // What the deepest subagent wrote is committed with the turn.
    assert!(body["files"].to_string().contains("/workspace/deep.md"), "{body}");
    let file = http.call(file_event(Some(USER), "s2", "deep.md")).await;
    assert_eq!(file["statusCode"], 200, "{file}");
    assert_eq!(file["body"], "RGVlcCBub3Rlcy4=", "the file, base64-encoded as API Gateway carries it");
}

#[tokio::test]
async fn a_subagents_events_reach_the_parents_stream_tagged_and_in_order() {
    use crate::streaming::{all_events, names, stream_event};
    use local_stack::identity::IdentityProvider;

    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    let identity = IdentityProvider::start().await;
    let function = Function::start("stream-turn", &stack.env(&identity.env())).await;
    stack.model.push([Reply::tool(
        "task",
        json!({"description": "Summarise the notes.", "subagent_type": "general-purpose"}),
    )]);
    stack.model.push_for(
        "Summarise the notes",
        [
            Reply::tool("write_file", json!({"file_path": "/workspace/summary.md", "content": "Short."})),
            Reply::text("The summary is in /workspace/summary.md."),
        ],
    );
    stack.model.push([Reply::Chunks(vec!["Here ".into(), "it is.".into()])]);
    let event = stream_event(Some(&identity.token(USER)), "s3", json!({"message": "Summarise my notes."}), true);
    let mut stream = function.invoke_streaming(event, Duration::from_secs(120)).await;
    let events = all_events(&mut stream).await;
    assert_eq!(
        names(&events),
        [
            "turn.started",
            "model.call",
            "tool.call",
            "subagent.started",
            "model.call",
            "tool.call",
            "tool.result",
            "file.written",
            "model.call",
            "subagent.completed",
            "tool.result",
            "model.call",
            "message.delta",
            "message.delta",
            "turn.completed",
        ]
    );
    let task_call = &events[2].data;
    assert_eq!(task_call["name"], "task");
    let started = &events[3].data;
    assert_eq!(started["subagent"], "sa-1");
    assert_eq!(started["parent"], Value::Null);
    assert_eq!(started["call_id"], task_call["id"]);
    assert_eq!((started["agent_type"].as_str(), started["depth"].as_u64()), (Some("general-purpose"), Some(1)));
    // The subagent's own events carry its id; the parent's carry none.
    for event in &events[4..9] {
        assert_eq!(event.data["subagent"], "sa-1", "{}: {}", event.name, event.data);
    }
    for event in events[..3].iter().chain(&events[10..]) {
        assert!(event.data.get("subagent").is_none(), "{}: {}", event.name, event.data);
    }
    assert_eq!(events[7].data["path"], "/workspace/summary.md");
    let completed = &events[9].data;
    assert_eq!((completed["ending"].as_str(), completed["steps"].as_u64()), (Some("answered"), Some(2)));
    assert_eq!(completed["ok"], true);
    // Its own two model calls, attributed to it with the input split; the turn's totals include them.
    let usage = &completed["usage"];
    assert_eq!((usage["input_tokens"].as_u64(), usage["output_tokens"].as_u64()), (Some(200), Some(20)), "{completed}");
    let split = ["uncached_input_tokens", "cache_write_tokens", "cache_read_tokens"].map(|key| usage[key].as_u64());
    assert_eq!(split.iter().flatten().sum::<u64>(), 200, "the input's parts add up: {usage}");
    assert_eq!(events[10].data["content"], "The summary is in /workspace/summary.md.");
    let done = &events.last().unwrap().data;
    assert_eq!(done["reply"], "Here it is.");
    assert_eq!(done["usage"]["input_tokens"], 400, "the parent's two calls and the subagent's: {done}");
    assert!(done["files"].to_string().contains("/workspace/summary.md"), "{done}");
}

#[tokio::test]
async fn a_tenant_agent_from_agents_runs_with_its_instructions_and_only_its_tools() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack
        .put(
            &format!("{USER}/agents/revisor.md"),
            "---\nname: revisor\ndescription: Revisa escrituras y señala errores.\ntools: Read, Grep\nmodel: inherit\n---\n\
             Eres un revisor de escrituras. Lee con cuidado y responde con una lista de errores.\n",
        )
        .await;
    stack.model.push([Reply::Tools(vec![
        ("task".to_owned(), json!({"description": "Revisa /workspace/borrador.md.", "subagent_type": "revisor"})),
        ("task".to_owned(), json!({"description": "Otra cosa.", "subagent_type": "inventado"})),
    ])]);
    stack.model.push_for(
        "Revisa /workspace/borrador.md",
        [
            Reply::tool("write_file", json!({"file_path": "/workspace/x.md", "content": "no"})),
            Reply::tool("read_file", json!({"file_path": "/workspace/borrador.md"})),
            Reply::text("Sin errores: el borrador no existe todavía."),
        ],
    );
    stack.model.push([Reply::text("Revisado.")]);
    let http = stack.http(&[]).await;
    let (status, body) = turn(&http, "s4", "Revisa mi borrador.").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "Revisado.");
    assert_eq!(body["refused_tool_calls"], 1, "the subagent's refused write counts in the turn's: {body}");

    let requests = stack.model.requests();
    // The parent is told of the tenant's agent beside the built-in type.
    let task_spec = requests[0]["tools"].as_array().unwrap().iter().find(|t| t["function"]["name"] == "task").unwrap();
    let description = task_spec["function"]["description"].as_str().unwrap();
    assert!(description.contains("- revisor: Revisa escrituras y señala errores."), "{description}");
    let revisor: Vec<&Value> = requests.iter().filter(|r| first_user(r).starts_with("Revisa /workspace")).collect();
    assert_eq!(revisor.len(), 3);
    let mut tools = tool_names(revisor[0]);
    tools.sort();
    assert_eq!(tools, ["grep", "read_file"], "Read and Grep, mapped to ours, and nothing else");
    let system = system_of(revisor[0]);
    assert!(system.starts_with("Eres un revisor de escrituras."), "its body is its prompt: {system}");
    assert!(system.contains("<subagent>"), "{system}");
    assert!(!system.contains("load_skill("), "no skill listing without load_skill");
    // A tool outside its list is refused, and never runs.
    assert!(
        tool_results(revisor[1])[0].starts_with("Error: there is no tool named `write_file`"),
        "{:?}",
        tool_results(revisor[1])
    );
    assert!(stack.object_keys(&format!("{USER}/sessions/")).await.iter().all(|key| !key.contains("x.md")));
    let results = tool_results(requests.last().unwrap());
    assert_eq!(results[0], "Sin errores: el borrador no existe todavía.");
    assert!(
        results[1].starts_with("Error: there is no agent type `inventado`. Agent types: general-purpose, revisor."),
        "{results:?}"
    );
    assert!(!body["files"].to_string().contains("x.md"), "{body}");
}

#[tokio::test]
async fn a_subagents_call_that_needs_approval_streams_approval_requested_and_goes_on_once_approved() {
    use crate::streaming::{all_events, names, stream_event};
    use local_stack::identity::IdentityProvider;

    let stack = Stack::new().await;
    let identity = IdentityProvider::start().await;
    let mut env = identity.env();
    env.push(("APPROVAL_REQUIRED", "write_file"));
    let function = Function::start("stream-turn", &stack.env(&env)).await;
    stack.model.push([Reply::tool(
        "task",
        json!({"description": "Draft the meeting minutes.", "subagent_type": "general-purpose"}),
    )]);
    stack.model.push_for(
        "Draft the meeting minutes",
        [
            Reply::tool("write_file", json!({"file_path": "/workspace/minutes.md", "content": "Minutes."})),
            Reply::text("The minutes are in /workspace/minutes.md."),
        ],
    );
    stack.model.push([Reply::text("Done.")]);
    let post = |body: Value| {
        let event = stream_event(Some(&identity.token(USER)), "s-approval", body, true);
        function.invoke_streaming(event, Duration::from_secs(120))
    };
    let first = all_events(&mut post(json!({"message": "Please take care of the minutes."})).await).await;
    let events = &first;
    assert_eq!(
        names(events),
        [
            "turn.started",
            "model.call",
            "tool.call",
            "subagent.started",
            "model.call",
            "subagent.completed",
            "approval.requested",
            "turn.completed",
        ]
    );
    // The subagent stops waiting; the parent's stream says which call of which subagent waits.
    let completed = &events[5].data;
    assert_eq!(
        (completed["subagent"].as_str(), completed["ending"].as_str()),
        (Some("sa-1"), Some("awaiting_approval"))
    );
    let calls = &events[6].data["calls"];
    assert_eq!(calls.as_array().map(Vec::len), Some(1), "{calls}");
    assert_eq!((calls[0]["name"].as_str(), calls[0]["subagent"].as_str()), (Some("write_file"), Some("sa-1")));
    let call_id = calls[0]["id"].as_str().expect("the call's id").to_owned();
    assert!(call_id.starts_with("sa-1/"), "{call_id}");
    assert!(events[6].data.get("subagent").is_none(), "the request is the turn's, not the subagent's own event");
    let done = &events[7].data;
    assert_eq!(done["ending"], "awaiting_approval");
    assert_eq!(done["pending_approval"][0]["id"], call_id.as_str());

    // Approved: the task call is made again and its subagent (the same sa-1, started by the same
    // call) goes on: its call runs with its id on its events, then the parent answers.
    let task_call_id = first[2].data["id"].clone();
    let decisions = json!({"decisions": [{"call_id": call_id, "decision": "approve"}]});
    let events = all_events(&mut post(decisions).await).await;
    assert_eq!(
        names(&events),
        [
            "turn.started",
            "tool.call",
            "subagent.started",
            "tool.call",
            "tool.result",
            "file.written",
            "model.call",
            "subagent.completed",
            "tool.result",
            "model.call",
            "message.delta",
            "turn.completed",
        ]
    );
    assert_eq!(events[1].data["id"], task_call_id);
    assert_eq!((events[2].data["subagent"].as_str(), &events[2].data["call_id"]), (Some("sa-1"), &task_call_id));
    for event in &events[3..7] {
        assert_eq!(event.data["subagent"], "sa-1", "{}: {}", event.name, event.data);
    }
    assert_eq!(events[7].data["ending"], "answered");
    assert_eq!(events[8].data["content"], "The minutes are in /workspace/minutes.md.");
    assert_eq!(events[11].data["reply"], "Done.");
}
