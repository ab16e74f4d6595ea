//! The `http-turn` function, compiled, fed API Gateway events, against moto and the scripted model.

use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, status_and_body, system_of, tool_names, tool_results, turn_event, Stack};
use serde_json::{json, Value};

const USER: &str = "user-a";

async fn turn(function: &Function, user: &str, session: &str, message: &str) -> (u16, Value) {
    status_and_body(&function.call(turn_event(Some(user), session, json!({ "message": message }))).await)
}

fn skill_md(path: &str) -> String {
    std::fs::read_to_string(local_stack::stack::repo_root().join("examples/skills").join(path).join("SKILL.md"))
        .unwrap()
}

#[tokio::test]
async fn state_one_prompt_lists_the_tenants_skills_in_the_base_template() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack.model.push([Reply::text("Puedo ayudarte con escrituras y contratos.")]);
    let http = stack.http(&[]).await;

    let (status, body) = turn(&http, USER, "s1", "¿Qué sabes hacer?").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "Puedo ayudarte con escrituras y contratos.");
    assert_eq!(body["session_id"], "s1");
    assert_eq!(body["steps"], 1);
    assert_eq!(body["current_skill"], Value::Null);
    assert_eq!(body["usage"]["input_tokens"], 100);

    let requests = stack.model.requests();
    let system = system_of(&requests[0]);
    // The tenant's BASE_PROMPT.md override, with its placeholders filled.
    assert!(system.starts_with("# Asistente de la Notaría"), "{system}");
    assert!(system.contains("Usuario: Ana García"), "the name comes from the JWT: {system}");
    for skill in ["escrituras/compraventa", "escrituras/hipoteca", "contratos/arrendamiento"] {
        assert!(system.contains(&format!("load_skill(\"{skill}\")")), "{skill} listed");
    }
    assert!(!system.contains('{') || !system.contains("{skill}"), "no placeholder left");
    let tools = tool_names(&requests[0]);
    for tool in ["load_skill", "ls", "read_file", "write_file", "edit_file", "glob", "grep"] {
        assert!(tools.contains(&tool.to_owned()), "{tool} offered: {tools:?}");
    }
    assert_eq!(requests[0]["model"], "scripted-model");
}

#[tokio::test]
async fn load_skill_switches_the_very_next_call_to_the_skill_md_and_the_turn_ends_clean() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "escrituras/compraventa"})),
        Reply::tool("ls", json!({"path": "/"})),
        Reply::text("Skill cargada."),
        // The next turn.
        Reply::text("De nuevo en estado 1."),
    ]);
    let http = stack.http(&[]).await;

    let (status, body) = turn(&http, USER, "s1", "Quiero una compraventa").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["current_skill"], "escrituras/compraventa");
    assert_eq!(body["steps"], 3);
    let requests = stack.model.requests();
    assert!(system_of(&requests[0]).contains("load_skill(\"escrituras/hipoteca\")"));
    // State 2: the whole SKILL.md replaces the prompt, with no listing of other skills; only what
    // /memories is for follows it.
    let state_two = format!("{}{}", skill_md("escrituras/compraventa"), agent_core::prompt::MEMORY_SECTION);
    assert_eq!(system_of(&requests[1]), state_two);
    assert!(!system_of(&requests[1]).contains("load_skill(\"escrituras/hipoteca\")"), "no listing in state 2");
    assert!(tool_results(&requests[1])[0].contains("escrituras/compraventa loaded"));
    assert!(tool_results(&requests[2])[1].contains("/skills"), "{:?}", tool_results(&requests[2]));

    // The stored session is reset: current_skill NULL (a top-level attribute), version 1.
    let item = stack.session_item(USER, "s1").await.expect("session stored");
    assert!(matches!(item.get("current_skill"), Some(aws_sdk_dynamodb::types::AttributeValue::Null(true))));
    assert_eq!(item["version"].as_n().unwrap(), "1");

    // The next turn starts in state 1 again and carries the history of the first.
    let (status, _) = turn(&http, USER, "s1", "¿Y ahora?").await;
    assert_eq!(status, 200);
    let next = &stack.model.requests()[3];
    assert!(system_of(next).contains("load_skill(\"escrituras/compraventa\")"));
    let roles: Vec<&str> = next["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "user"]);
    assert_eq!(next["messages"][1]["content"], "Quiero una compraventa");
}

