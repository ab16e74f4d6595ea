//! The planner strategy through the compiled `http-turn` function, against expert MCP servers
//! (the official Python SDK) on loopback, moto, and a scripted model.

use local_stack::experts::{dead_url, ExpertOptions, ExpertServer};
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, status_and_body, system_of, tool_results, turn_event, Stack};
use serde_json::{json, Value};

const USER: &str = "user-p";

fn structured(value: Value) -> Reply {
    Reply::Text(value.to_string())
}

fn plan(tasks: &[(&str, &str)]) -> Reply {
    let tasks: Vec<Value> = tasks.iter().map(|(expert, task)| json!({"expert": expert, "task": task})).collect();
    structured(json!({"decision": "replace", "plan": tasks, "next_task": 0, "clarification": null}))
}

/// A prompt's name, its score, and the argument values discovery proposes for it.
type Scored<'a> = (&'a str, f64, &'a [(&'a str, &'a str)]);

fn scores(prompts: &[Scored<'_>]) -> Reply {
    let prompts: Vec<Value> = prompts
        .iter()
        .map(|(name, confidence, args)| {
            let args: Vec<Value> = args.iter().map(|(n, v)| json!({"name": n, "value": v})).collect();
            json!({"name": name, "description": "", "match_confidence": confidence, "arguments": args})
        })
        .collect();
    structured(json!({ "prompts": prompts }))
}

fn assessed(done: bool, confidence: f64) -> Reply {
    structured(
        json!({"is_completed": done, "explanation": if done { "complete" } else { "the total is missing" }, "confidence": confidence}),
    )
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

async fn turn(function: &Function, session: &str, message: &str) -> (u16, Value) {
    status_and_body(&function.call(turn_event(Some(USER), session, json!({ "message": message }))).await)
}

async fn stored_plan(stack: &Stack, session: &str) -> Option<aws_sdk_dynamodb::types::AttributeValue> {
    stack.session_item(USER, session).await.expect("session stored").get("plan").cloned()
}

#[tokio::test]
async fn a_plan_of_two_tasks_on_two_experts_runs_with_the_fetched_prompt() {
    let (alpha, beta) = (ExpertServer::start(), ExpertServer::start());
    let stack = Stack::new().await;
    stack.model.push([
        plan(&[("alpha", "Draft the sale contract"), ("beta", "Add the two payments")]),
        scores(&[("draft_contract", 0.92, &[("party_a", "Ana"), ("party_b", "Luis")]), ("review_clause", 0.2, &[])]),
        Reply::Tools(vec![
            ("alpha__add".into(), json!({"a": 2, "b": 3})),
            ("alpha__add".into(), json!({"a": 10, "b": 5})),
        ]),
        Reply::text("Contract drafted for Ana and Luis."),
        assessed(true, 0.9),
        scores(&[("draft_contract", 0.1, &[]), ("review_clause", 0.1, &[])]),
        Reply::tool("beta__add", json!({"a": 100, "b": 50})),
        Reply::text("The payments add up to 150."),
        assessed(true, 0.95),
        Reply::text("Here is your contract, and the payments total 150."),
    ]);
    let http =
        planner_function(&stack, &[("alpha", &alpha.url), ("beta", &beta.url)], &[("PLANNER_MODEL", "planner-model")])
            .await;
    let (status, body) = turn(&http, "p1", "Draft a sale contract between Ana and Luis and add up the payments").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "Here is your contract, and the payments total 150.");
    assert_eq!(body["ending"], "answered");
    assert_eq!(body["steps"], 10);

    let requests = stack.model.requests();
    assert_eq!(requests.len(), 10);
    // Planning: structured output, its own model, both experts listed.
    assert_eq!(requests[0]["model"], "planner-model");
    assert_eq!(requests[0]["response_format"]["json_schema"]["name"], "plan");
    let planning = requests[0]["messages"][1]["content"].as_str().unwrap();
    assert!(
        planning.contains("- alpha: The alpha expert") && planning.contains("- beta: The beta expert"),
        "{planning}"
    );
    // Discovery saw the expert's prompts.
    assert!(requests[1]["messages"][1]["content"].as_str().unwrap().contains("draft_contract"));
    // The selected prompt was fetched with the proposed arguments and its content reached the model.
    let orchestration = system_of(&requests[2]);
    assert!(orchestration.contains("Draft a sale contract between Ana (seller) and Luis (buyer)."), "{orchestration}");
    let tools: Vec<&str> =
        requests[2]["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert!(tools.contains(&"alpha__add") && tools.contains(&"alpha__fail"), "{tools:?}");
    assert!(!tools.iter().any(|t| t.starts_with("beta__")), "only the task's expert's tools");
    // Both calls of one reply ran.
    assert_eq!(tool_results(&requests[3]), ["5", "15"]);
    assert_eq!(requests[4]["response_format"]["json_schema"]["name"], "assessment");
    // The second task had no prompt above the thresholds and used beta's tools.
    assert!(!system_of(&requests[6]).contains("<expert-prompt"));
    assert_eq!(tool_results(&requests[7]), ["150"]);

    // The finished plan is reset to NULL; the history holds the request and the answer.
    assert!(matches!(stored_plan(&stack, "p1").await, Some(aws_sdk_dynamodb::types::AttributeValue::Null(true))));
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "p1")).await);
    assert_eq!(session["history"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn an_unsure_match_asks_the_user_and_reads_the_answer_next_turn() {
    let alpha = ExpertServer::start();
    let stack = Stack::new().await;
    let unsure = || {
        scores(&[
            ("draft_contract", 0.5, &[("party_a", "Ana"), ("party_b", "Luis")]),
            ("review_clause", 0.45, &[("clause", "pago aplazado")]),
            ("filler_1", 0.1, &[]),
        ])
    };
    stack.model.push([plan(&[("alpha", "Help with the contract")]), unsure()]);
    let http = planner_function(&stack, &[("alpha", &alpha.url)], &[]).await;
    let (status, body) = turn(&http, "by-number", "Help me with my contract").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ending"], "awaiting_choice");
    let question = body["reply"].as_str().unwrap();
    assert!(question.contains("1. draft_contract") && question.contains("2. review_clause"), "{question}");
    assert!(!question.contains("filler_1"), "below the suggestion threshold");
    assert!(question.contains("\"none\""));
    let plan_item = stored_plan(&stack, "by-number").await.unwrap();
    assert!(plan_item.as_m().unwrap().contains_key("pending_choice"), "the pending choice is stored");

    // The answer "2": no new planning, the second prompt is fetched with its arguments.
    stack.model.push([Reply::text("The clause is risky."), assessed(true, 0.8), Reply::text("Review done.")]);
    let (status, body) = turn(&http, "by-number", "2").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "Review done.");
    let requests = stack.model.requests();
    assert_eq!(requests.len(), 5, "plan, discovery, then orchestration, assessment, response");
    assert!(system_of(&requests[2]).contains("Review this clause for risks: pago aplazado"));

    // The answer "none": the task runs without a prompt.
    stack.model.push([plan(&[("alpha", "Help with the contract")]), unsure()]);
    turn(&http, "by-none", "Help me with my contract").await;
    stack.model.push([Reply::text("Done without a prompt."), assessed(true, 0.8), Reply::text("All done.")]);
    let (status, body) = turn(&http, "by-none", "none").await;
    assert_eq!((status, body["reply"].as_str()), (200, Some("All done.")));
    let requests = stack.model.requests();
    assert!(!system_of(&requests[7]).contains("<expert-prompt"), "{}", system_of(&requests[7]));
    assert!(matches!(stored_plan(&stack, "by-none").await, Some(aws_sdk_dynamodb::types::AttributeValue::Null(true))));
}

#[tokio::test]
async fn a_task_not_done_goes_round_again_and_tool_errors_are_results() {
    let alpha = ExpertServer::start();
    let stack = Stack::new().await;
    stack.model.push([
        plan(&[("alpha", "Compute the total")]),
        scores(&[]),
        Reply::tool("alpha__fail", json!({})),
        Reply::text("I could not compute it."),
        assessed(false, 0.9),
        Reply::tool("alpha__add", json!({"a": 1, "b": 2})),
        Reply::text("The total is 3."),
        assessed(true, 0.75),
        Reply::text("Total: 3."),
    ]);
    let http = planner_function(&stack, &[("alpha", &alpha.url)], &[]).await;
    let (status, body) = turn(&http, "rounds", "What is the total?").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "Total: 3.");
    let requests = stack.model.requests();
    let failed = tool_results(&requests[3]);
    assert!(
        failed[0].starts_with("Error (the tool reported a failure)") && failed[0].contains("always fails"),
        "{failed:?}"
    );
    // The second round carries the assessment's explanation.
    assert!(system_of(&requests[5]).contains("the total is missing"), "{}", system_of(&requests[5]));
}

