//! Forced skills (`/skill-name`), proven with a scripted model that misbehaves: what the model was
//! sent (tools, system prompt, reminders) and what was or was not executed or stored.

use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{
    get_event, repo_root, status_and_body, system_of, tool_names, tool_results, turn_event, Stack,
};
use serde_json::{json, Value};

const USER: &str = "user-f";

async fn turn(function: &Function, session: &str, message: &str) -> (u16, Value) {
    status_and_body(&function.call(turn_event(Some(USER), session, json!({ "message": message }))).await)
}

fn last_message(request: &Value) -> Value {
    request["messages"].as_array().unwrap().last().unwrap().clone()
}

fn skill_md(path: &str) -> String {
    std::fs::read_to_string(repo_root().join("examples/skills").join(path).join("SKILL.md")).unwrap()
}

fn mandatory_block(path: &str) -> String {
    format!("<mandatory-skill name=\"{path}\">\n{}\n</mandatory-skill>", skill_md(path).trim_end())
}

#[tokio::test]
async fn a_forced_skill_gets_its_tools_a_mandatory_block_and_reminders_from_the_second_call() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack.model.push([
        Reply::tool("ls", json!({"path": "/skills/compraventa"})),
        Reply::tool("read_file", json!({"file_path": "/skills/compraventa/disclosure_clausulas.md", "limit": 2})),
        Reply::text("Borrador listo."),
    ]);
    let http = stack.http(&[]).await;
    let (status, body) = turn(&http, "s1", "/compraventa Piso en Madrid por 250.000 euros").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["forced_skill"], "escrituras/compraventa");
    assert_eq!(body["refused_tool_calls"], 0);

    let requests = stack.model.requests();
    assert_eq!(requests.len(), 3);
    let want_tools = ["abort", "edit_file", "glob", "grep", "ls", "read_file", "todoread", "todowrite", "write_file"];
    for request in &requests {
        assert_eq!(tool_names(request), want_tools, "declared tools + essentials, never load_skill");
        let system = system_of(request);
        assert!(system.contains(&mandatory_block("escrituras/compraventa")), "the full SKILL.md in the block");
        assert!(!system.contains("load_skill(\"escrituras/hipoteca\")"), "no listing of other skills");
        // The reminder closes the prompt's stable part; only the tail (the context, the date) follows.
        let (_, tail) = system.rsplit_once("</skill-reminder>").expect("the reminder");
        assert!(tail.trim_start().starts_with("## Context of this conversation"), "{tail}");
        assert!(tail.trim_end().ends_with(".") && tail.contains("Today is "), "{tail}");
        assert!(system.contains("- read_file:") && !system.contains("- load_skill:"), "only offered tools described");
    }
    // The first call carries the request; later calls end with the reminder.
    assert_eq!(last_message(&requests[0])["content"], "Piso en Madrid por 250.000 euros");
    for request in &requests[1..] {
        let reminder = last_message(request);
        assert_eq!(reminder["role"], "user");
        assert!(reminder["content"].as_str().unwrap().starts_with("[SKILL REMINDER]"), "{reminder}");
        assert!(reminder["content"].as_str().unwrap().contains("/compraventa"));
    }
    assert!(tool_results(&requests[2])[1].starts_with("@@ lines 1-2 of "), "declared tools run");

    // Reminders are not stored, and the forced state lasts one turn.
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    let history = session["history"].to_string();
    assert!(!history.contains("SKILL REMINDER"));
    assert_eq!(session["current_skill"], Value::Null);
    stack.model.push([Reply::text("Estado normal.")]);
    turn(&http, "s1", "Gracias").await;
    let next = stack.model.requests().pop().unwrap();
    assert!(system_of(&next).contains("load_skill(\"escrituras/hipoteca\")"), "back to state 1");
    assert!(tool_names(&next).contains(&"load_skill".to_owned()));
}

