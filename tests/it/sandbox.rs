//! Skills that run their own scripts: `execute` through the compiled functions with `SANDBOX=local`
//! (bubblewrap, the same handler code as the `sandbox` function), against moto and the scripted
//! model. Real PDF, spreadsheet and Word files are made by the skills' scripts, kept in the session
//! byte for byte and downloaded; hostile commands end as clear tool results.

use local_stack::identity::IdentityProvider;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{
    get_event, repo_root, sample_event, status_and_body, system_of, tool_names, tool_results, turn_event, upload_dir,
    Stack,
};
use serde_json::{json, Value};

/// The environment that gives a function the local sandbox over the sandbox image.
fn sandbox_env() -> Vec<(&'static str, String)> {
    local_stack::image::local_sandbox_env()
}

async fn http_with_sandbox(stack: &Stack, extra: &[(&str, &str)]) -> Function {
    let env = sandbox_env();
    let mut all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.extend_from_slice(extra);
    stack.http(&all).await
}

async fn upload_test_skills(stack: &Stack, user: &str) {
    upload_dir(&stack.s3, &stack.bucket, &repo_root().join("tests/skills"), &format!("{user}/skills/"))
        .await
        .expect("upload the test skills");
}

async fn turn(function: &Function, user: &str, session: &str, message: &str) -> (u16, Value) {
    status_and_body(&function.call(turn_event(Some(user), session, json!({ "message": message }))).await)
}

fn execute(command: &str) -> (String, Value) {
    ("execute".to_owned(), json!({ "command": command }))
}

/// `GET /sessions/{session}/files/{path}` by `user`: the status, headers and decoded body.
async fn download(function: &Function, user: &str, session: &str, path: &str) -> (u16, Value, Vec<u8>) {
    let mut event = get_event(Some(user), session);
    let raw = format!("/sessions/{session}/files/{path}");
    event["rawPath"] = json!(raw);
    event["requestContext"]["http"]["path"] = json!(raw);
    let response = function.call(event).await;
    let status = response["statusCode"].as_u64().expect("statusCode") as u16;
    let body = response["body"].as_str().unwrap_or_default();
    let bytes = if response["isBase64Encoded"].as_bool().unwrap_or(false) {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(body).expect("base64 body")
    } else {
        body.as_bytes().to_vec()
    };
    (status, response["headers"].clone(), bytes)
}