#[tokio::test]
async fn inject_mode_puts_the_skill_md_into_the_base_template() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack.model.push([Reply::tool("load_skill", json!({"skill_path": "contratos/arrendamiento"})), Reply::text("ok")]);
    let http = stack.http(&[("SKILL_PROMPT_MODE", "inject")]).await;
    let (status, _) = turn(&http, USER, "s1", "Un alquiler").await;
    assert_eq!(status, 200);
    let system = system_of(&stack.model.requests()[1]);
    assert!(system.starts_with("# Asistente de la Notaría"));
    assert!(system.contains(&skill_md("contratos/arrendamiento")));
    assert!(!system.contains("load_skill(\"escrituras/hipoteca\")"), "the listing is gone");
}

#[tokio::test]
async fn the_virtual_filesystem_follows_its_rules_and_the_workspace_persists() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack.put(&format!("{USER}/tickets/T-1/carta.txt"), "Carta del cliente").await;
    stack.model.push([
        Reply::Tools(vec![
            ("ls".into(), json!({"path": "/"})),
            ("read_file".into(), json!({"file_path": "/skills/compraventa/SKILL.md"})),
        ]),
        Reply::tool("load_skill", json!({"skill_path": "escrituras/compraventa"})),
        Reply::Tools(vec![
            ("ls".into(), json!({"path": "/"})),
            ("ls".into(), json!({"path": "/skills"})),
            ("read_file".into(), json!({"file_path": "/skills/compraventa/disclosure_clausulas.md", "limit": 3})),
            ("read_file".into(), json!({"file_path": "/skills/compraventa/resources/plantilla.pdf"})),
            ("read_file".into(), json!({"file_path": "/skills/hipoteca/SKILL.md"})),
            ("read_file".into(), json!({"file_path": "/ticket/carta.txt"})),
            ("write_file".into(), json!({"file_path": "/ticket/nuevo.txt", "content": "x"})),
            ("write_file".into(), json!({"file_path": "/skills/compraventa/SKILL.md", "content": "x"})),
            ("write_file".into(), json!({"file_path": "/workspace/borrador.md", "content": "Primera línea\nSegunda"})),
            ("no_such_tool".into(), json!({})),
        ]),
        Reply::text("Hecho."),
        // Second turn, no ticket: the workspace file is still there.
        Reply::Tools(vec![
            ("ls".into(), json!({"path": "/"})),
            ("read_file".into(), json!({"file_path": "/workspace/borrador.md"})),
        ]),
        Reply::text("Sigue ahí."),
    ]);
    let http = stack.http(&[]).await;
    let event = turn_event(Some(USER), "s1", json!({"message": "Trabaja", "ticket_id": "T-1"}));
    let (status, body) = status_and_body(&http.call(event).await);
    assert_eq!(status, 200, "{body}");

    let requests = stack.model.requests();
    let before = tool_results(&requests[1]);
    assert!(before[0].contains("/workspace") && before[0].contains("/ticket"), "{}", before[0]);
    assert!(!before[0].contains("/skills"), "no /skills before a skill is loaded: {}", before[0]);
    assert!(before[1].starts_with("Error: File '") && before[1].ends_with("' not found"), "{}", before[1]);

    let after = tool_results(&requests[3]);
    let after = &after[3..];
    assert!(after[0].contains("/skills"), "{}", after[0]);
    assert!(after[1].contains("/skills/compraventa") && !after[1].contains("hipoteca"), "{}", after[1]);
    assert!(after[2].starts_with("@@ lines 1-3 of "), "paged under a status header: {}", after[2]);
    // A loaded skill's PDF is shown to the model as a document.
    assert_eq!(after[3], "Showing the PDF document /skills/compraventa/resources/plantilla.pdf (793 bytes, 1 page).");
    assert!(after[4].starts_with("Error: File '") && after[4].ends_with("' not found"), "unloaded skill: {}", after[4]);
    assert!(after[5].contains("Carta del cliente"), "{}", after[5]);
    assert!(after[6].starts_with("Error:") && after[6].contains("read-only"), "{}", after[6]);
    assert!(after[7].starts_with("Error:") && after[7].contains("read-only"), "{}", after[7]);
    assert!(!after[8].starts_with("Error"), "{}", after[8]);
    assert!(after[9].starts_with("Error:") && after[9].contains("no_such_tool"), "{}", after[9]);

    let (status, _) = turn(&http, USER, "s1", "¿Sigue el borrador?").await;
    assert_eq!(status, 200);
    let second = tool_results(&stack.model.requests()[5]);
    let second = &second[second.len() - 2..];
    assert!(!second[0].contains("/ticket") && !second[0].contains("/skills"), "{}", second[0]);
    assert!(second[1].contains("Primera línea"), "{}", second[1]);

    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    assert_eq!(session["version"], 2);
    assert_eq!(session["workspace"][0]["path"], "/workspace/borrador.md");
}

