//! The context budget through the compiled function: tool calls whose arguments are large (within
//! their bounds) leave every later request of the turn, and the summariser's, within the model's
//! context, and a `find_skills` result shrunk to fit keeps its top matches' `load_skill` arguments.
//! A long turn of many calls condenses its older steps and commits; a large tool result is saved to
//! a workspace file the next request names; a turn that cannot go on ends `context_full`, stored; a
//! request over the window before any call is still refused with 413 and stores nothing.

use base64::Engine;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{
    file_event, get_event, status_and_body, system_of, tool_names, tool_results, turn_event, Stack,
};
use serde_json::{json, Value};

const USER: &str = "user-budget";
/// The scripted model's context window (the default for a model the runtime does not know).
const CONTEXT_TOKENS: usize = 32_768;

async fn turn(http: &Function, session: &str, message: &str) -> (u16, Value) {
    status_and_body(&http.call(turn_event(Some(USER), session, json!({ "message": message }))).await)
}

/// The size of a request as the provider received it, in the budget's estimate (three bytes a token).
/// The wire's JSON framing is not counted by the budget; the room kept for the answer covers it.
fn tokens_of(request: &Value) -> usize {
    request.to_string().len().div_ceil(3)
}

fn is_summary_request(request: &Value) -> bool {
    system_of(request).starts_with("You condense conversations")
}

#[tokio::test]
async fn large_tool_call_arguments_are_cut_so_every_request_and_the_summary_fit_the_context() {
    let stack = Stack::new().await;
    // Four calls of 200 KiB each: under 256 KiB a call and 1 MiB a turn.
    let content = "Una línea del informe con bastante texto para ocupar sitio.\n".repeat(3500);
    assert!(content.len() > 200 * 1024 && content.len() < 250 * 1024);
    let calls: Vec<(String, Value)> = (0..4)
        .map(|i| ("write_file".to_owned(), json!({"file_path": format!("/workspace/parte{i}.md"), "content": content})))
        .collect();
    stack.model.push([
        Reply::Tools(calls),
        Reply::text("Escritas las cuatro partes."),
        // The next turn's history is over the summary threshold: the summary comes first.
        Reply::text("Resumen: el usuario pidió un informe en cuatro partes, escritas en /workspace."),
        Reply::text("Sigo con el informe."),
    ]);
    let http = stack.http(&[]).await;
    let (status, body) = turn(&http, "args", "Escribe el informe en cuatro partes").await;
    assert_eq!(status, 200, "{body}");
    let requests = stack.model.requests();
    assert_eq!(requests.len(), 2);
    assert!(tokens_of(&requests[0]) <= CONTEXT_TOKENS);
    assert!(tokens_of(&requests[1]) <= CONTEXT_TOKENS, "the second request is {} tokens", tokens_of(&requests[1]));
    // The calls are still there, paired with their results, with arguments that say what was cut.
    let messages = requests[1]["messages"].as_array().unwrap();
    let calls = messages.iter().find_map(|m| m["tool_calls"].as_array()).expect("the reply's tool calls");
    assert_eq!(calls.len(), 4);
    for (i, call) in calls.iter().enumerate() {
        let arguments: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(arguments["file_path"], format!("/workspace/parte{i}.md"), "small arguments stay: {arguments}");
        let note = arguments["content"].as_str().unwrap();
        assert!(note.contains("cut") && note.contains(&content.len().to_string()), "{note}");
    }
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), 4);
    assert!(results.iter().all(|r| r.starts_with("Updated file")), "{results:?}");
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "args")).await);
    assert_eq!(session["workspace"].as_array().unwrap().len(), 4, "every call ran: {session}");

    let (status, body) = turn(&http, "args", "Sigue").await;
    assert_eq!(status, 200, "{body}");
    let requests = stack.model.requests();
    let summary = requests[2..].iter().find(|r| is_summary_request(r)).expect("the history was summarised");
    assert!(tokens_of(summary) <= CONTEXT_TOKENS, "the summary request is {} tokens", tokens_of(summary));
    let transcript = summary["messages"][1]["content"].as_str().unwrap();
    assert!(transcript.contains("/workspace/parte3.md"), "the transcript names what was written");
    let last = requests.last().unwrap();
    assert!(!is_summary_request(last));
    assert!(tokens_of(last) <= CONTEXT_TOKENS, "the turn's request is {} tokens", tokens_of(last));
    assert_eq!(body["reply"], "Sigo con el informe.");
}

fn skill_md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nInstructions of {name}.\n")
}

