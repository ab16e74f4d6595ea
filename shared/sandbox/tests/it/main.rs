//! The sandbox handler against real processes, in one test binary (`cargo test -p sandbox --test
//! it`): bubblewrap as the local backend runs it, and plain processes as the Lambda function runs
//! them. They need bwrap and the sandbox image's root filesystem in `SANDBOX_ROOT` (`cargo xtask
//! test` builds the image and sets it).

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use agent_ports::sandbox::{render_outcome, ExecRequest, Sandbox, SandboxError, SandboxFile, MAX_OUTPUT_CHARS};
use agent_ports::{SessionId, UserId};
use sandbox::handler::{self, Config, HandlerError, Isolation};
use sandbox::{LocalSandbox, WireFile, WireRequest, WireResponse, WireSkill};

mod bundles;
mod memory;

const SCRATCH_BASE: &str = "/tmp/agent-sandbox-tests";

fn bwrap_config() -> Config {
    let mut config = Config::local_default(PathBuf::from("/usr/bin/bwrap"), sandbox_root());
    config.scratch_base = PathBuf::from(SCRATCH_BASE);
    config
}

/// The image's root filesystem; `cargo xtask test` sets `SANDBOX_ROOT`.
fn sandbox_root() -> PathBuf {
    std::env::var_os("SANDBOX_ROOT").filter(|dir| !dir.is_empty()).map(PathBuf::from).expect(
        "SANDBOX_ROOT names the sandbox image's root filesystem: run `cargo xtask test`, or `cargo xtask sandbox image` \
         and export SANDBOX_ROOT=<the path it prints>",
    )
}

/// A process-isolation config over a scratch directory of its own (never /tmp/sandbox).
fn process_config(name: &str) -> Config {
    let mut config = Config::lambda_default();
    let dir = format!("{name}-{}", std::process::id());
    config.scratch_base = std::env::temp_dir().join("agent-sandbox-process-tests").join(dir);
    config
}

fn request(command: &str, timeout: Duration) -> WireRequest {
    WireRequest {
        tenant: "tenant-1".into(),
        session: "session-1".into(),
        command: command.into(),
        timeout_ms: u64::try_from(timeout.as_millis()).expect("small"),
        workspace: vec![],
        skills: vec![],
        ticket: None,
    }
}

fn run(config: &Config, request: WireRequest) -> WireResponse {
    handler::run_blocking(config, request).unwrap_or_else(|err| panic!("the call failed: {err}"))
}

/// Whether the handler runs as root here, which gives each call a bounded tmpfs workspace.
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn bash(command: &str) -> WireResponse {
    run(&bwrap_config(), request(command, Duration::from_secs(20)))
}

fn decoded(files: &[WireFile]) -> HashMap<String, Vec<u8>> {
    files.iter().map(|file| (file.path.clone(), file.decode(u64::MAX).expect("base64"))).collect()
}

/// Live tasks of `uid` on the machine (what must be none after a call); zombies wait for their
/// reaper and run nothing.
fn tasks_of(uid: u32) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else { continue };
        let real =
            status.lines().find_map(|line| line.strip_prefix("Uid:")).and_then(|rest| rest.split_whitespace().next());
        let zombie = status.lines().any(|line| line.starts_with("State:") && line.contains("zombie"));
        if real == Some(uid.to_string().as_str()) && !zombie {
            found.push(status.lines().next().unwrap_or_default().to_owned());
        }
    }
    found
}

static CREDENTIALS: Once = Once::new();

/// Puts credentials in this process's environment, as the functions have them.
fn set_credentials() {
    CREDENTIALS.call_once(|| {
        std::env::set_var("AWS_ACCESS_KEY_ID", "AKIATESTSANDBOXLEAK");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "secret-sandbox-leak");
        std::env::set_var("LLM_API_KEY", "llm-key-sandbox-leak");
    });
}

