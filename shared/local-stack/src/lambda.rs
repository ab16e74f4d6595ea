//! A Lambda Runtime API on loopback that runs a compiled function binary and feeds it events,
//! the way the Lambda service (or `cargo lambda watch`) does. What the function prints is kept
//! (see [`Function::logs`]) and echoed to the test's stderr when `TEST_FUNCTION_LOGS` is set.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, Mutex as AsyncMutex};

/// What the function answered for one invocation.
#[derive(Debug)]
pub enum Invocation {
    Response(Value),
    /// The function reported an error (`/invocation/{id}/error` or `/init/error`).
    Error(Value),
    /// The function answered in streaming mode (`Lambda-Runtime-Function-Response-Mode: streaming`),
    /// as a function behind a `RESPONSE_STREAM` Function URL does; the body arrives as it is sent.
    Stream(StreamedResponse),
}

/// One piece of a streamed response, with the moment the Runtime API received it.
#[derive(Debug)]
enum StreamFrame {
    Data(Bytes, std::time::Instant),
    Trailers(HeaderMap),
}

/// A response the function is streaming: the HTTP integration prelude (status, headers, cookies),
/// then the body as it arrives. Dropping it is a client that disconnects: the Runtime API keeps
/// reading what the function sends, as Lambda does, and the function is not told.
#[derive(Debug)]
pub struct StreamedResponse {
    /// When the function began to post its response.
    pub started: std::time::Instant,
    frames: mpsc::UnboundedReceiver<StreamFrame>,
    pending: Vec<u8>,
    prelude: Option<Value>,
    trailers: Option<HeaderMap>,
    ended: bool,
    first_byte: Option<std::time::Instant>,
    /// When the last chunk read so far arrived.
    last_arrival: Option<std::time::Instant>,
    /// When the chunk that completed the prelude's delimiter arrived.
    body_start: Option<std::time::Instant>,
}

/// One Server-Sent Event of a streamed body.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub name: String,
    pub data: Value,
    /// When the chunk that completed the event arrived.
    pub at: std::time::Instant,
}

impl StreamedResponse {
    /// Reads more of the body; false once the function has ended its response.
    async fn fill(&mut self) -> Option<std::time::Instant> {
        if self.ended {
            return None;
        }
        match self.frames.recv().await {
            Some(StreamFrame::Data(bytes, at)) => {
                self.pending.extend_from_slice(&bytes);
                self.first_byte.get_or_insert(at);
                self.last_arrival = Some(at);
                Some(at)
            }
            Some(StreamFrame::Trailers(trailers)) => {
                self.trailers = Some(trailers);
                self.ended = true;
                None
            }
            None => {
                self.ended = true;
                None
            }
        }
    }

    /// The prelude the function sent before its body: `{"statusCode": .., "headers": {..}}`.
    pub async fn prelude(&mut self) -> Value {
        if let Some(prelude) = &self.prelude {
            return prelude.clone();
        }
        loop {
            if let Some(end) = self.pending.windows(8).position(|window| window == [0u8; 8]) {
                let prelude: Value = serde_json::from_slice(&self.pending[..end]).expect("the prelude is JSON");
                self.pending.drain(..end + 8);
                self.prelude = Some(prelude.clone());
                self.body_start = self.last_arrival;
                return prelude;
            }
            if self.fill().await.is_none() {
                panic!("the stream ended before the prelude's delimiter: {:?}", String::from_utf8_lossy(&self.pending));
            }
        }
    }

    /// When the first byte of the response (its prelude) arrived, once read.
    pub fn first_byte(&self) -> Option<std::time::Instant> {
        self.first_byte
    }

    /// When the prelude's 8-byte delimiter arrived, once the prelude is read: the moment a Function
    /// URL's client can be sent the status and headers (Lambda parses the prelude up to it), and
    /// the earliest its first body byte can arrive.
    pub fn body_start(&self) -> Option<std::time::Instant> {
        self.body_start
    }

    /// The prelude's status code.
    pub async fn status(&mut self) -> u16 {
        let prelude = self.prelude().await;
        prelude["statusCode"].as_u64().expect("statusCode") as u16
    }

