//! Human approval of tool calls through the compiled http-turn with the scripted model: a call the
//! deployment's policy names pauses the turn (nothing of it runs); the next request's decisions,
//! taken by a new process, run it once, edited or not, or tell the model it was rejected; a
//! redelivered decision replays, and two requests answering one pause run its calls once; a forced skill's command rules still hold for edited arguments; and
//! a subagent's call that needs approval pauses the whole turn, which goes on inside the subagent;
//! a tenant's `settings.json` adds approvals it alone can waive, and `skills-index` applies a change.

use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, status_and_body, tool_results, turn_event, Stack};
use serde_json::{json, Value};

const USER: &str = "user-approvals";

async fn post(function: &Function, session: &str, body: Value, key: Option<&str>) -> (u16, Value, Value) {
    let mut event = turn_event(Some(USER), session, body);
    if let Some(key) = key {
        event["headers"]["idempotency-key"] = json!(key);
    }
    let response = function.call(event).await;
    let (status, body) = status_and_body(&response);
    (status, body, response["headers"].clone())
}

fn decide(decisions: Value) -> Value {
    json!({ "decisions": decisions })
}

#[tokio::test]
async fn a_call_that_needs_approval_pauses_the_turn_and_a_new_process_runs_it_once_approved() {
    let stack = Stack::new().await;
    let policy = [("APPROVAL_REQUIRED", "Write, execute")];
    stack.model.push([
        Reply::Tools(vec![
            ("ls".to_owned(), json!({"path": "/workspace"})),
            ("write_file".to_owned(), json!({"file_path": "/workspace/carta.md", "content": "Estimado cliente"})),
        ]),
        Reply::text("He escrito la carta."),
    ]);
    let http = stack.http(&policy).await;
    let (status, paused, _) = post(&http, "s1", json!({"message": "Escribe la carta"}), None).await;
    assert_eq!(status, 200, "{paused}");
    assert_eq!(paused["ending"], "awaiting_approval", "{paused}");
    let pending = paused["pending_approval"].as_array().expect("the calls that wait");
    assert_eq!(pending.len(), 1, "{paused}");
    assert_eq!(pending[0]["name"], "write_file");
    assert_eq!(pending[0]["arguments"]["content"], "Estimado cliente");
    let call_id = pending[0]["id"].as_str().unwrap().to_owned();
    assert!(paused["files"].as_array().unwrap().is_empty(), "nothing was written: {paused}");
    assert_eq!(stack.model.requests().len(), 1);
    // The session says what waits; the history holds the reply with the calls, and the call
    // before the one that waits has run.
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    assert_eq!(session["pending_approval"]["calls"][0]["id"], call_id.as_str(), "{session}");
    assert!(session["workspace"].as_array().unwrap().is_empty(), "{session}");
    let history = session["history"].as_array().unwrap();
    assert_eq!(history.last().unwrap()["role"], "tool", "the ls result is stored: {session}");

    // A new message cannot start while the call waits.
    let (status, body, _) = post(&http, "s1", json!({"message": "Otra cosa"}), None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("approval_pending")), "{body}");
    // Decisions must answer exactly the calls that wait.
    let wrong = decide(json!([{"call_id": "call_nope", "decision": "approve"}]));
    let (status, body, _) = post(&http, "s1", wrong, None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("not_pending")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains(&call_id), "{body}");
    assert_eq!(stack.model.requests().len(), 1, "nothing ran");

    // A cold process takes the decision: the call runs, and the loop goes on.
    drop(http);
    let http = stack.http(&policy).await;
    let approve = decide(json!([{"call_id": call_id, "decision": "approve"}]));
    let (status, done, headers) = post(&http, "s1", approve.clone(), Some("approve-1")).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!((done["ending"].as_str(), done["reply"].as_str()), (Some("answered"), Some("He escrito la carta.")));
    assert_eq!(done["steps"], 2, "the turn's steps go on from where it paused");
    assert!(headers.get("idempotent-replayed").is_none());
    assert_eq!(done["files"], json!([{"path": "/workspace/carta.md", "size": 16}]), "{done}");
    let requests = stack.model.requests();
    assert_eq!(requests.len(), 2);
    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), 2, "both calls of the reply have their result: {results:?}");
    assert!(results[1].starts_with("Updated file /workspace/carta.md"), "{results:?}");

    // The same request again replays; other decisions find nothing pending.
    let (status, replayed, headers) = post(&http, "s1", approve.clone(), Some("approve-1")).await;
    assert_eq!((status, replayed["reply"].clone()), (200, done["reply"].clone()));
    assert_eq!(headers["idempotent-replayed"], "true");
    let (status, body, _) = post(&http, "s1", approve, Some("approve-2")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("not_pending")), "{body}");
    assert_eq!(stack.model.requests().len(), 2, "nothing ran twice");
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    assert!(session["pending_approval"].is_null(), "{session}");
    assert_eq!(session["workspace"].as_array().unwrap().len(), 1, "{session}");
}