#[tokio::test]
async fn an_expert_that_is_down_is_left_out_and_a_bad_plan_is_retried_once() {
    let alpha = ExpertServer::start();
    let stack = Stack::new().await;
    stack.model.push([
        // Names an expert that is not available: retried once with the error.
        plan(&[("gamma", "Do something")]),
        plan(&[("alpha", "Add numbers")]),
        scores(&[]),
        Reply::text("Added."),
        assessed(true, 0.9),
        Reply::text("Done."),
    ]);
    let dead = dead_url();
    let http = planner_function(&stack, &[("alpha", &alpha.url), ("gamma", &dead)], &[]).await;
    let (status, body) = turn(&http, "down", "Add numbers").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "Done.");
    let requests = stack.model.requests();
    let planning = requests[0]["messages"][1]["content"].as_str().unwrap();
    assert!(planning.contains("- alpha:") && !planning.contains("gamma"), "the dead expert is left out: {planning}");
    let retry = requests[1]["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap();
    assert!(retry.contains("gamma") && retry.contains("not in the list"), "{retry}");

    // Two invalid replies end the turn with a clear message, and nothing breaks.
    stack.model.push([Reply::text("not json"), Reply::text("{\"decision\": 3}")]);
    let (status, body) = turn(&http, "down", "Again").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ending"], "plan_failed");
    assert!(body["reply"].as_str().unwrap().contains("did not have the expected form"), "{body}");
}

