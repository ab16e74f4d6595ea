//! `SANDBOX=agentcore` against the code interpreter stand-in (`local_stack::agentcore`): the backend
//! through its port (files in and back, the interpreter session kept and resumed, an ended one
//! replaced without the model noticing, exit codes, output and timeouts), then the compiled
//! `http-turn`, whose two turns of one agent session share one interpreter session kept in the
//! session's meta item.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::sandbox::{
    ExecOutcome, ExecRequest, Sandbox, SandboxError, SandboxFile, SkillMount, MAX_CALL_FILE_BYTES,
};
use agent_core::{SessionId, UserId};
use aws_sdk_dynamodb::types::AttributeValue;
use local_stack::agentcore::{CodeInterpreterService, EndedError};
use local_stack::model_server::Reply;
use local_stack::moto;
use local_stack::stack::{repo_root, status_and_body, system_of, tool_results, turn_event, upload_dir, Stack};
use sandbox::AgentCoreSandbox;
use serde_json::json;

async fn backend(service: &CodeInterpreterService) -> AgentCoreSandbox {
    let sdk = moto::sdk_config(&service.endpoint).await;
    AgentCoreSandbox::from_lookup(&sdk, |_| None).expect("the agentcore backend")
}

fn file(path: &str, bytes: &[u8]) -> SandboxFile {
    SandboxFile { path: path.into(), bytes: Arc::new(bytes.to_vec()) }
}

fn request(command: &str, workspace: Vec<SandboxFile>, resume: Option<&str>) -> ExecRequest {
    ExecRequest {
        tenant: UserId::parse("tenant-a").expect("valid"),
        session: SessionId::parse("s1").expect("valid"),
        command: command.into(),
        timeout: Duration::from_secs(20),
        workspace,
        skills: vec![],
        ticket: None,
        resume: resume.map(str::to_owned),
    }
}

async fn run(sandbox: &AgentCoreSandbox, request: ExecRequest) -> ExecOutcome {
    let outcome = sandbox.execute(request).await.expect("the command runs");
    assert!(outcome.changes.not_kept.is_empty(), "{:?}", outcome.changes.not_kept);
    outcome
}

#[tokio::test]
async fn a_file_a_command_writes_comes_back_with_the_interpreter_session() {
    let service = CodeInterpreterService::start().await;
    let sandbox = backend(&service).await;
    assert_eq!(sandbox.layout().workspace, "/tmp/agent/workspace");
    let outcome =
        run(&sandbox, request("echo made > out.txt && cat in.txt && pwd", vec![file("in.txt", b"hi\n")], None)).await;
    assert_eq!(outcome.exit_code, Some(0), "{}", outcome.output);
    assert_eq!(outcome.output, "hi\n/tmp/agent/workspace\n");
    assert_eq!(outcome.changes.written, [file("out.txt", b"made\n")]);
    assert!(outcome.changes.deleted.is_empty());
    let session = outcome.session.expect("the interpreter session is returned");
    let starts = service.starts();
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0]["sessionTimeoutSeconds"], 900);
    let name = starts[0]["name"].as_str().expect("a session name");
    assert!(name.starts_with("agent-") && !name.contains("tenant-a"), "{name}");
    assert_eq!(service.tools(&session), ["writeFiles", "executeCommand", "readFiles"]);
}

#[tokio::test]
async fn a_resumed_session_sees_the_files_sent_and_nothing_left_from_before() {
    let service = CodeInterpreterService::start().await;
    let sandbox = backend(&service).await;
    let first = run(
        &sandbox,
        request("echo left > leftover.txt && echo x > /tmp/agent/skills/stray", vec![file("drop.txt", b"x")], None),
    )
    .await;
    let session = first.session.expect("a session");

    let binary = [0u8, 255, 1, 2, 0x80, b'\n'];
    let mut second = request(
        "ls -A; cat keep.txt; cat /tmp/agent/skills/pdf/SKILL.md /tmp/agent/ticket/t.txt; ls /tmp/agent/skills; \
         cp bin.dat copy.dat && rm empty.txt && mkdir -p d/e && printf z > d/e/z.txt && bash /tmp/agent/skills/pdf/s.sh \
         && python -c 'print(6 * 7)'",
        vec![file("keep.txt", b"2\n"), file("bin.dat", &binary), file("empty.txt", b"")],
        Some(&session),
    );
    second.skills = vec![SkillMount {
        name: "pdf".into(),
        files: vec![file("SKILL.md", b"# pdf\n"), file("s.sh", b"echo from the skill\n")],
        bundle: None,
    }];
    second.ticket = Some(vec![file("t.txt", b"ticket\n")]);
    let outcome = run(&sandbox, second).await;
    assert_eq!(outcome.exit_code, Some(0), "{}", outcome.output);
    assert_eq!(
        outcome.output, "bin.dat\nempty.txt\nkeep.txt\n2\n# pdf\nticket\npdf\nfrom the skill\n42\n",
        "the workspace as sent, no leftovers, the skill and the ticket"
    );
    assert_eq!(outcome.session.as_deref(), Some(session.as_str()), "the same interpreter session");
    assert_eq!(service.starts().len(), 1, "no new session was started");
    assert_eq!(outcome.changes.written, [file("copy.dat", &binary), file("d/e/z.txt", b"z")]);
    assert_eq!(outcome.changes.deleted, ["empty.txt"]);
    assert_eq!(service.tools(&session).iter().filter(|tool| *tool == "executeCommand").count(), 2);
}

