//! `cargo xtask console`: a browser console for skill authors. It starts the local stack (moto with
//! the bucket, table and turn queue of `template.yaml`, the example skills for two local users),
//! runs the compiled `http-turn`, `stream-turn` and `queue-turn` functions behind a Lambda Runtime
//! API as Lambda runs them, and serves the page of `console/` on loopback through a gateway that
//! turns the page's requests into the events the HTTP API (with its JWT authorizer) and the
//! Function URL send; `queue` feeds the queue's messages to `queue-turn` as SQS would.

mod demo;
mod gateway;
mod grader;
mod page;
mod queue;
mod seen;
mod texts;

use std::net::TcpListener;
use std::path::Path;

use serde_json::{json, Value};

use crate::local::{self, LocalStack};

/// Where the console listens unless `--port` says otherwise.
const DEFAULT_PORT: u16 = 8765;
const BUCKET: &str = "skills-console";
const TABLE: &str = "sessions-console";
/// How long the users' tokens are good for: a working day, like `cargo xtask local`'s.
const TOKEN_SECONDS: u64 = 12 * 60 * 60;
/// Instances of each function: a streamed turn keeps one busy, as on Lambda, so a second lets
/// the other user (or another tab) go on meanwhile.
const INSTANCES: usize = 2;

/// A local user and the folders of skills uploaded under their prefix. The two catalogs differ, so
/// switching users shows that each sees only their own skills.
struct ConsoleUser {
    id: &'static str,
    name: &'static str,
    skills: &'static [&'static str],
}

const USERS: [ConsoleUser; 2] = [
    ConsoleUser {
        id: "ana",
        name: "Ana",
        // The console's own examples add a skill with warnings and one the catalog skips.
        skills: &["examples/skills", "examples/demo/skills", "examples/console/skills"],
    },
    ConsoleUser { id: "ben", name: "Ben", skills: &["examples/skills"] },
];

struct Options {
    port: u16,
    /// Build the functions and the page first (skipped by the browser tests, which built both).
    build: bool,
    /// Echo the functions' log lines.
    logs: bool,
}

impl Options {
    fn parse(args: &[String]) -> Result<Self, String> {
        let mut options = Options { port: DEFAULT_PORT, build: true, logs: false };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--port" => {
                    let value = args.next().ok_or("--port needs a number")?;
                    options.port = value.parse().map_err(|_| format!("--port: `{value}` is not a port number"))?;
                }
                "--no-build" => options.build = false,
                "--logs" => options.logs = true,
                other => return Err(format!("unknown option `{other}` (console [--port <n>] [--no-build] [--logs])")),
            }
        }
        Ok(options)
    }
}

/// `cargo xtask console --help`.
pub(crate) const HELP: &str = "\
usage: cargo xtask console [--port <n>] [--no-build] [--logs]

