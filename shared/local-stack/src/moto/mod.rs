//! moto on loopback (moto_server's application, with DynamoDB requests applied one at a time): one
//! per test process, shared by every test and killed with the process, or one a local command
//! starts on a fixed port and keeps until Ctrl-C (`cargo xtask local`, `cargo xtask console`).

mod resources;

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use resources::{
    create_bucket, create_fifo_queue, create_sessions_table, sdk_config, take_queue_records, unique_name,
};

/// How long moto_server may take to start answering; it imports a lot of Python on start.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);

/// How often the launcher's thread looks whether moto has exited; a blocking wait would hold the
/// child's lock, and `kill` needs it.
const EXIT_POLL: Duration = Duration::from_millis(100);

/// A running moto_server, killed when dropped (the process-wide one lives as long as the process).
///
/// It serves every backend the Python environment has the packages for, loading each on its first
/// request: `cargo xtask local` installs S3's and DynamoDB's only (`tests/requirements-local.txt`).
#[derive(Debug)]
pub struct Moto {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    pub port: u16,
    child: Arc<Mutex<Child>>,
    /// The exit status, sent once by the launcher's thread.
    exited: Mutex<mpsc::Receiver<String>>,
    tail: Tail,
}

/// The process-wide moto_server, started on first use on a port the kernel picks.
pub fn moto() -> &'static Moto {
    static MOTO: OnceLock<Moto> = OnceLock::new();
    MOTO.get_or_init(|| Moto::start(None).unwrap_or_else(|message| panic!("{message}")))
}

/// A free port, found by letting the kernel pick one. Another process could take it before
/// moto binds it; that shows up as moto exiting early, which `start` reports.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local address").port()
}

/// The last lines moto_server wrote to stderr, for failure messages.
type Tail = Arc<Mutex<VecDeque<String>>>;

const TAIL_LINES: usize = 50;

fn tail_text(tail: &Tail) -> String {
    let lines = tail.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if lines.is_empty() {
        "(moto_server wrote nothing to stderr)".to_string()
    } else {
        lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Moto {
    /// Starts moto_server (the one on `PATH`) on loopback `port`, or on a free port when `None`,
    /// and waits until it accepts connections. It dies with this process.
    pub fn start(port: Option<u16>) -> Result<Moto, String> {
        let port = port.unwrap_or_else(free_port);
        let python = moto_python()?;
        let mut command = Command::new(python);
        command
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/moto_serial.py"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let tail: Tail = Arc::default();
        let (started_tx, started_rx) = mpsc::channel::<Result<Arc<Mutex<Child>>, String>>();
        let (exited_tx, exited_rx) = mpsc::channel::<String>();
        let thread_tail = tail.clone();
        // PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, so the child is
        // spawned from a thread that lives as long as the child, watching for its exit.
        std::thread::Builder::new()
            .name("moto_server".into())
            .spawn(move || {
                let parent = std::process::id() as libc::pid_t;
                // SAFETY: only async-signal-safe calls between fork and exec.
                unsafe {
                    command.pre_exec(move || {
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        // The parent may have died before prctl took effect.
                        if libc::getppid() != parent {
                            libc::_exit(1);
                        }
                        Ok(())
                    });
                }
                let mut child = match command.spawn() {
                    Ok(child) => child,
                    Err(err) => {
                        let _ = started_tx.send(Err(format!("could not start moto_serial.py: {err}")));
                        return;
                    }
                };
                // moto logs every request to stderr: it must be drained or moto blocks on a full pipe.
                if let Some(stderr) = child.stderr.take() {
                    std::thread::spawn(move || {
                        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                            let mut lines = lock(&thread_tail);
                            if lines.len() == TAIL_LINES {
                                lines.pop_front();
                            }
                            lines.push_back(line);
                        }
                    });
                }
                let child = Arc::new(Mutex::new(child));
                let _ = started_tx.send(Ok(child.clone()));
                let status = loop {
                    match lock(&child).try_wait() {
                        Ok(Some(status)) => break status.to_string(),
                        Ok(None) => {}
                        Err(err) => break err.to_string(),
                    }
                    std::thread::sleep(EXIT_POLL);
                };
                let _ = exited_tx.send(status);
            })
            .map_err(|err| format!("spawn the moto_server thread: {err}"))?;

        let child = match started_rx.recv() {
            Ok(started) => started?,
            Err(_) => return Err("the moto_server thread ended before starting it".into()),
        };
        let mut moto =
            Moto { endpoint: format!("http://127.0.0.1:{port}"), port, child, exited: Mutex::new(exited_rx), tail };
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Ok(status) = lock(&moto.exited).try_recv() {
                // Give the drain thread a moment to collect the last words.
                std::thread::sleep(Duration::from_millis(200));
                return Err(format!("moto_server exited during start-up ({status}):\n{}", tail_text(&moto.tail)));
            }
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return Ok(moto);
            }
            if Instant::now() > deadline {
                let _ = moto.kill();
                return Err(format!(
                    "moto_server did not answer on {address} within {STARTUP_TIMEOUT:?}. \
                     Is it installed (`pip install \"moto[server]\"`)? Its stderr:\n{}",
                    tail_text(&moto.tail)
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Blocks until moto_server exits (killed, or Ctrl-C); says how, with its last words.
    pub fn wait(&mut self) -> String {
        let status = lock(&self.exited).recv().unwrap_or_else(|_| "its watcher ended".to_owned());
        std::thread::sleep(Duration::from_millis(200));
        format!("{status}; its last words:\n{}", tail_text(&self.tail))
    }

    /// Stops moto_server; what it held is gone. Killing one that already exited is no error.
    pub fn kill(&mut self) -> std::io::Result<()> {
        lock(&self.child).kill()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// The Python that `moto_server` on `PATH` runs in (its script's `#!` line), so the launcher
/// imports the same moto; `moto_serial.py` says why moto is not started as `moto_server` itself.
fn moto_python() -> Result<std::path::PathBuf, String> {
    const INSTALL: &str = "install it with `pip install \"moto[server]\"`";
    let path = std::env::var_os("PATH").unwrap_or_default();
    let script = std::env::split_paths(&path)
        .map(|dir| dir.join("moto_server"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| format!("moto_server is not on PATH; {INSTALL}"))?;
    let text = std::fs::read(&script).map_err(|err| format!("read {}: {err}", script.display()))?;
    let first_line = text.split(|byte| *byte == b'\n').next().unwrap_or_default();
    let words: Vec<&str> = std::str::from_utf8(first_line)
        .ok()
        .and_then(|line| line.strip_prefix("#!"))
        .map(|line| line.split_whitespace().collect())
        .unwrap_or_default();
    // `#!/usr/bin/env python3` names its Python by the word after `env`.
    let interpreter = match words.as_slice() {
        [env, program, ..] if Path::new(env).file_name().is_some_and(|name| name == "env") => *program,
        [interpreter, ..] => *interpreter,
        [] => return Err(format!("{} has no `#!` line naming its Python; {INSTALL}", script.display())),
    };
    let is_python = Path::new(interpreter).file_name().is_some_and(|name| name.to_string_lossy().starts_with("python"));
    if !is_python {
        // A pyenv or asdf shim is a shell script that picks a Python at run time.
        return Err(format!(
            "{} runs {interpreter}, not Python (a version manager's shim?): put the Python environment that has \
             moto first on PATH, as `cargo xtask test` does with .venv",
            script.display()
        ));
    }
    Ok(interpreter.into())
}
