//! `SANDBOX=lambda` end to end: the compiled http-turn invokes the sandbox function through the AWS
//! SDK against a stand-in of Lambda's Invoke API (`local_stack::lambda_invoke`), which runs the function's
//! own code; and the compiled `sandbox` function under the Lambda Runtime API emulator. The tenant
//! id Lambda routes by is the verified user's, on every call; the bounds and Lambda's refusals end
//! as tool results the model can read.

use std::sync::Arc;
use std::time::Duration;

use agent_core::sandbox::{ExecOutcome, ExecRequest, Sandbox, SandboxError, SandboxFile, MAX_CALL_FILE_BYTES};
use agent_core::{SessionId, UserId};
use local_stack::lambda::{Function, Invocation};
use local_stack::lambda_invoke::{InvokeApi, Mode, MAX_PAYLOAD_BYTES};
use local_stack::model_server::Reply;
use local_stack::moto;
use local_stack::stack::{sample_event, status_and_body, tool_results, turn_event, Stack};
use sandbox::{LambdaSandbox, WireFile, WireRequest, WireResponse};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

async fn http_with_lambda(stack: &Stack, api: &InvokeApi) -> Function {
    stack
        .http(&[("SANDBOX", "lambda"), ("SANDBOX_FUNCTION", "sandbox"), ("AWS_ENDPOINT_URL_LAMBDA", &api.endpoint)])
        .await
}

async fn turn(function: &Function, user: &str, session: &str, message: &str) -> (u16, Value) {
    status_and_body(&function.call(turn_event(Some(user), session, json!({ "message": message }))).await)
}

/// One turn whose model runs `command`, then answers; the tool result.
async fn run_one(stack: &Stack, http: &Function, user: &str, session: &str, command: &str) -> String {
    stack.model.push([Reply::tool("execute", json!({ "command": command })), Reply::text("Done.")]);
    let before = stack.model.requests().len();
    let (status, body) = turn(http, user, session, "Run it").await;
    assert_eq!(status, 200, "{body}");
    let requests = stack.model.requests();
    assert_eq!(requests.len(), before + 2);
    tool_results(&requests[before + 1]).pop().expect("the execute result")
}

fn exec_request(user: &str, workspace: Vec<SandboxFile>) -> ExecRequest {
    ExecRequest {
        tenant: UserId::parse(user).expect("valid"),
        session: SessionId::parse("s1").expect("valid"),
        command: "ls".into(),
        timeout: Duration::from_secs(10),
        workspace,
        skills: vec![],
        ticket: None,
        resume: None,
    }
}

fn file(path: &str, bytes: Vec<u8>) -> SandboxFile {
    SandboxFile { path: path.into(), bytes: Arc::new(bytes) }
}

#[tokio::test]
async fn a_command_runs_in_the_function_with_the_users_tenant_id_and_its_file_comes_back() {
    const USER: &str = "user-lambda";
    let api = InvokeApi::start().await;
    let stack = Stack::new().await;
    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/calc.py", "content": "print(6 * 7)\n"})),
        Reply::tool("execute", json!({"command": "python3 calc.py > answer.txt && cat answer.txt && echo made"})),
        Reply::text("The answer is in /workspace/answer.txt"),
    ]);
    let http = http_with_lambda(&stack, &api).await;
    let (status, body) = turn(&http, USER, "s1", "Compute six times seven with a script").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["executions"], 1);

    let results = tool_results(&stack.model.requests()[2]);
    assert!(results[1].starts_with("42\nmade\n"), "{}", results[1]);
    assert!(results[1].contains("[Command succeeded with exit code 0]"), "{}", results[1]);
    assert!(results[1].contains("Files written: /workspace/answer.txt"), "{}", results[1]);
    let files = body["files"].as_array().expect("files");
    let answer =
        files.iter().find(|f| f["path"] == "/workspace/answer.txt").expect("answer.txt is in the turn's files");
    assert_eq!(answer["size"], 3);

    let calls = api.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].function, "sandbox");
    assert_eq!(calls[0].tenant.as_deref(), Some(USER));
    assert_eq!(calls[0].payload_tenant.as_deref(), Some(USER));
    assert_eq!(calls[0].invocation_type, "RequestResponse");
    assert_eq!(calls[0].status, 200);
    assert!(calls[0].payload_bytes > 0 && calls[0].payload_bytes < MAX_PAYLOAD_BYTES);

    // The next turn's command finds the file the first one made.
    let result = run_one(&stack, &http, USER, "s1", "cat answer.txt; ls").await;
    assert!(result.starts_with("42\nanswer.txt\ncalc.py\n"), "{result}");
    assert!(api.calls().iter().all(|call| call.tenant.as_deref() == Some(USER)));
}

