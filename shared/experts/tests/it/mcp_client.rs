//! The expert client against real MCP servers on loopback: the official Python SDK's server
//! (`shared/local-stack/expert_server.py`, needs `pip install mcp`) and, for what only a scripted server can
//! show (headers on the wire, session expiry, protocol violations), a small axum fake.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_ports::{Object, ObjectMeta, ObjectStore, StoreError, UserId};
use async_trait::async_trait;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use experts::{
    experts_key, load_experts, EnvSecretResolver, Expert, McpClient, McpError, PromptRole, SecretError, SecretRef,
    SecretResolver, SecretScope,
};
use local_stack::experts::{dead_url, ExpertOptions, ExpertServer};
use local_store::MemoryObjectStore;
use serde_json::{json, Value};

use crate::expert;

const TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// Against the Python SDK's server

#[tokio::test(flavor = "multi_thread")]
async fn prompts_and_tools_over_sse_with_pagination() {
    let server = ExpertServer::start_with(&ExpertOptions::default().page_size(2));
    let client = McpClient::connect(&expert(&server, "contracts"), TIMEOUT).await.unwrap();
    // The SDK's server serves 2026-07-28 as well as the handshake revisions: the client prefers it.
    assert_eq!(client.protocol_version(), "2026-07-28");
    assert!(client.is_stateless());
    assert_eq!(client.instructions(), Some("A test expert for contracts and arithmetic."));

    // Seven prompts in pages of two: four requests following nextCursor.
    let prompts = client.list_prompts().await.unwrap();
    let names: Vec<_> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["draft_contract", "review_clause", "filler_1", "filler_2", "filler_3", "filler_4", "filler_5"]);
    let draft = &prompts[0];
    assert_eq!(draft.description.as_deref(), Some("Draft a contract between two parties."));
    let arguments: Vec<_> = draft.arguments.iter().map(|a| (a.name.as_str(), a.required)).collect();
    assert_eq!(arguments, [("party_a", true), ("party_b", true)]);

    let arguments = BTreeMap::from([("party_a".to_owned(), "Ana".to_owned()), ("party_b".to_owned(), "Bo".to_owned())]);
    let messages = client.get_prompt("draft_contract", &arguments).await.unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].role, PromptRole::User);
    assert_eq!(messages[0].text, "Draft a sale contract between Ana (seller) and Bo (buyer).");
    assert_eq!(messages[1].role, PromptRole::Assistant);
    assert!(messages[1].text.contains("Ana") && messages[1].text.contains("Bo"));

    // A prompt that does not exist is a JSON-RPC error, not a transport failure.
    let missing = client.get_prompt("no_such_prompt", &BTreeMap::new()).await.unwrap_err();
    assert!(matches!(missing, McpError::Rpc { .. }), "{missing:?}");

    let tools = client.list_tools().await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["add", "fail", "slow", "picture"]);
    assert_eq!(tools[0].description.as_deref(), Some("Add two integers."));
    assert_eq!(tools[0].input_schema["required"], json!(["a", "b"]));

    let sum = client.call_tool("add", json!({"a": 2, "b": 3})).await.unwrap();
    assert!(!sum.is_error);
    assert_eq!(sum.text, "5");

    let failed = client.call_tool("fail", json!({})).await.unwrap();
    assert!(failed.is_error);
    assert!(failed.text.contains("this tool always fails"), "{}", failed.text);

    let picture = client.call_tool("picture", Value::Null).await.unwrap();
    assert_eq!(picture.text, "a red dot\n[image content omitted: image/png]");

    let bad_arguments = client.call_tool("add", json!("{not json")).await.unwrap();
    assert!(bad_arguments.is_error && bad_arguments.text.contains("JSON object"));

    client.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn json_and_stateless_modes() {
    let modes = [
        ExpertOptions::default().json(),
        ExpertOptions::default().stateless(),
        ExpertOptions::default().json().stateless(),
        ExpertOptions::default().revision_2025_06_18(),
        ExpertOptions::default().revision_2025_06_18().json().stateless(),
    ];
    for mode in modes {
        let server = ExpertServer::start_with(&mode);
        let client = McpClient::connect(&expert(&server, "calc"), TIMEOUT).await.unwrap();
        let tools = client.list_tools().await.unwrap();
        assert_eq!(tools.len(), 4, "{mode:?}");
        let sum = client.call_tool("add", json!({"a": 20, "b": 22})).await.unwrap();
        assert_eq!(sum.text, "42", "{mode:?}");
        let prompts = client.list_prompts().await.unwrap();
        assert_eq!(prompts.len(), 7, "{mode:?}");
        client.close().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_tool_times_out_and_the_session_survives() {
    let server = ExpertServer::start();
    let client = McpClient::connect(&expert(&server, "calc"), Duration::from_millis(800)).await.unwrap();
    let started = Instant::now();
    let error = client.call_tool("slow", json!({"seconds": 5})).await.unwrap_err();
    assert!(matches!(error, McpError::Timeout(_)), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    let sum = client.call_tool("add", json!({"a": 1, "b": 1})).await.unwrap();
    assert_eq!(sum.text, "2");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_server_fails_fast() {
    let expert = Expert::new("gone", &dead_url()).unwrap();
    let started = Instant::now();
    let error = McpClient::connect(&expert, TIMEOUT).await.err().expect("connecting to nothing must fail");
    assert!(matches!(error, McpError::Transport(_)), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_server_gets_a_new_session() {
    let mut server = ExpertServer::start();
    let port = server.port;
    let client = McpClient::connect(&expert(&server, "calc"), TIMEOUT).await.unwrap();
    assert_eq!(client.list_tools().await.unwrap().len(), 4);

    // The new process knows nothing of the old session id and answers 404: the client re-initialises.
    server.stop();
    let _restarted = ExpertServer::start_with(&ExpertOptions::default().port(port));
    let sum = client.call_tool("add", json!({"a": 3, "b": 4})).await.unwrap();
    assert_eq!(sum.text, "7");
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// Configuration, secrets and the tenant's file

/// The in-memory store holding one object.
fn store_with(key: &str, bytes: &[u8]) -> MemoryObjectStore {
    let store = MemoryObjectStore::new();
    store.insert(key, bytes);
    store
}

/// A store whose every read fails like an unreachable backend.
struct BrokenStore;

#[async_trait]
impl ObjectStore for BrokenStore {
    async fn list(&self, _prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        Err(StoreError::Backend("unreachable".into()))
    }

    async fn get(&self, _key: &str) -> Result<Option<Object>, StoreError> {
        Err(StoreError::Backend("unreachable".into()))
    }

    async fn put(&self, _key: &str, _bytes: Vec<u8>) -> Result<(), StoreError> {
        Err(StoreError::Backend("unreachable".into()))
    }
}

/// Env references through [`EnvSecretResolver`]; Secrets Manager from a map, confined to the tenant's
/// own `tenants/{user}/` names as a production resolver must be.
struct FakeResolver {
    env: EnvSecretResolver,
    secrets: BTreeMap<String, String>,
}

#[async_trait]
impl SecretResolver for FakeResolver {
    async fn resolve(&self, reference: &SecretRef, scope: SecretScope<'_>) -> Result<String, SecretError> {
        match reference {
            SecretRef::SecretsManager { secret_id, json_key } => {
                if let SecretScope::Tenant(user) = scope {
                    if !secret_id.starts_with(&format!("tenants/{user}/")) {
                        return Err(SecretError::Forbidden(reference.to_string()));
                    }
                }
                let secret = self.secrets.get(secret_id).ok_or_else(|| SecretError::NotFound(reference.to_string()))?;
                match json_key {
                    Some(key) => experts::select_json_key(reference, secret, key),
                    None => Ok(secret.clone()),
                }
            }
            other => self.env.resolve(other, scope).await,
        }
    }
}

fn header<'a>(expert: &'a Expert, name: &str) -> Option<&'a str> {
    expert.headers().iter().find(|(n, _)| n.as_str() == name).and_then(|(_, v)| v.to_str().ok())
}

#[tokio::test(flavor = "multi_thread")]
async fn loads_merges_and_resolves_the_experts_of_a_tenant() {
    let server = ExpertServer::start_with(&ExpertOptions::default().require_header("x-api-key=s3cret"));
    let user = UserId::parse("u1").unwrap();
    let deployment = json!({"mcpServers": {
        "calc": {"url": server.url, "description": "Arithmetic", "headers": {"X-Api-Key": {"env": "EXPERT_KEY"}}},
        "legal": {"url": "https://legal.example/mcp", "description": "Deployment legal"},
        "retired": {"url": "https://retired.example/mcp"},
        "no secret": {"url": "https://x.example/mcp"},
        "unset": {"url": "https://x.example/mcp", "headers": {"Authorization": {"env": "NOT_SET"}}}
    }})
    .to_string();
    let tenant = json!({"mcpServers": {
        "legal": {"url": "https://tenant-legal.example/mcp", "headers": {"Authorization": "Bearer plain"}},
        "retired": null,
        "mine": {"url": "https://mine.example/mcp",
                 "headers": {"Authorization": {"secretsmanager": "tenants/u1/mine", "json_key": "token"}}},
        "theirs": {"url": "https://theirs.example/mcp",
                   "headers": {"Authorization": {"secretsmanager": "tenants/u2/theirs"}}},
        "sneaky": {"url": "https://sneaky.example/mcp", "headers": {"X-Leak": {"env": "EXPERT_KEY"}}},
        "local": {"url": "http://127.0.0.1:9001/2018-06-01/runtime/invocation/next"}
    }})
    .to_string();
    let store = store_with(&experts_key(&user), tenant.as_bytes());
    let resolver = FakeResolver {
        env: EnvSecretResolver::from_vars([("EXPERT_KEY", "s3cret")]),
        secrets: BTreeMap::from([
            ("tenants/u1/mine".to_owned(), r#"{"token": "Bearer from-sm"}"#.to_owned()),
            ("tenants/u2/theirs".to_owned(), "Bearer not-yours".to_owned()),
        ]),
    };

    let experts = load_experts(Some(&deployment), &store, &user, &resolver).await;
    let names: Vec<_> = experts.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["calc", "legal", "mine"]);
    assert_eq!(header(&experts[0], "x-api-key"), Some("s3cret"));
    assert_eq!(experts[1].url.as_str(), "https://tenant-legal.example/mcp");
    assert_eq!(experts[1].description, None, "a tenant entry replaces the deployment's as a whole");
    assert_eq!(header(&experts[1], "authorization"), Some("Bearer plain"));
    assert_eq!(header(&experts[2], "authorization"), Some("Bearer from-sm"));

    // The resolved header is what lets the client in; without it the server refuses.
    let client = McpClient::connect(&experts[0], TIMEOUT).await.unwrap();
    assert_eq!(client.call_tool("add", json!({"a": 1, "b": 2})).await.unwrap().text, "3");
    client.close().await;
    assert!(McpClient::connect(&expert(&server, "calc"), TIMEOUT).await.is_err());
}

#[tokio::test]
async fn a_missing_corrupt_or_unreadable_tenant_file_leaves_the_deployment_experts() {
    let user = UserId::parse("u1").unwrap();
    let resolver = EnvSecretResolver::from_vars(Vec::<(String, String)>::new());
    let deployment = r#"{"mcpServers": {"legal": {"url": "https://legal.example/mcp"}}}"#;
    let names = |experts: Vec<Expert>| experts.into_iter().map(|e| e.name).collect::<Vec<_>>();

    let empty = MemoryObjectStore::new();
    assert_eq!(names(load_experts(Some(deployment), &empty, &user, &resolver).await), ["legal"]);
    let corrupt = store_with(&experts_key(&user), b"{not json");
    assert_eq!(names(load_experts(Some(deployment), &corrupt, &user, &resolver).await), ["legal"]);
    let broken = BrokenStore;
    assert_eq!(names(load_experts(Some(deployment), &broken, &user, &resolver).await), ["legal"]);

    // A bad deployment document only costs the deployment's experts.
    let tenant = store_with(&experts_key(&user), br#"{"mcpServers": {"own": {"url": "https://own.example"}}}"#);
    assert_eq!(names(load_experts(Some("[1, 2"), &tenant, &user, &resolver).await), ["own"]);
    assert!(load_experts(None, &empty, &user, &resolver).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// A scripted server, for what the Python one cannot show

/// One request as the fake saw it.
#[derive(Debug, Clone)]
struct Seen {
    http: Method,
    rpc: Option<String>,
    session: Option<String>,
    version: Option<String>,
    /// The version an `initialize` asked for.
    asked: Option<String>,
}

#[derive(Default)]
struct FakeState {
    seen: Vec<Seen>,
    /// The version `initialize` answers with.
    version: String,
    sessions: u32,
    live: Option<String>,
    /// Forget the session after the next `tools/list`, as a server that expired it would.
    expire_after_list: bool,
    /// Answer 404 to every request with a session, so re-initialising never helps.
    always_expired: bool,
    /// Keep answering `prompts/list` with the same cursor.
    repeat_cursor: bool,
}

type Fake = Arc<Mutex<FakeState>>;

async fn start_fake(configure: impl FnOnce(&mut FakeState)) -> (String, Fake) {
    let mut state = FakeState { version: "2025-11-25".into(), ..FakeState::default() };
    configure(&mut state);
    let fake: Fake = Arc::new(Mutex::new(state));
    let app = Router::new().route("/mcp", any(fake_mcp)).with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, fake)
}

fn sse(events: &[Value]) -> Response {
    let body: String = events.iter().map(|event| format!("event: message\ndata: {event}\n\n")).collect();
    ([("content-type", "text/event-stream")], body).into_response()
}

fn json_reply(value: Value) -> Response {
    ([("content-type", "application/json")], value.to_string()).into_response()
}

async fn fake_mcp(State(fake): State<Fake>, method: Method, headers: HeaderMap, body: Bytes) -> Response {
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let mut state = fake.lock().unwrap();
    state.seen.push(Seen {
        http: method.clone(),
        rpc: message["method"].as_str().map(str::to_owned),
        session: text("mcp-session-id"),
        version: text("mcp-protocol-version"),
        asked: message["params"]["protocolVersion"].as_str().map(str::to_owned),
    });
    match method {
        Method::DELETE => return StatusCode::OK.into_response(),
        Method::POST => {}
        // No standalone stream: the spec lets a server refuse the GET.
        _ => return StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
    let id = message["id"].clone();
    if message["method"] == "initialize" {
        state.sessions += 1;
        let session = format!("s-{}", state.sessions);
        state.live = Some(session.clone());
        let result = json!({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": state.version,
            "capabilities": {"tools": {}, "prompts": {}},
            "serverInfo": {"name": "fake", "version": "0"}
        }});
        let mut response = json_reply(result);
        response.headers_mut().insert("mcp-session-id", session.parse().unwrap());
        return response;
    }
    let session = text("mcp-session-id");
    if state.always_expired || session.is_none() || session != state.live {
        return StatusCode::NOT_FOUND.into_response();
    }
    // Notifications, and the client's answers to our requests, get no body.
    if id.is_null() || message.get("method").is_none() {
        return StatusCode::ACCEPTED.into_response();
    }
    match message["method"].as_str().unwrap_or_default() {
        "tools/list" => {
            if state.expire_after_list {
                state.expire_after_list = false;
                state.live = None;
            }
            // Server chatter before the response: a log notification and a ping request.
            sse(&[
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}}),
                json!({"jsonrpc": "2.0", "id": "server-ping", "method": "ping"}),
                json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
                    {"name": "echo", "description": "Echoes.", "inputSchema": {"type": "object"}}
                ]}}),
            ])
        }
        "prompts/list" if state.repeat_cursor => json_reply(json!({"jsonrpc": "2.0", "id": id, "result": {
            "prompts": [{"name": "p"}], "nextCursor": "again"
        }})),
        other => json_reply(json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32601, "message": format!("no method {other}")
        }})),
    }
}

