//! `/memories` through the compiled `http-turn` against moto and the scripted model: a memory
//! written in one session is read in another session of its user and never reached by another
//! user; writes past a bound are refused naming it; a turn that does not look in `/memories` makes
//! no request under it; `GET /memories` and `DELETE /memories[/{path}]` for the owner only; and the
//! template routes them and lets the turn functions delete memories and nothing else.

use local_stack::faults::FaultProxy;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{sample_event, status_and_body, system_of, tool_results, turn_event, Stack};
use serde_json::{json, Value};

const OWNER: &str = "user-mem-a";
const STRANGER: &str = "user-mem-b";
const PREFS: &str = "Firma como «Ana R.»; prefiere escrituras en castellano. CLAVE-MEMORIA-7731\n";

async fn turn(function: &Function, user: &str, session: &str, message: &str) -> (u16, Value) {
    status_and_body(&function.call(turn_event(Some(user), session, json!({ "message": message }))).await)
}

/// An HTTP API event for `{method} {raw_path}` by `user` (no authorizer when `None`).
fn memories_event(user: Option<&str>, method: &str, raw_path: &str) -> Value {
    let mut event = sample_event("http-get-session.json");
    event["routeKey"] = json!(format!("{method} {raw_path}"));
    event["requestContext"]["routeKey"] = event["routeKey"].clone();
    event["rawPath"] = json!(raw_path);
    event["requestContext"]["http"]["method"] = json!(method);
    event["requestContext"]["http"]["path"] = json!(raw_path);
    event["pathParameters"] = json!({});
    match user {
        Some(user) => event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = json!(user),
        None => {
            event["requestContext"].as_object_mut().unwrap().remove("authorizer");
        }
    }
    event
}

async fn call(function: &Function, user: Option<&str>, method: &str, raw_path: &str) -> (u16, Value) {
    status_and_body(&function.call(memories_event(user, method, raw_path)).await)
}

/// The last request's tool results.
fn results(stack: &Stack) -> Vec<String> {
    tool_results(stack.model.requests().last().expect("a model request"))
}

#[tokio::test]
async fn a_memory_written_in_one_session_is_read_in_another_and_no_other_user_reaches_it() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/memories/prefs.md", "content": PREFS})),
        Reply::tool("read_file", json!({"file_path": "/memories/prefs.md"})),
        Reply::text("Lo recordaré."),
    ]);
    let (status, body) = turn(&http, OWNER, "s1", "Recuerda cómo firmo").await;
    assert_eq!(status, 200, "{body}");
    assert!(results(&stack)[1].contains("CLAVE-MEMORIA-7731"), "the turn reads its own staged write");
    assert_eq!(body["files"], json!([]), "memories are not workspace files: {body}");
    let system = system_of(&stack.model.requests()[0]);
    assert!(system.contains("## Memory\n/memories is your long-term memory of this user"), "{system}");
    let stored = stack.get(&format!("{OWNER}/memories/prefs.md")).await.expect("saved with the turn");
    assert_eq!(stored, PREFS.as_bytes());

    // Another session of the same user, in another process.
    let http = stack.http(&[]).await;
    stack.model.push([
        Reply::tool("ls", json!({"path": "/memories"})),
        Reply::tool("read_file", json!({"file_path": "/memories/prefs.md"})),
        Reply::text("Firmas como Ana R."),
    ]);
    let (status, body) = turn(&http, OWNER, "s2", "¿Cómo firmo?").await;
    assert_eq!(status, 200, "{body}");
    let seen = results(&stack);
    assert_eq!(seen[0], "['/memories/prefs.md']");
    assert!(seen[1].contains("CLAVE-MEMORIA-7731"), "{seen:?}");

    // Another user: nothing by any path, and nothing of theirs to delete.
    let probes = [
        ("ls", json!({"path": "/memories"})),
        ("read_file", json!({"file_path": "/memories/prefs.md"})),
        ("read_file", json!({"file_path": format!("/memories/../../{OWNER}/memories/prefs.md")})),
        ("read_file", json!({"file_path": format!("/memories/%2e%2e/{OWNER}/memories/prefs.md")})),
        ("read_file", json!({"file_path": format!("/{OWNER}/memories/prefs.md")})),
        ("grep", json!({"pattern": "CLAVE-MEMORIA", "path": "/"})),
        ("glob", json!({"pattern": "**", "path": "/"})),
        ("delete", json!({"file_path": "/memories/prefs.md"})),
    ];
    stack.model.push([Reply::Tools(probes.iter().map(|(n, a)| (n.to_string(), a.clone())).collect())]);
    stack.model.push([Reply::text("No sé nada.")]);
    let (status, body) = turn(&http, STRANGER, "s1", "¿Cómo firma Ana?").await;
    assert_eq!(status, 200, "{body}");
    let seen = results(&stack);
    assert_eq!(seen.len(), probes.len());
    for (result, (tool, args)) in seen.iter().zip(&probes) {
        assert!(!result.contains("CLAVE-MEMORIA-7731"), "{tool} {args}: {result}");
    }
    assert_eq!(seen[0], "No files found");
    assert_eq!(seen[7], "Error: File '/memories/prefs.md' not found");
    let (status, body) = call(&http, Some(STRANGER), "GET", "/memories").await;
    assert_eq!((status, body), (200, json!({"memories": []})));
    let (status, _) = call(&http, Some(STRANGER), "DELETE", "/memories/prefs.md").await;
    assert_eq!(status, 404);
    let (status, body) = call(&http, Some(STRANGER), "DELETE", "/memories").await;
    assert_eq!((status, body), (200, json!({"deleted": []})));
    assert_eq!(stack.get(&format!("{OWNER}/memories/prefs.md")).await.as_deref(), Some(PREFS.as_bytes()));
}

