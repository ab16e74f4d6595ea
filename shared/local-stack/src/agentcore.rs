//! A scripted stand-in of Amazon Bedrock AgentCore's code interpreter data plane on loopback,
//! speaking its wire format (restJson1 requests, `application/vnd.amazon.eventstream` answers to
//! `InvokeCodeInterpreter`): StartCodeInterpreterSession, GetCodeInterpreterSession,
//! StopCodeInterpreterSession, and InvokeCodeInterpreter's `writeFiles`, `readFiles` and
//! `executeCommand`.
//!
//! Each interpreter session has a folder of its own as its working directory (its file tree)
//! and a `/tmp` of its own: `executeCommand` runs `bash -c` for real under bubblewrap with the
//! host's root and the session's folder over `/tmp`, as one microVM per session would have it.
//! Tests count the calls, expire or age sessions and throttle requests on demand.

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Value};

use crate::eventstream::event_frame;
use crate::stack::repo_root;

/// The header carrying the session id of an invocation, both ways.
const SESSION_HEADER: &str = "x-amzn-code-interpreter-session-id";
/// The longest a command may run here, whatever it asks.
const COMMAND_LIMIT: Duration = Duration::from_secs(900);

/// How a request to a session that has ended is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedError {
    /// 404 ResourceNotFoundException.
    NotFound,
    /// 400 ValidationException.
    Validation,
}

#[derive(Debug)]
struct Session {
    interpreter: String,
    name: String,
    /// Seconds since the epoch.
    created: i64,
    timeout: i64,
    terminated: bool,
    /// The working directory: `writeFiles` and `readFiles` paths are relative to it.
    home: PathBuf,
    /// Bound over `/tmp` for its commands.
    tmp: PathBuf,
}

#[derive(Debug)]
struct World {
    base: PathBuf,
    sessions: HashMap<String, Session>,
    starts: Vec<Value>,
    stops: Vec<String>,
    gets: usize,
    /// (session, tool) of every invocation, in order.
    invocations: Vec<(String, String)>,
    /// Requests still to be answered with ThrottlingException.
    throttled: usize,
    /// Sessions to end right after their next GetCodeInterpreterSession.
    end_after_get: HashSet<String>,
    ended_error: EndedError,
    /// `executeCommand` answers as if `python3` were missing, this many more times.
    broken_commands: usize,
}

/// A running stand-in.
pub struct CodeInterpreterService {
    pub endpoint: String,
    world: Arc<Mutex<World>>,
    base: PathBuf,
}

static SERVICES: AtomicU64 = AtomicU64::new(0);