fn seen(fake: &Fake) -> Vec<Seen> {
    fake.lock().unwrap().seen.clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn sends_session_and_version_headers_ignores_chatter_and_deletes_on_close() {
    let (url, fake) = start_fake(|state| state.version = "2025-06-18".into()).await;
    let client = McpClient::connect(&Expert::new("fake", &url).unwrap(), TIMEOUT).await.unwrap();
    assert_eq!(client.protocol_version(), "2025-06-18", "an older supported version is accepted");
    let tools = client.list_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "echo");
    let error = client.call_tool("echo", json!({})).await.unwrap_err();
    assert!(matches!(error, McpError::Rpc { code: -32601, .. }), "{error:?}");
    client.close().await;

    let seen = seen(&fake);
    let posts: Vec<_> = seen.iter().filter(|s| s.http == Method::POST).collect();
    // The 2026 probe first, which a pre-2026 server refuses (this one with 404, as for a request
    // without its session), then the handshake as before.
    assert_eq!(posts[0].rpc.as_deref(), Some("server/discover"));
    assert_eq!((posts[0].version.as_deref(), posts[0].session.as_deref()), (Some("2026-07-28"), None));
    assert_eq!(posts[1].rpc.as_deref(), Some("initialize"));
    assert_eq!(posts[1].session, None);
    assert_eq!(posts[2].rpc.as_deref(), Some("notifications/initialized"));
    for later in &seen[2..] {
        assert_eq!(later.session.as_deref(), Some("s-1"), "{later:?}");
        assert_eq!(later.version.as_deref(), Some("2025-06-18"), "{later:?}");
    }
    assert!(posts.iter().any(|s| s.rpc.as_deref() == Some("tools/list")));
    assert!(posts.iter().any(|s| s.rpc.as_deref() == Some("tools/call")));
    assert!(seen.iter().any(|s| s.http == Method::DELETE && s.session.as_deref() == Some("s-1")), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_session_is_reinitialised_once() {
    let (url, fake) = start_fake(|state| state.expire_after_list = true).await;
    let client = McpClient::connect(&Expert::new("fake", &url).unwrap(), TIMEOUT).await.unwrap();
    client.list_tools().await.unwrap();
    // The session is gone now: the next request gets 404, then a new handshake, then the retry.
    assert_eq!(client.list_tools().await.unwrap().len(), 1);
    let seen = seen(&fake);
    let initializes = seen.iter().filter(|s| s.rpc.as_deref() == Some("initialize")).count();
    assert_eq!(initializes, 2, "{seen:?}");
    let last_list = seen.iter().rev().find(|s| s.rpc.as_deref() == Some("tools/list")).unwrap();
    assert_eq!(last_list.session.as_deref(), Some("s-2"));
    client.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_that_keeps_expiring_is_an_error_not_a_loop() {
    let (url, fake) = start_fake(|_| {}).await;
    let client = McpClient::connect(&Expert::new("fake", &url).unwrap(), Duration::from_secs(3)).await.unwrap();
    fake.lock().unwrap().always_expired = true;
    let started = Instant::now();
    let error = client.list_tools().await.unwrap_err();
    assert!(matches!(&error, McpError::Transport(m) if m.contains("404")), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    let initializes = seen(&fake).iter().filter(|s| s.rpc.as_deref() == Some("initialize")).count();
    assert!(initializes <= 2, "re-initialised {initializes} times");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unsupported_protocol_version_is_refused() {
    let (url, fake) = start_fake(|state| state.version = "2024-11-05".into()).await;
    let error = McpClient::connect(&Expert::new("old", &url).unwrap(), TIMEOUT).await.err().unwrap();
    assert!(matches!(&error, McpError::UnsupportedVersion(v) if v == "2024-11-05"), "{error:?}");
    let initialize = seen(&fake).into_iter().find(|s| s.rpc.as_deref() == Some("initialize")).unwrap();
    assert_eq!(initialize.asked.as_deref(), Some("2025-11-25"), "the client asks for its newest version");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cursor_that_never_ends_is_a_protocol_error() {
    let (url, _fake) = start_fake(|state| state.repeat_cursor = true).await;
    let client = McpClient::connect(&Expert::new("fake", &url).unwrap(), TIMEOUT).await.unwrap();
    let error = client.list_prompts().await.unwrap_err();
    assert!(matches!(error, McpError::Protocol(_)), "{error:?}");
    client.close().await;
}