#[tokio::test]
async fn two_requests_answering_one_pause_at_once_run_its_calls_once_and_a_failed_one_gives_the_pause_back() {
    let stack = Stack::new().await;
    let policy = [("APPROVAL_REQUIRED", "write_file")];
    let write =
        |name: &str| Reply::tool("write_file", json!({"file_path": format!("/workspace/{name}"), "content": "x"}));
    let slow = Reply::Delayed(std::time::Duration::from_millis(1500), Box::new(Reply::text("Escrito.")));
    stack.model.push([write("uno.md"), slow]);
    let first = stack.http(&policy).await;
    let second = stack.http(&policy).await;
    let (_, paused, _) = post(&first, "s-race", json!({"message": "Escribe uno"}), None).await;
    assert_eq!(paused["ending"], "awaiting_approval", "{paused}");
    let approve = decide(json!([{"call_id": paused["pending_approval"][0]["id"], "decision": "approve"}]));
    // Neither request carries the other's key (one carries none): the pause itself is claimed.
    let run_first = post(&first, "s-race", approve.clone(), None);
    let run_second = async {
        // Starts while the first waits on the model, after running the approved call.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        post(&second, "s-race", approve.clone(), Some("another-key")).await
    };
    let ((status, done, _), (other_status, other, _)) = tokio::join!(run_first, run_second);
    assert_eq!((status, done["reply"].as_str()), (200, Some("Escrito.")), "{done}");
    assert_eq!((other_status, other["error"]["code"].as_str()), (409, Some("not_pending")), "{other}");
    assert!(other["error"]["message"].as_str().unwrap().contains("another request"), "{other}");
    let requests = stack.model.requests();
    assert_eq!(requests.len(), 2, "the approved call and the model after it ran once");
    assert_eq!(tool_results(&requests[1]).len(), 1);
    // Once the first is committed, nothing waits.
    let (status, body, _) = post(&second, "s-race", approve, Some("another-key")).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("not_pending")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("no tool calls"), "{body}");

    // A resumed turn that fails gives the pause back: the retry (no key) runs it.
    stack.model.push([write("dos.md"), Reply::Status(500), Reply::Status(500), Reply::text("Ahora sí.")]);
    let (_, paused, _) = post(&first, "s-race", json!({"message": "Escribe dos"}), None).await;
    let approve = decide(json!([{"call_id": paused["pending_approval"][0]["id"], "decision": "approve"}]));
    let (status, body, _) = post(&first, "s-race", approve.clone(), None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (502, Some("model_provider_failed")), "{body}");
    let (status, body, _) = post(&second, "s-race", approve, None).await;
    assert_eq!((status, body["reply"].as_str()), (200, Some("Ahora sí.")), "{body}");
    let (_, session) = status_and_body(&first.call(get_event(Some(USER), "s-race")).await);
    assert!(session["pending_approval"].is_null(), "{session}");
    assert_eq!(session["workspace"].as_array().unwrap().len(), 2, "{session}");
}