impl CodeInterpreterService {
    pub async fn start() -> CodeInterpreterService {
        // Not under /tmp: each session's /tmp is bound over it.
        let base = repo_root().join("target/agentcore-standin").join(format!(
            "{}-{}",
            std::process::id(),
            SERVICES.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).expect("the stand-in's folder");
        let world = Arc::new(Mutex::new(World {
            base: base.clone(),
            sessions: HashMap::new(),
            starts: Vec::new(),
            stops: Vec::new(),
            gets: 0,
            invocations: Vec::new(),
            throttled: 0,
            end_after_get: HashSet::new(),
            ended_error: EndedError::NotFound,
            broken_commands: 0,
        }));
        let app = Router::new()
            .route("/code-interpreters/{interpreter}/sessions/start", put(start_session))
            .route("/code-interpreters/{interpreter}/sessions/get", get(get_session))
            .route("/code-interpreters/{interpreter}/sessions/stop", put(stop_session))
            .route("/code-interpreters/{interpreter}/tools/invoke", post(invoke))
            .with_state(world.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the stand-in");
        let address = listener.local_addr().expect("the stand-in's address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        CodeInterpreterService { endpoint: format!("http://{address}"), world, base }
    }

    fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The bodies of every StartCodeInterpreterSession, in order.
    pub fn starts(&self) -> Vec<Value> {
        self.world().starts.clone()
    }

    /// The sessions stopped with StopCodeInterpreterSession, in order.
    pub fn stops(&self) -> Vec<String> {
        self.world().stops.clone()
    }

    pub fn gets(&self) -> usize {
        self.world().gets
    }

    /// The tools invoked in `session`, in order.
    pub fn tools(&self, session: &str) -> Vec<String> {
        self.world().invocations.iter().filter(|(id, _)| id == session).map(|(_, tool)| tool.clone()).collect()
    }

    /// Ends `session` now, as its lifetime's end would (its files go with it).
    pub fn expire(&self, session: &str) {
        let mut world = self.world();
        if let Some(found) = world.sessions.get_mut(session) {
            found.terminated = true;
            let _ = std::fs::remove_dir_all(found.home.parent().expect("a session folder"));
        }
    }

    /// Ends `session` right after its next GetCodeInterpreterSession (which still says READY).
    pub fn expire_after_next_get(&self, session: &str) {
        self.world().end_after_get.insert(session.to_owned());
    }

    /// Makes `session` older by `seconds`, bringing its lifetime's end closer.
    pub fn age(&self, session: &str, seconds: i64) {
        if let Some(found) = self.world().sessions.get_mut(session) {
            found.created -= seconds;
        }
    }

    /// Answers the next `count` requests with ThrottlingException.
    pub fn throttle(&self, count: usize) {
        self.world().throttled = count;
    }

    /// How requests to an ended session are refused.
    pub fn set_ended_error(&self, error: EndedError) {
        self.world().ended_error = error;
    }

    /// Answers the next `count` commands as a session without `python3` would.
    pub fn break_commands(&self, count: usize) {
        self.world().broken_commands = count;
    }

    /// The working directory of `session` (its file tree).
    pub fn home(&self, session: &str) -> Option<PathBuf> {
        self.world().sessions.get(session).map(|found| found.home.clone())
    }
}

impl Drop for CodeInterpreterService {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs() as i64)
}

fn timestamp(seconds: i64) -> String {
    aws_smithy_types::DateTime::from_secs(seconds)
        .fmt(aws_smithy_types::date_time::Format::DateTime)
        .expect("a formattable time")
}

/// An error as the service sends one: a restJson1 body and its `x-amzn-ErrorType`.
fn error(status: u16, kind: &str, message: &str) -> Response {
    let mut body = json!({ "message": message });
    if kind == "ValidationException" {
        body["reason"] = json!("CannotParse");
    }
    let mut response = (StatusCode::from_u16(status).expect("a status"), Json(body)).into_response();
    response.headers_mut().insert("x-amzn-errortype", kind.parse().expect("a header"));
    response
}

/// A throttled request, when one is due.
fn throttled(world: &mut World) -> Option<Response> {
    (world.throttled > 0).then(|| {
        world.throttled -= 1;
        error(429, "ThrottlingException", "Rate exceeded")
    })
}

fn ended(world: &World, id: &str) -> Response {
    match world.ended_error {
        EndedError::NotFound => error(404, "ResourceNotFoundException", &format!("Session {id} not found")),
        EndedError::Validation => error(400, "ValidationException", &format!("Session {id} is terminated")),
    }
}

async fn start_session(
    State(world): State<Arc<Mutex<World>>>,
    UrlPath(interpreter): UrlPath<String>,
    Json(body): Json<Value>,
) -> Response {
    let mut world = world.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(response) = throttled(&mut world) {
        return response;
    }
    world.starts.push(body.clone());
    let id = format!("01STANDIN{:06}", world.starts.len());
    let folder = world.base.join(&id);
    let (home, tmp) = (folder.join("home"), folder.join("tmp"));
    std::fs::create_dir_all(&home).expect("a session's home");
    std::fs::create_dir_all(&tmp).expect("a session's /tmp");
    let created = now();
    let session = Session {
        interpreter: interpreter.clone(),
        name: body["name"].as_str().unwrap_or_default().to_owned(),
        created,
        timeout: body["sessionTimeoutSeconds"].as_i64().unwrap_or(900),
        terminated: false,
        home,
        tmp,
    };
    world.sessions.insert(id.clone(), session);
    Json(json!({"codeInterpreterIdentifier": interpreter, "sessionId": id, "createdAt": timestamp(created)}))
        .into_response()
}

/// Whether `session` has ended (by expiry or by its lifetime).
fn is_ended(session: &Session) -> bool {
    session.terminated || now() >= session.created + session.timeout
}

async fn get_session(
    State(world): State<Arc<Mutex<World>>>,
    UrlPath(interpreter): UrlPath<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let mut world = world.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(response) = throttled(&mut world) {
        return response;
    }
    world.gets += 1;
    let id = query.get("sessionId").cloned().unwrap_or_default();
    let Some(session) = world.sessions.get(&id).filter(|session| session.interpreter == interpreter) else {
        return error(404, "ResourceNotFoundException", &format!("Session {id} not found"));
    };
    let body = json!({
        "codeInterpreterIdentifier": interpreter,
        "sessionId": id,
        "name": session.name,
        "createdAt": timestamp(session.created),
        "sessionTimeoutSeconds": session.timeout,
        "status": if is_ended(session) { "TERMINATED" } else { "READY" },
    });
    if world.end_after_get.remove(&id) {
        if let Some(session) = world.sessions.get_mut(&id) {
            session.terminated = true;
        }
    }
    Json(body).into_response()
}

async fn stop_session(
    State(world): State<Arc<Mutex<World>>>,
    UrlPath(interpreter): UrlPath<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let mut world = world.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let id = query.get("sessionId").cloned().unwrap_or_default();
    world.stops.push(id.clone());
    let Some(session) = world.sessions.get_mut(&id) else {
        return error(404, "ResourceNotFoundException", &format!("Session {id} not found"));
    };
    session.terminated = true;
    Json(json!({"codeInterpreterIdentifier": interpreter, "sessionId": id, "lastUpdatedAt": timestamp(now())}))
        .into_response()
}

async fn invoke(
    State(world): State<Arc<Mutex<World>>>,
    UrlPath(interpreter): UrlPath<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let id = headers.get(SESSION_HEADER).and_then(|value| value.to_str().ok()).unwrap_or_default().to_owned();
    let tool = body["name"].as_str().unwrap_or_default().to_owned();
    let (home, tmp, broken) = {
        let mut world = world.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(response) = throttled(&mut world) {
            return response;
        }
        world.invocations.push((id.clone(), tool.clone()));
        let broken = tool == "executeCommand" && world.broken_commands > 0;
        if broken {
            world.broken_commands -= 1;
        }
        match world.sessions.get(&id).filter(|session| session.interpreter == interpreter) {
            Some(session) if !is_ended(session) => (session.home.clone(), session.tmp.clone(), broken),
            _ => return ended(&world, &id),
        }
    };
    let arguments = &body["arguments"];
    let result = match tool.as_str() {
        "writeFiles" => write_files(&home, arguments),
        "readFiles" => Ok(read_files(&home, arguments)),
        "executeCommand" if broken => Ok(json!({
            "content": [{"type": "text", "text": ""}],
            "structuredContent": {"stdout": "", "stderr": "bash: line 1: python3: command not found\n", "exitCode": 127},
            "isError": true,
        })),
        "executeCommand" => execute_command(&home, &tmp, arguments).await,
        other => Err(format!("Unknown tool {other}")),
    };
    match result {
        Ok(result) => {
            let mut response = axum::body::Body::from(event_frame("result", &result)).into_response();
            let headers = response.headers_mut();
            headers.insert("content-type", "application/vnd.amazon.eventstream".parse().expect("a header"));
            headers.insert(SESSION_HEADER, id.parse().unwrap_or_else(|_| "invalid".parse().expect("a header")));
            response
        }
        Err(message) => error(400, "ValidationException", &message),
    }
}

/// A path under the session's working directory: relative, without `..`.
fn under(home: &Path, path: &str) -> Result<PathBuf, String> {
    let relative = Path::new(path);
    if path.is_empty() || relative.components().any(|part| !matches!(part, Component::Normal(_))) {
        return Err(format!("Path must be relative, without '..': {path}"));
    }
    Ok(home.join(relative))
}

fn write_files(home: &Path, arguments: &Value) -> Result<Value, String> {
    let content = arguments["content"].as_array().ok_or("content is required")?;
    for item in content {
        let target = under(home, item["path"].as_str().unwrap_or_default())?;
        let bytes = match (item["text"].as_str(), item["blob"].as_str()) {
            (Some(text), None) => text.as_bytes().to_vec(),
            (None, Some(blob)) => STANDARD.decode(blob).map_err(|err| format!("blob: {err}"))?,
            _ => return Err("each file needs text or blob".to_owned()),
        };
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|err| err.to_string())?;
        }
        std::fs::write(&target, bytes).map_err(|err| err.to_string())?;
    }
    let text = format!("Successfully wrote {} files", content.len());
    Ok(json!({"content": [{"type": "text", "text": text}], "isError": false}))
}

