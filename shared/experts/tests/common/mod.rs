//! Test support shared by the experts crate's test binaries: the Python expert server as a child process.
// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use experts::Expert;

/// Fails every Python-backed test with the fix when the SDK is missing, instead of a confusing error.
pub fn require_python_sdk() {
    static CHECK: OnceLock<Result<(), String>> = OnceLock::new();
    let check = CHECK.get_or_init(|| {
        let status = Command::new("python3").args(["-c", "import mcp.server.mcpserver"]).status();
        match status {
            Ok(status) if status.success() => Ok(()),
            _ => Err("these tests need python3 with the official MCP SDK (mcp >= 2): run `pip install mcp`".into()),
        }
    });
    if let Err(message) = check {
        panic!("{message}");
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `shared/local-stack/expert_server.py` as a child process; killed on drop.
pub struct PyServer {
    child: Child,
    pub port: u16,
    log: PathBuf,
}

impl PyServer {
    pub fn start(args: &[&str]) -> PyServer {
        Self::start_on(free_port(), args)
    }

    pub fn start_on(port: u16, args: &[&str]) -> PyServer {
        require_python_sdk();
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/local-stack/expert_server.py");
        // The log goes to a file: a pipe nobody reads could fill up and stall the server.
        let log = std::env::temp_dir().join(format!("expert-server-{port}-{}.log", std::process::id()));
        let child = Command::new("python3")
            .arg(&script)
            .arg(port.to_string())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start python3");
        let mut server = PyServer { child, port, log };
        server.wait_until_listening();
        server
    }

    fn wait_until_listening(&mut self) {
        let address = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                panic!("the expert server exited with {status}:\n{log}");
            }
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the expert server did not listen on {address} within 30 s");
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn expert(&self, name: &str) -> Expert {
        Expert::new(name, &self.url()).unwrap()
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PyServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.log);
    }
}
