//! A Lambda Runtime API on loopback that runs a compiled function binary and feeds it events,
//! the way the Lambda service (or `cargo lambda watch`) does.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, Mutex as AsyncMutex};

/// What the function answered for one invocation.
#[derive(Debug)]
pub enum Invocation {
    Response(Value),
    /// The function reported an error (`/invocation/{id}/error` or `/init/error`).
    Error(Value),
}

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Invocation>>>>;

struct Queued {
    id: String,
    event: Value,
    deadline_ms: u64,
}

#[derive(Clone)]
struct ApiState {
    next: Arc<AsyncMutex<mpsc::UnboundedReceiver<Queued>>>,
    pending: Pending,
    init_error: Arc<Mutex<Option<Value>>>,
}

/// A running function: its process and the Runtime API it polls.
pub struct Function {
    child: Child,
    events: mpsc::UnboundedSender<Queued>,
    pending: Pending,
    init_error: Arc<Mutex<Option<Value>>>,
    counter: Mutex<u64>,
}

/// The path of a workspace binary built next to the test binary (`cargo xtask test` builds them).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let mut dir = exe.parent().expect("target profile dir");
    // Test binaries live in `target/<profile>/deps`, other binaries in `target/<profile>`.
    if dir.file_name().is_some_and(|name| name == "deps") {
        dir = dir.parent().expect("target profile dir");
    }
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: build the functions first (`cargo build -p http-turn -p queue-turn`, which `cargo xtask test` does)",
        path.display()
    );
    path
}

impl Function {
    /// Starts `binary` with `env` (plus the variables the Lambda runtime requires).
    pub async fn start(name: &str, env: &[(String, String)]) -> Function {
        let (events, receiver) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        let init_error = Arc::new(Mutex::new(None));
        let state = ApiState {
            next: Arc::new(AsyncMutex::new(receiver)),
            pending: pending.clone(),
            init_error: init_error.clone(),
        };
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next_invocation))
            .route("/2018-06-01/runtime/invocation/{id}/response", post(invocation_response))
            .route("/2018-06-01/runtime/invocation/{id}/error", post(invocation_error))
            .route("/2018-06-01/runtime/init/error", post(init_error_handler))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind runtime api");
        let address = listener.local_addr().expect("runtime api address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let mut command = Command::new(binary(name));
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", name)
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(if std::env::var_os("TEST_FUNCTION_LOGS").is_some() { Stdio::inherit() } else { Stdio::null() })
            .stderr(if std::env::var_os("TEST_FUNCTION_LOGS").is_some() { Stdio::inherit() } else { Stdio::null() })
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command.spawn().expect("start the function binary");
        Function { child, events, pending, init_error, counter: Mutex::new(0) }
    }

    /// Sends one event and waits for the answer, with a deadline `budget` from now.
    pub async fn invoke_with_budget(&self, event: Value, budget: Duration) -> Invocation {
        let id = {
            let mut counter = self.counter.lock().unwrap();
            *counter += 1;
            format!("req-{}", *counter)
        };
        let (sender, receiver) = oneshot::channel();
        self.pending.lock().unwrap().insert(id.clone(), sender);
        let deadline_ms = (SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + budget).as_millis() as u64;
        self.events.send(Queued { id, event, deadline_ms }).expect("runtime api alive");
        let wait = async {
            loop {
                if let Some(error) = self.init_error.lock().unwrap().clone() {
                    return Invocation::Error(error);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::select! {
            answer = receiver => answer.expect("invocation answered"),
            init = wait => init,
            _ = tokio::time::sleep(budget + Duration::from_secs(30)) => panic!("the function did not answer"),
        }
    }

    pub async fn invoke(&self, event: Value) -> Invocation {
        self.invoke_with_budget(event, Duration::from_secs(60)).await
    }

    /// Like [`Function::invoke`] but panics unless the function returned a response.
    pub async fn call(&self, event: Value) -> Value {
        match self.invoke(event).await {
            Invocation::Response(value) => value,
            Invocation::Error(error) => panic!("the function failed: {error}"),
        }
    }

    /// The process id, for measuring memory.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }
}

async fn next_invocation(State(state): State<ApiState>) -> Response {
    let queued = state.next.lock().await.recv().await;
    let Some(queued) = queued else { return StatusCode::GONE.into_response() };
    let mut headers = HeaderMap::new();
    headers.insert("lambda-runtime-aws-request-id", queued.id.parse().unwrap());
    headers.insert("lambda-runtime-deadline-ms", queued.deadline_ms.to_string().parse().unwrap());
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:us-east-1:123456789012:function:test".parse().unwrap(),
    );
    headers.insert("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000".parse().unwrap());
    headers.insert("content-type", "application/json".parse().unwrap());
    (headers, queued.event.to_string()).into_response()
}

fn settle(state: &ApiState, id: &str, outcome: Invocation) {
    if let Some(sender) = state.pending.lock().unwrap().remove(id) {
        let _ = sender.send(outcome);
    }
}

async fn invocation_response(State(state): State<ApiState>, Path(id): Path<String>, body: String) -> StatusCode {
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    settle(&state, &id, Invocation::Response(value));
    StatusCode::ACCEPTED
}

async fn invocation_error(State(state): State<ApiState>, Path(id): Path<String>, body: String) -> StatusCode {
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    settle(&state, &id, Invocation::Error(value));
    StatusCode::ACCEPTED
}

async fn init_error_handler(State(state): State<ApiState>, body: String) -> StatusCode {
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    *state.init_error.lock().unwrap() = Some(value);
    StatusCode::ACCEPTED
}