#[tokio::test]
async fn two_tenants_calls_carry_their_own_tenant_ids() {
    let api = InvokeApi::start().await;
    let stack = Stack::new().await;
    let http = http_with_lambda(&stack, &api).await;
    let first = run_one(&stack, &http, "tenant-one", "s1", "echo one > mine.txt; ls").await;
    assert!(first.starts_with("mine.txt\n"), "{first}");
    // A user id with `|` (an identity provider's `auth0|...`) travels as `/`, which Lambda accepts.
    let second = run_one(&stack, &http, "auth0|tenant-two", "s1", "ls; echo two").await;
    assert!(second.starts_with("two\n"), "the other tenant's file is not there: {second}");
    let third = run_one(&stack, &http, "tenant-one", "s2", "echo again").await;
    assert!(third.starts_with("again\n"), "{third}");

    let seen: Vec<(Option<String>, Option<String>)> =
        api.calls().into_iter().map(|call| (call.tenant, call.payload_tenant)).collect();
    let pair = |header: &str, payload: &str| (Some(header.to_owned()), Some(payload.to_owned()));
    assert_eq!(
        seen,
        [
            pair("tenant-one", "tenant-one"),
            pair("auth0/tenant-two", "auth0|tenant-two"),
            pair("tenant-one", "tenant-one")
        ]
    );
}

#[tokio::test]
async fn the_tenant_id_comes_from_the_verified_identity_never_from_the_request() {
    let api = InvokeApi::start().await;
    let stack = Stack::new().await;
    let http = http_with_lambda(&stack, &api).await;
    for body in [json!({"message": "run", "tenant": "victim"}), json!({"message": "run", "user_id": "victim"})] {
        let (status, _) = status_and_body(&http.call(turn_event(Some("attacker"), "s1", body)).await);
        assert_eq!(status, 400, "the body has no say in who the user is");
    }
    assert!(api.calls().is_empty());

    stack.model.push([Reply::tool("execute", json!({"command": "echo hi"})), Reply::text("Done.")]);
    let mut event = turn_event(Some("attacker"), "s1", json!({"message": "I am tenant victim; run as victim"}));
    event["headers"]["x-amz-tenant-id"] = json!("victim");
    event["headers"]["x-tenant-id"] = json!("victim");
    let (status, body) = status_and_body(&http.call(event).await);
    assert_eq!(status, 200, "{body}");
    let calls = api.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].tenant.as_deref(), Some("attacker"));
    assert_eq!(calls[0].payload_tenant.as_deref(), Some("attacker"));
}

#[tokio::test]
async fn a_throttled_function_is_busy_and_a_broken_one_is_unavailable() {
    let api = InvokeApi::start().await;
    let stack = Stack::new().await;
    let http = http_with_lambda(&stack, &api).await;

    api.set_mode(Mode::Throttle);
    let busy = run_one(&stack, &http, "user-busy", "s1", "echo hi").await;
    assert_eq!(busy, SandboxError::Busy(String::new()).to_string());
    let calls = api.calls();
    // The SDK's standard mode retries a throttled call, at most three attempts in all.
    assert!((1..=3).contains(&calls.len()), "{calls:?}");
    assert!(calls.iter().all(|call| call.status == 429));

    let unavailable = SandboxError::Unavailable(String::new()).to_string();
    for mode in [Mode::FunctionError, Mode::Garbage] {
        api.set_mode(mode);
        let result = run_one(&stack, &http, "user-busy", "s1", "echo hi").await;
        assert_eq!(result, unavailable, "{mode:?}: the detail is logged, not shown");
    }
    api.set_mode(Mode::Run);
    let ran = run_one(&stack, &http, "user-busy", "s1", "echo hi").await;
    assert!(ran.starts_with("hi\n"), "{ran}");
}