#[tokio::test]
async fn an_ended_session_is_replaced_without_the_command_noticing() {
    let service = CodeInterpreterService::start().await;
    let sandbox = backend(&service).await;
    let workspace = || vec![file("a.txt", b"same\n")];
    let command = "cat a.txt; ls -A";
    let s1 = run(&sandbox, request("echo left > b.txt", workspace(), None)).await.session.expect("s1");

    // Ended by its lifetime: GetCodeInterpreterSession says so.
    service.expire(&s1);
    let outcome = run(&sandbox, request(command, workspace(), Some(&s1))).await;
    assert_eq!(outcome.output, "same\na.txt\n");
    let s2 = outcome.session.expect("s2");
    assert_ne!(s2, s1);
    assert_eq!(service.starts().len(), 2);

    // Ended between the check and the files' transfer: the call starts another and runs once.
    service.expire_after_next_get(&s2);
    let outcome = run(&sandbox, request(command, workspace(), Some(&s2))).await;
    assert_eq!(outcome.output, "same\na.txt\n");
    let s3 = outcome.session.expect("s3");
    assert!(s3 != s2 && service.starts().len() == 3);
    assert_eq!(service.tools(&s2).last().map(String::as_str), Some("writeFiles"), "nothing ran in s2");

    // The same when the service refuses with a validation error instead of a 404.
    service.set_ended_error(EndedError::Validation);
    service.expire_after_next_get(&s3);
    let s4 = run(&sandbox, request(command, workspace(), Some(&s3))).await.session.expect("s4");
    assert!(s4 != s3 && service.starts().len() == 4);

    // Too little lifetime left for the command's timeout: replaced, and the old one stopped.
    service.age(&s4, 890);
    let s5 = run(&sandbox, request(command, workspace(), Some(&s4))).await.session.expect("s5");
    assert!(s5 != s4 && service.starts().len() == 5);
    let waited = Instant::now();
    while !service.stops().contains(&s4) && waited.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(service.stops(), [s4]);

    // A kept id that is not a session id is not sent anywhere.
    let s6 = run(&sandbox, request(command, workspace(), Some("not a session\n"))).await.session.expect("s6");
    assert!(s6 != s5 && service.starts().len() == 6);
}

#[tokio::test]
async fn exit_codes_output_timeouts_and_throttling_end_as_the_other_backends_do() {
    let service = CodeInterpreterService::start().await;
    let sandbox = backend(&service).await;
    let outcome = run(&sandbox, request("echo out; echo err >&2; exit 3", vec![], None)).await;
    assert_eq!((outcome.exit_code, outcome.stopped.as_deref(), outcome.timed_out), (Some(3), None, false));
    assert_eq!(outcome.output, "out\nerr\n", "stdout and stderr interleaved as written");
    let session = outcome.session.expect("a session");

    let mut sleepy = request("echo before; sleep 30", vec![], Some(&session));
    sleepy.timeout = Duration::from_secs(2);
    let started = Instant::now();
    let outcome = run(&sandbox, sleepy).await;
    assert!(started.elapsed() < Duration::from_secs(15), "stopped at its timeout: {:?}", started.elapsed());
    assert!(outcome.timed_out && outcome.exit_code.is_none(), "{outcome:?}");
    assert_eq!(outcome.stopped.as_deref(), Some("timed out after 2 s"));
    assert_eq!(outcome.output, "before\n");

    let started = Instant::now();
    let outcome = run(&sandbox, request("sleep 300 & echo started", vec![], Some(&session))).await;
    assert_eq!((outcome.exit_code, outcome.output.as_str()), (Some(0), "started\n"));
    assert!(started.elapsed() < Duration::from_secs(10), "a background process does not hold the call");

    let outcome = run(&sandbox, request("yes 'a long line of output' | head -c 5000000", vec![], Some(&session))).await;
    assert!(outcome.omitted_bytes > 4_900_000 && outcome.output.contains("bytes of output omitted"));
    assert!(outcome.output.chars().count() < 31_000, "{}", outcome.output.chars().count());
    assert!(outcome.output.starts_with("a long line of output\n"));

    let many = "for i in $(seq 1 1100); do : > f$i.txt; done; sleep 1";
    let outcome = sandbox.execute(request(many, vec![], Some(&session))).await.expect("runs");
    let stopped = outcome.stopped.as_deref() == Some("created more than 1000 files in the workspace");
    let noted = outcome.changes.not_kept.iter().any(|line| line.contains("more than 1000 files and folders"));
    assert!(stopped || noted, "{:?} {:?}", outcome.stopped, outcome.changes.not_kept);
    assert!(outcome.changes.written.len() <= 1000);

    let outcome = run(&sandbox, request("kill -9 $$", vec![], Some(&session))).await;
    assert_eq!((outcome.exit_code, outcome.stopped.as_deref()), (None, None), "killed by a signal");

    service.throttle(1000);
    let busy = sandbox.execute(request("true", vec![], None)).await;
    service.throttle(0);
    assert!(matches!(busy, Err(SandboxError::Busy(_))), "{busy:?}");
    let tooled = service.tools(&session).len();
    let outcome = run(&sandbox, request("true", vec![], Some(&session))).await;
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(service.tools(&session).len(), tooled + 2, "the session is used again after throttling");
}