#[tokio::test]
async fn calls_to_undeclared_or_invented_tools_are_refused_and_never_run() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack.model.push([
        Reply::Tools(vec![
            ("ls".into(), json!({"path": "/"})),
            ("load_skill".into(), json!({"skill_path": "escrituras/hipoteca"})),
            ("delete_everything".into(), json!({})),
            ("write_file".into(), json!({"file_path": "/workspace/contrato.md", "content": "Contrato"})),
        ]),
        Reply::text("Hecho."),
    ]);
    let http = stack.http(&[]).await;
    // arrendamiento declares `allowed-tools: [read_file, write_file]`.
    let (status, body) = turn(&http, "s1", "/contratos/arrendamiento Alquiler de un piso").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["refused_tool_calls"], 3);
    assert_eq!(body["current_skill"], "contratos/arrendamiento", "the refused load_skill changed nothing");
    let requests = stack.model.requests();
    assert_eq!(tool_names(&requests[0]), ["abort", "read_file", "todoread", "todowrite", "write_file"]);
    let results = tool_results(&requests[1]);
    for refused in &results[..3] {
        assert!(refused.starts_with("Error: the tool `") && refused.contains("not available"), "{refused}");
    }
    assert!(results[3].contains("/workspace/contrato.md"), "the declared tool ran: {}", results[3]);
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    assert_eq!(session["workspace"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn an_unknown_slash_command_never_reaches_the_model() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack
        .put(&format!("{USER}/skills/pdf/SKILL.md"), "---\nname: pdf\ndescription: Fill PDF forms.\n---\nbody\n")
        .await;
    let http = stack.http(&[]).await;
    let (status, body) = turn(&http, "s1", "/compraventas piso").await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "unknown_skill");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("/compraventas") && message.contains("/escrituras/compraventa"), "{message}");
    let (status, body) = turn(&http, "s1", "/escrituras/testamento").await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("unknown_skill")));
    // A category that is not the skill's still gets the skill suggested by its name, in either layout.
    for (command, suggested) in [("/anthropic/pdf", "/pdf"), ("/notarias/compraventa", "/escrituras/compraventa")] {
        let (status, body) = turn(&http, "s1", &format!("{command} fill it")).await;
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some("unknown_skill")), "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("did you mean {suggested}")), "{command}: {message}");
    }
    assert!(stack.model.requests().is_empty());
    assert_eq!(stack.item_count().await, 0);
}

#[tokio::test]
async fn a_skill_that_declares_no_tools_gets_every_tool_but_load_skill() {
    let stack = Stack::new().await;
    stack
        .put(
            &format!("{USER}/skills/general/notas/SKILL.md"),
            "---\nname: notas\ndescription: Toma notas.\n---\n# Notas\n",
        )
        .await;
    stack
        .put(
            &format!("{USER}/skills/general/raro/SKILL.md"),
            "---\nname: raro\ndescription: Herramientas que no existen.\ntools: [telepathy]\n---\n# Raro\n",
        )
        .await;
    stack.model.push([Reply::text("ok"), Reply::text("ok")]);
    let http = stack.http(&[]).await;
    assert_eq!(turn(&http, "s1", "/notas apunta esto").await.0, 200);
    assert_eq!(turn(&http, "s2", "/raro hola").await.0, 200);
    let all = [
        "abort",
        "delete",
        "edit_file",
        "glob",
        "grep",
        "ls",
        "read_file",
        "task",
        "todoread",
        "todowrite",
        "write_file",
    ];
    for request in stack.model.requests() {
        assert_eq!(tool_names(&request), all);
    }
}

#[tokio::test]
async fn todos_survive_turns_and_abort_ends_the_turn_with_its_reason() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack.model.push([
        Reply::tool(
            "todowrite",
            json!({"todos": [{"content": "Pedir DNI", "status": "pending"}, {"content": "Redactar", "status": "in_progress"}]}),
        ),
        Reply::Tools(vec![
            ("abort".into(), json!({"reason": "Necesito el DNI de ambas partes para seguir."})),
            ("write_file".into(), json!({"file_path": "/workspace/x.md", "content": "no"})),
        ]),
        Reply::tool("todoread", json!({})),
        Reply::text("Tienes 2 tareas."),
    ]);
    let http = stack.http(&[]).await;
    let (status, body) = turn(&http, "s1", "/compraventa empieza").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ending"], "aborted");
    assert_eq!(body["reply"], "Necesito el DNI de ambas partes para seguir.");
    assert_eq!(stack.model.requests().len(), 2, "no model call after abort");
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    assert_eq!(session["todos"][0], json!({"content": "Pedir DNI", "status": "pending"}));
    assert_eq!(session["workspace"], json!([]), "the call after abort did not run");

    let (status, _) = turn(&http, "s1", "¿Qué me queda?").await;
    assert_eq!(status, 200);
    let results = tool_results(&stack.model.requests()[3]);
    let last = results.last().unwrap();
    assert!(last.contains("1. [pending] Pedir DNI") && last.contains("2. [in_progress] Redactar"), "{last}");
}