#[test]
fn echo_prints_and_the_exit_code_comes_back() {
    let response = bash("echo hello; exit 3");
    assert_eq!(response.output, "hello\n");
    assert_eq!(response.exit_code, Some(3));
    assert_eq!((response.stopped, response.timed_out), (None, false));
    assert!(response.written.is_empty() && response.deleted.is_empty() && response.not_kept.is_empty());
}

#[test]
fn stdout_and_stderr_are_interleaved_as_written() {
    let response = bash("echo one; echo two >&2; echo three; ls /nonexistent");
    assert!(response.output.starts_with("one\ntwo\nthree\nls: cannot access '/nonexistent'"), "{}", response.output);
    assert_eq!(response.exit_code, Some(2));
}

#[test]
fn a_timeout_stops_the_command_on_time() {
    let started = Instant::now();
    let response = run(&bwrap_config(), request("echo before; sleep 30", Duration::from_secs(1)));
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    assert!(response.timed_out);
    assert_eq!(response.stopped.as_deref(), Some("timed out after 1 s"));
    assert_eq!(response.exit_code, None);
    assert_eq!(response.output, "before\n");
}

#[test]
fn endless_output_is_cut_counted_and_stopped() {
    let started = Instant::now();
    let response = run(&bwrap_config(), request("yes", Duration::from_secs(60)));
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    assert_eq!(response.stopped.as_deref(), Some("printed more than 64 MiB of output"));
    assert!(!response.timed_out);
    assert!(response.omitted_bytes > 60 << 20, "omitted {}", response.omitted_bytes);
    assert!(response.output.starts_with("y\ny\n") && response.output.ends_with("y\n"));
    assert!(response.output.chars().count() < MAX_OUTPUT_CHARS + 100);
    assert!(response.output.contains(&format!("[{} bytes of output omitted]", response.omitted_bytes)));
}

#[test]
fn a_fork_bomb_ends_within_its_timeout_and_leaves_no_process() {
    let started = Instant::now();
    let response = run(&bwrap_config(), request("id -u; :(){ :|:& };:", Duration::from_secs(5)));
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    let uid: u32 = response.output.lines().next().and_then(|line| line.parse().ok()).expect("the uid comes first");
    assert!((200_000..260_000).contains(&uid), "uid {uid}");
    assert!(response.stopped.is_some() || response.exit_code.is_some(), "{response:?}");
    assert_eq!(tasks_of(uid), Vec::<String>::new());
}

#[test]
fn a_huge_file_is_stopped_and_not_kept() {
    let started = Instant::now();
    let response = bash("head -c 10G /dev/zero > big; ls -l big; echo after");
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert!(response.output.contains("33554432 "), "the file stops at RLIMIT_FSIZE: {}", response.output);
    assert!(response.written.is_empty());
    assert!(response.not_kept.iter().any(|line| line.starts_with("big: 33554432 bytes")), "{:?}", response.not_kept);
}

#[test]
fn writing_past_the_disk_bound_stops_the_command() {
    // Files under RLIMIT_FSIZE each, more than the workspace's 64 MiB together.
    let command = "for i in 1 2 3 4 5 6; do head -c 30M /dev/zero > f$i; done; du -sm . | cut -f1; sleep 1";
    let response = bash(command);
    if is_root() {
        // The workspace is a tmpfs of that size: the writes past it fail, the command goes on.
        assert!(response.output.contains("No space left on device"), "{}", response.output);
        let used: u64 = response.output.lines().find_map(|line| line.trim().parse().ok()).expect("du");
        assert!(used <= 65, "{used} MiB: {}", response.output);
    } else {
        assert_eq!(response.stopped.as_deref(), Some("wrote more than 64 MiB to the workspace"));
        assert_eq!(response.exit_code, None);
    }
}

#[test]
fn hundreds_of_files_come_back() {
    let response = bash("mkdir -p out; for i in $(seq 1 500); do echo $i > out/f$i.txt; done");
    assert_eq!(response.exit_code, Some(0));
    let written = decoded(&response.written);
    assert_eq!(written.len(), 500);
    assert_eq!(written["out/f250.txt"], b"250\n");
    assert!(response.not_kept.is_empty());
}

