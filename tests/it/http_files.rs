//! `GET /sessions/{id}/files/{path}` through the compiled `http-turn`: the files a turn wrote are
//! listed in its reply and downloadable by their owner only, inline or as a presigned link.

use agent_core::keys;
use agent_core::store::{SessionState, SessionStore, TurnCommit, WorkspaceFile};
use agent_core::{Message, SessionId, UserId};
use aws_store::{AwsStores, StoreSettings};
use base64::Engine;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::moto;
use local_stack::stack::{file_event, status_and_body, turn_event, Stack};
use serde_json::{json, Value};
use sha2::Digest;

const OWNER: &str = "user-a";
const PLAN: &str = "# Plan\n\n1. Leer la escritura.\n2. Redactar el borrador — con acentos: ñ, é.\n";

/// What a download answered: the status, the headers (lowercase names) and the decoded body.
struct Download {
    status: u16,
    headers: serde_json::Map<String, Value>,
    bytes: Vec<u8>,
    base64: bool,
}

impl Download {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(Value::as_str)
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or_else(|_| panic!("a JSON body: {:?}", self.bytes))
    }

    fn error_code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap_or_default().to_owned()
    }
}

async fn download(function: &Function, user: Option<&str>, session: &str, path: &str) -> Download {
    let response = function.call(file_event(user, session, path)).await;
    let status = response["statusCode"].as_u64().expect("statusCode") as u16;
    let headers = response["headers"].as_object().cloned().unwrap_or_default();
    let base64 = response["isBase64Encoded"].as_bool().unwrap_or(false);
    let body = response["body"].as_str().unwrap_or_default();
    let bytes = if base64 {
        base64::engine::general_purpose::STANDARD.decode(body).expect("a base64 body")
    } else {
        body.as_bytes().to_vec()
    };
    Download { status, headers, bytes, base64 }
}

#[tokio::test]
async fn a_file_the_turn_wrote_is_listed_and_downloadable_by_its_owner_only() {
    let stack = Stack::new().await;
    stack.upload_example_skills(OWNER).await;
    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/notes/plan.md", "content": PLAN})),
        Reply::text("El plan está en /workspace/notes/plan.md."),
    ]);
    let http = stack.http(&[]).await;

    let event = turn_event(Some(OWNER), "s1", json!({"message": "Escribe el plan"}));
    let (status, body) = status_and_body(&http.call(event).await);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["files"], json!([{"path": "/workspace/notes/plan.md", "size": PLAN.len()}]), "{body}");

    let file = download(&http, Some(OWNER), "s1", "notes/plan.md").await;
    assert_eq!(file.status, 200, "{:?}", String::from_utf8_lossy(&file.bytes));
    assert!(file.base64, "binary-safe: the body is base64-encoded");
    assert_eq!(file.bytes, PLAN.as_bytes());
    assert_eq!(file.header("content-type"), Some("text/markdown; charset=utf-8"));
    assert_eq!(file.header("content-disposition"), Some("attachment; filename=\"plan.md\""));
    assert_eq!(file.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(file.header("cache-control"), Some("private, no-store"));
    assert_eq!(file.header("content-length"), None, "API Gateway sets it");
    // The segments may be percent-encoded like any path.
    let encoded = download(&http, Some(OWNER), "s1", "notes/plan%2Emd").await;
    assert_eq!((encoded.status, encoded.bytes), (200, PLAN.as_bytes().to_vec()));

    // Another tenant, even with a session of the same id, sees nothing: 404, never 403.
    stack.model.push([Reply::text("hola")]);
    let (status, _) = status_and_body(&http.call(turn_event(Some("user-b"), "s1", json!({"message": "hola"}))).await);
    assert_eq!(status, 200);
    let stranger = download(&http, Some("user-b"), "s1", "notes/plan.md").await;
    assert_eq!((stranger.status, stranger.error_code().as_str()), (404, "not_found"));
    assert!(!String::from_utf8_lossy(&stranger.bytes).contains("Leer la escritura"));
    let stranger = download(&http, Some("user-b"), "s2", "notes/plan.md").await;
    assert_eq!((stranger.status, stranger.error_code().as_str()), (404, "not_found"));

    // Traversals are refused (400) or name nothing (404); never a file.
    for path in ["notes/..%2Fplan.md", "%2e%2e/x", "notes/%2E%2E/notes/plan.md", "notes/.", "notes%2Fplan.md"] {
        let refused = download(&http, Some(OWNER), "s1", path).await;
        assert_eq!((refused.status, refused.error_code().as_str()), (400, "bad_request"), "{path}");
    }
    for path in ["notes/%252e%252e/plan.md", "workspace/notes/plan.md", "notes\\plan.md", "notes/plan.md%20"] {
        let missing = download(&http, Some(OWNER), "s1", path).await;
        assert_eq!((missing.status, missing.error_code().as_str()), (404, "not_found"), "{path}");
    }
    for path in ["notes//plan.md", "notes/plan.md/"] {
        let unrouted = download(&http, Some(OWNER), "s1", path).await;
        assert_eq!(unrouted.status, 404, "{path}");
    }

    // A missing file, a missing session, no identity, a bad session id, another method.
    let missing = download(&http, Some(OWNER), "s1", "notes/otro.md").await;
    assert_eq!((missing.status, missing.error_code().as_str()), (404, "not_found"));
    let missing = download(&http, Some(OWNER), "no-such-session", "notes/plan.md").await;
    assert_eq!((missing.status, missing.error_code().as_str()), (404, "not_found"));
    let anonymous = download(&http, None, "s1", "notes/plan.md").await;
    assert_eq!((anonymous.status, anonymous.error_code().as_str()), (401, "unauthorized"));
    let bad_session = download(&http, Some(OWNER), "bad%20id", "notes/plan.md").await;
    assert_eq!((bad_session.status, bad_session.error_code().as_str()), (400, "bad_request"));
    let mut post = file_event(Some(OWNER), "s1", "notes/plan.md");
    post["requestContext"]["http"]["method"] = json!("POST");
    let (status, body) = status_and_body(&http.call(post).await);
    assert_eq!((status, body["error"]["code"].as_str()), (405, Some("method_not_allowed")));
}