/// Runs Python in the sandbox image on a file a skill made, to read it back with the same packages.
fn python_check(script: &str, file: &[u8], suffix: &str) -> String {
    let dir = std::env::temp_dir().join(format!("sandbox-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("file{suffix}")), file).unwrap();
    let name = format!("file{suffix}");
    let output = local_stack::image::run_in_image(&dir, "python3", &["-c", script, &name]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[tokio::test]
async fn a_skill_fills_a_pdf_form_with_its_own_script_and_the_user_downloads_it() {
    const USER: &str = "user-pdf";
    let stack = Stack::new().await;
    upload_test_skills(&stack, USER).await;
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "pdf-form"})),
        Reply::tool(
            "execute",
            json!({"command": "python /skills/pdf-form/scripts/read_form.py /skills/pdf-form/assets/form.pdf"}),
        ),
        Reply::tool(
            "write_file",
            json!({"file_path": "/workspace/values.json", "content": "{\"buyer_name\": \"Ana García\", \"price\": \"250000\"}"}),
        ),
        Reply::tool(
            "execute",
            json!({"command": "python /skills/pdf-form/scripts/fill_form.py assets/form.pdf values.json filled.pdf && python /skills/pdf-form/scripts/read_form.py filled.pdf", "timeout": 60}),
        ),
        Reply::tool("read_file", json!({"file_path": "/workspace/filled.pdf"})),
        Reply::tool("ls", json!({"path": "/workspace"})),
        Reply::text("The form is filled: /workspace/filled.pdf"),
    ]);
    let http = http_with_sandbox(&stack, &[]).await;
    let (status, body) = turn(&http, USER, "s1", "Fill the purchase form for Ana García, 250000").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["executions"], 2);

    let requests = stack.model.requests();
    assert_eq!(requests.len(), 7);
    assert!(tool_names(&requests[0]).contains(&"execute".to_owned()), "offered in state 1 with a sandbox");
    let state2 = system_of(&requests[1]);
    assert!(state2.contains("<skill-files>") && state2.contains("/skills/pdf-form/scripts/"), "{state2}");
    let results = tool_results(&requests[6]);
    assert_eq!(results[1].lines().next().unwrap(), r#"{"buyer_name": "", "price": ""}"#, "{}", results[1]);
    assert!(results[1].contains("[Command succeeded with exit code 0]"), "{}", results[1]);
    assert!(results[3].contains(r#"{"buyer_name": "Ana García", "price": "250000"}"#), "{}", results[3]);
    assert!(results[3].contains("Files written: /workspace/filled.pdf ("), "{}", results[3]);
    // The PDF the script filled is shown to the model as a document.
    assert!(results[4].starts_with("Showing the PDF document /workspace/filled.pdf ("), "{}", results[4]);
    let shown = requests[6].to_string();
    assert!(shown.contains("application/pdf"), "the filled PDF is in the next request");
    assert!(results[5].contains("/workspace/filled.pdf"), "{}", results[5]);

    let files = body["files"].as_array().expect("files");
    let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/workspace/filled.pdf", "/workspace/values.json"]);
    let (status, headers, pdf) = download(&http, USER, "s1", "filled.pdf").await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/pdf");
    assert!(pdf.starts_with(b"%PDF"));
    assert_eq!(pdf.len() as u64, files[0]["size"].as_u64().unwrap());
    let fields = python_check(
        "import sys, json; from pypdf import PdfReader; print(json.dumps(PdfReader(sys.argv[1]).get_form_text_fields(), ensure_ascii=False, sort_keys=True))",
        &pdf,
        ".pdf",
    );
    assert_eq!(fields, r#"{"buyer_name": "Ana García", "price": "250000"}"#);
    // Another tenant cannot download it.
    let (status, _, _) = download(&http, "user-other", "s1", "filled.pdf").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn scripts_build_a_spreadsheet_and_a_word_document_that_open_as_such() {
    const USER: &str = "user-office";
    let stack = Stack::new().await;
    upload_test_skills(&stack, USER).await;
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "xlsx-builder"})),
        Reply::tool(
            "execute",
            json!({"command": "python /skills/xlsx-builder/scripts/build_sheet.py gastos.xlsx notaria=600.5 registro=120"}),
        ),
        Reply::tool("load_skill", json!({"skill_path": "docx-writer"})),
        Reply::tool(
            "execute",
            json!({"command": "mkdir -p out && python /skills/docx-writer/scripts/make_docx.py out/minuta.docx 'Minuta' 'Primera cláusula.' 'Segunda cláusula.'"}),
        ),
        Reply::text("Both files are ready."),
    ]);
    let http = http_with_sandbox(&stack, &[]).await;
    let (status, body) = turn(&http, USER, "s1", "Make the expenses sheet and the draft").await;
    assert_eq!(status, 200, "{body}");
    let results = tool_results(&stack.model.requests()[4]);
    assert!(results[1].contains("wrote 2 items to gastos.xlsx"), "{}", results[1]);
    assert!(results[3].contains("wrote out/minuta.docx"), "{}", results[3]);

    let (status, headers, xlsx) = download(&http, USER, "s1", "gastos.xlsx").await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet");
    let cells = python_check(
        "import sys; from openpyxl import load_workbook; ws = load_workbook(sys.argv[1])['Expenses']; print([[c.value for c in row] for row in ws.iter_rows()])",
        &xlsx,
        ".xlsx",
    );
    assert_eq!(cells, "[['Item', 'Amount'], ['notaria', 600.5], ['registro', 120], ['Total', '=SUM(B2:B3)']]");
    let (status, _, docx) = download(&http, USER, "s1", "out/minuta.docx").await;
    assert_eq!(status, 200);
    let text = python_check(
        "import sys; from docx import Document; print('|'.join(p.text for p in Document(sys.argv[1]).paragraphs))",
        &docx,
        ".docx",
    );
    assert_eq!(text, "Minuta|Primera cláusula.|Segunda cláusula.");
}