The local stack (moto with a turn queue, a loopback token issuer, the compiled http-turn,
stream-turn and queue-turn) for two local users, and the web console on http://127.0.0.1:8765/;
runs until Ctrl-C. The page is built with npm on first use and whenever its sources change. The model is the console's demo model
(scripted, on loopback) unless LLM_PROVIDER, LLM_MODEL and LLM_API_KEY name a real one
(LLM_PROVIDER=replay: the local loop's replayed replies).
  --port <n>   listen on this loopback port instead of 8765
  --no-build   start what is already built (the functions and the page)
  --logs       print the functions' log lines";

pub fn run(root: &Path, args: &[String]) -> Result<(), String> {
    if args.iter().any(|arg| arg == "--help" || arg == "-h") {
        println!("{HELP}");
        return Ok(());
    }
    let options = Options::parse(args)?;
    // Taken before anything starts, so a second console fails at once with a clear message.
    let listener = TcpListener::bind(("127.0.0.1", options.port))
        .map_err(|err| format!("cannot listen on 127.0.0.1:{}: {err} (another console? try --port)", options.port))?;
    if options.build {
        crate::run(
            "cargo",
            &["build", "--package", "http-turn", "--package", "stream-turn", "--package", "queue-turn"],
        )?;
        page::build(root)?;
    }
    let page = page::Page::load(root)?;
    // The functions are started from beside this binary, where `cargo build` put them.
    let here = std::env::current_exe().map_err(|err| format!("where is xtask: {err}"))?;
    for function in ["http-turn", "stream-turn", "queue-turn"] {
        let binary = here.with_file_name(function);
        if !binary.exists() {
            return Err(format!("{} is missing: run without --no-build to build the functions", binary.display()));
        }
    }
    if options.logs {
        // Read by the Runtime API stand-in when it starts each function.
        std::env::set_var("TEST_FUNCTION_LOGS", "1");
    }
    crate::python::activate_local(root)?;
    // Without a model of the user's, the demo model answers (its port taken before any thread, as
    // it sets the LLM_* variables the functions get; it serves once the runtime runs).
    let demo = match std::env::var("LLM_PROVIDER").map(|provider| provider.trim().to_owned()) {
        Ok(provider) if !provider.is_empty() => None,
        _ => Some(DemoModel::bind()?),
    };
    let moto_port = free_port()?;
    let mut moto = local::start_moto(moto_port)?;
    let runtime = tokio::runtime::Runtime::new().map_err(|err| format!("tokio runtime: {err}"))?;
    let result = runtime.block_on(async {
        if let Some(demo) = demo {
            demo.serve().await?;
        }
        tokio::select! {
            served = serve(root, listener, page, moto_port) => served,
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    });
    let _ = moto.kill();
    let _ = moto.wait();
    result
}

/// The demo model (`demo`: the workspace's scripted model server with the demo's decisions, OpenAI's
/// API on loopback): it answers the requests docs/console.md shows (a note, then the note in Word; a
/// task for two subagents) and says what it is otherwise.
struct DemoModel(TcpListener);

/// The model name the functions send to the demo model, which the page shows.
const DEMO_MODEL: &str = "console-demo";

impl DemoModel {
    /// Takes the demo's port and points the functions' model settings at it.
    fn bind() -> Result<Self, String> {
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(|err| format!("no loopback port for the demo: {err}"))?;
        let address = listener.local_addr().map_err(|err| err.to_string())?;
        // xtask has no other thread yet.
        std::env::set_var("LLM_PROVIDER", "openai");
        std::env::set_var("LLM_BASE_URL", format!("http://{address}/v1"));
        std::env::set_var("LLM_MODEL", DEMO_MODEL);
        std::env::set_var("LLM_API_KEY", "demo");
        Ok(DemoModel(listener))
    }

    /// Serves on the runtime, each word streamed `MODEL_WORD_DELAY_MS` (40 ms unless set) after the last.
    async fn serve(self) -> Result<(), String> {
        let delay = std::env::var("MODEL_WORD_DELAY_MS").unwrap_or_else(|_| "40".to_owned());
        let delay = delay.trim().parse().map_err(|_| format!("MODEL_WORD_DELAY_MS: `{delay}` is not milliseconds"))?;
        let model = local_stack::model_server::ModelServer::start_on(self.0).await;
        model.set_chunk_delay(std::time::Duration::from_millis(delay));
        model.decide(demo::decide);
        Ok(())
    }
}

/// The console's own tests: its unit tests (Vitest), then its browser tests: Playwright drives
/// Debian's Chromium against this console (started with `--no-build` by Playwright, with the
/// functions and this binary as `cargo xtask test` built them) and a scripted model.
pub fn test(root: &Path) -> Result<(), String> {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    if !Path::new(&chromium).exists() {
        return Err(format!(
            "the console's browser tests need Chromium at {chromium}: `apt-get install chromium` (or set CHROMIUM)"
        ));
    }
    page::build(root)?;
    let console = root.join("console");
    page::npm(&console, &["test"])?;
    page::npm(&console, &["run", "test:browser"])
}

/// A port nothing listens on now, for moto (the console's own port is the one that is printed).
fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|err| format!("no free loopback port: {err}"))?;
    listener.local_addr().map(|address| address.port()).map_err(|err| err.to_string())
}