#[tokio::test]
async fn a_rejected_call_does_not_run_and_the_model_hears_why() {
    let stack = Stack::new().await;
    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/borrador.md", "content": "x"})),
        Reply::text("De acuerdo, no lo escribo."),
    ]);
    let http = stack.http(&[("APPROVAL_REQUIRED", "write_file")]).await;
    let (status, paused, _) = post(&http, "s2", json!({"message": "Guarda un borrador"}), None).await;
    assert_eq!((status, paused["ending"].as_str()), (200, Some("awaiting_approval")), "{paused}");
    let call_id = paused["pending_approval"][0]["id"].clone();
    let reject = decide(json!([{"call_id": call_id, "decision": "reject", "message": "Todavía no."}]));
    let (status, done, _) = post(&http, "s2", reject, None).await;
    assert_eq!((status, done["reply"].as_str()), (200, Some("De acuerdo, no lo escribo.")), "{done}");
    assert!(done["files"].as_array().unwrap().is_empty(), "{done}");
    let results = tool_results(&stack.model.requests()[1]);
    assert_eq!(results, ["The user rejected this call; it was not run. Their message: Todavía no."]);
    // Bad decisions are refused before anything is read.
    let (status, body, _) = post(&http, "s2", decide(json!([{"call_id": "a", "decision": "maybe"}])), None).await;
    assert_eq!(status, 400, "{body}");
    let twice = decide(json!([{"call_id": "a", "decision": "approve"}, {"call_id": "a", "decision": "reject"}]));
    let (status, body, _) = post(&http, "s2", twice, None).await;
    assert_eq!(
        (status, body["error"]["message"].as_str().is_some_and(|m| m.contains("answered twice"))),
        (400, true),
        "{body}"
    );
    let both = json!({"message": "hola", "decisions": [{"call_id": "a", "decision": "approve"}]});
    let (status, body, _) = post(&http, "s2", both, None).await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn edited_arguments_still_obey_the_forced_skills_commands() {
    let stack = Stack::new().await;
    let skill = "---\nname: calculo\ndescription: Calcula con Python.\nallowed-tools: Bash(python3:*)\n---\n# Cálculo\nUsa python3.\n";
    stack.put(&format!("{USER}/skills/calculo/SKILL.md"), skill).await;
    stack.model.push([
        Reply::tool("execute", json!({"command": "python3 -c 'print(1)'"})),
        Reply::tool("execute", json!({"command": "python3 -c 'print(2)'"})),
        Reply::text("Calculado."),
    ]);
    let env = local_stack::image::local_sandbox_env();
    let mut all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.push(("APPROVAL_REQUIRED", "execute"));
    let http = stack.http(&all).await;
    let (status, paused, _) = post(&http, "s3", json!({"message": "/calculo suma"}), None).await;
    assert_eq!((status, paused["ending"].as_str()), (200, Some("awaiting_approval")), "{paused}");
    assert_eq!(paused["forced_skill"], "calculo");
    let first = paused["pending_approval"][0]["id"].clone();

    // The person edits the command into one the skill does not allow: refused, not run.
    let edit = decide(json!([{"call_id": first, "decision": "edit", "arguments": {"command": "rm -rf /workspace"}}]));
    let (status, paused_again, _) = post(&http, "s3", edit, None).await;
    assert_eq!((status, paused_again["ending"].as_str()), (200, Some("awaiting_approval")), "{paused_again}");
    let results = tool_results(&stack.model.requests()[1]);
    assert!(results[0].starts_with("(The user edited this call's arguments before it ran.)"), "{results:?}");
    assert!(results[0].contains("does not allow this command"), "{results:?}");
    assert_eq!(paused_again["refused_tool_calls"], 1, "{paused_again}");
    assert_eq!(paused_again["executions"], 0, "{paused_again}");

    // The second call, edited into an allowed one, runs with the edit.
    let second = paused_again["pending_approval"][0]["id"].clone();
    let edit =
        decide(json!([{"call_id": second, "decision": "edit", "arguments": {"command": "python3 -c 'print(6*7)'"}}]));
    let (status, done, _) = post(&http, "s3", edit, None).await;
    assert_eq!((status, done["reply"].as_str()), (200, Some("Calculado.")), "{done}");
    assert_eq!(done["executions"], 1, "{done}");
    let requests = stack.model.requests();
    assert_eq!(requests.len(), 3);
    let results = tool_results(&requests[2]);
    assert!(results.last().unwrap().contains("42"), "{results:?}");
    // The model saw the command that ran, and the forced skill held through both pauses.
    assert!(requests[2].to_string().contains("print(6*7)"), "the edited call is in the conversation");
    assert!(local_stack::stack::system_of(&requests[2]).contains("<mandatory-skill name=\"calculo\">"));
}

