//! moto on loopback (moto_server's application, with DynamoDB requests applied one at a time):
//! one per test process, shared by every test, killed with the process.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, SdkConfig};
use aws_sdk_dynamodb::config::{Credentials, Region};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType,
    ScalarAttributeType, TimeToLiveSpecification,
};
use serde_norway::Value;

/// How long moto_server may take to start answering; it imports a lot of Python on start.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);

/// A running moto_server.
#[derive(Debug)]
pub struct Moto {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
}

/// The process-wide moto_server, started on first use.
pub fn moto() -> &'static Moto {
    static MOTO: OnceLock<Moto> = OnceLock::new();
    MOTO.get_or_init(start)
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

fn start() -> Moto {
    let port = free_port();
    let tail: Tail = Arc::default();
    let (started_tx, started_rx) = mpsc::channel::<Result<(), String>>();
    let (exited_tx, exited_rx) = mpsc::channel::<String>();
    let thread_tail = tail.clone();
    // PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, so the child is
    // spawned from a thread that lives as long as the process, parked in `wait`.
    std::thread::Builder::new()
        .name("moto_server".into())
        .spawn(move || {
            let parent = std::process::id() as libc::pid_t;
            let python = match moto_python() {
                Ok(python) => python,
                Err(message) => {
                    let _ = started_tx.send(Err(message));
                    return;
                }
            };
            let mut command = Command::new(python);
            command
                .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/moto_serial.py"))
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
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
                        let mut lines = thread_tail.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                        if lines.len() == TAIL_LINES {
                            lines.pop_front();
                        }
                        lines.push_back(line);
                    }
                });
            }
            let _ = started_tx.send(Ok(()));
            let status = child.wait().map(|s| s.to_string()).unwrap_or_else(|err| err.to_string());
            let _ = exited_tx.send(status);
        })
        .expect("spawn the moto_server thread");

    match started_rx.recv() {
        Ok(Ok(())) => {}
        Ok(Err(message)) => panic!("{message}"),
        Err(_) => panic!("the moto_server thread ended before starting it"),
    }

    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if let Ok(status) = exited_rx.try_recv() {
            // Give the drain thread a moment to collect the last words.
            std::thread::sleep(Duration::from_millis(200));
            panic!("moto_server exited during start-up ({status}):\n{}", tail_text(&tail));
        }
        if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
            break;
        }
        if Instant::now() > deadline {
            panic!(
                "moto_server did not answer on {address} within {STARTUP_TIMEOUT:?}. \
                 Is it installed (`pip install \"moto[server]\"`)? Its stderr:\n{}",
                tail_text(&tail)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Moto { endpoint: format!("http://{address}") }
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

/// An SDK configuration for moto: static test credentials, us-east-1, the given endpoint.
pub async fn sdk_config(endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto-tests"))
        .endpoint_url(endpoint)
        .load()
        .await
}

/// A name no other test (or test process) uses, for buckets and tables in the shared moto.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Creates a FIFO queue with a unique name, as the template's turn queue is, and returns its URL.
pub async fn create_fifo_queue(client: &aws_sdk_sqs::Client) -> String {
    client
        .create_queue()
        .queue_name(format!("{}.fifo", unique_name("turns")))
        .attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true")
        .send()
        .await
        .expect("create queue")
        .queue_url
        .expect("queue url")
}

pub async fn create_bucket(client: &aws_sdk_s3::Client, name: &str) {
    client.create_bucket().bucket(name).send().await.unwrap_or_else(|err| panic!("create bucket {name}: {err:?}"));
}

/// The `SessionsTable` resource's properties in `template.yaml`. CloudFormation tags such as
/// `!Ref` parse as tagged values, which the properties read here do not use.
fn sessions_table_properties(template: &Path) -> Value {
    let text = std::fs::read_to_string(template).unwrap_or_else(|err| panic!("read {}: {err}", template.display()));
    let document: Value =
        serde_norway::from_str(&text).unwrap_or_else(|err| panic!("parse {}: {err}", template.display()));
    let resource = &document["Resources"]["SessionsTable"];
    assert_eq!(resource["Type"].as_str(), Some("AWS::DynamoDB::Table"), "SessionsTable in {}", template.display());
    resource["Properties"].clone()
}

fn string_at<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field].as_str().unwrap_or_else(|| panic!("template.yaml: SessionsTable field {field} is not a string"))
}

/// A `KeySchema` list of the template as SDK key elements.
fn key_schema(value: &Value, what: &str) -> Vec<KeySchemaElement> {
    value
        .as_sequence()
        .unwrap_or_else(|| panic!("template.yaml: {what} is not a list"))
        .iter()
        .map(|element| {
            KeySchemaElement::builder()
                .attribute_name(string_at(element, "AttributeName"))
                .key_type(KeyType::from(string_at(element, "KeyType")))
                .build()
                .expect("key schema element")
        })
        .collect()
}

/// One entry of the template's `GlobalSecondaryIndexes` as the SDK's index.
fn global_index(index: &Value) -> GlobalSecondaryIndex {
    let name = string_at(index, "IndexName");
    let projection = &index["Projection"];
    let non_key = projection["NonKeyAttributes"]
        .as_sequence()
        .map(|names| names.iter().map(|name| name.as_str().expect("a NonKeyAttributes name").to_owned()).collect());
    GlobalSecondaryIndex::builder()
        .index_name(name)
        .set_key_schema(Some(key_schema(&index["KeySchema"], &format!("index {name} KeySchema"))))
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::from(string_at(projection, "ProjectionType")))
                .set_non_key_attributes(non_key)
                .build(),
        )
        .build()
        .expect("global secondary index")
}

/// Creates a sessions table shaped exactly as `template.yaml` declares it, so the tests
/// exercise the deployed key schema rather than a copy of it.
pub async fn create_sessions_table(client: &aws_sdk_dynamodb::Client, table_name: &str) {
    let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../template.yaml");
    let properties = sessions_table_properties(&template);

    let definitions = properties["AttributeDefinitions"]
        .as_sequence()
        .expect("SessionsTable.AttributeDefinitions")
        .iter()
        .map(|definition| {
            AttributeDefinition::builder()
                .attribute_name(string_at(definition, "AttributeName"))
                .attribute_type(ScalarAttributeType::from(string_at(definition, "AttributeType")))
                .build()
                .expect("attribute definition")
        })
        .collect::<Vec<_>>();
    let key_schema = key_schema(&properties["KeySchema"], "SessionsTable.KeySchema");
    // Every global secondary index the template declares, with its keys and projection.
    let indexes = properties["GlobalSecondaryIndexes"]
        .as_sequence()
        .map(|indexes| indexes.iter().map(global_index).collect::<Vec<_>>())
        .filter(|indexes| !indexes.is_empty());
    let billing_mode = BillingMode::from(string_at(&properties, "BillingMode"));

    client
        .create_table()
        .table_name(table_name)
        .set_attribute_definitions(Some(definitions))
        .set_key_schema(Some(key_schema))
        .set_global_secondary_indexes(indexes)
        .billing_mode(billing_mode)
        .send()
        .await
        .unwrap_or_else(|err| panic!("create table {table_name}: {err:?}"));

    let ttl = &properties["TimeToLiveSpecification"];
    if ttl["Enabled"].as_bool() == Some(true) {
        client
            .update_time_to_live()
            .table_name(table_name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name(string_at(ttl, "AttributeName"))
                    .enabled(true)
                    .build()
                    .expect("ttl specification"),
            )
            .send()
            .await
            .unwrap_or_else(|err| panic!("enable TTL on {table_name}: {err:?}"));
    }
}