    /// The next Server-Sent Event of the body, or `None` at its end.
    pub async fn next_event(&mut self) -> Option<SseEvent> {
        self.prelude().await;
        let mut at = std::time::Instant::now();
        loop {
            if let Some(end) = self.pending.windows(2).position(|window| window == b"\n\n") {
                let block: Vec<u8> = self.pending.drain(..end + 2).collect();
                let block = String::from_utf8(block).expect("an SSE event is UTF-8");
                let mut name = "message".to_owned();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("event:") {
                        name = value.trim().to_owned();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        if !data.is_empty() {
                            data.push('\n');
                        }
                        data.push_str(value.strip_prefix(' ').unwrap_or(value));
                    }
                }
                if data.is_empty() && name == "message" {
                    continue; // A comment or keep-alive.
                }
                let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                return Some(SseEvent { name, data, at });
            }
            match self.fill().await {
                Some(arrived) => at = arrived,
                None => return None,
            }
        }
    }

    /// The next piece of the body after the prelude, as the function sent it; `None` at its end.
    /// What a Function URL forwards to its client, chunk by chunk.
    pub async fn next_body_chunk(&mut self) -> Option<Bytes> {
        self.prelude().await;
        if self.pending.is_empty() && self.fill().await.is_none() {
            return None;
        }
        Some(Bytes::from(std::mem::take(&mut self.pending)))
    }

    /// The rest of the body after the prelude, as text, once the function has ended it.
    pub async fn body_text(&mut self) -> String {
        self.prelude().await;
        while self.fill().await.is_some() {}
        String::from_utf8(std::mem::take(&mut self.pending)).expect("the body is UTF-8")
    }

    /// The error trailer (`Lambda-Runtime-Function-Error-Type`) the function sent, if any, once ended.
    pub async fn error_trailer(&mut self) -> Option<String> {
        while self.fill().await.is_some() {}
        let trailers = self.trailers.as_ref()?;
        trailers.get("lambda-runtime-function-error-type").map(|value| value.to_str().unwrap_or("").to_owned())
    }
}

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Invocation>>>>;

struct Queued {
    id: String,
    event: Value,
    deadline_ms: u64,
    /// Lambda's tenant id for the invocation (`Lambda-Runtime-Aws-Tenant-Id`), for PER_TENANT functions.
    tenant: Option<String>,
}

#[derive(Clone)]
struct ApiState {
    next: Arc<AsyncMutex<mpsc::UnboundedReceiver<Queued>>>,
    pending: Pending,
    init_error: Arc<Mutex<Option<Value>>>,
    /// When set, a posted response is never taken: the function waits on it until it is killed.
    swallow: Arc<std::sync::atomic::AtomicBool>,
    swallowed: Arc<tokio::sync::Notify>,
}

/// How many of the function's most recent log lines are kept.
const LOG_LINES_KEPT: usize = 20_000;

/// How long [`Function::storage_requests_since`] waits for the lines it expects.
const STORAGE_LOG_WAIT: Duration = Duration::from_secs(2);

/// The function's stdout and stderr lines, in the order they were read. Line numbers (marks)
/// count every line ever read, including the oldest ones dropped to stay within the bound.
#[derive(Default)]
struct LogBuffer {
    lines: VecDeque<String>,
    dropped: usize,
}

impl LogBuffer {
    fn push(&mut self, line: String) {
        if self.lines.len() == LOG_LINES_KEPT {
            self.lines.pop_front();
            self.dropped += 1;
        }
        self.lines.push_back(line);
    }

    fn mark(&self) -> usize {
        self.dropped + self.lines.len()
    }

    fn since(&self, mark: usize) -> Vec<String> {
        self.lines.iter().skip(mark.saturating_sub(self.dropped)).cloned().collect()
    }
}

type Logs = Arc<Mutex<LogBuffer>>;