fn task(description: &str) -> (String, Value) {
    ("task".to_owned(), json!({"description": description, "subagent_type": "general-purpose"}))
}

#[tokio::test]
async fn a_subagents_call_that_needs_approval_pauses_the_turn_and_goes_on_inside_that_subagent() {
    let stack = Stack::new().await;
    let policy = [("APPROVAL_REQUIRED", "write_file")];
    // A call of the reply that runs on its own stands between the two tasks.
    let list = ("ls".to_owned(), json!({"path": "/workspace"}));
    stack.model.push([Reply::Tools(vec![
        task("Draft the letter to the client."),
        list,
        task("Find the client's name."),
    ])]);
    stack.model.push_for(
        "Draft the letter",
        [
            Reply::tool("write_file", json!({"file_path": "/workspace/carta.md", "content": "Estimada Ana"})),
            Reply::text("Draft written to /workspace/carta.md."),
        ],
    );
    stack.model.push_for("client's name", [Reply::text("The client is Ana.")]);
    stack.model.push([Reply::text("La carta para Ana está lista.")]);
    let http = stack.http(&policy).await;
    let (status, paused, _) = post(&http, "s4", json!({"message": "Prepara la carta"}), None).await;
    assert_eq!((status, paused["ending"].as_str()), (200, Some("awaiting_approval")), "{paused}");
    let pending = paused["pending_approval"].as_array().expect("the calls that wait");
    assert_eq!(pending.len(), 1, "{paused}");
    assert_eq!((pending[0]["name"].as_str(), pending[0]["subagent"].as_str()), (Some("write_file"), Some("sa-1")));
    let call_id = pending[0]["id"].as_str().unwrap().to_owned();
    assert!(call_id.starts_with("sa-1/"), "a subagent's call is named within the turn: {call_id}");
    assert!(paused["files"].as_array().unwrap().is_empty(), "nothing was written: {paused}");
    assert_eq!(stack.model.requests().len(), 3, "the parent and both subagents were asked once");
    // The other subagent's answer is its task's result already; the paused one's task has none.
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s4")).await);
    let waiting = &session["pending_approval"]["calls"][0];
    assert_eq!(waiting["subagent"], "sa-1", "{session}");
    assert_eq!(waiting["arguments"]["content"], "Estimada Ana", "from the subagent's kept conversation: {session}");
    let history = session["history"].as_array().unwrap();
    let last = history.last().unwrap();
    assert_eq!((last["role"].as_str(), last["content"].as_str()), (Some("tool"), Some("The client is Ana.")));
    assert_eq!(history[history.len() - 2]["role"], "assistant", "the ls after the paused task waits: {session}");

    // A cold process takes the decision: the subagent's write runs, the subagent answers, and the
    // turn's own loop goes on with both answers.
    drop(http);
    let http = stack.http(&policy).await;
    let approve = decide(json!([{"call_id": call_id, "decision": "approve"}]));
    let (status, done, _) = post(&http, "s4", approve.clone(), Some("approve-sub")).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        (done["ending"].as_str(), done["reply"].as_str()),
        (Some("answered"), Some("La carta para Ana está lista."))
    );
    assert_eq!(done["files"], json!([{"path": "/workspace/carta.md", "size": 12}]), "{done}");
    let requests = stack.model.requests();
    assert_eq!(requests.len(), 5, "the subagent once more, then the parent");
    // The subagent went on in its own conversation: its task, its call, the call's result.
    let resumed = &requests[3];
    assert!(resumed.to_string().contains("Draft the letter to the client."), "{resumed}");
    assert!(!resumed.to_string().contains("Prepara la carta"), "none of the parent's words: {resumed}");
    let results = tool_results(resumed);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].starts_with("Updated file /workspace/carta.md"), "{results:?}");
    // The other subagent ran once, before the pause; the ls ran after the resumed one answered.
    let answers = tool_results(&requests[4]);
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert_eq!(&answers[..2], ["The client is Ana.", "Draft written to /workspace/carta.md."]);
    assert!(answers[2].contains("carta.md"), "the ls sees the file the resumed subagent wrote: {answers:?}");

    // The same decision again replays; nothing runs twice.
    let (status, replayed, headers) = post(&http, "s4", approve, Some("approve-sub")).await;
    assert_eq!((status, replayed["reply"].clone()), (200, done["reply"].clone()));
    assert_eq!(headers["idempotent-replayed"], "true");
    assert_eq!(stack.model.requests().len(), 5);
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s4")).await);
    assert!(session["pending_approval"].is_null(), "{session}");
}