#[tokio::test]
async fn a_plan_that_does_not_fit_one_invocation_continues_in_the_next() {
    let (alpha, beta) = (ExpertServer::start(), ExpertServer::start());
    let stack = Stack::new().await;
    stack.model.push([
        plan(&[("alpha", "First part"), ("beta", "Second part")]),
        scores(&[]),
        Reply::text("First part done."),
        assessed(true, 0.9),
        scores(&[]),
    ]);
    let http = planner_function(&stack, &[("alpha", &alpha.url), ("beta", &beta.url)], &[("MAX_STEPS", "5")]).await;
    let (status, body) = turn(&http, "long", "Do both parts").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ending"], "plan_continues");
    assert!(body["reply"].as_str().unwrap().contains("1 of 2"), "{body}");
    let stored = stored_plan(&stack, "long").await.unwrap();
    assert_eq!(stored.as_m().unwrap()["position"].as_n().unwrap(), "1", "saved with its position");

    stack.model.push([
        structured(json!({"decision": "continue", "plan": [], "next_task": 0, "clarification": null})),
        Reply::text("Second part done."),
        assessed(true, 0.9),
        Reply::text("Both parts are done."),
    ]);
    let (status, body) = turn(&http, "long", "continue").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "Both parts are done.");
    let requests = stack.model.requests();
    let planning = requests[5]["messages"][1]["content"].as_str().unwrap();
    assert!(planning.contains("\"next_task\": 1"), "the planner sees the saved position: {planning}");
    assert!(system_of(&requests[6]).contains("Second part"));
    let response = requests[8]["messages"][1]["content"].as_str().unwrap();
    assert!(response.contains("First part done.") && response.contains("Second part done."), "{response}");
}

