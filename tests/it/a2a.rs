//! A2A through the compiled stream-turn behind a loopback Function URL, driven by the a2a-sdk
//! Python client (`tests/clients/a2a_client.py`, one step per run): the card is public and names
//! the tenant's skills only for a valid token; a message runs one turn (sent again, it replays),
//! a streamed one arrives as the SDK's stream responses; a non-blocking send is a queued task that
//! queue-turn runs, read with GetTask, and canceled before it runs it never runs; an approval pause
//! is `input-required` and a message of decisions resumes the same task; another user's task, a
//! malformed body, an unknown method and a missing token are refused with their codes.

use std::sync::Arc;

use local_stack::function_url::FunctionUrl;
use local_stack::identity::IdentityProvider;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{repo_root, Stack};
use serde_json::{json, Value};

const USER: &str = "user-a2a";

struct World {
    stack: Stack,
    identity: IdentityProvider,
    base: String,
    function: Arc<Function>,
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    worker: Function,
}

impl World {
    async fn start(extra: &[(&str, &str)]) -> World {
        let stack = Stack::new().await;
        let identity = IdentityProvider::start().await;
        let sqs = aws_sdk_sqs::Client::new(&local_stack::moto::sdk_config(&stack.endpoint).await);
        let queue_url = local_stack::moto::create_fifo_queue(&sqs).await;
        let (url, listener) = FunctionUrl::reserve().await;
        let base = url.url("");
        let a2a_url = format!("{base}/a2a");
        let mut env = identity.env();
        env.extend([("TURN_QUEUE_URL", queue_url.as_str()), ("A2A_URL", a2a_url.as_str())]);
        env.extend_from_slice(extra);
        let function = Arc::new(Function::start("stream-turn", &stack.env(&env)).await);
        FunctionUrl::serve(listener, function.clone());
        let mut worker_env = vec![("TURN_QUEUE_URL", queue_url.as_str()), ("TURN_MAX_RECEIVE_COUNT", "3")];
        worker_env.extend_from_slice(extra);
        let worker = stack.queue(&worker_env).await;
        World { stack, identity, base, function, sqs, queue_url, worker }
    }

    /// One step of the SDK's client as `user` (anonymous with `None`), its printed JSON.
    async fn client(&self, user: Option<&str>, command: &str, arg: Option<String>) -> Value {
        self.client_with_token(user.map(|user| self.identity.token(user)), command, arg).await
    }

    async fn client_with_token(&self, token: Option<String>, command: &str, arg: Option<String>) -> Value {
        self.run_client(token, None, command, arg).await
    }

    /// One step of the SDK's client as `USER`, speaking A2A 0.3.
    async fn send_v03(&self, command: &str, arg: String) -> Value {
        self.run_client(Some(self.identity.token(USER)), Some("0.3"), command, Some(arg)).await
    }

    async fn run_client(
        &self,
        token: Option<String>,
        protocol: Option<&str>,
        command: &str,
        arg: Option<String>,
    ) -> Value {
        let script = repo_root().join("tests/clients/a2a_client.py");
        let mut run = tokio::process::Command::new("python3");
        run.arg(&script).arg(&self.base).arg(command).args(arg).env_remove("A2A_TOKEN").env_remove("A2A_PROTOCOL");
        if let Some(token) = token {
            run.env("A2A_TOKEN", token);
        }
        if let Some(protocol) = protocol {
            run.env("A2A_PROTOCOL", protocol);
        }
        let output = run.output().await.expect("python3 runs (it needs a2a-sdk from tests/requirements.txt)");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{command}: {}\n{stdout}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("{command} printed no JSON: {stdout}"))
    }

    async fn send(&self, command: &str, args: Value) -> Value {
        self.client(Some(USER), command, Some(args.to_string())).await
    }

    async fn get(&self, user: &str, task: &str) -> Value {
        self.client(Some(user), "get", Some(task.to_owned())).await
    }

    async fn cancel(&self, task: &str) -> Value {
        self.client(Some(USER), "cancel", Some(task.to_owned())).await
    }

    /// Runs the queue's waiting records through queue-turn; how many there were.
    async fn deliver(&self) -> usize {
        let records = local_stack::moto::take_queue_records(&self.sqs, &self.queue_url).await;
        let count = records.len();
        if count > 0 {
            let response = self.worker.call(json!({ "Records": records })).await;
            assert_eq!(response["batchItemFailures"], json!([]), "{response}");
        }
        count
    }
}