#[tokio::test]
async fn tenants_are_walls_even_with_the_same_session_id_and_escaping_paths() {
    let stack = Stack::new().await;
    stack.upload_example_skills("tenant-a").await;
    stack.upload_example_skills("tenant-b").await;
    const SECRET: &str = "SECRET-OF-TENANT-B";
    stack
        .put("tenant-b/skills/escrituras/compraventa/disclosure_clausulas.md", format!("---\nname: x\n---\n{SECRET}"))
        .await;
    stack.put("tenant-b/tickets/T-1/secreto.txt", SECRET).await;
    stack.put("tenant-b/secret.txt", SECRET).await;

    let escapes = [
        "/skills/compraventa/../../../tenant-b/skills/escrituras/compraventa/disclosure_clausulas.md",
        "/skills/compraventa/%2e%2e/%2e%2e/tenant-b/secret.txt",
        "/skills/compraventa/..%2f..%2f..%2ftenant-b%2fsecret.txt",
        "//skills/compraventa/disclosure_clausulas.md/../../../../tenant-b/secret.txt",
        "/workspace/../../tenant-b/secret.txt",
        "/ticket/../../tenant-b/tickets/T-1/secreto.txt",
        "/tenant-b/secret.txt",
        "tenant-b/secret.txt",
        "/skills/compraventa\\..\\..\\tenant-b\\secret.txt",
        "/workspace/\u{0000}/../secret.txt",
    ];
    let mut calls: Vec<(String, Value)> =
        escapes.iter().map(|path| ("read_file".to_owned(), json!({ "file_path": path }))).collect();
    calls.push(("ls".into(), json!({"path": "/skills/compraventa/../.."})));
    calls.push(("grep".into(), json!({"pattern": "SECRET", "path": "/"})));
    calls.push(("glob".into(), json!({"pattern": "**/*", "path": "/"})));
    calls.push(("load_skill".into(), json!({"skill_path": "../tenant-b/escrituras"})));
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "escrituras/compraventa"})),
        Reply::Tools(calls),
        Reply::text("Nada."),
        Reply::text("Turno de B."),
    ]);
    let http = stack.http(&[]).await;
    let event = turn_event(Some("tenant-a"), "shared-id", json!({"message": "Lee", "ticket_id": "T-1"}));
    let (status, _) = status_and_body(&http.call(event).await);
    assert_eq!(status, 200);
    let results = tool_results(&stack.model.requests()[2]);
    for (index, result) in results.iter().enumerate() {
        assert!(!result.contains(SECRET), "result {index} leaked: {result}");
        // Errors may echo the path the model sent, but never a storage key of either tenant.
        assert!(!result.contains("tenant-a/"), "result {index} shows a key: {result}");
    }
    for (index, result) in results[1..=escapes.len()].iter().enumerate() {
        assert!(result.starts_with("Error:"), "{} → {result}", escapes[index]);
    }

    // Tenant B's session with the same id is a different session.
    let (status, body) = turn(&http, "tenant-b", "shared-id", "Hola").await;
    assert_eq!((status, body["version"].as_u64()), (200, Some(1)));
    let (_, a) = status_and_body(&http.call(get_event(Some("tenant-a"), "shared-id")).await);
    let (_, b) = status_and_body(&http.call(get_event(Some("tenant-b"), "shared-id")).await);
    assert_eq!(a["history"][0]["content"], "Lee");
    assert_eq!(b["history"][0]["content"], "Hola");
    let (status, _) = status_and_body(&http.call(get_event(Some("tenant-c"), "shared-id")).await);
    assert_eq!(status, 404);
}