/// A running function: its process and the Runtime API it polls.
pub struct Function {
    child: Child,
    events: mpsc::UnboundedSender<Queued>,
    pending: Pending,
    init_error: Arc<Mutex<Option<Value>>>,
    counter: Mutex<u64>,
    logs: Logs,
    /// For each invocation the function answered with a response, the log mark taken when it was sent.
    answered: Mutex<Vec<usize>>,
    swallow: Arc<std::sync::atomic::AtomicBool>,
    swallowed: Arc<tokio::sync::Notify>,
    /// The address of its Runtime API (`AWS_LAMBDA_RUNTIME_API`).
    runtime_api: std::net::SocketAddr,
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
        let mut command = Command::new(binary(name));
        command.env("PATH", std::env::var("PATH").unwrap_or_default());
        Self::spawn(name, command, env).await
    }

    /// Starts `binary` as Lambda runs a container image's bootstrap: the sandbox image's root
    /// filesystem (`root`) as `/`, read-only, a 1 GiB `/tmp`, an unprivileged uid without an account
    /// (`sbx_user`'s 993), a PID namespace of its own, and the host's loopback for the Runtime API.
    /// The folder of the binary is mounted at `/mnt` (the image's root has no file to mount it on).
    pub async fn start_in_image(name: &str, root: &std::path::Path, env: &[(String, String)]) -> Function {
        Self::start_in_image_as(name, root, env, false).await
    }

    /// [`Function::start_in_image`], with the function as the PID 1 of its PID namespace when
    /// `as_init` (as a container's entry point is): orphans of its children come to it.
    pub async fn start_in_image_as(
        name: &str,
        root: &std::path::Path,
        env: &[(String, String)],
        as_init: bool,
    ) -> Function {
        let binary = binary(name);
        // SAFETY: geteuid has no preconditions.
        let mut command = if unsafe { libc::geteuid() } == 0 {
            let mut command = Command::new("setpriv");
            command.args(["--reuid=993", "--regid=990", "--clear-groups", "--", "bwrap"]);
            command
        } else {
            let mut command = Command::new("bwrap");
            command.args(["--uid", "993", "--gid", "990"]);
            command
        };
        if as_init {
            command.arg("--as-pid-1");
        }
        command
            .args(["--unshare-user", "--unshare-pid"])
            .args(["--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session", "--ro-bind"])
            .arg(root)
            .arg("/")
            .args(["--proc", "/proc", "--dev", "/dev", "--size", &(1u64 << 30).to_string(), "--tmpfs", "/tmp"])
            .arg("--ro-bind")
            .arg(binary.parent().expect("the binary's folder"))
            .args(["/mnt", "--chdir", "/", "--"])
            .arg(std::path::Path::new("/mnt").join(binary.file_name().expect("the binary's name")))
            .env("PATH", "/usr/local/bin:/usr/bin:/bin");
        Self::spawn(name, command, env).await
    }

    async fn spawn(name: &str, mut command: Command, env: &[(String, String)]) -> Function {
        let (events, receiver) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        let init_error = Arc::new(Mutex::new(None));
        let swallow = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swallowed = Arc::new(tokio::sync::Notify::new());
        let state = ApiState {
            next: Arc::new(AsyncMutex::new(receiver)),
            pending: pending.clone(),
            init_error: init_error.clone(),
            swallow: swallow.clone(),
            swallowed: swallowed.clone(),
        };
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next_invocation))
            .route("/2018-06-01/runtime/invocation/{id}/response", post(invocation_response))
            .route("/2018-06-01/runtime/invocation/{id}/error", post(invocation_error))
            .route("/2018-06-01/runtime/init/error", post(init_error_handler))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind runtime api");
        let address = listener.local_addr().expect("runtime api address");
        // Small writes (the prelude, one SSE event) are not held back by Nagle's algorithm, as on
        // Lambda's own Runtime API: the streaming measurements are of the function, not of TCP.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let path = command.as_std().get_envs().find(|(key, _)| *key == "PATH").and_then(|(_, value)| value);
        let path = path.map(|value| value.to_owned()).unwrap_or_default();
        command
            .env_clear()
            .env("PATH", path)
            .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", name)
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("start the function binary");
        let logs = Logs::default();
        let echo = std::env::var_os("TEST_FUNCTION_LOGS").is_some();
        if let Some(stdout) = child.stdout.take() {
            tokio::spawn(capture(stdout, logs.clone(), echo));
        }
        if let Some(stderr) = child.stderr.take() {
            tokio::spawn(capture(stderr, logs.clone(), echo));
        }
        Function {
            child,
            events,
            pending,
            init_error,
            counter: Mutex::new(0),
            logs,
            answered: Mutex::default(),
            swallow,
            swallowed,
            runtime_api: address,
        }
    }

    /// The address of the function's Runtime API, as `AWS_LAMBDA_RUNTIME_API` gives it.
    pub fn runtime_api(&self) -> std::net::SocketAddr {
        self.runtime_api
    }

    /// Sends one event, lets the function run it to the end, and SIGKILLs the process at the moment
    /// it posts its answer: everything the invocation did is done, but its caller (SQS, API
    /// Gateway) never hears of it. The function is unusable afterwards.
    pub async fn invoke_and_kill_before_answer(&mut self, event: Value) {
        self.swallow.store(true, std::sync::atomic::Ordering::SeqCst);
        let swallowed = self.swallowed.clone();
        let notified = swallowed.notified();
        tokio::select! {
            answer = self.invoke(event) => panic!("the answer was not held back: {answer:?}"),
            _ = notified => {}
        }
        self.child.start_kill().expect("kill the function");
        let _ = self.child.wait().await;
    }

    /// Sends one event and waits for the answer, with a deadline `budget` from now.
    pub async fn invoke_with_budget(&self, event: Value, budget: Duration) -> Invocation {
        let deadline_ms = (SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + budget).as_millis() as u64;
        self.invoke_with_deadline_header(event, deadline_ms, budget).await
    }

    /// Sends one event with `deadline_ms` as the `Lambda-Runtime-Deadline-Ms` header, exactly (an
    /// epoch time, as Lambda sends it, or a duration, as `cargo lambda watch` does), and waits up to
    /// `wait` (plus 30 s) for the answer.
    pub async fn invoke_with_deadline_header(&self, event: Value, deadline_ms: u64, budget: Duration) -> Invocation {
        self.invoke_as(event, deadline_ms, budget, None).await
    }

    /// Sends one event for `tenant` (Lambda's tenant id, as a PER_TENANT function receives it) with
    /// a deadline `budget` from now.
    pub async fn invoke_for_tenant(&self, event: Value, tenant: &str, budget: Duration) -> Invocation {
        let deadline_ms = (SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + budget).as_millis() as u64;
        self.invoke_as(event, deadline_ms, budget, Some(tenant.to_owned())).await
    }

    async fn invoke_as(&self, event: Value, deadline_ms: u64, budget: Duration, tenant: Option<String>) -> Invocation {
        let id = {
            let mut counter = self.counter.lock().unwrap();
            *counter += 1;
            format!("req-{}", *counter)
        };
        let (sender, receiver) = oneshot::channel();
        self.pending.lock().unwrap().insert(id.clone(), sender);
        let sent_at = self.log_mark();
        self.events.send(Queued { id, event, deadline_ms, tenant }).expect("runtime api alive");
        let wait = async {
            loop {
                if let Some(error) = self.init_error.lock().unwrap().clone() {
                    return Invocation::Error(error);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::select! {
            answer = receiver => {
                let answer = answer.expect("invocation answered");
                if matches!(answer, Invocation::Response(_)) {
                    self.answered.lock().unwrap().push(sent_at);
                }
                answer
            }
            init = wait => init,
            _ = tokio::time::sleep(budget + Duration::from_secs(30)) => panic!("the function did not answer"),
        }
    }

    pub async fn invoke(&self, event: Value) -> Invocation {
        self.invoke_with_budget(event, Duration::from_secs(60)).await
    }

    /// Sends one event and returns the response the function streams, as soon as it starts;
    /// panics if it answered in buffered mode or failed.
    pub async fn invoke_streaming(&self, event: Value, budget: Duration) -> StreamedResponse {
        match self.invoke_with_budget(event, budget).await {
            Invocation::Stream(stream) => stream,
            other => panic!("the function did not stream its response: {other:?}"),
        }
    }

    /// Like [`Function::invoke`] but panics unless the function returned a response.
    pub async fn call(&self, event: Value) -> Value {
        match self.invoke(event).await {
            Invocation::Response(value) => value,
            Invocation::Error(error) => panic!("the function failed: {error}"),
            Invocation::Stream(_) => panic!("the function streamed its response; use invoke_streaming"),
        }
    }

    /// Waits up to `within` for the process to end by itself, as a function whose initialisation
    /// fails does (Lambda then reports `Runtime.ExitError` with what it printed); `None` if it
    /// is still running.
    pub async fn exit_status(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(within, self.child.wait()).await.ok().and_then(Result::ok)
    }

    /// The process id, for measuring memory.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Every line the function has printed so far (stdout and stderr, the last 20,000 lines).
    pub fn logs(&self) -> Vec<String> {
        self.logs_since(0)
    }

    /// The number of lines printed so far, for [`Function::logs_since`].
    pub fn log_mark(&self) -> usize {
        self.logs.lock().unwrap().mark()
    }

    /// The lines printed after `mark` (a [`Function::log_mark`]).
    pub fn logs_since(&self, mark: usize) -> Vec<String> {
        self.logs.lock().unwrap().since(mark)
    }

    /// The storage requests, per operation (`DynamoDB.Query`, `S3.GetObject`, ...), that the
    /// invocations answered after `mark` logged, summed. The function logs them before it posts
    /// its answer, but the pipe may lag, so this waits up to 2 s for one `storage requests` line
    /// per invocation sent after `mark` that got a response (an invocation that failed may have
    /// logged none; then the wait runs out and the lines found are summed).
    pub async fn storage_requests_since(&self, mark: usize) -> BTreeMap<String, u64> {
        let expected = self.answered.lock().unwrap().iter().filter(|&&sent_at| sent_at >= mark).count();
        let waited = tokio::time::Instant::now();
        loop {
            let logged: Vec<BTreeMap<String, u64>> =
                self.logs_since(mark).iter().filter_map(|line| storage_requests(line)).collect();
            if logged.len() >= expected || waited.elapsed() >= STORAGE_LOG_WAIT {
                let mut total = BTreeMap::new();
                for (operation, count) in logged.into_iter().flatten() {
                    *total.entry(operation).or_default() += count;
                }
                return total;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Reads `stream` line by line into `logs` until the function closes it, echoing each line to
/// the real stderr when `echo` is set (written directly, so the test harness does not capture it).
async fn capture(stream: impl AsyncRead + Unpin, logs: Logs, echo: bool) {
    let mut reader = BufReader::new(stream);
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        match reader.read_until(b'\n', &mut bytes).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(&bytes).trim_end_matches(['\n', '\r']).to_owned();
        if echo {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
        logs.lock().unwrap().push(line);
    }
}

/// The per-operation counts of a `storage requests` log line (JSON, as `agent_app::with_request_log`
/// writes it: `fields.storage_operations` holds a JSON object as a string), or `None` for any other line.
fn storage_requests(line: &str) -> Option<BTreeMap<String, u64>> {
    let value: Value = serde_json::from_str(line).ok()?;
    let fields = value.get("fields")?;
    if fields.get("message")?.as_str()? != "storage requests" {
        return None;
    }
    match fields.get("storage_operations")? {
        Value::String(text) => serde_json::from_str(text).ok(),
        object => serde_json::from_value(object.clone()).ok(),
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
    if let Some(tenant) = queued.tenant.as_deref().and_then(|tenant| tenant.parse().ok()) {
        headers.insert("lambda-runtime-aws-tenant-id", tenant);
    }
    (headers, queued.event.to_string()).into_response()
}

fn settle(state: &ApiState, id: &str, outcome: Invocation) {
    if let Some(sender) = state.pending.lock().unwrap().remove(id) {
        let _ = sender.send(outcome);
    }
}

async fn invocation_response(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> StatusCode {
    if state.swallow.load(std::sync::atomic::Ordering::SeqCst) {
        state.swallowed.notify_one();
        std::future::pending::<()>().await;
    }
    let streaming = headers
        .get("lambda-runtime-function-response-mode")
        .is_some_and(|mode| mode.as_bytes().eq_ignore_ascii_case(b"streaming"));
    if streaming {
        return stream_response(&state, &id, body).await;
    }
    let Ok(body) = axum::body::to_bytes(body, usize::MAX).await else { return StatusCode::BAD_REQUEST };
    let body = String::from_utf8_lossy(&body).into_owned();
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    settle(&state, &id, Invocation::Response(value));
    StatusCode::ACCEPTED
}

/// Hands the invocation's caller a [`StreamedResponse`] at once, then forwards the body frame by
/// frame until the function ends it. Frames keep being read after the caller went away.
async fn stream_response(state: &ApiState, id: &str, mut body: axum::body::Body) -> StatusCode {
    let (sender, frames) = mpsc::unbounded_channel();
    let response = StreamedResponse {
        started: std::time::Instant::now(),
        frames,
        pending: Vec::new(),
        prelude: None,
        trailers: None,
        ended: false,
        first_byte: None,
        last_arrival: None,
        body_start: None,
    };
    settle(state, id, Invocation::Stream(response));
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        let frame = match frame.into_data() {
            Ok(data) => StreamFrame::Data(data, std::time::Instant::now()),
            Err(frame) => match frame.into_trailers() {
                Ok(trailers) => StreamFrame::Trailers(trailers),
                Err(_) => continue,
            },
        };
        let _ = sender.send(frame);
    }
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