#[tokio::test]
async fn failures_timeouts_huge_output_and_too_many_files_are_clear_tool_results() {
    const USER: &str = "user-hostile";
    let stack = Stack::new().await;
    upload_test_skills(&stack, USER).await;
    stack.model.push([
        Reply::Tools(vec![
            ("write_file".into(), json!({"file_path": "/workspace/a.txt", "content": "uno dos tres\n"})),
            ("load_skill".into(), json!({"skill_path": "shell-tools"})),
        ]),
        Reply::Tools(vec![
            execute("bash /skills/shell-tools/scripts/count.sh"),
            execute("echo to stderr >&2; exit 3"),
            ("execute".into(), json!({"command": "sleep 30", "timeout": 2})),
            execute("yes 'a long line of output' | head -c 5000000"),
            execute("for i in $(seq 1 300); do echo $i > f$i.txt; done; echo made"),
            execute("touch /skills/shell-tools/new.txt"),
        ]),
        Reply::text("Done."),
    ]);
    let http = http_with_sandbox(&stack, &[]).await;
    let started = std::time::Instant::now();
    let (status, body) = turn(&http, USER, "s1", "Count the words, then try a few things").await;
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() < std::time::Duration::from_secs(25), "the timeout stopped the sleep");
    let results = tool_results(&stack.model.requests()[2]);
    assert!(results[2].contains("a.txt: 3 words") && results[2].contains("total: 3"), "{}", results[2]);
    assert!(results[2].contains("Files written: /workspace/report.txt"), "{}", results[2]);
    assert!(
        results[3].contains("to stderr") && results[3].contains("[Command failed with exit code 3]"),
        "{}",
        results[3]
    );
    assert!(results[4].contains("timed out after 2 s"), "{}", results[4]);
    // The sandbox cut 5 MB of output to about 30,000 characters; that is still over what the
    // conversation keeps of one result, so the whole of it went to a workspace file.
    let huge = &results[5];
    let size: usize = huge
        .strip_prefix("[This result is ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("a saved result: {}", &huge[..200.min(huge.len())]));
    assert!(size < 31_000, "cut to about 30,000 characters: {size}");
    assert!(huge.contains("saved to /workspace/.results/"), "{}", &huge[..300.min(huge.len())]);
    assert!(
        results[6].contains("made") && results[6].contains("none of the command's changes were kept"),
        "{}",
        results[6]
    );
    assert!(results[7].contains("Read-only file system") || results[7].contains("Permission denied"), "{}", results[7]);
    assert!(results[7].contains("exit code 1"), "{}", results[7]);
    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    let kept: Vec<&str> =
        session["workspace"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    // The saved result is a workspace file of the turn's; none of the 300 files is.
    assert_eq!(
        kept,
        ["/workspace/.results/call_2_3.txt", "/workspace/a.txt", "/workspace/report.txt"],
        "the 300 files were refused whole"
    );
}

#[tokio::test]
async fn commands_have_no_network_no_credentials_and_no_other_tenants_files() {
    let stack = Stack::new().await;
    upload_test_skills(&stack, "tenant-a").await;
    upload_test_skills(&stack, "tenant-b").await;
    let http = http_with_sandbox(&stack, &[]).await;
    stack.model.push([
        Reply::tool("execute", json!({"command": "echo topsecret-of-a > secret-a.txt && ls"})),
        Reply::text("Saved."),
    ]);
    let (status, _) = turn(&http, "tenant-a", "sa", "keep a secret").await;
    assert_eq!(status, 200);

    let moto_port = stack.endpoint.rsplit(':').next().unwrap().trim_end_matches('/').to_owned();
    let network = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {moto_port}), 2); print('CONN' + 'ECTED')\""
    );
    stack.model.push([
        Reply::Tools(vec![
            execute(&network),
            execute("(exec 3<>/dev/tcp/1.1.1.1/80) && echo CONNECTED"),
            execute("env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; ls -a ~ /root 2>&1"),
            execute(
                "grep -rs --exclude-dir=usr --exclude-dir=proc --exclude-dir=sys topsecret-of-a / 2>/dev/null; \
                 find / -path /proc -prune -o -name 'secret-a*' -print 2>/dev/null; echo searched",
            ),
            execute("ls /skills/pdf-form/../../ 2>&1; ls /workspace"),
        ]),
        Reply::text("Checked."),
    ]);
    let (status, _) = turn(&http, "tenant-b", "sb", "look around").await;
    assert_eq!(status, 200);
    let results = tool_results(stack.model.requests().last().unwrap());
    assert!(!results[0].contains("CONNECTED") && results[0].contains("exit code 1"), "{}", results[0]);
    assert!(!results[1].contains("CONNECTED"), "{}", results[1]);
    for secret in ["sk-test-secret", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "LLM_API_KEY", "SESSIONS_TABLE"] {
        assert!(!results[2].contains(secret), "{secret} leaked into the command's view: {}", results[2]);
    }
    assert_eq!(results[3].lines().next().unwrap(), "searched", "{}", results[3]);
    assert!(!results[4].contains("secret-a"), "{}", results[4]);
}