#[tokio::test]
async fn over_the_context_budget_old_turns_go_first_and_the_skill_and_request_stay_whole() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    let report: String = (0..3000).map(|i| format!("Informe largo, línea {i}.\n")).collect();
    stack.put(&format!("{USER}/tickets/T-9/informe.txt"), report).await;
    let filler = "Historia antigua. ".repeat(600);
    stack.model.push((0..3).map(|i| Reply::Text(format!("respuesta {i} {filler}"))));
    stack.model.push([
        // A page far larger than the default 100 lines, so that the budget has to cut it.
        Reply::tool("read_file", json!({"file_path": "/ticket/informe.txt", "limit": 2000})),
        Reply::text("Resumen del informe."),
    ]);
    // 9,000 tokens of input (10,000 less 1,000 for the answer): the base prompt, the SKILL.md and the
    // request fit (the base prompt is never cut), the history does not.
    let env = [("LLM_CONTEXT_TOKENS", "10000"), ("LLM_MAX_TOKENS", "1000"), ("HISTORY_SUMMARY_TOKENS", "10000000")];
    let http = stack.http(&env).await;
    for i in 0..3 {
        let (status, body) = turn(&http, "s1", &format!("pregunta {i} {filler}")).await;
        assert_eq!(status, 200, "{body}");
    }
    let event =
        turn_event(Some(USER), "s1", json!({"message": "/compraventa Lee el informe del ticket", "ticket_id": "T-9"}));
    let (status, body) = status_and_body(&http.call(event).await);
    assert_eq!(status, 200, "{body}");

    let requests = stack.model.requests();
    for request in &requests[3..] {
        let system = system_of(request);
        assert!(system.contains(&mandatory_block("escrituras/compraventa")), "the skill block is never cut");
        let messages = request["messages"].as_array().unwrap();
        let user_request = messages.iter().find(|m| m["content"] == "Lee el informe del ticket");
        assert!(user_request.is_some(), "the current request is never dropped");
        assert!(!request.to_string().contains("pregunta 0"), "the oldest turn was dropped");
        assert!(request.to_string().len() < 9000 * 3 + 20_000, "the request fits the budget");
    }
    let read = tool_results(&requests[4]).pop().unwrap();
    assert!(read.contains("[truncated to fit the model's context]"), "the large tool result was cut");
    // Trimming shapes requests only: the stored history is whole.
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    assert!(session["history"].to_string().contains("pregunta 0"));
}

#[tokio::test]
async fn long_histories_are_summarised_once_and_the_summary_is_stored() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    let filler = "Datos del expediente. ".repeat(150);
    stack.model.push((0..3).map(|i| Reply::Text(format!("respuesta {i}"))));
    stack.model.push([
        Reply::text("RESUMEN: el cliente prepara una compraventa; faltan los DNI."),
        Reply::text("Sigo con la compraventa."),
        Reply::text("Y sigo."),
    ]);
    let http = stack.http(&[("HISTORY_SUMMARY_TOKENS", "3000")]).await;
    for i in 0..3 {
        assert_eq!(turn(&http, "s1", &format!("mensaje {i} {filler}")).await.0, 200);
    }
    let (status, body) = turn(&http, "s1", "/compraventa continúa").await;
    assert_eq!(status, 200, "{body}");

    let requests = stack.model.requests();
    let summarise = &requests[3];
    assert!(system_of(summarise).contains("You condense conversations"));
    assert!(summarise["tools"].is_null() || tool_names(summarise).is_empty(), "no tools for the summary");
    assert!(summarise.to_string().contains("mensaje 0"));
    assert!(!summarise.to_string().contains("Visión general"), "skill instructions are never summarised");

    let forced = &requests[4];
    assert!(system_of(forced).contains(&mandatory_block("escrituras/compraventa")), "the block is intact");
    let first = &forced["messages"][1]["content"];
    assert!(first.as_str().unwrap().contains("RESUMEN: el cliente prepara"), "{first}");
    assert!(!forced.to_string().contains("mensaje 0"), "summarised turns are replaced");

    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    assert!(session["summary"]["text"].as_str().unwrap().starts_with("RESUMEN"));
    assert_eq!(session["history"].as_array().unwrap().len(), 8, "the stored history is whole");

    // The next turn reuses the stored summary instead of summarising again.
    turn(&http, "s1", "otra cosa").await;
    let requests = stack.model.requests();
    assert_eq!(requests.len(), 6);
    assert!(!system_of(&requests[5]).contains("You condense conversations"));
    assert!(requests[5]["messages"][1]["content"].as_str().unwrap().contains("RESUMEN"));
}