#[tokio::test]
async fn writes_past_a_bound_are_refused_with_the_bound_named_and_nothing_is_stored() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let long_path = format!("/memories/{}.md", "p".repeat(254));
    stack.model.push([
        Reply::Tools(vec![
            ("write_file".into(), json!({"file_path": "/memories/grande.md", "content": "m".repeat(64 * 1024 + 1)})),
            ("write_file".into(), json!({"file_path": long_path, "content": "x"})),
            ("write_file".into(), json!({"file_path": "/memories/../workspace/x.md", "content": "x"})),
            ("write_file".into(), json!({"file_path": "/memories", "content": "x"})),
        ]),
        Reply::text("No cabe."),
    ]);
    let (status, body) = turn(&http, OWNER, "s1", "Guarda esto").await;
    assert_eq!(status, 200, "{body}");
    let seen = results(&stack);
    assert!(
        seen[0].starts_with("Error: Content too large: 65537 bytes (a /memories file holds at most 65536 bytes"),
        "{}",
        seen[0]
    );
    assert!(seen[1].contains("a /memories path is at most 256 bytes after /memories/"), "{}", seen[1]);
    assert!(seen[2].starts_with("Error: File '/memories/../workspace/x.md' not found"), "{}", seen[2]);
    assert!(seen[3].starts_with("Error: Is a directory: /memories"), "{}", seen[3]);
    assert!(stack.object_keys(&format!("{OWNER}/memories/")).await.is_empty());

    // A user with 100 memories cannot add one more, and with 1 MiB of them cannot grow it.
    let many: Vec<(String, Vec<u8>)> =
        (0..100).map(|i| (format!("{OWNER}/memories/notas/n{i:03}.md"), format!("nota {i}\n").into_bytes())).collect();
    stack.put_many(many).await;
    let big: Vec<(String, Vec<u8>)> =
        (0..16).map(|i| (format!("{STRANGER}/memories/big{i:02}.md"), vec![b'b'; 64 * 1024])).collect();
    stack.put_many(big).await;
    stack.model.push([
        Reply::Tools(vec![
            ("write_file".into(), json!({"file_path": "/memories/otra.md", "content": "x"})),
            ("write_file".into(), json!({"file_path": "/memories/notas/n000.md", "content": "reescrita\n"})),
        ]),
        Reply::text("Lleno."),
    ]);
    let (status, body) = turn(&http, OWNER, "s2", "Guarda otra").await;
    assert_eq!(status, 200, "{body}");
    let seen = results(&stack);
    assert!(seen[0].starts_with("Error: /memories already holds 100 files, its limit"), "{}", seen[0]);
    assert_eq!(seen[1], "Updated file /memories/notas/n000.md", "a full memory still takes a rewrite");
    assert_eq!(stack.get(&format!("{OWNER}/memories/notas/n000.md")).await.unwrap(), b"reescrita\n");
    assert!(stack.get(&format!("{OWNER}/memories/otra.md")).await.is_none());

    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/memories/mas.md", "content": "z"})),
        Reply::text("Lleno."),
    ]);
    let (status, body) = turn(&http, STRANGER, "s1", "Guarda más").await;
    assert_eq!(status, 200, "{body}");
    let over = &results(&stack)[0];
    assert!(over.starts_with("Error: /memories would hold 1048577 bytes, over its limit of 1 MiB"), "{over}");
    assert!(stack.get(&format!("{STRANGER}/memories/mas.md")).await.is_none());
}