#[tokio::test]
async fn a_workspace_over_what_a_call_carries_is_refused_without_an_invoke() {
    const USER: &str = "user-big";
    let api = InvokeApi::start().await;
    let stack = Stack::new().await;
    // Two commands make 2.4 MB of random bytes each; the workspace is then over the 4.4 MB one
    // call may carry, so the third command is refused before any invocation.
    stack.model.push([
        Reply::tool("execute", json!({"command": "head -c 2400000 /dev/urandom > a.bin"})),
        Reply::tool("execute", json!({"command": "head -c 2400000 /dev/urandom > b.bin"})),
        Reply::tool("execute", json!({"command": "ls -l"})),
        Reply::text("Done."),
    ]);
    let http = http_with_lambda(&stack, &api).await;
    let (status, body) = turn(&http, USER, "s1", "Make two big files, then list them").await;
    assert_eq!(status, 200, "{body}");
    let results = tool_results(&stack.model.requests()[3]);
    assert!(results[0].contains("Files written: /workspace/a.bin"), "{}", results[0]);
    assert!(results[1].contains("Files written: /workspace/b.bin"), "{}", results[1]);
    assert!(results[2].contains("too large (4800000 bytes in 2 files"), "{}", results[2]);
    assert!(results[2].contains(&MAX_CALL_FILE_BYTES.to_string()), "{}", results[2]);
    assert_eq!(api.calls().len(), 2, "the third command was never sent");
}

#[tokio::test]
async fn the_backend_checks_lambdas_payload_bound_before_invoking() {
    let api = InvokeApi::start().await;
    let sandbox = LambdaSandbox::new(&moto::sdk_config(&api.endpoint).await, "sandbox");
    assert_eq!(sandbox.layout().workspace, "/tmp/sandbox/workspace");

    // 4.8 MB of files is 6.4 MB of JSON: over Lambda's 6,291,456 bytes, so never sent.
    let over = exec_request("user-bound", vec![file("big.bin", vec![7; 4_800_000])]);
    match sandbox.execute(over).await {
        Err(SandboxError::TooLarge { bytes, files, max_bytes, .. }) => {
            assert!(bytes > MAX_PAYLOAD_BYTES as u64, "{bytes}");
            assert_eq!((files, max_bytes), (1, MAX_PAYLOAD_BYTES as u64));
        }
        other => panic!("not refused as too large: {other:?}"),
    }
    assert!(api.calls().is_empty());

    // Under Lambda's bound but over the handler's: the function refuses it and the model is told
    // it is too large.
    let under = exec_request("user-bound", vec![file("big.bin", vec![7; 4_500_000])]);
    match sandbox.execute(under).await {
        Err(SandboxError::TooLarge { bytes, files, max_bytes, .. }) => {
            assert_eq!((bytes, files, max_bytes), (4_500_000, 1, MAX_CALL_FILE_BYTES));
        }
        other => panic!("not refused as too large: {other:?}"),
    }
    let calls = api.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].tenant.as_deref(), Some("user-bound"));

    // The stand-in refuses what Lambda refuses, as Lambda does.
    let client = reqwest::Client::new();
    let url = format!("{}/2015-03-31/functions/sandbox/invocations", api.endpoint);
    let response = client
        .post(&url)
        .header("X-Amz-Tenant-Id", "user-bound")
        .body(vec![b' '; MAX_PAYLOAD_BYTES + 1])
        .send()
        .await
        .expect("post");
    assert_eq!(response.status(), 413);
    assert_eq!(response.headers()["x-amzn-errortype"], "RequestEntityTooLargeException");
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["Type"], "User");
    assert!(body["message"].as_str().unwrap().contains("6291456"), "{body}");
    let response = client.post(&url).body(r#"{"tenant":"x"}"#).send().await.expect("post");
    assert_eq!(response.status(), 400);
    assert_eq!(response.headers()["x-amzn-errortype"], "InvalidParameterValueException");
}

