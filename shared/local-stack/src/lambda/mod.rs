//! A Lambda Runtime API on loopback that runs a compiled function binary and feeds it events,
//! the way the Lambda service (or `cargo lambda watch`) does. What the function prints is kept
//! (see [`Function::logs`]) and echoed to the test's stderr when `TEST_FUNCTION_LOGS` is set.
//! `api`: the Runtime API's routes; `stream`: a streamed response as it arrives; `logs`: the lines.

mod api;
mod logs;
mod stream;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, Mutex as AsyncMutex};

use api::{ApiState, Pending, Queued};
use logs::{capture, storage_requests, Logs};
pub use stream::{SseEvent, StreamedResponse};

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

/// How long [`Function::storage_requests_since`] waits for the lines it expects.
const STORAGE_LOG_WAIT: Duration = Duration::from_secs(2);

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

    /// Starts `binary` inside the cgroup at `cgroup` (a v1 `cpu` controller's folder) from its first
    /// instruction: a shell puts itself in the group, then becomes the binary (same process).
    pub async fn start_in_cgroup(name: &str, env: &[(String, String)], cgroup: &std::path::Path) -> Function {
        let mut command = Command::new("sh");
        command
            .args(["-c", "echo $$ > \"$1/cgroup.procs\" && exec \"$2\"", "sh"])
            .arg(cgroup)
            .arg(binary(name))
            .env("PATH", std::env::var("PATH").unwrap_or_default());
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
        let app = api::router(state);
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
            // As the template's Globals set it for every function.
            .env("MIMALLOC_PURGE_DELAY", "0")
            .env("MIMALLOC_ALLOW_THP", "0")
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