/// A planner turn that made no model call (its plan call cut by the deadline, or no time left for
/// one) is a retryable 503 that commits nothing, as in the skills strategy: a canned reply stored
/// in its place would use up the user's message.
#[tokio::test]
async fn a_slow_planning_call_gives_way_to_the_deadline() {
    let alpha = ExpertServer::start();
    let stack = Stack::new().await;
    stack.model.push([Reply::Delayed(std::time::Duration::from_secs(6), Box::new(plan(&[("alpha", "Late")])))]);
    let http = planner_function(&stack, &[("alpha", &alpha.url)], &[("DEADLINE_RESERVE_MS", "1000")]).await;
    let event = turn_event(Some(USER), "slow", json!({"message": "Plan this"}));
    let started = std::time::Instant::now();
    let response = match http.invoke_with_budget(event, std::time::Duration::from_secs(4)).await {
        local_stack::lambda::Invocation::Response(value) => value,
        local_stack::lambda::Invocation::Error(error) => panic!("{error}"),
        local_stack::lambda::Invocation::Stream(_) => panic!("http-turn streamed its answer"),
    };
    assert!(started.elapsed() < std::time::Duration::from_secs(4), "answered before the deadline");
    let (status, body) = status_and_body(&response);
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("out_of_time")), "{body}");
    assert!(stack.session_item(USER, "slow").await.is_none(), "nothing was committed");

    // Half a second left, inside the reserve: the plan call is never made.
    let event = turn_event(Some(USER), "hurried", json!({"message": "Plan this"}));
    let response = match http.invoke_with_budget(event, std::time::Duration::from_millis(500)).await {
        local_stack::lambda::Invocation::Response(value) => value,
        local_stack::lambda::Invocation::Error(error) => panic!("{error}"),
        local_stack::lambda::Invocation::Stream(_) => panic!("http-turn streamed its answer"),
    };
    let (status, body) = status_and_body(&response);
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("out_of_time")), "{body}");
    assert_eq!(stack.model.requests().len(), 1, "only the cut call of the first turn reached the model");
    assert!(stack.session_item(USER, "hurried").await.is_none(), "nothing was committed");
}

/// The expert server with `--deed-prompts`: the prompts of the argument tests, which stay out of the
/// default listing that other tests count.
fn deed_expert() -> ExpertServer {
    ExpertServer::start_with(&ExpertOptions::default().deed_prompts())
}

fn is_null(plan: Option<aws_sdk_dynamodb::types::AttributeValue>) -> bool {
    matches!(plan, Some(aws_sdk_dynamodb::types::AttributeValue::Null(true)))
}

#[tokio::test]
async fn a_required_prompt_argument_nobody_filled_is_asked_for_and_the_answer_fetches_the_prompt() {
    let alpha = deed_expert();
    let stack = Stack::new().await;
    // Discovery picks `draft_deed` but has no value for its required `deed_type`.
    stack.model.push([plan(&[("alpha", "Draft the deed")]), scores(&[("draft_deed", 0.9, &[])])]);
    let http = planner_function(&stack, &[("alpha", &alpha.url)], &[]).await;
    let (status, body) = turn(&http, "ask", "Draft my deed").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ending"], "awaiting_clarification");
    let question = body["reply"].as_str().unwrap();
    assert!(question.contains("- deed_type: The kind of deed: sale, gift, will."), "{question}");
    assert!(question.contains("\"none\""), "{question}");
    assert_eq!(stack.model.requests().len(), 2, "plan and discovery only: no task ran");
    let stored = stored_plan(&stack, "ask").await.unwrap();
    let pending = stored.as_m().unwrap().get("pending_arguments").expect("the question is stored");
    assert!(pending.as_m().is_ok_and(|m| m.contains_key("asked")), "{pending:?}");

    // The answer: no new planning; the expert renders the prompt with it, and the task runs.
    stack.model.push([Reply::text("Deed drafted."), assessed(true, 0.9), Reply::text("Here is your deed.")]);
    let (status, body) = turn(&http, "ask", "compraventa").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["reply"].as_str(), body["ending"].as_str()), (Some("Here is your deed."), Some("answered")));
    let requests = stack.model.requests();
    assert_eq!(requests.len(), 5, "orchestration, assessment, response");
    let orchestration = system_of(&requests[2]);
    assert!(orchestration.contains("Draft a notarial deed of type: compraventa."), "{orchestration}");
    assert!(is_null(stored_plan(&stack, "ask").await));
}