#[tokio::test]
async fn the_sandbox_function_binary_answers_wire_requests_and_refuses_bad_events() {
    // As Lambda runs the deployed image: the image's root, read-only, an unprivileged uid.
    let function = Function::start_in_image("sandbox", &local_stack::image::root(), &[]).await;

    let answer = match function.invoke(sample_event("sandbox.json")).await {
        Invocation::Response(answer) => answer,
        other => panic!("the function failed: {other:?}"),
    };
    let response: WireResponse = serde_json::from_value(answer).expect("a wire response");
    assert_eq!((response.output.as_str(), response.exit_code), ("4\n", Some(0)));
    assert!(response.written.is_empty() && response.deleted.is_empty());

    const TENANT: &str = "tenant-visible-7f3a";
    let request = WireRequest {
        tenant: TENANT.into(),
        session: "s1".into(),
        command: "tr a-z A-Z < in.txt > out.txt; rm gone.txt; echo marker-not-logged-5c1e".into(),
        timeout_ms: 10_000,
        workspace: vec![WireFile::encode("in.txt", b"hello\n"), WireFile::encode("gone.txt", b"x")],
        skills: vec![],
        ticket: None,
    };
    let answer = match function.invoke(serde_json::to_value(&request).expect("json")).await {
        Invocation::Response(answer) => answer,
        other => panic!("the function failed: {other:?}"),
    };
    let response: WireResponse = serde_json::from_value(answer).expect("a wire response");
    assert_eq!(response.output, "marker-not-logged-5c1e\n");
    assert_eq!(response.written.len(), 1);
    assert_eq!(response.written[0].path, "out.txt");
    assert_eq!(response.written[0].decode(100).expect("base64"), b"HELLO\n");
    assert_eq!(response.deleted, ["gone.txt"]);

    for bad in [
        json!({"hello": "world"}),
        json!([1, 2]),
        json!({"tenant": "../x", "session": "s", "command": "true", "timeout_ms": 1000}),
    ] {
        let answer = match function.invoke(bad).await {
            Invocation::Response(answer) => answer,
            other => panic!("a bad event is an answer, not a failure: {other:?}"),
        };
        assert_eq!(answer["error"], "invalid_request", "{answer}");
    }

    // One line per call: the tenant hashed, never the command, its output or a file's name.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let logs = function.logs();
    let calls: Vec<&String> = logs.iter().filter(|line| line.contains("sandbox call")).collect();
    assert_eq!(calls.len(), 5, "{logs:#?}");
    let hashed = hex::encode(&Sha256::digest(TENANT.as_bytes())[..6]);
    assert!(calls.iter().any(|line| line.contains(&hashed) && line.contains("\"exit_code\":0")), "{calls:#?}");
    for secret in [TENANT, "marker-not-logged", "in.txt", "out.txt", "gone.txt", "tr a-z"] {
        assert!(!logs.iter().any(|line| line.contains(secret)), "{secret} is in the logs: {logs:#?}");
    }
}

/// One command through the backend as `user`, over `workspace`.
async fn exec(sandbox: &LambdaSandbox, user: &str, command: &str, workspace: Vec<SandboxFile>) -> ExecOutcome {
    let request = ExecRequest { command: command.into(), ..exec_request(user, workspace) };
    sandbox.execute(request).await.expect("the command ran")
}

#[tokio::test]
async fn nothing_a_command_leaves_outside_its_scratch_reaches_the_next_call() {
    let api = InvokeApi::start().await;
    let sandbox = LambdaSandbox::new(&moto::sdk_config(&api.endpoint).await, "sandbox");
    let plant = "echo planted-7d1 > /tmp/x; mkdir -p /tmp/d/e && echo planted-7d1 > /tmp/d/e/f; \
                 chmod 000 /tmp/d; echo planted-7d1 > /dev/shm/y 2>/dev/null; ls /tmp";
    let first = exec(&sandbox, "user-leftovers", plant, vec![]).await;
    assert!(first.output.contains("x\n"), "the file was written: {}", first.output);
    let second = exec(&sandbox, "user-leftovers", "cat /tmp/x /tmp/d/e/f /dev/shm/y 2>&1; ls -A /tmp", vec![]).await;
    assert!(!second.output.contains("planted-7d1"), "{}", second.output);
    assert!(second.output.contains("/tmp/x: No such file or directory"), "{}", second.output);
    // The scratch and the bundles' folder stay; nothing else of the command's.
    let left: Vec<&str> = second.output.lines().filter(|line| !line.starts_with("cat:")).collect();
    assert!(left.iter().all(|name| ["sandbox", "bundles"].contains(name)), "{left:?}");
    assert_eq!(api.calls().len(), 2, "one environment served both calls");
}

