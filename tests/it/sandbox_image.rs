//! The sandbox image as a skill's author meets it: through the compiled http-turn with `SANDBOX=local`
//! over the image's root filesystem, against moto and the scripted model, the commands that
//! published document skills tell the model to run: a sheet recalculated by LibreOffice, a Word
//! document made with docx-js under node and converted to PDF, a PDF page turned into a PNG, a
//! template copied out of the skill and edited. And nothing of the host is there.

use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, repo_root, status_and_body, tool_results, turn_event, upload_dir, Stack};
use serde_json::json;

/// A stack whose `user` has the skills of `tests/skills`.
async fn stack_with_test_skills(user: &str) -> Stack {
    let stack = Stack::new().await;
    upload_dir(&stack.s3, &stack.bucket, &repo_root().join("tests/skills"), &format!("{user}/skills/"))
        .await
        .expect("upload the test skills");
    stack
}

async fn http_with_sandbox(stack: &Stack) -> Function {
    let env = local_stack::image::local_sandbox_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(key, value)| (*key, value.as_str())).collect();
    stack.http(&env).await
}

fn execute(command: &str) -> Reply {
    Reply::tool("execute", json!({ "command": command, "timeout": 180 }))
}

/// `GET /sessions/{session}/files/{path}` by `user`: the decoded body of a 200.
pub(crate) async fn download(function: &Function, user: &str, session: &str, path: &str) -> Vec<u8> {
    let mut event = get_event(Some(user), session);
    let raw = format!("/sessions/{session}/files/{path}");
    event["rawPath"] = json!(raw);
    event["requestContext"]["http"]["path"] = json!(raw);
    let response = function.call(event).await;
    assert_eq!(response["statusCode"], 200, "{path}: {response}");
    let body = response["body"].as_str().unwrap_or_default();
    if response["isBase64Encoded"].as_bool().unwrap_or(false) {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(body).expect("base64 body")
    } else {
        body.as_bytes().to_vec()
    }
}