#[tokio::test]
async fn a_subagent_two_levels_down_waits_and_a_rejection_reaches_it() {
    let stack = Stack::new().await;
    let policy = [("APPROVAL_REQUIRED", "execute, write_file")];
    stack.model.push([Reply::Tools(vec![task("Organise the archive.")])]);
    stack.model.push_for("Organise the archive", [Reply::Tools(vec![task("Delete the old drafts.")])]);
    stack.model.push_for(
        "Delete the old drafts",
        [
            Reply::tool("write_file", json!({"file_path": "/workspace/borrar.txt", "content": "todo"})),
            Reply::text("I did not delete anything: the user said no."),
        ],
    );
    stack.model.push_for("Organise the archive", [Reply::text("Nothing was deleted.")]);
    stack.model.push([Reply::text("No se ha borrado nada.")]);
    let http = stack.http(&policy).await;
    let (status, paused, _) = post(&http, "s5", json!({"message": "Ordena el archivo"}), None).await;
    assert_eq!((status, paused["ending"].as_str()), (200, Some("awaiting_approval")), "{paused}");
    let pending = &paused["pending_approval"][0];
    assert_eq!(pending["subagent"], "sa-2", "the level-2 subagent's call waits: {paused}");
    let call_id = pending["id"].as_str().unwrap().to_owned();

    drop(http);
    let http = stack.http(&policy).await;
    let reject = decide(json!([{"call_id": call_id, "decision": "reject", "message": "No borres nada."}]));
    let (status, done, _) = post(&http, "s5", reject, None).await;
    assert_eq!((status, done["reply"].as_str()), (200, Some("No se ha borrado nada.")), "{done}");
    assert!(done["files"].as_array().unwrap().is_empty(), "{done}");
    let requests = stack.model.requests();
    assert_eq!(requests.len(), 6, "parent, level 1, level 2; then level 2, level 1, parent");
    let results = tool_results(&requests[3]);
    assert_eq!(results, ["The user rejected this call; it was not run. Their message: No borres nada."]);
    assert_eq!(tool_results(&requests[4]), ["I did not delete anything: the user said no."]);
    assert_eq!(tool_results(&requests[5]), ["Nothing was deleted."]);
}

#[tokio::test]
async fn a_subagent_too_large_to_keep_while_it_waits_ends_its_task_with_an_error() {
    let stack = Stack::new().await;
    let policy = [("APPROVAL_REQUIRED", "edit_file")];
    let big = "x".repeat(120 * 1024);
    stack.model.push([Reply::Tools(vec![task("Write two long chapters, then fix the title.")])]);
    stack.model.push_for(
        "two long chapters",
        [
            Reply::Tools(vec![
                ("write_file".to_owned(), json!({"file_path": "/workspace/uno.md", "content": big})),
                ("write_file".to_owned(), json!({"file_path": "/workspace/dos.md", "content": big})),
            ]),
            Reply::tool("edit_file", json!({"file_path": "/workspace/uno.md", "old_string": "x", "new_string": "y"})),
        ],
    );
    stack.model.push([Reply::text("The chapters are written; the title still needs fixing.")]);
    let http = stack.http(&policy).await;
    let (status, done, _) = post(&http, "s6", json!({"message": "Escribe el libro"}), None).await;
    assert_eq!((status, done["ending"].as_str()), (200, Some("answered")), "nothing waits: {done}");
    assert!(done["pending_approval"].as_array().is_none_or(|calls| calls.is_empty()), "{done}");
    let results = tool_results(&stack.model.requests()[3]);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0].starts_with("Error: the subagent stopped at a call that needs a person's approval"),
        "{results:?}"
    );
    assert!(results[0].contains("192 KiB"), "{results:?}");
    // What it wrote before it stopped is kept.
    let files: Vec<&str> =
        done["files"].as_array().unwrap().iter().map(|file| file["path"].as_str().unwrap()).collect();
    assert_eq!(files, ["/workspace/dos.md", "/workspace/uno.md"]);
}