#[test]
fn files_past_the_file_bound_are_not_collected() {
    let mut config = bwrap_config();
    config.limits.files = 100;
    let response = run(&config, request("for i in $(seq 1 500); do echo $i > f$i; done", Duration::from_secs(20)));
    assert!(response.written.len() <= 100, "{} written", response.written.len());
    if is_root() {
        // The workspace's tmpfs has that many inodes: the files past them are never made.
        assert!(response.output.contains("No space left on device"), "{}", response.output);
    } else {
        assert!(response.not_kept.iter().any(|line| line.contains("more than 100 files")), "{:?}", response.not_kept);
    }
}

#[test]
fn there_is_no_network() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("address").port();
    let command = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\" 2>&1 | tail -1; \
         (echo hi > /dev/tcp/127.0.0.1/{port}) 2>&1; echo tcp=$?; \
         python3 -c \"import socket; socket.getaddrinfo('example.com', 443)\" 2>&1 | tail -1"
    );
    let response = bash(&command);
    // The seccomp filter refuses the socket itself, before any connection is tried.
    assert!(response.output.contains("PermissionError: [Errno 1] Operation not permitted"), "{}", response.output);
    assert!(response.output.contains("tcp=1"), "{}", response.output);
    assert!(response.output.contains("socket.gaierror"), "{}", response.output);
    assert_eq!(listener.accept().map(|_| ()).map_err(|err| err.kind()), Err(ErrorKind::WouldBlock));
}

#[test]
fn the_command_sees_no_credentials() {
    set_credentials();
    // In bwrap, /proc shows only the sandbox's own processes; the handler's environment is not
    // among them.
    let all_environs = "env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null";
    for (config, command) in [(bwrap_config(), all_environs), (process_config("credentials"), "env")] {
        let response = run(&config, request(command, Duration::from_secs(20)));
        for leak in ["AKIATESTSANDBOXLEAK", "secret-sandbox-leak", "llm-key-sandbox-leak", "AWS_", "LLM_"] {
            assert!(!response.output.contains(leak), "{leak} leaked in {:?}: {}", config.isolation, response.output);
        }
        assert!(response.output.contains("LANG=C.UTF-8"), "{}", response.output);
        assert!(response.output.contains("HOME="), "{}", response.output);
    }
}

#[test]
fn another_call_cannot_see_a_running_calls_files() {
    let writer = std::thread::spawn(|| {
        let mut call = request(
            "echo s3cr3t > secret_a.txt; mkdir -p d && echo s3cr3t > d/secret_b; sleep 3",
            Duration::from_secs(20),
        );
        call.tenant = "tenant-a".into();
        run(&bwrap_config(), call)
    });
    std::thread::sleep(Duration::from_millis(800));
    let mut call = request(
        "find / -name 'secret*' 2>/dev/null; grep -rs s3cr3t / 2>/dev/null | head -3; ls -a / /tmp /workspace",
        Duration::from_secs(20),
    );
    call.tenant = "tenant-b".into();
    let response = run(&bwrap_config(), call);
    assert!(!response.output.contains("secret_"), "{}", response.output);
    assert!(!response.output.contains("s3cr3t"), "{}", response.output);
    let written = writer.join().expect("the writer call");
    assert_eq!(decoded(&written.written)["secret_a.txt"], b"s3cr3t\n");
}

#[test]
fn skills_and_ticket_are_read_only() {
    let mut call = request(
        "cat /skills/pdf/SKILL.md /skills/pdf/scripts/run.sh /ticket/brief.txt; \
         touch /skills/pdf/new 2>/dev/null || echo refused-new; \
         { echo x > /skills/pdf/SKILL.md; } 2>/dev/null || echo refused-write; \
         rm /ticket/brief.txt 2>/dev/null || echo refused-rm; ls /skills",
        Duration::from_secs(20),
    );
    call.skills = vec![
        WireSkill {
            name: "pdf".into(),
            files: vec![WireFile::encode("SKILL.md", b"# pdf\n"), WireFile::encode("scripts/run.sh", b"echo run\n")],
            bundle: None,
        },
        WireSkill { name: "docx".into(), files: vec![WireFile::encode("SKILL.md", b"# docx\n")], bundle: None },
    ];
    call.ticket = Some(vec![WireFile::encode("brief.txt", b"the brief\n")]);
    let response = run(&bwrap_config(), call);
    assert_eq!(
        response.output, "# pdf\necho run\nthe brief\nrefused-new\nrefused-write\nrefused-rm\ndocx\npdf\n",
        "{response:?}"
    );
    assert!(response.written.is_empty());
}