#[tokio::test]
async fn the_step_bound_ends_the_turn_normally_with_a_reply_that_says_so() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack.model.push((0..3).map(|_| Reply::tool("ls", json!({"path": "/"}))));
    let http = stack.http(&[("MAX_STEPS", "3")]).await;
    let (status, body) = turn(&http, USER, "s1", "Da vueltas").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["steps"], 3);
    assert_eq!(body["ending"], "step_limit");
    assert!(body["reply"].as_str().unwrap().contains("limit"), "{body}");
    assert_eq!(stack.model.requests().len(), 3);
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    assert_eq!(session["version"], 1);
    assert_eq!(session["history"].as_array().unwrap().last().unwrap()["content"], body["reply"]);
}

#[tokio::test]
async fn the_deadline_ends_the_turn_in_time_to_persist() {
    let stack = Stack::new().await;
    stack.model.push([
        Reply::tool("ls", json!({"path": "/"})),
        Reply::Delayed(std::time::Duration::from_secs(5), Box::new(Reply::text("too late"))),
    ]);
    let http = stack.http(&[("DEADLINE_RESERVE_MS", "1000")]).await;
    let event = turn_event(Some(USER), "s1", json!({"message": "Rápido"}));
    let started = std::time::Instant::now();
    let response = match http.invoke_with_budget(event, std::time::Duration::from_secs(3)).await {
        local_stack::lambda::Invocation::Response(value) => value,
        local_stack::lambda::Invocation::Error(error) => panic!("{error}"),
        local_stack::lambda::Invocation::Stream(_) => panic!("http-turn streamed its answer"),
    };
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "answered before the deadline");
    let (status, body) = status_and_body(&response);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ending"], "deadline");
    assert!(body["reply"].as_str().unwrap().contains("time"));
    assert_eq!(stack.session_item(USER, "s1").await.unwrap()["version"].as_n().unwrap(), "1");
}