#[tokio::test]
async fn failures_are_sandbox_errors_and_leave_no_session_behind() {
    let service = CodeInterpreterService::start().await;
    let sandbox = backend(&service).await;
    let big = vec![file("big.bin", &vec![7u8; MAX_CALL_FILE_BYTES as usize + 1])];
    let refused = sandbox.execute(request("true", big, None)).await;
    assert!(matches!(refused, Err(SandboxError::TooLarge { .. })), "{refused:?}");
    assert!(service.starts().is_empty(), "nothing was sent");

    service.break_commands(1);
    let failed = sandbox.execute(request("true", vec![], None)).await;
    let Err(SandboxError::Unavailable(detail)) = failed else { panic!("{failed:?}") };
    assert!(detail.contains("python3: command not found"), "{detail}");
    let started = service.starts().len();
    assert_eq!(started, 1);
    let waited = Instant::now();
    while service.stops().is_empty() && waited.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(service.stops().len(), 1, "the session started for the failed call is stopped");
    assert_eq!(
        SandboxError::Unavailable(detail).to_string(),
        "Error: the sandbox is unavailable right now; try again later",
        "the model is not told the detail"
    );
}

#[tokio::test]
async fn turns_of_one_session_share_the_interpreter_session_kept_with_it() {
    const USER: &str = "user-agentcore";
    let stack = Stack::new().await;
    upload_dir(&stack.s3, &stack.bucket, &repo_root().join("tests/skills"), &format!("{USER}/skills/"))
        .await
        .expect("upload the test skills");
    let service = CodeInterpreterService::start().await;
    let http = stack.http(&[("SANDBOX", "agentcore"), ("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", &service.endpoint)]).await;
    let kept = |item: Option<std::collections::HashMap<String, AttributeValue>>| match item
        .expect("the session's meta item")
        .get("sandbox_session")
    {
        Some(AttributeValue::S(id)) => id.clone(),
        other => panic!("sandbox_session is {other:?}"),
    };

    stack.model.push([
        Reply::tool("execute", json!({"command": "echo made in turn one > note.txt && echo done"})),
        Reply::text("Made note.txt."),
    ]);
    let (status, body) =
        status_and_body(&http.call(turn_event(Some(USER), "s1", json!({"message": "make a note"}))).await);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["files"], json!([{"path": "/workspace/note.txt", "size": 17}]));
    let results = tool_results(&stack.model.requests()[1]);
    assert!(results[0].starts_with("done\n") && results[0].contains("exit code 0"), "{}", results[0]);
    let interpreter_session = kept(stack.session_item(USER, "s1").await);
    assert_eq!(service.starts().len(), 1);

    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "shell-tools"})),
        Reply::tool(
            "execute",
            json!({"command": "cat note.txt && bash /tmp/agent/skills/shell-tools/scripts/count.sh"}),
        ),
        Reply::text("Counted."),
    ]);
    let (status, body) = status_and_body(&http.call(turn_event(Some(USER), "s1", json!({"message": "count"}))).await);
    assert_eq!(status, 200, "{body}");
    let requests = stack.model.requests();
    let state2 = system_of(&requests[3]);
    assert!(state2.contains("/tmp/agent/skills/shell-tools"), "the prompt names the skill's folder: {state2}");
    let results = tool_results(&requests[4]);
    let counted = results.last().expect("the execute result");
    assert!(counted.starts_with("made in turn one\nnote.txt: 4 words\ntotal: 4\n"), "{counted}");
    assert!(counted.contains("Files written: /workspace/report.txt"), "{counted}");
    assert_eq!(service.starts().len(), 1, "the second turn resumed the interpreter session");
    assert_eq!(kept(stack.session_item(USER, "s1").await), interpreter_session);
    assert_eq!(service.tools(&interpreter_session).iter().filter(|tool| *tool == "executeCommand").count(), 2);
    let files: Vec<&str> =
        body["files"].as_array().expect("files").iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(files, ["/workspace/report.txt"]);
}