#[tokio::test]
async fn a_command_cannot_reach_the_runtime_api_and_its_invocation_is_unaffected() {
    let api = InvokeApi::start().await;
    let sandbox = LambdaSandbox::new(&moto::sdk_config(&api.endpoint).await, "sandbox");
    let warm = exec(&sandbox, "user-runtime", "echo warm", vec![]).await;
    assert_eq!(warm.output, "warm\n");
    let address = api.runtime_api("user-runtime").await.expect("the tenant's environment");
    let (host, port) = (address.ip(), address.port());
    // Taking the next invocation from the Runtime API would let a command answer for later calls.
    let steal = format!(
        "(exec 3<>/dev/tcp/{host}/{port} && echo CONNECTED) 2>&1; \
         python3 -c \"import urllib.request; urllib.request.urlopen('http://{host}:{port}/2018-06-01/runtime/invocation/next', timeout=2)\" 2>&1 | tail -1; \
         echo after"
    );
    let outcome = exec(&sandbox, "user-runtime", &steal, vec![file("in.txt", b"x".to_vec())]).await;
    assert!(!outcome.output.contains("CONNECTED"), "{}", outcome.output);
    assert!(outcome.output.contains("Operation not permitted"), "{}", outcome.output);
    assert!(outcome.output.contains("PermissionError") || outcome.output.contains("[Errno 1]"), "{}", outcome.output);
    assert!(outcome.output.ends_with("after\n") && outcome.exit_code == Some(0), "{outcome:?}");
    // The environment goes on answering its own invocations.
    let next = exec(&sandbox, "user-runtime", "cat in.txt; echo next", vec![file("in.txt", b"x".to_vec())]).await;
    assert_eq!(next.output, "xnext\n");
    assert_eq!(api.calls().len(), 3);
}

#[tokio::test]
async fn a_daemon_a_command_double_forks_leaves_no_process_and_no_zombie() {
    // The function is its namespace's PID 1, as a container's entry point is: orphans come to it.
    let api = InvokeApi::start_as_init().await;
    let sandbox = LambdaSandbox::new(&moto::sdk_config(&api.endpoint).await, "sandbox");
    let daemon = "(setsid sleep 300 &); (sleep 301 > /dev/null 2>&1 &); (bash -c 'sleep 302 & exit 0'); echo started";
    for _ in 0..2 {
        let started = exec(&sandbox, "user-daemon", daemon, vec![]).await;
        assert_eq!(started.output, "started\n");
    }
    let look = "for stat in /proc/[0-9]*/stat; do cat $stat 2>/dev/null; echo; done";
    let seen = exec(&sandbox, "user-daemon", look, vec![]).await;
    let processes: Vec<&str> = seen.output.lines().filter(|line| !line.trim().is_empty()).collect();
    assert!(processes.iter().any(|line| line.starts_with("1 (sandbox)")), "the function is PID 1: {processes:#?}");
    assert!(!processes.iter().any(|line| line.contains("(sleep)")), "{processes:#?}");
    let zombies: Vec<&&str> = processes.iter().filter(|line| line.contains(") Z ")).collect();
    assert!(zombies.is_empty(), "{zombies:#?}");
}

#[tokio::test]
async fn the_functions_files_over_what_a_response_brings_back_come_back_none_of_them() {
    let function = Function::start_in_image("sandbox", &local_stack::image::root(), &[]).await;
    let request = WireRequest {
        tenant: "user-over".into(),
        session: "s1".into(),
        command: "rm keep.txt; head -c 2000000 /dev/urandom > a.bin; head -c 2000000 /dev/urandom > b.bin; \
                  head -c 1000000 /dev/urandom > c.bin; echo made"
            .into(),
        timeout_ms: 10_000,
        workspace: vec![WireFile::encode("keep.txt", b"kept\n")],
        skills: vec![],
        ticket: None,
    };
    let answer = match function.invoke(serde_json::to_value(&request).expect("json")).await {
        Invocation::Response(answer) => answer,
        other => panic!("the function failed: {other:?}"),
    };
    let response: WireResponse = serde_json::from_value(answer).expect("a wire response");
    assert_eq!(response.output, "made\n");
    assert!(response.written.is_empty() && response.deleted.is_empty(), "{response:?}");
    assert!(
        response.not_kept[0].contains("none of the command's changes were brought back: it wrote or changed 3 files of 5000000 bytes together, past the 4400000 bytes"),
        "{:?}",
        response.not_kept
    );
}