/// The task of a blocking send's only response.
fn sent_task(sent: &Value) -> &Value {
    let responses = sent["responses"].as_array().unwrap_or_else(|| panic!("no responses: {sent}"));
    assert_eq!(responses.len(), 1, "{sent}");
    &responses[0]["task"]
}

fn reply_text(task: &Value) -> &str {
    task["artifacts"][0]["parts"][0]["text"].as_str().unwrap_or_else(|| panic!("no reply artifact: {task}"))
}

#[tokio::test]
async fn the_card_is_public_and_names_the_tenants_skills_only_to_its_caller() {
    let world = World::start(&[]).await;
    world.stack.upload_example_skills(USER).await;
    let anonymous = world.client(None, "card", None).await;
    assert_eq!(anonymous["supportedInterfaces"][0]["url"], format!("{}/a2a", world.base), "{anonymous}");
    assert_eq!(anonymous["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    assert_eq!(anonymous["capabilities"]["streaming"], true);
    assert_eq!(anonymous["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["bearerFormat"], "JWT");
    assert!(anonymous.get("skills").is_none(), "an anonymous caller sees no skill: {anonymous}");

    let card = world.client(Some(USER), "card", None).await;
    let ids: Vec<&str> = card["skills"].as_array().expect("skills").iter().filter_map(|s| s["id"].as_str()).collect();
    assert!(ids.contains(&"escrituras/compraventa"), "{ids:?}");
    // Another tenant's card names none of these, and a forged token is anonymous.
    let other = world.client(Some("user-a2a-other"), "card", None).await;
    assert!(other.get("skills").is_none(), "{other}");
    let forged = world.client_with_token(Some("not.a.jwt".to_owned()), "card", None).await;
    assert!(forged.get("skills").is_none(), "{forged}");
}

#[tokio::test]
async fn a_message_is_one_turn_sent_again_it_replays_and_a_streamed_one_arrives_as_stream_responses() {
    let world = World::start(&[]).await;
    world.stack.model.push([Reply::text("Buenos días.")]);
    let message = json!({"text": "Hola", "message_id": "msg-1", "context_id": "ctx-1"});
    let sent = world.send("send", message.clone()).await;
    let task = sent_task(&sent);
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(task["contextId"], "ctx-1");
    assert_eq!(reply_text(task), "Buenos días.");
    assert_eq!(task["metadata"]["turn"]["ending"], "answered");
    let again = world.send("send", message).await;
    assert_eq!(sent_task(&again)["id"], task["id"], "the same message is the same task");
    assert_eq!(reply_text(sent_task(&again)), "Buenos días.");
    assert_eq!(world.stack.model.requests().len(), 1, "the message ran once");
    let read = world.get(USER, task["id"].as_str().unwrap()).await;
    assert_eq!(read["status"]["state"], "TASK_STATE_COMPLETED", "{read}");

    world
        .stack
        .model
        .push([Reply::tool("ls", json!({"path": "/workspace"})), Reply::Chunks(vec!["Nada ".into(), "aquí.".into()])]);
    let streamed =
        world.send("stream", json!({"text": "¿Qué hay?", "message_id": "msg-2", "context_id": "ctx-1"})).await;
    let responses = streamed["responses"].as_array().unwrap_or_else(|| panic!("{streamed}"));
    let kinds: Vec<&str> = responses.iter().map(|r| r.as_object().unwrap().keys().next().unwrap().as_str()).collect();
    assert_eq!(kinds.first(), Some(&"task"), "{kinds:?}");
    assert_eq!(&kinds[kinds.len() - 2..], ["artifactUpdate", "statusUpdate"], "{kinds:?}");
    let events: Vec<&str> = responses
        .iter()
        .filter_map(|r| r["statusUpdate"]["status"]["message"]["parts"][0]["data"]["event"].as_str())
        .collect();
    assert!(events.contains(&"tool.call") && events.contains(&"tool.result"), "{events:?}");
    let text: String =
        responses.iter().filter_map(|r| r["statusUpdate"]["status"]["message"]["parts"][0]["text"].as_str()).collect();
    assert_eq!(text, "Nada aquí.");
    let last = responses.last().unwrap();
    assert_eq!(last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED", "{last}");
    assert_eq!(responses[responses.len() - 2]["artifactUpdate"]["artifact"]["parts"][0]["text"], "Nada aquí.");
    let task_id = responses[0]["task"]["id"].as_str().unwrap();
    assert_eq!(reply_text(&world.get(USER, task_id).await), "Nada aquí.", "the streamed turn was committed");
}

#[tokio::test]
async fn a_background_task_is_queued_read_run_and_one_canceled_before_it_runs_never_runs() {
    let world = World::start(&[]).await;
    world.stack.model.push([Reply::text("Informe listo.")]);
    let queued = world
        .send("send", json!({"text": "Prepara el informe", "message_id": "bg-1", "return_immediately": true}))
        .await;
    let task = sent_task(&queued).clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_SUBMITTED", "{queued}");
    let id = task["id"].as_str().unwrap();
    assert_eq!(world.get(USER, id).await["status"]["state"], "TASK_STATE_SUBMITTED");
    assert!(world.stack.model.requests().is_empty(), "stream-turn ran nothing");
    assert_eq!(world.deliver().await, 1);
    let done = world.get(USER, id).await;
    assert_eq!((done["status"]["state"].as_str(), reply_text(&done)), (Some("TASK_STATE_COMPLETED"), "Informe listo."));
    let late = world.cancel(id).await;
    assert_eq!(late["error"]["type"], "TaskNotCancelableError", "{late}");

    let queued =
        world.send("send", json!({"text": "Otro informe", "message_id": "bg-2", "return_immediately": true})).await;
    let id = sent_task(&queued)["id"].as_str().unwrap().to_owned();
    let canceled = world.cancel(&id).await;
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");
    assert_eq!(world.cancel(&id).await["status"]["state"], "TASK_STATE_CANCELED", "canceling again answers the same");
    assert_eq!(world.deliver().await, 1, "the record was delivered");
    assert_eq!(world.stack.model.requests().len(), 1, "the canceled task never ran");
    assert_eq!(world.get(USER, &id).await["status"]["state"], "TASK_STATE_CANCELED");
}

#[tokio::test]
async fn an_approval_pause_is_input_required_and_a_message_of_decisions_resumes_the_task() {
    let world = World::start(&[("APPROVAL_REQUIRED", "write_file")]).await;
    world.stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/carta.md", "content": "Estimado cliente"})),
        Reply::text("He escrito la carta."),
    ]);
    let sent =
        world.send("send", json!({"text": "Escribe la carta", "message_id": "ap-1", "context_id": "ctx-ap"})).await;
    let task = sent_task(&sent).clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{sent}");
    let parts = task["status"]["message"]["parts"].as_array().expect("the status message");
    let pending = &parts.last().unwrap()["data"]["pending_approval"];
    assert_eq!(pending[0]["name"], "write_file", "{task}");
    let id = task["id"].as_str().unwrap();
    assert_eq!(world.get(USER, id).await["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(world.stack.model.requests().len(), 1);

    let decide = json!({"task_id": id, "context_id": "ctx-ap", "message_id": "ap-2",
                        "decisions": [{"call_id": pending[0]["id"], "decision": "approve"}]});
    let resumed = world.send("decide", decide.clone()).await;
    let done = sent_task(&resumed);
    assert_eq!(done["id"], id, "the answer goes on with the same task");
    assert_eq!(
        (done["status"]["state"].as_str(), reply_text(done)),
        (Some("TASK_STATE_COMPLETED"), "He escrito la carta.")
    );
    assert_eq!(done["metadata"]["turn"]["files"][0]["path"], "/workspace/carta.md", "{done}");
    assert_eq!(reply_text(&world.get(USER, id).await), "He escrito la carta.", "the task reads as resumed");
    let again = world.send("decide", decide).await;
    assert_eq!(reply_text(sent_task(&again)), "He escrito la carta.", "the same decisions replay");
    assert_eq!(world.stack.model.requests().len(), 2, "the approved call ran once");
}

#[tokio::test]
async fn another_users_task_a_malformed_body_an_unknown_method_and_no_token_are_refused() {
    let world = World::start(&[]).await;
    world.stack.model.push([Reply::text("Secreto de user-a2a.")]);
    let sent = world.send("send", json!({"text": "Guarda esto", "message_id": "own-1"})).await;
    let id = sent_task(&sent)["id"].as_str().unwrap().to_owned();
    let foreign = world.get("user-a2a-intruder", &id).await;
    assert_eq!(
        (foreign["error"]["type"].as_str(), foreign["error"]["code"].as_i64()),
        (Some("TaskNotFoundError"), Some(-32001))
    );
    assert!(!foreign.to_string().contains("Secreto"), "{foreign}");
    let foreign_cancel = world.client(Some("user-a2a-intruder"), "cancel", Some(id.clone())).await;
    assert_eq!(foreign_cancel["error"]["code"], -32001, "{foreign_cancel}");
    assert_eq!(world.get(USER, "not-a-task").await["error"]["code"], -32001);

    let raw = |body: &str| world.client(Some(USER), "raw", Some(body.to_owned()));
    let malformed = raw("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\":").await;
    assert_eq!((malformed["status"].as_u64(), malformed["body"]["error"]["code"].as_i64()), (Some(200), Some(-32700)));
    let unknown = raw(r#"{"jsonrpc": "2.0", "id": "u1", "method": "tasks/explode", "params": {}}"#).await;
    assert_eq!(unknown["body"]["error"]["code"], -32601, "{unknown}");
    assert_eq!(unknown["body"]["id"], "u1");
    let invalid =
        raw(r#"{"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": {"parts": []}}}"#).await;
    assert_eq!(invalid["body"]["error"]["code"], -32602, "{invalid}");

    let anonymous = world.client(None, "raw", Some(r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}"#.into())).await;
    assert_eq!(anonymous["status"], 401, "{anonymous}");
    let sdk = world.client(None, "get", Some(id)).await;
    assert!(sdk["error"]["message"].as_str().unwrap_or("").contains("401"), "{sdk}");
}

#[tokio::test]
async fn a_client_speaking_0_3_sends_streams_and_reads_tasks_in_0_3s_shapes() {
    let world = World::start(&[]).await;
    world.stack.model.push([Reply::text("Hola desde 0.3."), Reply::Chunks(vec!["En ".into(), "directo.".into()])]);
    let mark = world.function.log_mark();
    // The SDK validates each 0.3 answer against 0.3's types before it converts it.
    let sent = world
        .send_v03("send", json!({"text": "Hola", "message_id": "old-1", "context_id": "ctx-03"}).to_string())
        .await;
    let task = sent_task(&sent);
    assert_eq!(
        (task["status"]["state"].as_str(), reply_text(task)),
        (Some("TASK_STATE_COMPLETED"), "Hola desde 0.3."),
        "{sent}"
    );
    let read = world.send_v03("get", task["id"].as_str().unwrap().to_owned()).await;
    assert_eq!(reply_text(&read), "Hola desde 0.3.", "{read}");
    let streamed = world
        .send_v03("stream", json!({"text": "Sigue", "message_id": "old-2", "context_id": "ctx-03"}).to_string())
        .await;
    let responses = streamed["responses"].as_array().unwrap_or_else(|| panic!("{streamed}"));
    assert_eq!(responses.last().unwrap()["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED", "{streamed}");
    let logs = world.function.logs_since(mark).join("\n");
    let dialects: Vec<&str> = logs.lines().filter(|line| line.contains("A2A request")).collect();
    assert_eq!(dialects.len(), 3, "{logs}");
    assert!(dialects.iter().all(|line| line.contains(r#""dialect":"V03""#)), "the client spoke 0.3: {dialects:?}");
}