#[tokio::test]
async fn a_find_skills_result_cut_to_fit_keeps_the_top_matches_load_skill_arguments() {
    let stack = Stack::new().await;
    let filler = "It drafts, checks and files documents for the office with care, following the house style \
                  and the checklist of the team, and reports what it did and what is still pending.";
    for i in 0..30 {
        let name = format!("skill-{i:02}");
        let description = if i == 17 {
            format!("Reconcile quarterly VAT returns against the bank ledger. {filler} {filler}")
        } else {
            format!("Synthetic skill {i} about reconciling topic {i} of the catalogue. {filler} {filler}")
        };
        stack.put(&format!("{USER}/skills/area-{}/{name}/SKILL.md", i % 3), skill_md(&name, &description)).await;
    }
    let query = "reconcile quarterly VAT returns against the bank ledger for the office and its documents";
    stack.model.push([Reply::tool("find_skills", json!({"query": query, "limit": 20})), Reply::text("Encontrada.")]);
    // A small context and a long request: the search's result does not fit whole next to it, but
    // its twenty arguments do (the request is sized to the system prompt and tools, which grew
    // with /memories).
    let http = stack.http(&[("LLM_CONTEXT_TOKENS", "12400"), ("SKILL_LISTING_TOKENS", "200")]).await;
    let message = format!("Concilia el IVA del trimestre. Datos: {}", "importe 1.234,56 EUR; ".repeat(450));
    let (status, body) = turn(&http, "find", &message).await;
    assert_eq!(status, 200, "{body}");
    let requests = stack.model.requests();
    assert!(tool_names(&requests[0]).contains(&"find_skills".to_owned()), "the listing is shortened");
    assert!(tokens_of(&requests[1]) <= 12_400, "the second request is {} tokens", tokens_of(&requests[1]));
    let found = &tool_results(&requests[1])[0];
    assert!(found.contains("load_skill(\"area-2/skill-17\")"), "the top match survives the cut: {found}");
    // Descriptions go before arguments: all twenty matches still name their skill.
    let arguments = found.lines().filter(|line| line.starts_with("- load_skill(\"")).count();
    assert_eq!(arguments, 20, "every match keeps its argument: {found}");
    assert!(found.contains("[shortened to fit the model's context]"), "the result was cut: {found}");
}

#[tokio::test]
async fn a_request_that_cannot_be_cut_to_fit_is_refused_before_the_model_is_called() {
    let stack = Stack::new().await;
    stack.model.push([Reply::text("Nunca.")]);
    // 6,144 tokens of input (8,192 minus the 2,048 kept for the answer); the request alone is ~6,700,
    // and the base prompt, which is never cut, comes on top.
    let http = stack.http(&[("LLM_CONTEXT_TOKENS", "8192"), ("LLM_MAX_TOKENS", "2048")]).await;
    let message = format!("Revisa este contrato: {}", "cláusula de prueba; ".repeat(1000));
    let (status, body) = turn(&http, "huge", &message).await;
    assert_eq!((status, body["error"]["code"].as_str()), (413, Some("context_too_large")), "{body}");
    assert!(stack.model.requests().is_empty(), "no request over the limit reaches the model");
    let (status, _) = status_and_body(&http.call(get_event(Some(USER), "huge")).await);
    assert_eq!(status, 404, "nothing was stored");
    // A message that fits is answered by the same process.
    let (status, body) = turn(&http, "huge", "Hola").await;
    assert_eq!((status, body["reply"].as_str()), (200, Some("Nunca.")), "{body}");
}

/// How the runtime's condensing call starts its system prompt, and how a condensed step starts.
const CONDENSING: &str = "You condense the work of an assistant";
const CONDENSED: &str = "[Earlier steps of this turn, condensed";

fn is_condensing_request(request: &Value) -> bool {
    system_of(request).starts_with(CONDENSING)
}

#[tokio::test]
async fn a_turn_of_seven_replies_of_forty_calls_commits_its_work_within_a_32k_context() {
    let stack = Stack::new().await;
    // Each reply writes four files of about 6 KB and reads them back, then lists /workspace; only
    // the first 16 calls of a reply run, the other 24 get an error result, as for any model.
    let content = "Cláusula del contrato con su texto completo y sus condiciones.\n".repeat(96);
    let mut replies = Vec::new();
    for step in 0..7 {
        let mut calls: Vec<(String, Value)> = (0..4)
            .map(|i| {
                let path = format!("/workspace/paso{step}/parte{i}.md");
                ("write_file".to_owned(), json!({"file_path": path, "content": content}))
            })
            .collect();
        for i in 0..36 {
            let path = format!("/workspace/paso{step}/parte{}.md", i % 4);
            calls.push(if i % 3 == 2 {
                ("ls".to_owned(), json!({"path": "/workspace"}))
            } else {
                ("read_file".to_owned(), json!({"file_path": path}))
            });
        }
        replies.push(Reply::Tools(calls));
    }
    replies.push(Reply::text("He revisado los siete pasos del contrato."));
    stack.model.push(replies);
    stack
        .model
        .answer_system_prefix(CONDENSING, "Pasos hechos: escritas y leídas las partes de /workspace/paso0 a paso5.");
    let http = stack.http(&[]).await;
    let (status, body) = turn(&http, "long", "Redacta y revisa el contrato por partes").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["ending"].as_str(), body["steps"].as_u64()), (Some("answered"), Some(8)), "{body}");
    assert_eq!(body["reply"], "He revisado los siete pasos del contrato.");

    let requests = stack.model.requests();
    let (condensing, turn_requests): (Vec<&Value>, Vec<&Value>) =
        requests.iter().partition(|r| is_condensing_request(r));
    assert_eq!(turn_requests.len(), 8);
    assert!(!condensing.is_empty(), "the older steps were condensed");
    for request in &requests {
        assert!(tokens_of(request) <= CONTEXT_TOKENS, "a request of {} tokens", tokens_of(request));
    }
    let last = turn_requests.last().unwrap();
    let messages = last["messages"].as_array().unwrap();
    assert_eq!(messages[1]["content"], "Redacta y revisa el contrato por partes", "the request is never cut");
    let condensed = messages[2]["content"].as_str().unwrap_or_default();
    assert!(condensed.starts_with(CONDENSED) && condensed.contains("paso0 a paso5"), "{condensed}");

    // Everything the turn did is stored: every file, and every step in the history.
    let (status, session) = status_and_body(&http.call(get_event(Some(USER), "long")).await);
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["version"], 1);
    assert_eq!(session["workspace"].as_array().unwrap().len(), 28, "{}", session["workspace"]);
    assert_eq!(body["files"].as_array().unwrap().len(), 28);
    let history = session["history"].as_array().unwrap();
    let calls: usize = history.iter().filter_map(|m| m["tool_calls"].as_array()).map(Vec::len).sum();
    assert_eq!(calls, 7 * 40, "every call is stored with its result");
    assert_eq!(history.last().unwrap()["content"], "He revisado los siete pasos del contrato.");
    // The stored turn alone is far over the window: without condensing, the last request could not be sent.
    let stored: usize = history.iter().map(|m| m.to_string().len()).sum::<usize>().div_ceil(3);
    assert!(stored > CONTEXT_TOKENS, "the turn's messages are {stored} tokens");
}