/// Seeds `user`'s session `session` with these workspace files (path, bytes), as a committed turn
/// would leave them: the blobs under their hashes and the manifest in the session.
async fn seed_workspace(stack: &Stack, user: &str, session: &str, files: &[(&str, Vec<u8>)]) {
    let settings = StoreSettings {
        sessions_table: stack.table.clone(),
        skills_bucket: stack.bucket.clone(),
        session_ttl_days: 30,
        s3_force_path_style: true,
    };
    let stores = AwsStores::from_sdk_config(&moto::sdk_config(&stack.endpoint).await, &settings, None);
    let (user, session) = (UserId::parse(user).unwrap(), SessionId::parse(session).unwrap());
    let mut state = SessionState::default();
    for (path, bytes) in files {
        let sha256 = hex::encode(sha2::Sha256::digest(bytes));
        stack.put(&keys::workspace_blob_key(&user, &session, &sha256), bytes.clone()).await;
        state.workspace.insert((*path).to_owned(), WorkspaceFile { sha256, size: bytes.len() as u64 });
    }
    let now = time_now();
    let commit = TurnCommit {
        expected_version: 0,
        new_messages: vec![Message::user("genera los ficheros"), Message::assistant("hecho")],
        history_len: 0,
        state,
        now,
        commit_token: format!("seed-{now}"),
        idempotency: None,
        usage: None,
        skill_versions: Default::default(),
    };
    stores.sessions.commit(&user, &session, &commit).await.expect("seed the session");
}

fn time_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