#[test]
fn writes_and_deletions_come_back_and_links_and_fifos_do_not() {
    let mut call = request(
        "echo new > a.txt; rm sub/b.txt; mkdir -p out/deep && printf x > out/deep/c.txt; mkdir empty; \
         ln -s /etc/passwd link; mkfifo pipe; mv keep.txt kept.txt",
        Duration::from_secs(20),
    );
    call.workspace = vec![
        WireFile::encode("a.txt", b"old\n"),
        WireFile::encode("same.txt", b"same\n"),
        WireFile::encode("keep.txt", b"moved\n"),
        WireFile::encode("sub/b.txt", b"b\n"),
    ];
    let response = run(&bwrap_config(), call);
    assert_eq!(response.exit_code, Some(0), "{response:?}");
    let written = decoded(&response.written);
    let mut paths: Vec<&str> = written.keys().map(String::as_str).collect();
    paths.sort_unstable();
    assert_eq!(paths, ["a.txt", "kept.txt", "out/deep/c.txt"]);
    assert_eq!(written["a.txt"], b"new\n");
    assert_eq!(response.deleted, ["keep.txt", "sub/b.txt"]);
    assert_eq!(response.not_kept, ["link: a symbolic link", "pipe: not a regular file"]);
}

#[test]
fn invalid_requests_are_refused() {
    let config = bwrap_config();
    let mut call = request("true", Duration::from_secs(1));
    call.workspace = vec![WireFile::encode("../escape", b"x")];
    assert!(matches!(handler::run_blocking(&config, call), Err(HandlerError::InvalidRequest(_))));
    let mut call = request("true", Duration::from_secs(1));
    call.tenant = "a/b".into();
    assert!(matches!(handler::run_blocking(&config, call), Err(HandlerError::InvalidRequest(_))));
    let call = request("true", Duration::from_secs(601));
    assert!(matches!(handler::run_blocking(&config, call), Err(HandlerError::InvalidRequest(_))));
}

fn exec_request(command: &str, workspace: Vec<SandboxFile>) -> ExecRequest {
    ExecRequest {
        tenant: UserId::parse("tenant-1").expect("valid"),
        session: SessionId::parse("session-1").expect("valid"),
        command: command.into(),
        timeout: Duration::from_secs(20),
        workspace,
        skills: vec![],
        ticket: None,
        resume: None,
    }
}

#[tokio::test]
async fn binary_bytes_round_trip_through_the_local_backend() {
    let sandbox = LocalSandbox::new(bwrap_config());
    let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
    let input = SandboxFile { path: "data.bin".into(), bytes: Arc::new(all.clone()) };
    let outcome = sandbox
        .execute(exec_request(
            "cp data.bin copy.bin && printf '\\x00\\xff' >> copy.bin && wc -c < copy.bin",
            vec![input],
        ))
        .await
        .expect("runs");
    assert_eq!(outcome.output, "514\n");
    assert_eq!(outcome.changes.written.len(), 1);
    let copy = &outcome.changes.written[0];
    let mut expected = all;
    expected.extend_from_slice(&[0, 255]);
    assert_eq!((copy.path.as_str(), copy.bytes.as_slice()), ("copy.bin", expected.as_slice()));
    assert_eq!(render_outcome(&outcome), "514\n\n[Command succeeded with exit code 0]");
}