async fn serve(root: &Path, listener: TcpListener, page: page::Page, moto_port: u16) -> Result<(), String> {
    let endpoint = format!("http://127.0.0.1:{moto_port}");
    provision(root, &endpoint).await?;
    let identity = local_stack::identity::IdentityProvider::start().await;
    let stack = LocalStack {
        endpoint,
        bucket: BUCKET.to_owned(),
        table: TABLE.to_owned(),
        issuer: identity.issuer.clone(),
        audience: local_stack::identity::AUDIENCE.to_owned(),
    };
    let base = local::environment(root, &stack, local::sandbox_settings(root).as_deref());
    let (mut environment, model) = model_environment(&base, |name| std::env::var(name).ok(), &env_names())?;
    // The approval policy the console's turns run under, when its environment sets one.
    for name in ["APPROVAL_REQUIRED", "APPROVAL_ALLOW"] {
        if let Some(value) = std::env::var(name).ok().filter(|value| !value.contains('\n')) {
            environment.push_str(&format!("{name}={value}\n"));
        }
    }
    let env = local::parse_environment(&environment);
    write_storage_env(root, &stack)?;
    // Background turns and eval runs go through the turn queue, as once deployed.
    let turn_queue = queue::TurnQueue::create(&stack.endpoint).await;
    let queued_env: Vec<(String, String)> = env.iter().cloned().chain(turn_queue.environment()).collect();
    for _ in 0..INSTANCES {
        let function = local_stack::lambda::Function::start("queue-turn", &queued_env).await;
        tokio::spawn(turn_queue.clone().work(function));
    }
    let users: Vec<Value> = USERS
        .iter()
        .map(
            |user| json!({"id": user.id, "name": user.name, "token": identity.token_valid_for(user.id, TOKEN_SECONDS)}),
        )
        .collect();
    let config = json!({"users": users, "model": model, "sandbox": environment.contains("SANDBOX=local")});
    let verifier = gateway::verifier(&stack)?;
    let gateway = gateway::Gateway::start(&env, &queued_env, verifier, config, page, INSTANCES).await;
    let address = listener.local_addr().map_err(|err| err.to_string())?;
    eprintln!(
        "\nconsole ready: http://{address}/\n  \
         users: {users} (each with a token from a local identity provider)\n  \
         model: {model}\n  \
         the page talks to the compiled http-turn and stream-turn functions over moto on 127.0.0.1:{moto_port};\n  \
         queue-turn runs background turns and eval runs from the turn queue\n  \
         your own skills, as a user's whole catalog: cargo xtask skills sync <dir> --user ana --console\n\
         Ctrl-C stops it (and forgets everything).\n",
        users = USERS.iter().map(|user| user.id).collect::<Vec<_>>().join(", "),
    );
    gateway.serve(listener).await
}

/// Where `cargo xtask skills sync <dir> --user <id> --console` finds this stack: the storage lines
/// of the functions' environment, and nothing of the model's (a key may be among those).
fn write_storage_env(root: &Path, stack: &LocalStack) -> Result<(), String> {
    let path = root.join(crate::skills::CONSOLE_ENV_FILE);
    let text = format!(
        "AWS_ENDPOINT_URL={}\nSKILLS_BUCKET={}\nSESSIONS_TABLE={}\nAWS_ACCESS_KEY_ID=testing\n\
         AWS_SECRET_ACCESS_KEY=testing\nAWS_REGION=us-east-1\n",
        stack.endpoint, stack.bucket, stack.table
    );
    std::fs::write(&path, text).map_err(|err| format!("could not write {}: {err}", path.display()))
}

/// The bucket, the table and each user's skills.
async fn provision(root: &Path, endpoint: &str) -> Result<(), String> {
    let config = local_stack::moto::sdk_config(endpoint).await;
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&config).force_path_style(true).build());
    let dynamodb = aws_sdk_dynamodb::Client::new(&config);
    local_stack::moto::create_bucket(&s3, BUCKET).await;
    local_stack::moto::create_sessions_table(&dynamodb, TABLE).await;
    for user in &USERS {
        let prefix = format!("{}/skills/", user.id);
        let mut uploaded = 0;
        for folder in user.skills {
            uploaded += local_stack::stack::upload_dir(&s3, BUCKET, &root.join(folder), &prefix).await?;
        }
        eprintln!(
            "uploaded {} for {} ({})",
            crate::counted(uploaded as u64, "file", "files"),
            user.id,
            user.skills.join(", ")
        );
    }
    Ok(())
}