#[tokio::test]
async fn a_large_tool_result_is_saved_to_a_file_whose_path_the_next_request_carries() {
    let stack = Stack::new().await;
    let content: String = (0..3000).map(|i| format!("línea {i:04} del registro de entradas\n")).collect();
    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/registro.txt", "content": content})),
        Reply::tool("grep", json!({"pattern": "del registro", "path": "/workspace", "output_mode": "content"})),
        Reply::text("El registro tiene muchas entradas."),
    ]);
    let http = stack.http(&[]).await;
    let (status, body) = turn(&http, "grande", "¿Qué hay en el registro?").await;
    assert_eq!(status, 200, "{body}");
    let requests = stack.model.requests();
    assert_eq!(requests.len(), 3);
    // The grep was the second request's reply, its first call: `call_2_0`.
    let path = "/workspace/.results/call_2_0.txt";
    let shown = tool_results(&requests[2]).pop().unwrap();
    assert!(shown.contains(&format!("saved to {path}")), "{shown}");
    assert!(
        shown.contains("línea 0000 del registro") && shown.len() < 10_752,
        "head and tail only: {} bytes",
        shown.len()
    );
    let files: Vec<&str> = body["files"].as_array().unwrap().iter().filter_map(|f| f["path"].as_str()).collect();
    assert!(files.contains(&path), "{files:?}");
    // The whole result is a workspace file of the session, committed with the turn.
    let response = http.call(file_event(Some(USER), "grande", ".results/call_2_0.txt")).await;
    assert_eq!(response["statusCode"], 200, "{response}");
    let body = response["body"].as_str().unwrap_or_default();
    let saved = if response["isBase64Encoded"].as_bool().unwrap_or(false) {
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(body).unwrap()).unwrap()
    } else {
        body.to_owned()
    };
    assert!(saved.len() > shown.len() && saved.contains("línea 0999 del registro"), "{} bytes", saved.len());
}

#[tokio::test]
async fn a_turn_whose_loaded_skill_fills_the_context_ends_context_full_with_its_work_stored() {
    let stack = Stack::new().await;
    let rules = "Comprueba cada cláusula contra el registro y anota la fuente de cada dato. ".repeat(200);
    stack
        .put(
            &format!("{USER}/skills/notaria/extensa/SKILL.md"),
            skill_md("extensa", "Una habilidad muy larga.") + &rules,
        )
        .await;
    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/nota.md", "content": "Primera nota."})),
        Reply::tool("load_skill", json!({"skill_path": "notaria/extensa"})),
        Reply::text("Nunca."),
    ]);
    // 4,404 tokens of input; the SKILL.md alone is about 5,000.
    let http = stack.http(&[("LLM_CONTEXT_TOKENS", "8500")]).await;
    let (status, body) = turn(&http, "llena", "Revisa el contrato con la habilidad extensa").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["ending"].as_str(), body["steps"].as_u64()), (Some("context_full"), Some(2)), "{body}");
    let reply = body["reply"].as_str().unwrap();
    assert!(reply.contains("no longer fits"), "{reply}");
    assert_eq!(stack.model.requests().len(), 2, "no request over the limit was sent");
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "llena")).await);
    assert_eq!(session["workspace"][0]["path"], "/workspace/nota.md", "{session}");
    let history = session["history"].as_array().unwrap();
    assert_eq!(history.last().unwrap()["content"], reply, "the reply is stored");
}