#[tokio::test]
async fn too_many_bytes_are_too_large_for_the_model() {
    let sandbox = LocalSandbox::new(bwrap_config());
    let big = SandboxFile { path: "big.bin".into(), bytes: Arc::new(vec![7; 5_000_000]) };
    let result = sandbox.execute(exec_request("true", vec![big])).await;
    assert!(matches!(result, Err(SandboxError::TooLarge { bytes: 5_000_000, files: 1, .. })), "{result:?}");
}

#[tokio::test]
async fn the_local_backend_checks_itself_and_runs_echo_quickly() {
    // As the app makes it (the default scratch base, bwrap from PATH), then over the tests' base.
    let from_env = LocalSandbox::from_env().expect("bwrap is installed and works");
    assert_eq!(
        from_env.config().isolation,
        Isolation::Bwrap { bwrap: from_env_bwrap(&from_env), root: sandbox_root() }
    );
    assert_eq!(from_env.layout().workspace, "/workspace");
    let sandbox = LocalSandbox::new(bwrap_config());
    sandbox.check().expect("the self-check passes");
    assert_eq!(sandbox.name(), "local");
    let mut times = Vec::new();
    for _ in 0..21 {
        let started = Instant::now();
        let outcome = sandbox.execute(exec_request("echo hi", vec![])).await.expect("runs");
        times.push(started.elapsed());
        assert_eq!(outcome.output, "hi\n");
    }
    // The first call is the cold one.
    times.remove(0);
    times.sort();
    let median = times[times.len() / 2];
    println!("echo through LocalSandbox: median {median:?}, min {:?}, max {:?}", times[0], times[times.len() - 1]);
    assert!(median < Duration::from_secs(1), "median {median:?}");
}

fn from_env_bwrap(sandbox: &LocalSandbox) -> PathBuf {
    match &sandbox.config().isolation {
        Isolation::Bwrap { bwrap, .. } => bwrap.clone(),
        Isolation::Process => panic!("the local backend uses bubblewrap"),
    }
}

#[test]
fn the_sandbox_python_packages_import() {
    let command = "python -c \"import pypdf, openpyxl, docx, pptx, lxml, defusedxml, PIL, numpy, pandas; print('imported')\" && \
                   python -c \"import matplotlib.pyplot as plt; plt.plot([1, 2], [3, 4]); plt.savefig('plot.png')\" && ls -a";
    let response = run(&bwrap_config(), request(command, Duration::from_secs(60)));
    assert_eq!(response.exit_code, Some(0), "{}", response.output);
    assert!(response.output.starts_with("imported\n"), "{}", response.output);
    let written = decoded(&response.written);
    assert!(written.get("plot.png").is_some_and(|png| png.starts_with(b"\x89PNG")), "{:?}", written.keys());
    assert_eq!(written.len(), 1, "caches stay out of the workspace: {:?}", written.keys());
}

#[test]
fn process_isolation_runs_echo_in_its_layout() {
    let config = process_config("echo");
    let layout = config.layout();
    assert!(matches!(config.isolation, Isolation::Process));
    let mut call =
        request("pwd; echo hi > out.txt; cat in.txt; ls \"$PWD/in.txt\"; python --version", Duration::from_secs(20));
    call.workspace = vec![WireFile::encode("in.txt", b"input\n")];
    let response = run(&config, call);
    assert_eq!(response.exit_code, Some(0), "{}", response.output);
    let expected = format!("{ws}\ninput\n{ws}/in.txt\nPython 3", ws = layout.workspace);
    assert!(response.output.starts_with(&expected), "{}", response.output);
    assert_eq!(decoded(&response.written)["out.txt"], b"hi\n");
    assert!(!config.scratch_base.exists(), "the scratch directory is removed after the call");
}

#[test]
fn process_isolation_times_out() {
    let started = Instant::now();
    let response = run(&process_config("timeout"), request("sleep 30 & sleep 30", Duration::from_secs(1)));
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    assert!(response.timed_out);
    assert_eq!(response.stopped.as_deref(), Some("timed out after 1 s"));
}