/// The names of the console's own environment that start with `LLM_`.
fn env_names() -> Vec<String> {
    std::env::vars().map(|(name, _)| name).filter(|name| name.starts_with("LLM_")).collect()
}

/// The functions' environment and a line saying which model answers. With `LLM_PROVIDER` set (and
/// not `replay`), every `LLM_*` variable of the console's environment replaces the local loop's
/// replay settings, so a real model (or a scripted one, in the browser tests) answers.
fn model_environment(
    base: &str,
    lookup: impl Fn(&str) -> Option<String>,
    names: &[String],
) -> Result<(String, String), String> {
    let provider = lookup("LLM_PROVIDER").map(|value| value.trim().to_owned()).filter(|value| !value.is_empty());
    let Some(provider) = provider.filter(|provider| provider != "replay") else {
        let model = format!(
            "replayed replies from {} (they do not read your messages; set LLM_PROVIDER, LLM_MODEL and LLM_API_KEY for a real model)",
            local::REPLAY_FILE
        );
        return Ok((base.to_owned(), model));
    };
    if provider == "bedrock" {
        return Err("the console's storage is moto, so its AWS credentials are moto's: use openai or anthropic".into());
    }
    let mut environment: String =
        base.lines().filter(|line| !line.starts_with("LLM_")).map(|line| format!("{line}\n")).collect();
    let mut names = names.to_vec();
    names.sort();
    for name in &names {
        if let Some(value) = lookup(name) {
            if value.contains('\n') {
                return Err(format!("{name} holds a line break"));
            }
            environment.push_str(&format!("{name}={value}\n"));
        }
    }
    let config = llm::LlmConfig::from_lookup(&lookup).map_err(|err| format!("the model settings: {err}"))?;
    if config.model == DEMO_MODEL {
        let model = "the console's demo model (scripted; set LLM_PROVIDER for a real one)";
        return Ok((environment, model.to_owned()));
    }
    Ok((environment, format!("{provider} {} at {}", config.model, config.base_url)))
}

#[cfg(test)]
mod console_tests {
    use super::*;

    fn lookup(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| (*value).to_owned())
    }

    const BASE: &str = "SESSIONS_TABLE=t\nLLM_PROVIDER=replay\nLLM_REPLAY_FILE=/r.jsonl\nRUST_LOG=info\n";

    #[test]
    fn without_a_provider_the_replay_model_answers() {
        let (environment, model) = model_environment(BASE, lookup(&[]), &[]).unwrap();
        assert_eq!(environment, BASE);
        assert!(model.starts_with("replayed replies from examples/local/replay.jsonl"), "{model}");
    }

    #[test]
    fn a_provider_replaces_the_replay_settings_with_the_consoles_own() {
        let pairs = &[
            ("LLM_PROVIDER", "openai"),
            ("LLM_BASE_URL", "http://127.0.0.1:9/v1"),
            ("LLM_MODEL", "scripted"),
            ("LLM_API_KEY", "test-key"),
        ];
        let names: Vec<String> = pairs.iter().map(|(name, _)| name.to_string()).collect();
        let (environment, model) = model_environment(BASE, lookup(pairs), &names).unwrap();
        assert_eq!(
            environment,
            "SESSIONS_TABLE=t\nRUST_LOG=info\nLLM_API_KEY=test-key\nLLM_BASE_URL=http://127.0.0.1:9/v1\n\
             LLM_MODEL=scripted\nLLM_PROVIDER=openai\n"
        );
        assert_eq!(model, "openai scripted at http://127.0.0.1:9/v1");
    }

    #[test]
    fn bedrock_and_bad_options_are_refused_with_a_reason() {
        let err = model_environment(BASE, lookup(&[("LLM_PROVIDER", "bedrock")]), &[]).unwrap_err();
        assert!(err.contains("moto"), "{err}");
        let err = Options::parse(&["--port".into(), "x".into()]).err().unwrap();
        assert!(err.contains("not a port number"), "{err}");
        let err = Options::parse(&["--colour".into()]).err().unwrap();
        assert!(err.contains("unknown option `--colour`"), "{err}");
        let options = Options::parse(&["--port".into(), "9001".into(), "--no-build".into()]).unwrap();
        assert_eq!((options.port, options.build, options.logs), (9001, false, false));
    }
}