#[tokio::test]
async fn a_cargo_lambda_deadline_is_relative_and_a_turn_without_time_for_the_model_saves_nothing() {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    let stack = Stack::new().await;
    stack.model.push([Reply::text("Con tiempo.")]);
    let http = stack.http(&[]).await;
    let event = turn_event(Some(USER), "s1", json!({"message": "Hola"}));
    // `cargo lambda watch` sends the function's timeout as a duration: 600000.
    let response = match http.invoke_with_deadline_header(event, 600_000, Duration::from_secs(60)).await {
        local_stack::lambda::Invocation::Response(value) => value,
        other => panic!("{other:?}"),
    };
    let (status, body) = status_and_body(&response);
    assert_eq!((status, body["reply"].as_str()), (200, Some("Con tiempo.")), "{body}");
    assert!(http.logs().iter().any(|line| line.contains("reading it as relative")));

    // One second left, inside the three-second reserve: no model call can be made, so nothing is
    // committed and the answer is a retryable 503, not a canned reply.
    let soon = (SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + Duration::from_secs(1)).as_millis() as u64;
    let event = turn_event(Some(USER), "s2", json!({"message": "Hola"}));
    let response = match http.invoke_with_deadline_header(event, soon, Duration::from_secs(5)).await {
        local_stack::lambda::Invocation::Response(value) => value,
        other => panic!("{other:?}"),
    };
    let (status, body) = status_and_body(&response);
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("out_of_time")), "{body}");
    assert_eq!(stack.model.requests().len(), 1, "the model was not called");
    assert!(stack.session_item(USER, "s2").await.is_none(), "nothing was committed");
}

#[tokio::test]
async fn bad_input_is_refused_precisely_and_writes_nothing() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    let http = stack.http(&[]).await;
    let big = "a".repeat(256 * 1024 + 1);
    let cases: Vec<(Value, u16, &str)> = vec![
        (local_stack::stack::sample_event("http-bad-request.json"), 400, "bad_request"),
        (turn_event(Some(USER), "s1", Value::String("{\"message\": ".into())), 400, "bad_request"),
        (turn_event(Some(USER), "s1", json!({})), 400, "bad_request"),
        (turn_event(Some(USER), "s1", json!({"message": 42})), 400, "bad_request"),
        (turn_event(Some(USER), "s1", json!({"message": "   "})), 400, "bad_request"),
        (turn_event(Some(USER), "s1", json!({"message": "hola", "user_id": "someone-else"})), 400, "bad_request"),
        (turn_event(Some(USER), "s1", json!({"message": "hola", "ticket_id": "../x"})), 400, "bad_request"),
        (turn_event(Some(USER), "bad%2Fid", json!({"message": "hola"})), 400, "bad_request"),
        (turn_event(Some(USER), "s1", Value::String(String::new())), 400, "bad_request"),
        (turn_event(Some(USER), "s1", json!({ "message": big })), 413, "payload_too_large"),
        (turn_event(None, "s1", json!({"message": "hola"})), 401, "unauthorized"),
        (local_stack::stack::sample_event("http-no-auth.json"), 401, "unauthorized"),
        (get_event(Some(USER), "never-created"), 404, "not_found"),
    ];
    for (index, (event, want_status, want_code)) in cases.into_iter().enumerate() {
        let (status, body) = status_and_body(&http.call(event).await);
        assert_eq!(
            (status, body["error"]["code"].as_str().unwrap_or("")),
            (want_status, want_code),
            "case {index}: {body}"
        );
        assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "case {index}");
    }
    let mut unknown = turn_event(Some(USER), "s1", json!({"message": "hola"}));
    unknown["rawPath"] = json!("/nowhere");
    unknown["requestContext"]["http"]["path"] = json!("/nowhere");
    let (status, body) = status_and_body(&http.call(unknown).await);
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("not_found")));

    assert!(stack.model.requests().is_empty(), "bad input never reaches the model");
    assert_eq!(stack.item_count().await, 0, "bad input writes nothing");
}