/// `GET /skills` of `user`.
fn skills_event(user: &str) -> Value {
    let mut event = get_event(Some(user), "unused");
    event["rawPath"] = json!("/skills");
    event["requestContext"]["http"]["path"] = json!("/skills");
    event["pathParameters"] = json!({});
    event
}

#[tokio::test]
async fn a_tenants_settings_add_approvals_that_only_it_can_waive_and_skills_index_applies_a_change() {
    const TENANT: &str = "user-approvals-settings";
    const OTHER: &str = "user-approvals-none";
    let stack = Stack::new().await;
    // Claude Code's settings format; the deployment asks about writes, the tenant about edits.
    let settings = json!({"permissions": {"ask": ["Edit", "Bash(git push:*)"], "allow": ["Write"], "deny": ["Read"]}});
    let key = format!("{TENANT}/skills/settings.json");
    stack.put(&key, settings.to_string()).await;
    let http = stack.http(&[("APPROVAL_REQUIRED", "Write")]).await;
    let turn = |user: &str, session: &str| turn_event(Some(user), session, json!({"message": "Cambia la nota"}));
    let edit = ("edit_file", json!({"file_path": "/workspace/n.md", "old_string": "a", "new_string": "b"}));
    let write = ("write_file", json!({"file_path": "/workspace/n.md", "content": "a"}));

    // The tenant's `ask` pauses its edit; another tenant's edit runs.
    stack.model.push([Reply::tool(edit.0, edit.1.clone()), Reply::tool(edit.0, edit.1.clone()), Reply::text("Hecho.")]);
    let (status, paused) = status_and_body(&http.call(turn(TENANT, "t1")).await);
    assert_eq!((status, paused["ending"].as_str()), (200, Some("awaiting_approval")), "{paused}");
    assert_eq!(paused["pending_approval"][0]["name"], "edit_file", "{paused}");
    let (status, done) = status_and_body(&http.call(turn(OTHER, "o1")).await);
    assert_eq!((status, done["ending"].as_str()), (200, Some("answered")), "{done}");

    // The tenant's `allow` does not lift the deployment's `Write`.
    stack.model.push([Reply::tool(write.0, write.1.clone())]);
    let (_, paused) = status_and_body(&http.call(turn(TENANT, "t2")).await);
    assert_eq!(paused["pending_approval"][0]["name"], "write_file", "{paused}");

    // The owner sees the rules it added and what was left out.
    let (status, skills) = status_and_body(&http.call(skills_event(TENANT)).await);
    assert_eq!(status, 200, "{skills}");
    assert_eq!(skills["settings"]["ask"], json!(["Edit", "Bash(git push:*)"]), "{skills}");
    assert_eq!(skills["settings"]["allow"], json!(["Write"]), "{skills}");
    assert!(skills["settings"]["problems"][0].as_str().unwrap().contains("deny"), "{skills}");
    let (_, other_skills) = status_and_body(&http.call(skills_event(OTHER)).await);
    assert!(other_skills["settings"].is_null(), "{other_skills}");

    // The tenant drops its `ask`; skills-index applies the change and the next edit runs.
    stack.put(&key, json!({"permissions": {"ask": []}}).to_string()).await;
    let indexer = stack.skills_index(&[]).await;
    let summary = indexer.call(stack.s3_event(&[&key], true)).await;
    assert_eq!(summary["updated"], 1, "{summary}");
    stack.model.push([Reply::tool(edit.0, edit.1.clone()), Reply::text("Hecho.")]);
    let (_, done) = status_and_body(&http.call(turn(TENANT, "t3")).await);
    assert_eq!(done["ending"], "answered", "{done}");
}