#[tokio::test]
async fn a_turn_that_does_not_look_in_memories_makes_no_request_under_them() {
    let stack = Stack::new().await;
    stack.put(&format!("{OWNER}/memories/prefs.md"), PREFS).await;
    let proxy = FaultProxy::start(&stack.endpoint).await;
    let http = stack.http(&[("AWS_ENDPOINT_URL", proxy.endpoint.as_str())]).await;
    let under_memories = || -> Vec<String> {
        proxy.log().into_iter().map(|seen| seen.path).filter(|path| path.contains("memories")).collect()
    };

    stack.model.push([
        Reply::tool("ls", json!({"path": "/"})),
        Reply::tool("write_file", json!({"file_path": "/workspace/a.md", "content": "hola"})),
        Reply::tool("grep", json!({"pattern": "hola", "path": "/workspace"})),
        Reply::text("hecho"),
    ]);
    let (status, body) = turn(&http, OWNER, "s1", "Trabaja en el borrador").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(results(&stack)[0], "['/memories/', '/workspace/']");
    assert!(!proxy.log().is_empty(), "the function's requests go through the proxy");
    assert_eq!(under_memories(), Vec::<String>::new());

    // Looking lists the prefix once and reads a file when it is read; a write is one PUT at the end.
    stack.model.push([
        Reply::tool("ls", json!({"path": "/memories"})),
        Reply::tool("read_file", json!({"file_path": "/memories/prefs.md"})),
        Reply::tool("glob", json!({"pattern": "*.md", "path": "/memories"})),
        Reply::tool("write_file", json!({"file_path": "/memories/nuevo.md", "content": "nuevo\n"})),
        Reply::text("hecho"),
    ]);
    let (status, body) = turn(&http, OWNER, "s1", "Mira tus notas").await;
    assert_eq!(status, 200, "{body}");
    let methods: Vec<(String, bool)> = proxy
        .log()
        .into_iter()
        .filter(|seen| seen.path.contains("memories"))
        .map(|seen| (seen.method, seen.path.contains("list-type=2")))
        .collect();
    let expected = [("GET".to_owned(), true), ("GET".to_owned(), false), ("PUT".to_owned(), false)];
    assert_eq!(methods, expected, "{:?}", under_memories());
}