#[tokio::test]
async fn a_failed_turn_leaves_the_session_exactly_as_it_was() {
    let stack = Stack::new().await;
    stack.model.push([
        Reply::text("Primera respuesta."),
        Reply::tool("write_file", json!({"file_path": "/workspace/a.md", "content": "parcial"})),
        Reply::Status(500),
        Reply::Status(503),
    ]);
    let http = stack.http(&[]).await;
    assert_eq!(turn(&http, USER, "s1", "Uno").await.0, 200);
    let before = stack.session_item(USER, "s1").await.unwrap();
    let (status, body) = turn(&http, USER, "s1", "Dos").await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "model_provider_failed");
    assert!(!body.to_string().contains("sk-test-secret"));
    assert_eq!(stack.session_item(USER, "s1").await.unwrap(), before, "the session item is untouched");
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    assert_eq!(session["version"], 1);
    assert_eq!(session["history"].as_array().unwrap().len(), 2);
    assert_eq!(session["workspace"], json!([]), "the failed turn's write is not part of the session");
    // 1 + 3 model calls: the last two were the provider failing twice (LLM_MAX_ATTEMPTS=2).
    assert_eq!(stack.model.requests().len(), 4);
}

#[tokio::test]
async fn concurrent_turns_on_one_session_never_overwrite_each_other() {
    let stack = Stack::new().await;
    let slow = |text: &str| Reply::Delayed(std::time::Duration::from_millis(700), Box::new(Reply::text(text)));
    stack.model.push([slow("A"), slow("B")]);
    let first = stack.http(&[]).await;
    let second = stack.http(&[]).await;
    let (one, two) = tokio::join!(turn(&first, USER, "s1", "uno"), turn(&second, USER, "s1", "dos"));
    let mut statuses = [one.0, two.0];
    statuses.sort();
    assert_eq!(statuses, [200, 409], "{one:?} {two:?}");
    let conflict = if one.0 == 409 { one.1 } else { two.1 };
    assert_eq!(conflict["error"]["code"], "conflict");
    let (_, session) = status_and_body(&first.call(get_event(Some(USER), "s1")).await);
    assert_eq!(session["version"], 1);
    assert_eq!(session["history"].as_array().unwrap().len(), 2, "exactly one turn stored");
}

#[tokio::test]
async fn long_histories_keep_working_past_the_item_size_limit() {
    let stack = Stack::new().await;
    let long = "x".repeat(200 * 1024);
    stack.model.push((0..3).map(|i| Reply::Text(format!("{i}{long}"))));
    // A model with a large context, so this test is about storage, not about trimming.
    let http = stack.http(&[("LLM_CONTEXT_TOKENS", "2000000"), ("HISTORY_SUMMARY_TOKENS", "100000000")]).await;
    for i in 0..3 {
        let (status, body) = turn(&http, USER, "s1", &format!("{i}{long}")).await;
        assert_eq!(status, 200, "turn {i}: {body}");
    }
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    assert_eq!(session["version"], 3);
    assert_eq!(session["history"].as_array().unwrap().len(), 6);
    assert_eq!(stack.model.requests()[2]["messages"].as_array().unwrap().len(), 6, "system + 4 history + user");
}

#[tokio::test]
async fn broken_skills_are_skipped_and_a_broken_template_is_a_clear_error() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack.put(&format!("{USER}/skills/rotas/sin-frontmatter/SKILL.md"), "# No frontmatter").await;
    stack.put(&format!("{USER}/skills/rotas/yaml/SKILL.md"), "---\nname: [x\n---\n").await;
    stack.model.push([Reply::text("ok")]);
    let http = stack.http(&[]).await;
    assert_eq!(turn(&http, USER, "s1", "hola").await.0, 200);
    let system = system_of(&stack.model.requests()[0]);
    assert!(system.contains("escrituras/compraventa") && !system.contains("rotas/"), "{system}");

    // S3 notifies skills-index of the new base prompt, which updates the tenant's catalog index.
    let base_prompt = format!("{USER}/skills/BASE_PROMPT.md");
    stack.put(&base_prompt, "Hola {name}, {unknown}").await;
    let indexer = stack.skills_index(&[]).await;
    indexer.call(stack.s3_event(&[&base_prompt], true)).await;
    let (status, body) = turn(&http, USER, "s1", "hola").await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["error"]["code"], "configuration_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("{unknown}"), "{body}");
    assert_eq!(stack.model.requests().len(), 1, "no model call with a broken template");
}
