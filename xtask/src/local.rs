//! `cargo xtask local`: a local stand-in for the deployed stack, for the cargo-lambda loop. It
//! starts moto_server (S3, DynamoDB) on a fixed loopback port, creates the bucket and the sessions
//! table as `template.yaml` declares it, uploads `examples/skills` for the sample events' user, and
//! writes the environment file that `cargo lambda watch --env-file` reads. It runs until Ctrl-C.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The port cargo-lambda's examples leave free (its own emulator listens on 9000).
const PORT: u16 = 5000;
const BUCKET: &str = "skills-local";
const TABLE: &str = "sessions-local";
/// The user of the sample events in `events/` (their JWT `sub`).
const SAMPLE_USER: &str = "user-demo";
/// Where the environment file is written; `target/` is already ignored by git.
const ENV_FILE: &str = "target/local.env";

pub fn run(root: &Path) -> Result<(), String> {
    crate::python::activate(root)?;
    let endpoint = format!("http://127.0.0.1:{PORT}");
    let address = SocketAddr::from(([127, 0, 0, 1], PORT));
    if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
        return Err(format!("port {PORT} is taken: stop what listens there (an earlier `cargo xtask local`?)"));
    }
    let mut moto = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &PORT.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|err| format!("could not start moto_server from .venv: {err}"))?;
    let started = Instant::now();
    while TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err() {
        if started.elapsed() > Duration::from_secs(30) || moto.try_wait().ok().flatten().is_some() {
            let _ = moto.kill();
            return Err(format!("moto_server did not start on {endpoint}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    let runtime = tokio::runtime::Runtime::new().map_err(|err| format!("tokio runtime: {err}"))?;
    if let Err(message) = runtime.block_on(provision(root, &endpoint)) {
        let _ = moto.kill();
        return Err(message);
    }
    let env_file = root.join(ENV_FILE);
    std::fs::write(&env_file, environment(root, &endpoint))
        .map_err(|err| format!("could not write {}: {err}", env_file.display()))?;
    eprintln!(
        "local stack ready: moto on {endpoint}, bucket {BUCKET}, table {TABLE}, examples/skills for {SAMPLE_USER}\n\
         environment for the functions: {ENV_FILE} (replayed model replies; edit it for a real model)\n\n\
         in another terminal:\n  \
         cargo lambda watch --env-file {ENV_FILE}\n\
         then:\n  \
         cargo lambda invoke http-turn --data-file events/http-turn.json\n  \
         cargo lambda invoke http-turn --data-file events/http-get-session.json\n  \
         cargo lambda invoke queue-turn --data-file events/sqs-batch.json\n\n\
         Ctrl-C stops moto (and forgets everything)."
    );
    let status = moto.wait().map_err(|err| format!("waiting for moto_server: {err}"))?;
    Err(format!("moto_server stopped ({status})"))
}

async fn provision(root: &Path, endpoint: &str) -> Result<(), String> {
    let config = tests::moto::sdk_config(endpoint).await;
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&config).force_path_style(true).build());
    let dynamodb = aws_sdk_dynamodb::Client::new(&config);
    tests::moto::create_bucket(&s3, BUCKET).await;
    tests::moto::create_sessions_table(&dynamodb, TABLE).await;
    let prefix = format!("{SAMPLE_USER}/skills/");
    let uploaded = tests::stack::upload_dir(&s3, BUCKET, &root.join("examples/skills"), &prefix).await?;
    eprintln!("uploaded {uploaded} files of examples/skills to s3://{BUCKET}/{SAMPLE_USER}/skills/");
    let uploaded = tests::stack::upload_dir(&s3, BUCKET, &root.join("examples/demo/skills"), &prefix).await?;
    eprintln!("uploaded {uploaded} files of examples/demo/skills (a skill with a script of its own)");
    Ok(())
}

/// What a deployed function gets from the template, pointed at the local stand-ins. The model is
/// the demo's replay file, so the loop needs no API key; `execute` runs in the local sandbox when
/// bubblewrap is installed.
fn environment(root: &Path, endpoint: &str) -> String {
    let replay = root.join("examples/demo/replay.jsonl");
    let sandbox = if std::path::Path::new("/usr/bin/bwrap").exists() {
        let packages = std::env::var("SANDBOX_PYTHON_PACKAGES").unwrap_or_default();
        format!("SANDBOX=local\nSANDBOX_PYTHON_PACKAGES={packages}\n")
    } else {
        eprintln!("no bubblewrap (apt-get install bubblewrap): the functions will not offer execute");
        String::new()
    };
    let environment = format!(
        "SESSIONS_TABLE={TABLE}\n\
         SKILLS_BUCKET={BUCKET}\n\
         AWS_ENDPOINT_URL={endpoint}\n\
         AWS_ACCESS_KEY_ID=testing\n\
         AWS_SECRET_ACCESS_KEY=testing\n\
         AWS_REGION=us-east-1\n\
         AWS_EC2_METADATA_DISABLED=true\n\
         LLM_PROVIDER=replay\n\
         LLM_REPLAY_FILE={}\n\
         RUST_LOG=info\n",
        replay.display()
    );
    environment + &sandbox
}
