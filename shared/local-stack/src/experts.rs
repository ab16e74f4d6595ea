//! Expert MCP servers for the tests: the official Python SDK's server (`shared/local-stack/expert_server.py`)
//! on loopback, with the flags of its usage line as options, stopped when dropped.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the server may take to listen; the SDK and uvicorn are slow to import.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// The flags of `expert_server.py`: `ExpertOptions::default().json().page_size(2)`.
#[derive(Debug, Clone, Default)]
pub struct ExpertOptions {
    /// A fixed loopback port (a restart on the port a client knows); none: a free one.
    pub port: Option<u16>,
    /// `--json`: `application/json` answers instead of SSE streams.
    pub json: bool,
    /// `--stateless`: no sessions (no `Mcp-Session-Id`).
    pub stateless: bool,
    /// `--page-size N`: `prompts/list` and `tools/list` in pages of N.
    pub page_size: Option<usize>,
    /// `--require-header NAME=VALUE`: 401 without that header.
    pub require_header: Option<String>,
    /// `--allow-host NAME`: a host name besides the loopback ones the server accepts.
    pub allow_hosts: Vec<String>,
    /// `--deed-prompts`: the prompts of the planner's prompt-argument tests.
    pub deed_prompts: bool,
    /// `--revision 2025-06-18`: a server of that revision only (refuses 2026-07-28 as a pre-2026
    /// server does, answers `initialize` with 2025-06-18); none: both eras, as the SDK serves.
    pub revision: Option<String>,
    /// `--record`: every request's method, routing and session headers, read by [`ExpertServer::requests`].
    pub record: bool,
    /// `--cache-ttl-ms N --cache-scope S`: the 2026 cache hints of `tools/list` and `prompts/list`.
    pub cache: Option<(u64, &'static str)>,
    /// `--modern-tools`: `book_trip` (asks for a seat, input-required) and `long_report` (a task).
    pub modern_tools: bool,
}

impl ExpertOptions {
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    pub fn json(mut self) -> Self {
        self.json = true;
        self
    }

    pub fn stateless(mut self) -> Self {
        self.stateless = true;
        self
    }

    pub fn page_size(mut self, size: usize) -> Self {
        self.page_size = Some(size);
        self
    }

    /// `header` is `NAME=VALUE`.
    pub fn require_header(mut self, header: &str) -> Self {
        self.require_header = Some(header.to_owned());
        self
    }

    pub fn allow_host(mut self, host: &str) -> Self {
        self.allow_hosts.push(host.to_owned());
        self
    }

    pub fn deed_prompts(mut self) -> Self {
        self.deed_prompts = true;
        self
    }

    /// A server of MCP 2025-06-18 only.
    pub fn revision_2025_06_18(mut self) -> Self {
        self.revision = Some("2025-06-18".to_owned());
        self
    }

    pub fn record(mut self) -> Self {
        self.record = true;
        self
    }

    /// `scope` is `public` or `private`.
    pub fn cache(mut self, ttl_ms: u64, scope: &'static str) -> Self {
        self.cache = Some((ttl_ms, scope));
        self
    }

    pub fn modern_tools(mut self) -> Self {
        self.modern_tools = true;
        self
    }

    /// The script's arguments after the port.
    fn flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        if self.json {
            flags.push("--json".to_owned());
        }
        if self.stateless {
            flags.push("--stateless".to_owned());
        }
        if let Some(size) = self.page_size {
            flags.extend(["--page-size".to_owned(), size.to_string()]);
        }
        if let Some(header) = &self.require_header {
            flags.extend(["--require-header".to_owned(), header.clone()]);
        }
        for host in &self.allow_hosts {
            flags.extend(["--allow-host".to_owned(), host.clone()]);
        }
        if self.deed_prompts {
            flags.push("--deed-prompts".to_owned());
        }
        if let Some(revision) = &self.revision {
            flags.extend(["--revision".to_owned(), revision.clone()]);
        }
        if let Some((ttl_ms, scope)) = self.cache {
            flags.extend(["--cache-ttl-ms".to_owned(), ttl_ms.to_string(), "--cache-scope".to_owned(), scope.into()]);
        }
        if self.modern_tools {
            flags.push("--modern-tools".to_owned());
        }
        flags
    }
}

/// `expert_server.py` as a child process; killed on drop.
pub struct ExpertServer {
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    pub port: u16,
    child: Child,
    /// Its stderr: a file, since a pipe nobody reads could fill up and stall the server.
    log: PathBuf,
    /// The `--record` file, when recording.
    record: Option<PathBuf>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A loopback port nobody listens on, for an expert that is down.
pub fn dead_url() -> String {
    format!("http://127.0.0.1:{}/mcp", free_port())
}

impl ExpertServer {
    /// The default server: SSE streams, sessions, every item in one page, no header required.
    pub fn start() -> ExpertServer {
        Self::start_with(&ExpertOptions::default())
    }

    pub fn start_with(options: &ExpertOptions) -> ExpertServer {
        let port = options.port.unwrap_or_else(free_port);
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("expert_server.py");
        let log = std::env::temp_dir().join(format!("expert-server-{port}-{}.log", std::process::id()));
        let stderr = std::fs::File::create(&log).unwrap_or_else(|err| panic!("create {}: {err}", log.display()));
        let record = options
            .record
            .then(|| std::env::temp_dir().join(format!("expert-server-{port}-{}.jsonl", std::process::id())));
        let mut flags = options.flags();
        if let Some(record) = &record {
            let _ = std::fs::remove_file(record);
            flags.extend(["--record".to_owned(), record.display().to_string()]);
        }
        let child = Command::new("python3")
            .arg(&script)
            .arg(port.to_string())
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start python3 shared/local-stack/expert_server.py");
        let mut server = ExpertServer { url: format!("http://127.0.0.1:{port}/mcp"), port, child, log, record };
        server.wait_until_listening();
        server
    }

    fn wait_until_listening(&mut self) {
        let address = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                panic!(
                    "the expert server exited with {status} (it needs python3 with the MCP SDK, mcp >= 2: \
                     `pip install mcp`, or .venv first on PATH):\n{log}"
                );
            }
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the expert server did not listen on {address} within {STARTUP_TIMEOUT:?}");
    }

    /// The requests recorded so far (`ExpertOptions::record`), in order: each a JSON object with
    /// `http` (the HTTP method), `method` (the JSON-RPC method), `version` (`MCP-Protocol-Version`),
    /// `session` (`Mcp-Session-Id`), `mcp_method` and `mcp_name` (the routing headers) and `meta`
    /// (whether the params carried the 2026 `_meta` envelope).
    pub fn requests(&self) -> Vec<serde_json::Value> {
        let record = self.record.as_ref().expect("the server was started with ExpertOptions::record");
        std::fs::read_to_string(record)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// How many recorded requests were of the JSON-RPC `method`.
    pub fn count(&self, method: &str) -> usize {
        self.requests().iter().filter(|request| request["method"] == method).count()
    }

    /// Stops the server now, as an expert that goes down mid-session.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ExpertServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.log);
        if let Some(record) = &self.record {
            let _ = std::fs::remove_file(record);
        }
    }
}