/// Runs `program args…` in the image over the files given, returning its standard output.
fn in_image(files: &[(&str, &[u8])], program: &str, args: &[&str]) -> String {
    let dir = std::env::temp_dir().join(format!("image-check-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let output = local_stack::image::run_in_image(&dir, program, args);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(output.status.success(), "{program}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::SeqCst)
}

#[tokio::test]
async fn document_skills_commands_run_in_the_image_as_on_their_authors_machine() {
    const USER: &str = "user-office";
    let stack = stack_with_test_skills(USER).await;
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "office-docs"})),
        execute(
            "python /skills/office-docs/scripts/build_sheet.py budget.xlsx && python /skills/office-docs/scripts/recalc.py budget.xlsx",
        ),
        execute("node /skills/office-docs/scripts/make_docx.js report.docx 'Informe de gastos'"),
        execute(
            "python /skills/office-docs/scripts/office/soffice.py --headless --convert-to pdf report.docx >/dev/null && \
             pdftoppm -png -r 40 -f 1 -l 1 report.pdf page && pdfinfo report.pdf | grep Pages",
        ),
        execute(
            "mkdir unpacked && cd unpacked && unzip -q ../report.docx && cd .. && \
             python /skills/office-docs/scripts/comment.py unpacked 'Revisar el total' && \
             grep -o 'Revisar el total' unpacked/word/comments.xml && rm -rf unpacked",
        ),
        execute(
            "for tool in bwrap mmdebstrap qemu-img cargo rustc psql; do command -v $tool && echo \"host tool: $tool\"; done; \
             ls /root/.cargo /usr/lib/jvm 2>&1 | head -2; echo 'edit' >> /skills/office-docs/SKILL.md; \
             python3 --version; node --version; soffice --version | cut -d' ' -f1-2; git --version; gcc --version | head -1",
        ),
        Reply::text("The documents are ready."),
    ]);
    let http = http_with_sandbox(&stack).await;
    let (status, body) = status_and_body(
        &http.call(turn_event(Some(USER), "s1", json!({"message": "Make the budget and the report"}))).await,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["executions"], 5, "{body}");
    let requests = stack.model.requests();
    let results: Vec<String> = (2..=6).map(|step| tool_results(&requests[step]).pop().expect("a result")).collect();

    // The sheet: built with openpyxl, recalculated by LibreOffice, formulas now with cached values.
    assert!(results[0].contains("wrote budget.xlsx with 2 formulas"), "{}", results[0]);
    assert!(results[0].contains(r#"{"status": "success", "total_formulas": 2, "errors": []}"#), "{}", results[0]);
    let xlsx = download(&http, USER, "s1", "budget.xlsx").await;
    let cached = in_image(
        &[("budget.xlsx", &xlsx)],
        "python3",
        &["-c", "from openpyxl import load_workbook; ws = load_workbook('budget.xlsx', data_only=True)['Budget']; print(ws['B5'].value, round(ws['B6'].value, 2))"],
    );
    assert_eq!(cached, "2220.5 740.17");
    let formulas = in_image(
        &[("budget.xlsx", &xlsx)],
        "python3",
        &["-c", "from openpyxl import load_workbook; print(load_workbook('budget.xlsx')['Budget']['B5'].value)"],
    );
    assert_eq!(formulas, "=SUM(B2:B4)", "the formulas stay formulas");

    // docx-js under node: a real Heading 1.
    assert!(results[1].contains("wrote report.docx"), "{}", results[1]);
    let docx = download(&http, USER, "s1", "report.docx").await;
    let paragraphs = in_image(
        &[("report.docx", &docx)],
        "python3",
        &["-c", "from docx import Document; print('|'.join(f'{p.style.name if p.style is not None else chr(45)}:{p.text}' for p in Document('report.docx').paragraphs))"],
    );
    assert!(paragraphs.starts_with("Heading 1:Informe de gastos|"), "{paragraphs}");
    assert!(paragraphs.contains("Made with docx-js under node v20"), "{paragraphs}");

    // The PDF LibreOffice made, and its first page as a PNG.
    assert!(results[2].contains("Pages:") && results[2].contains("exit code 0"), "{}", results[2]);
    let pdf = download(&http, USER, "s1", "report.pdf").await;
    assert!(pdf.starts_with(b"%PDF-"), "a PDF");
    let text = in_image(&[("report.pdf", &pdf)], "pdftotext", &["report.pdf", "-"]);
    assert!(text.contains("Informe de gastos"), "{text}");
    let png = download(&http, USER, "s1", "page-1.png").await;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");

    // A template copied out of the skill is an ordinary writable file.
    assert!(results[3].contains("added a comment") && results[3].contains("Revisar el total"), "{}", results[3]);
    assert!(results[3].contains("exit code 0"), "{}", results[3]);

    // Nothing of the host: its tools and folders are not there; the skill's folder stays read-only.
    let tools = &results[4];
    assert!(!tools.contains("host tool:"), "{tools}");
    assert!(tools.contains("cannot access '/root/.cargo'"), "{tools}");
    assert!(tools.contains("cannot access '/usr/lib/jvm': No such file or directory"), "{tools}");
    assert!(
        tools.contains("SKILL.md: Read-only file system") || tools.contains("SKILL.md: Permission denied"),
        "{tools}"
    );
    for version in ["Python 3.13", "v20.", "LibreOffice 25", "git version", "gcc"] {
        assert!(tools.contains(version), "{version}: {tools}");
    }
    assert!(bwrap_exists_on_the_host(), "the test means something only where the host has bwrap");

    let (_, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    let kept: Vec<&str> =
        session["workspace"].as_array().unwrap().iter().filter_map(|file| file["path"].as_str()).collect();
    assert_eq!(
        kept,
        ["/workspace/budget.xlsx", "/workspace/page-1.png", "/workspace/report.docx", "/workspace/report.pdf"],
        "LibreOffice's profile and caches stay out of the workspace"
    );
}

fn bwrap_exists_on_the_host() -> bool {
    std::path::Path::new("/usr/bin/bwrap").exists()
}

/// The same commands through `SANDBOX=lambda`: the compiled http-turn invokes the compiled `sandbox`
/// function, which runs as Lambda runs the deployed image (its root read-only, an unprivileged uid
/// with no account, process isolation over `/tmp/sandbox`).
#[tokio::test]
async fn document_skills_commands_run_in_the_deployed_image_through_the_lambda_backend() {
    const USER: &str = "user-office-lambda";
    let stack = stack_with_test_skills(USER).await;
    let api = local_stack::lambda_invoke::InvokeApi::start().await;
    let http = stack
        .http(&[("SANDBOX", "lambda"), ("SANDBOX_FUNCTION", "sandbox"), ("AWS_ENDPOINT_URL_LAMBDA", &api.endpoint)])
        .await;
    let skill = "/tmp/sandbox/skills/office-docs/scripts";
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "office-docs"})),
        execute(&format!("python {skill}/build_sheet.py budget.xlsx && python {skill}/recalc.py budget.xlsx")),
        execute(&format!(
            "node {skill}/make_docx.js report.docx 'Informe' && python {skill}/office/soffice.py --headless \
             --convert-to pdf report.docx >/dev/null && pdftoppm -png -r 40 -f 1 -l 1 report.pdf page && ls"
        )),
        execute("id -un; command -v bwrap cargo || echo 'no host tools'; python3 --version"),
        Reply::text("Done."),
    ]);
    let (status, body) = status_and_body(
        &http.call(turn_event(Some(USER), "s1", json!({"message": "Make the budget and the report"}))).await,
    );
    assert_eq!(status, 200, "{body}");
    let requests = stack.model.requests();
    let results: Vec<String> = (2..=4).map(|step| tool_results(&requests[step]).pop().expect("a result")).collect();
    assert!(results[0].contains(r#"{"status": "success", "total_formulas": 2, "errors": []}"#), "{}", results[0]);
    assert!(results[1].contains("page-1.png") && results[1].contains("report.pdf"), "{}", results[1]);
    assert!(results[2].starts_with("sandbox\nno host tools\nPython 3.13"), "{}", results[2]);
    let xlsx = download(&http, USER, "s1", "budget.xlsx").await;
    let cached = in_image(
        &[("budget.xlsx", &xlsx)],
        "python3",
        &["-c", "from openpyxl import load_workbook; print(load_workbook('budget.xlsx', data_only=True)['Budget']['B5'].value)"],
    );
    assert_eq!(cached, "2220.5");
    assert!(api.calls().iter().all(|call| call.tenant.as_deref() == Some(USER)), "{:?}", api.calls());
}

/// The demo's Word skill turns Markdown headings into Word's own heading styles, in the image.
#[test]
fn the_demo_word_skill_writes_real_word_headings() {
    let script = std::fs::read(repo_root().join("examples/demo/skills/documentos/minuta-word/scripts/md_a_docx.py"))
        .expect("the demo skill's script");
    let draft = "# Escritura de compraventa\n\n**Vendedora:** Ana García\n\n## Cláusulas\n- Precio: 250.000 €\n### Primera\nTexto.\n";
    let dir = std::env::temp_dir().join(format!("demo-word-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("md_a_docx.py"), script).unwrap();
    std::fs::write(dir.join("draft.md"), draft).unwrap();
    let made = local_stack::image::run_in_image(&dir, "python3", &["md_a_docx.py", "draft.md", "out.docx"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let read = local_stack::image::run_in_image(
        &dir,
        "python3",
        &[
            "-c",
            "from docx import Document; d = Document('out.docx'); \
             print('|'.join(f'{p.style.name}:{p.text}:{any(r.bold for r in p.runs)}' for p in d.paragraphs))",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));
    assert_eq!(
        String::from_utf8_lossy(&read.stdout).trim(),
        "Heading 1:Escritura de compraventa:False|Normal:Vendedora: Ana García:True|Heading 2:Cláusulas:False|\
         List Bullet:Precio: 250.000 €:False|Heading 3:Primera:False|Normal:Texto.:False"
    );
}

/// A folder served over HTTP on loopback by Python's own server, as a pip `--find-links` page.
struct WheelServer {
    child: std::process::Child,
    url: String,
}

impl WheelServer {
    fn start(dir: &std::path::Path) -> WheelServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = std::process::Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1", &port.to_string()])
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 -m http.server");
        let url = format!("http://127.0.0.1:{port}/");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        WheelServer { child, url }
    }
}

impl Drop for WheelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A folder of wheels holding the test package, served as a pip find-links page on loopback.
fn wheel_page() -> (std::path::PathBuf, WheelServer) {
    let wheels = std::env::temp_dir().join(format!("wheels-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&wheels).unwrap();
    local_stack::image::write_test_wheel(&wheels);
    let server = WheelServer::start(&wheels);
    (wheels, server)
}

/// A turn of `user` that loads `fechas` and runs its script, which imports the package only its
/// bundle provides: the command prints the deadline.
async fn plazo_runs_from_the_bundle(stack: &Stack, user: &str) {
    let http = http_with_sandbox(stack).await;
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "fechas"})),
        execute("python /skills/fechas/scripts/plazo.py"),
        Reply::text("Done."),
    ]);
    let (status, body) = status_and_body(&http.call(turn_event(Some(user), "s1", json!({"message": "plazo"}))).await);
    assert_eq!(status, 200, "{body}");
    let result = tool_results(&stack.model.requests()[2]).pop().unwrap();
    assert!(result.starts_with("plazo de 10 dias habiles\n"), "{result}");
}

/// A skill uploaded straight to the bucket with a `requirements.txt` naming a package the image
/// lacks: skills-index, running in the image as deployed, resolves it with the image's pip (from a
/// wheel page on loopback; nothing else is reachable) into the skill's bundle, and the next turn's
/// command imports it with the network still closed. The bundle's own event changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn skills_index_in_the_image_bundles_a_skill_uploaded_straight_to_the_bucket() {
    const USER: &str = "user-bundle-index";
    let stack = Stack::new().await;
    let (wheels, server) = wheel_page();
    let skill = format!("{USER}/skills/fechas/");
    stack
        .put_many(vec![
            (format!("{skill}SKILL.md"), b"---\nname: fechas\ndescription: Plazos.\n---\n# Fechas\n".to_vec()),
            (format!("{skill}scripts/requirements.txt"), b"notarial-dates==1.0\nopenpyxl\n".to_vec()),
            (format!("{skill}scripts/plazo.py"), b"import notarial_dates\nprint(notarial_dates.plazo(10))\n".to_vec()),
        ])
        .await;
    let env = stack.env(&[("SKILLS_BUNDLES", "pip"), ("PIP_NO_INDEX", "1"), ("PIP_FIND_LINKS", &server.url)]);
    let index = Function::start_in_image("skills-index", &local_stack::image::root(), &env).await;
    let answer = index.call(stack.bridge_event(&format!("{skill}scripts/requirements.txt"), true)).await;
    assert_eq!(answer["tenants"], 1, "{answer}");
    let listed =
        stack.s3.list_objects_v2().bucket(&stack.bucket).prefix(format!("{skill}.bundle/")).send().await.unwrap();
    let bundles: Vec<String> = listed.contents().iter().filter_map(|object| object.key().map(str::to_owned)).collect();
    assert_eq!(bundles.len(), 1, "one bundle and no marker (openpyxl is the image's): {bundles:?}");
    let bundle = stack.get(&bundles[0]).await.expect("the bundle");
    let mut archive = tar::Archive::new(bundle.as_slice());
    let names: Vec<String> =
        archive.entries().unwrap().map(|e| e.unwrap().path().unwrap().display().to_string()).collect();
    assert_eq!(names, ["bundle.json", "requirements.txt", "wheels/notarial_dates-1.0-py3-none-any.whl"]);
    // EventBridge then reports the bundle itself: the index takes it, nothing is made again.
    let again = index.call(stack.bridge_event(&bundles[0], true)).await;
    assert_eq!(again["tenants"], 1, "{again}");
    let listed =
        stack.s3.list_objects_v2().bucket(&stack.bucket).prefix(format!("{skill}.bundle/")).send().await.unwrap();
    assert_eq!(listed.contents().len(), 1);
    drop(server);

    plazo_runs_from_the_bundle(&stack, USER).await;
    let _ = std::fs::remove_dir_all(&wheels);
}