#[tokio::test]
async fn refused_prompt_arguments_are_asked_for_again_and_none_goes_on_without_the_prompt() {
    let alpha = deed_expert();
    let stack = Stack::new().await;
    // `notarize` refuses a deed not on record with invalid params (-32602).
    stack.model.push([plan(&[("alpha", "Notarize the deed")]), scores(&[("notarize", 0.9, &[("deed", "D-99")])])]);
    let http = planner_function(&stack, &[("alpha", &alpha.url)], &[]).await;
    let (status, body) = turn(&http, "refused", "Notarize deed D-99").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ending"], "awaiting_clarification");
    let question = body["reply"].as_str().unwrap();
    assert!(question.contains("the deed 'D-99' is not on record"), "the expert's words: {question}");
    assert!(question.contains("- deed: The deed's number on record. (tried: \"D-99\")"), "{question}");

    stack.model.push([Reply::text("Notarized."), assessed(true, 0.9), Reply::text("The deed is notarized.")]);
    let (_, body) = turn(&http, "refused", "D-17").await;
    assert_eq!(body["reply"], "The deed is notarized.");
    assert!(system_of(&stack.model.requests()[2]).contains("Notarize the deed D-17."));

    // "none" runs the task without the prompt.
    stack.model.push([plan(&[("alpha", "Draft the deed")]), scores(&[("draft_deed", 0.9, &[])])]);
    turn(&http, "skipped", "Draft my deed").await;
    stack.model.push([Reply::text("Drafted."), assessed(true, 0.9), Reply::text("Drafted without it.")]);
    let (_, body) = turn(&http, "skipped", "none").await;
    assert_eq!(body["reply"], "Drafted without it.");
    let requests = stack.model.requests();
    assert!(!system_of(&requests[7]).contains("<expert-prompt"), "{}", system_of(&requests[7]));
}

#[tokio::test]
async fn a_prompt_that_cannot_be_fetched_for_another_reason_is_named_in_the_reply() {
    let alpha = deed_expert();
    let stack = Stack::new().await;
    stack.model.push([
        plan(&[("alpha", "Read the register")]),
        scores(&[("deed_register", 0.9, &[])]),
        Reply::text("Read without the prompt."),
        assessed(true, 0.9),
        Reply::text("The register is read."),
    ]);
    let http = planner_function(&stack, &[("alpha", &alpha.url)], &[]).await;
    let (status, body) = turn(&http, "failed", "Read the deed register").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ending"], "answered");
    let reply = body["reply"].as_str().unwrap();
    let (answer, note) = reply.split_once("\n\n").expect("the answer, then the note");
    assert_eq!(answer, "The register is read.");
    assert!(
        note.starts_with("Note: the prompt \"deed_register\" of the expert alpha could not be fetched")
            // The server's words: at 2026-07-28 the SDK masks a handler's exception as -32603.
            && note.contains("prompts/get was refused (error -32603): Internal server error")
            && note.ends_with("so its task ran without it."),
        "{note}"
    );
    assert!(!system_of(&stack.model.requests()[2]).contains("<expert-prompt"));
}