/// Each file as a resource: text when it is UTF-8, a blob otherwise; a missing one as an error.
fn read_files(home: &Path, arguments: &Value) -> Value {
    let mut content = Vec::new();
    let mut failed = false;
    for path in arguments["paths"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        let read = under(home, path).and_then(|target| {
            let bytes = std::fs::read(&target).map_err(|err| format!("{path}: {err}"))?;
            Ok((target, bytes))
        });
        match read {
            Ok((target, bytes)) => {
                let uri = format!("file://{}", target.display());
                let resource = match String::from_utf8(bytes) {
                    Ok(text) => json!({"type": "text", "uri": uri, "mimeType": "text/plain", "text": text}),
                    Err(err) => json!({"type": "blob", "uri": uri, "mimeType": "application/octet-stream",
                                       "blob": STANDARD.encode(err.into_bytes())}),
                };
                content.push(json!({"type": "resource", "resource": resource}));
            }
            Err(message) => {
                failed = true;
                content.push(json!({"type": "text", "text": message}));
            }
        }
    }
    json!({"content": content, "isError": failed})
}

async fn execute_command(home: &Path, tmp: &Path, arguments: &Value) -> Result<Value, String> {
    let command = arguments["command"].as_str().ok_or("command is required")?;
    let mut process = if Path::new("/usr/bin/bwrap").exists() {
        let mut process = tokio::process::Command::new("/usr/bin/bwrap");
        // The session's private /tmp hides the host's; the home is bound again after it, since a
        // checkout under /tmp (CI's clone, say) holds the home there too.
        process.args(["--dev-bind", "/", "/", "--bind"]).arg(tmp).arg("/tmp");
        process.arg("--bind").arg(home).arg(home).arg("--chdir").arg(home);
        process.args(["--", "bash", "-c", command]);
        process
    } else {
        let mut process = tokio::process::Command::new("bash");
        process.args(["-c", command]).current_dir(home);
        process
    };
    process.stdin(std::process::Stdio::null()).kill_on_drop(true);
    let started = Instant::now();
    let output = tokio::time::timeout(COMMAND_LIMIT, process.output())
        .await
        .map_err(|_| "the command ran too long".to_owned())?
        .map_err(|err| format!("could not run the command: {err}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let exit_code = output.status.code().unwrap_or(-1);
    Ok(json!({
        "content": [{"type": "text", "text": stdout}],
        "structuredContent": {"stdout": stdout, "stderr": stderr, "exitCode": exit_code,
                              "executionTime": started.elapsed().as_secs_f64()},
        "isError": exit_code != 0,
    }))
}