#[tokio::test]
async fn a_forced_skill_with_bash_python_runs_only_python() {
    const USER: &str = "user-forced-bash";
    let stack = Stack::new().await;
    upload_test_skills(&stack, USER).await;
    stack.model.push([
        Reply::Tools(vec![
            execute("python /skills/py-only/scripts/hello.py"),
            execute("ls /"),
            execute("python -c 'print(1)'; rm -rf /workspace"),
        ]),
        Reply::text("Ran it."),
    ]);
    let http = http_with_sandbox(&stack, &[]).await;
    let (status, body) = turn(&http, USER, "s1", "/py-only go").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["refused_tool_calls"], 2);
    let requests = stack.model.requests();
    assert_eq!(tool_names(&requests[0]), ["abort", "execute", "read_file", "todoread", "todowrite"]);
    let results = tool_results(&requests[1]);
    assert!(results[0].contains("hello from python"), "{}", results[0]);
    assert!(
        results[1].contains("does not allow this command") && results[1].contains("`python ...`"),
        "{}",
        results[1]
    );
    assert!(results[2].contains("is refused"), "{}", results[2]);
    assert_eq!(body["files"], json!([{"path": "/workspace/hello.txt", "size": 18}]));
}

#[tokio::test]
async fn without_a_sandbox_execute_is_not_offered() {
    const USER: &str = "user-no-sandbox";
    let stack = Stack::new().await;
    upload_test_skills(&stack, USER).await;
    stack.model.push([Reply::tool("execute", json!({"command": "echo hi"})), Reply::text("No.")]);
    let http = stack.http(&[]).await;
    let (status, body) = turn(&http, USER, "s1", "/py-only go").await;
    assert_eq!(status, 200, "{body}");
    let requests = stack.model.requests();
    assert!(!tool_names(&requests[0]).contains(&"execute".to_owned()));
    assert_eq!(body["refused_tool_calls"], 1);
    assert!(!system_of(&requests[0]).contains("<skill-files>"));
}

#[tokio::test]
async fn a_retried_turn_replays_its_reply_and_runs_nothing_again() {
    const USER: &str = "user-retry";
    let stack = Stack::new().await;
    upload_test_skills(&stack, USER).await;
    stack.model.push([Reply::tool("execute", json!({"command": "echo run >> runs.txt"})), Reply::text("Once.")]);
    let http = http_with_sandbox(&stack, &[]).await;
    let keyed = || {
        let mut event = turn_event(Some(USER), "s1", json!({"message": "append a line"}));
        event["headers"]["idempotency-key"] = json!("retry-1");
        event
    };
    let (status, first) = status_and_body(&http.call(keyed()).await);
    assert_eq!(status, 200, "{first}");
    let (status, second) = status_and_body(&http.call(keyed()).await);
    assert_eq!(status, 200, "{second}");
    assert_eq!(first, second);
    assert_eq!(stack.model.requests().len(), 2, "the retry made no model call and ran no command");
    let (_, _, runs) = download(&http, USER, "s1", "runs.txt").await;
    assert_eq!(runs, b"run\n");
}

#[tokio::test]
async fn the_stream_sends_file_written_as_files_appear() {
    const USER: &str = "user-stream-files";
    let stack = Stack::new().await;
    upload_test_skills(&stack, USER).await;
    let identity = IdentityProvider::start().await;
    let mut env: Vec<(&str, String)> = sandbox_env();
    env.extend(identity.env().into_iter().map(|(k, v)| (k, v.to_owned())));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let function = Function::start("stream-turn", &stack.env(&env)).await;
    stack.model.push([
        Reply::tool("execute", json!({"command": "printf 'x,y\\n1,2\\n' > table.csv && echo ok"})),
        Reply::text("Made table.csv."),
    ]);
    let mut event = sample_event("stream-turn.json");
    event["rawPath"] = json!("/sessions/s1/turns");
    event["requestContext"]["http"]["path"] = json!("/sessions/s1/turns");
    event["body"] = Value::String(json!({"message": "make a csv"}).to_string());
    event["headers"]["authorization"] = json!(format!("Bearer {}", identity.token(USER)));
    let mut response = function.invoke_streaming(event, std::time::Duration::from_secs(60)).await;
    assert_eq!(response.status().await, 200);
    let mut names = Vec::new();
    let mut written = None;
    let mut completed = None;
    while let Some(event) = response.next_event().await {
        if event.name == "file.written" {
            written = Some(event.data.clone());
        }
        if event.name == "turn.completed" {
            completed = Some(event.data.clone());
        }
        names.push(event.name);
    }
    let position = |name: &str| names.iter().position(|n| n == name).unwrap_or_else(|| panic!("{name} in {names:?}"));
    assert!(position("tool.result") < position("file.written"), "{names:?}");
    assert!(position("file.written") < position("turn.completed"), "{names:?}");
    assert_eq!(written.unwrap(), json!({"path": "/workspace/table.csv", "size": 8}));
    assert_eq!(completed.unwrap()["files"], json!([{"path": "/workspace/table.csv", "size": 8}]));
}
