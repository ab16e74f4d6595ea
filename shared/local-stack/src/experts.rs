//! Expert MCP servers for the tests: the official Python SDK's server (`shared/local-stack/expert_server.py`)
//! started on a free loopback port, stopped when dropped.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::stack::repo_root;

pub struct ExpertServer {
    pub url: String,
    child: Child,
}

/// A loopback port nobody listens on, for an expert that is down.
pub fn dead_url() -> String {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    format!("http://127.0.0.1:{port}/mcp")
}

impl ExpertServer {
    pub fn start() -> ExpertServer {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let script = repo_root().join("shared/local-stack/expert_server.py");
        let child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start python3 shared/local-stack/expert_server.py (pip install mcp)");
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the expert server did not start: is `mcp` installed (pip install mcp)?"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        ExpertServer { url: format!("http://{address}/mcp"), child }
    }
}

impl Drop for ExpertServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