/// A published version with a `requirements.txt` naming a package the image lacks: skills-index in
/// the image, told of the version's declaration, makes its bundle beside the version's files (in
/// the version's `.bundle/`), the index takes the version's new file list, and the next turn's
/// command imports the package from the bundle the sandbox read under the tenant's skill-versions/.
#[tokio::test(flavor = "multi_thread")]
async fn skills_index_in_the_image_bundles_a_published_version_beside_its_files() {
    use agent_core::skills::versions::{publish, SkillFileBytes};

    const USER: &str = "user-bundle-version";
    let stack = Stack::new().await;
    let (wheels, server) = wheel_page();
    let objects = aws_store::S3ObjectStore::new(stack.s3.clone(), &stack.bucket);
    let user = agent_core::UserId::parse(USER).unwrap();
    let skill = agent_core::ids::SkillPath::parse("fechas").unwrap();
    let file = |path: &str, text: &str| SkillFileBytes { path: path.to_owned(), bytes: text.as_bytes().to_vec() };
    let files = vec![
        file("SKILL.md", "---\nname: fechas\ndescription: Plazos.\n---\n# Fechas\n"),
        file("requirements.txt", "notarial-dates==1.0\n"),
        file("scripts/plazo.py", "import notarial_dates\nprint(notarial_dates.plazo(10))\n"),
    ];
    let published = publish(&objects, &user, &skill, files, "ana", 1, None, None).await.expect("published");
    let prefix = agent_core::keys::skill_version_files_prefix(&user, &skill, &published.record.sha256);

    let env = stack.env(&[("SKILLS_BUNDLES", "pip"), ("PIP_NO_INDEX", "1"), ("PIP_FIND_LINKS", &server.url)]);
    let index = Function::start_in_image("skills-index", &local_stack::image::root(), &env).await;
    let answer = index.call(stack.bridge_event(&format!("{prefix}requirements.txt"), true)).await;
    assert_eq!(answer["tenants"], 1, "{answer}");
    let listed =
        stack.s3.list_objects_v2().bucket(&stack.bucket).prefix(format!("{prefix}.bundle/")).send().await.unwrap();
    let bundles: Vec<String> = listed.contents().iter().filter_map(|object| object.key().map(str::to_owned)).collect();
    assert_eq!(bundles.len(), 1, "one bundle, in the version's own files: {bundles:?}");
    assert!(bundles[0].ends_with(".tar"), "{bundles:?}");
    drop(server);

    plazo_runs_from_the_bundle(&stack, USER).await;
    let _ = std::fs::remove_dir_all(&wheels);
}