#[tokio::test]
async fn the_owner_lists_and_deletes_their_memories() {
    let stack = Stack::new().await;
    for (path, text) in [("prefs.md", "a"), ("clientes/garcia.md", "bb"), ("clientes/ruiz.md", "ccc"), ("otro.md", "d")]
    {
        stack.put(&format!("{OWNER}/memories/{path}"), text).await;
    }
    stack.put(&format!("{STRANGER}/memories/prefs.md"), "ajeno").await;
    let http = stack.http(&[]).await;

    let (status, body) = call(&http, Some(OWNER), "GET", "/memories").await;
    assert_eq!(status, 200, "{body}");
    let listed: Vec<(&str, u64)> = body["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| (file["path"].as_str().unwrap(), file["size"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        listed,
        [
            ("/memories/clientes/garcia.md", 2),
            ("/memories/clientes/ruiz.md", 3),
            ("/memories/otro.md", 1),
            ("/memories/prefs.md", 1)
        ]
    );
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    for file in body["memories"].as_array().unwrap() {
        let written = file["last_modified"].as_i64().expect("last_modified in unix seconds");
        assert!((now - 600..=now + 600).contains(&written), "{file}");
    }

    // One file, a folder, then everything; each answers what it deleted.
    let (status, body) = call(&http, Some(OWNER), "DELETE", "/memories/clientes/garcia.md").await;
    assert_eq!((status, body), (200, json!({"deleted": ["/memories/clientes/garcia.md"]})));
    let (status, body) = call(&http, Some(OWNER), "DELETE", "/memories/clientes/garcia.md").await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("not_found")));
    let (status, body) = call(&http, Some(OWNER), "DELETE", "/memories/clientes").await;
    assert_eq!((status, body), (200, json!({"deleted": ["/memories/clientes/ruiz.md"]})));
    let (status, body) = call(&http, Some(OWNER), "DELETE", "/memories/otro%2Emd").await;
    assert_eq!((status, body), (200, json!({"deleted": ["/memories/otro.md"]})));

    // Bad paths are 400, other methods 405, no identity 401, unknown paths 404.
    for path in ["/memories/%2e%2e", "/memories/a%2Fb", "/memories/a%00b", "/memories/%252e%252e"] {
        let (status, body) = call(&http, Some(OWNER), "DELETE", path).await;
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some("bad_request")), "{path}");
    }
    for (method, path) in [("GET", "/memories/prefs.md"), ("POST", "/memories"), ("PUT", "/memories/prefs.md")] {
        let (status, body) = call(&http, Some(OWNER), method, path).await;
        assert_eq!((status, body["error"]["code"].as_str()), (405, Some("method_not_allowed")), "{method} {path}");
    }
    let (status, body) = call(&http, None, "GET", "/memories").await;
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("unauthorized")));
    let (status, _) = call(&http, Some(OWNER), "DELETE", "/memories//prefs.md").await;
    assert_eq!(status, 404);

    let (status, body) = call(&http, Some(OWNER), "DELETE", "/memories").await;
    assert_eq!((status, body), (200, json!({"deleted": ["/memories/prefs.md"]})));
    let (status, body) = call(&http, Some(OWNER), "GET", "/memories").await;
    assert_eq!((status, body), (200, json!({"memories": []})));
    assert_eq!(stack.get(&format!("{STRANGER}/memories/prefs.md")).await.as_deref(), Some(b"ajeno".as_slice()));
}

#[test]
fn the_api_routes_the_memories_and_turn_functions_may_delete_memories_only() {
    use crate::template::{iam_matches, resources, scalar, Rendered};
    let stack = Rendered::new(&[]);
    let http = stack.resource("HttpTurnFunction").expect("http-turn");
    let routes: Vec<(String, String)> = http["Events"]
        .as_object()
        .expect("Events")
        .values()
        .map(|event| (scalar(&event["Properties"]["Method"]), scalar(&event["Properties"]["Path"])))
        .collect();
    for route in [("GET", "/memories"), ("DELETE", "/memories"), ("DELETE", "/memories/{proxy+}")] {
        assert!(routes.contains(&(route.0.to_owned(), route.1.to_owned())), "{route:?}: {routes:?}");
    }
    for function in ["HttpTurnFunction", "StreamTurnFunction", "QueueTurnFunction"] {
        let deletable: Vec<String> = stack
            .function_statements(function)
            .iter()
            .filter(|statement| statement["Action"].to_string().contains("s3:DeleteObject"))
            .flat_map(resources)
            .collect();
        // Memories, and uploads a turn attached (moved beside the workspace's files); http-turn
        // also skills' versions and their staged zips (DELETE /skills/...): nothing else.
        let expected = if function == "HttpTurnFunction" { 4 } else { 2 };
        assert_eq!(deletable.len(), expected, "{function}: {deletable:?}");
        let memories = deletable.iter().find(|grant| grant.ends_with("/*/memories/*")).expect("memories");
        let bucket = memories.strip_suffix("/*/memories/*").unwrap_or_else(|| panic!("{function}: {memories}"));
        assert!(iam_matches(memories, &format!("{bucket}/u1/memories/prefs.md")), "{function}: {memories}");
        let uploads = deletable.iter().find(|grant| grant.ends_with("/*/uploads/*")).expect("uploads");
        assert!(iam_matches(uploads, &format!("{bucket}/u1/uploads/s/{}", "a".repeat(64))), "{function}: {uploads}");
        if function == "HttpTurnFunction" {
            let staged = format!("u1/skill-uploads/{}", "a".repeat(64));
            for key in ["u1/skill-versions/pdf/@v/00000001.json", staged.as_str()] {
                assert!(deletable.iter().any(|grant| iam_matches(grant, &format!("{bucket}/{key}"))), "{key}");
            }
        }
        for grant in &deletable {
            for key in ["u1/skills/a/SKILL.md", "u1/workspaces/s/blobs/0", "u1/catalog/index.json", "u1/memories"] {
                assert!(!iam_matches(grant, &format!("{bucket}/{key}")), "{function} may not delete {key}");
            }
        }
    }
}