#[tokio::test]
async fn files_up_to_3_mib_come_inline_and_larger_ones_as_a_presigned_link() {
    let stack = Stack::new().await;
    const MIB: usize = 1024 * 1024;
    let exact: Vec<u8> = (0..3 * MIB).map(|i| (i * 7 % 251) as u8).collect();
    let big: Vec<u8> = (0..3 * MIB + 1).map(|i| (i * 13 % 253) as u8).collect();
    seed_workspace(
        &stack,
        OWNER,
        "s1",
        &[
            ("exports/exact.bin", exact.clone()),
            ("exports/escritura final ñ.pdf", big.clone()),
            ("exports/datos.csv", b"a,b\n".repeat(MIB)),
        ],
    )
    .await;
    let http = stack.http(&[]).await;

    // At the bound: inline, binary intact.
    let inline = download(&http, Some(OWNER), "s1", "exports/exact.bin").await;
    assert_eq!(inline.status, 200);
    assert!(inline.bytes == exact, "the 3 MiB file comes back byte for byte");
    assert_eq!(inline.header("content-type"), Some("application/octet-stream"));
    assert_eq!(inline.header("content-disposition"), Some("attachment; filename=\"exact.bin\""));

    // Past the bound: 303 to a presigned link that reads the blob without credentials.
    let linked = download(&http, Some(OWNER), "s1", "exports/escritura%20final%20%C3%B1.pdf").await;
    assert_eq!(linked.status, 303, "{:?}", String::from_utf8_lossy(&linked.bytes));
    let body = linked.json();
    assert_eq!(body["path"], "/workspace/exports/escritura final ñ.pdf");
    assert_eq!(body["size"], big.len());
    assert_eq!(body["expires_in"], 300);
    let url = body["url"].as_str().expect("url");
    assert_eq!(linked.header("location"), Some(url));
    assert_eq!(linked.header("cache-control"), Some("private, no-store"));
    assert!(url.starts_with(&stack.endpoint), "the link is for the configured endpoint: {url}");
    assert!(url.contains("X-Amz-Signature=") && url.contains("X-Amz-Expires=300"), "{url}");
    // S3 serves the file as what it is and under its name, not as an octet-stream named by its
    // hash: the link carries both headers as signed `response-content-*` parameters. (moto 5.2
    // ignores these parameters when it serves the object, so they are checked in the link itself.)
    let signed = |url: &str, name: &str| {
        let url = reqwest::Url::parse(url).expect("a URL");
        let value = url.query_pairs().find(|(key, _)| key == name).map(|(_, value)| value.into_owned());
        let signed_headers = url.query_pairs().any(|(key, _)| key == "X-Amz-Signature");
        assert!(signed_headers, "{url}");
        value
    };
    assert_eq!(signed(url, "response-content-type").as_deref(), Some("application/pdf"));
    assert_eq!(
        signed(url, "response-content-disposition").as_deref(),
        Some("attachment; filename=\"escritura final _.pdf\"; filename*=UTF-8''escritura%20final%20%C3%B1.pdf")
    );
    let fetched = reqwest::get(url).await.expect("follow the link");
    assert_eq!(fetched.status(), 200);
    assert!(fetched.bytes().await.expect("the linked bytes").as_ref() == big.as_slice(), "the link reads the file");

    // An ASCII name is a plain `filename`; a text type says UTF-8.
    let linked = download(&http, Some(OWNER), "s1", "exports/datos.csv").await;
    assert_eq!(linked.status, 303);
    let url = linked.header("location").expect("a location").to_owned();
    assert_eq!(signed(&url, "response-content-type").as_deref(), Some("text/csv; charset=utf-8"));
    assert_eq!(signed(&url, "response-content-disposition").as_deref(), Some("attachment; filename=\"datos.csv\""));
    let fetched = reqwest::get(&url).await.expect("follow the link");
    assert_eq!(fetched.status(), 200);
    assert_eq!(fetched.bytes().await.expect("the linked bytes").len(), 4 * MIB);

    // The link is the owner's alone to get.
    let stranger = download(&http, Some("user-b"), "s1", "exports/escritura%20final%20%C3%B1.pdf").await;
    assert_eq!((stranger.status, stranger.error_code().as_str()), (404, "not_found"));
}

#[tokio::test]
async fn non_ascii_names_get_an_rfc_6266_attachment_header() {
    let stack = Stack::new().await;
    seed_workspace(&stack, OWNER, "s1", &[("informe café.txt", b"hola".to_vec())]).await;
    let http = stack.http(&[]).await;
    let file = download(&http, Some(OWNER), "s1", "informe%20caf%C3%A9.txt").await;
    assert_eq!((file.status, file.bytes.as_slice()), (200, b"hola".as_slice()));
    assert_eq!(file.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(
        file.header("content-disposition"),
        Some("attachment; filename=\"informe caf_.txt\"; filename*=UTF-8''informe%20caf%C3%A9.txt")
    );
}
