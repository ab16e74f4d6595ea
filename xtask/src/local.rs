//! `cargo xtask local`: a local stand-in for the deployed stack, for the cargo-lambda loop. It
//! starts moto_server (S3, DynamoDB) on a fixed loopback port, creates the bucket and the sessions
//! table as `template.yaml` declares it, uploads `examples/skills` (and `examples/agents`, the
//! tenant's agents) for the sample events' user, and
//! writes the environment file that `cargo lambda watch --env-file` reads; it also serves a local
//! identity provider (test keys) so `stream-turn` can verify a token for the sample user, and a
//! bundle signing key of its own. It runs until Ctrl-C.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use local_stack::moto::Moto;
use serde_json::{json, Value};

/// The port cargo-lambda's examples leave free (its own emulator listens on 9000).
const PORT: u16 = 5000;
const BUCKET: &str = "skills-local";
const TABLE: &str = "sessions-local";
/// The user of the sample events in `events/` (their JWT `sub`).
const SAMPLE_USER: &str = "user-demo";
/// Where the environment file is written; `target/` is already ignored by git.
const ENV_FILE: &str = "target/local.env";
/// The streamed sample event with a token the local issuer signed, and the token alone (for curl).
const STREAM_EVENT: &str = "target/local/stream-turn.json";
const TOKEN_FILE: &str = "target/local/token";
/// The replies the local loop's replay model plays: for every turn, `load_skill` of the
/// compraventa skill and an answer that fits each sample event (they all ask about a compraventa).
pub const REPLAY_FILE: &str = "examples/local/replay.jsonl";
/// How long the handed-out token is good for: a working day.
const TOKEN_SECONDS: u64 = 12 * 60 * 60;
/// The local stacks' bundle signing key (`BUNDLE_SIGNING_KEY`): the functions check bundles with
/// it and `skills sync` into a local stack signs with it. Never a deployment's key.
const LOCAL_BUNDLE_KEY: &str = "local-stack-bundle-signing-key-not-a-secret";

/// Where the local stand-ins listen, and the names the functions are given.
pub struct LocalStack {
    pub endpoint: String,
    pub bucket: String,
    pub table: String,
    /// The local identity provider: `stream-turn` verifies bearer tokens against its JWKS.
    pub issuer: String,
    pub audience: String,
}

pub fn run(root: &Path) -> Result<(), String> {
    crate::python::activate_local(root)?;
    let address = SocketAddr::from(([127, 0, 0, 1], PORT));
    if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
        return Err(format!("port {PORT} is taken: stop what listens there (an earlier `cargo xtask local`?)"));
    }
    let mut moto = start_moto(PORT)?;
    let endpoint = moto.endpoint.clone();

    // The runtime lives until moto stops: the identity provider is served from its threads.
    let runtime = tokio::runtime::Runtime::new().map_err(|err| format!("tokio runtime: {err}"))?;
    // An error drops `moto`, which stops it.
    runtime.block_on(provision(root, &endpoint, BUCKET, TABLE))?;
    let identity = runtime.block_on(local_stack::identity::IdentityProvider::start());
    let stack = LocalStack {
        endpoint: endpoint.clone(),
        bucket: BUCKET.to_owned(),
        table: TABLE.to_owned(),
        issuer: identity.issuer.clone(),
        audience: local_stack::identity::AUDIENCE.to_owned(),
    };
    let token = identity.token_valid_for(SAMPLE_USER, TOKEN_SECONDS);
    write_files(root, &stack, &token)?;
    eprintln!(
        "local stack ready: moto on {endpoint}, bucket {BUCKET}, table {TABLE}, examples/skills for {SAMPLE_USER},\n\
         a local identity provider on {issuer} (test keys) whose token for {SAMPLE_USER} is in {TOKEN_FILE} (12 h)\n\
         environment for the functions: {ENV_FILE} (model replies replayed from {REPLAY_FILE}; edit it for a real model)\n\n\
         in another terminal:\n  \
         cargo lambda watch --env-file {ENV_FILE}\n\
         then:\n  \
         cargo lambda invoke http-turn --data-file events/http-turn.json\n  \
         cargo lambda invoke http-turn --data-file events/http-get-session.json\n  \
         cargo lambda invoke queue-turn --data-file events/sqs-batch.json\n  \
         cargo lambda invoke skills-index --data-file events/skills-index-rebuild.json\n  \
         cargo lambda invoke stream-turn --data-file {STREAM_EVENT}\n\
         and a stream through cargo-lambda's function URL:\n  \
         curl -N http://127.0.0.1:9000/lambda-url/stream-turn/sessions/demo-session/turns \\\n    \
         -H \"authorization: Bearer $(cat {TOKEN_FILE})\" -H 'accept: text/event-stream' \\\n    \
         -H 'content-type: application/json' -d '{{\"message\": \"Necesito preparar una compraventa de vivienda\"}}'\n\n\
         Ctrl-C stops moto and the identity provider (and forgets everything).",
        issuer = stack.issuer,
    );
    let status = moto.wait();
    drop(runtime);
    Err(format!("moto_server stopped ({status})"))
}

/// Starts moto (from `.venv`, see [`crate::python::activate_local`]) on loopback `port` with
/// local-stack's launcher, and waits until it accepts connections.
pub fn start_moto(port: u16) -> Result<Moto, String> {
    eprintln!("xtask: starting moto_server on http://127.0.0.1:{port}");
    Moto::start(Some(port))
}

/// The environment file, the streamed sample event with a real token, and the token alone.
fn write_files(root: &Path, stack: &LocalStack, token: &str) -> Result<(), String> {
    let write = |relative: &str, text: String| {
        let path = root.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|err| format!("could not create {}: {err}", parent.display()))?;
        }
        std::fs::write(&path, text).map_err(|err| format!("could not write {}: {err}", path.display()))
    };
    write(ENV_FILE, environment(root, stack, sandbox_settings(root).as_deref()))?;
    let event = std::fs::read_to_string(root.join("events/stream-turn.json"))
        .map_err(|err| format!("could not read events/stream-turn.json: {err}"))?;
    let event: Value = serde_json::from_str(&event).map_err(|err| format!("events/stream-turn.json: {err}"))?;
    write(STREAM_EVENT, format!("{:#}\n", with_token(event, token)))?;
    write(TOKEN_FILE, format!("{token}\n"))
}

/// A sample Function URL event with `token` as its bearer token.
pub fn with_token(mut event: Value, token: &str) -> Value {
    event["headers"]["authorization"] = json!(format!("Bearer {token}"));
    event
}

async fn provision(root: &Path, endpoint: &str, bucket: &str, table: &str) -> Result<(), String> {
    let config = local_stack::moto::sdk_config(endpoint).await;
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&config).force_path_style(true).build());
    let dynamodb = aws_sdk_dynamodb::Client::new(&config);
    local_stack::moto::create_bucket(&s3, bucket).await;
    local_stack::moto::create_sessions_table(&dynamodb, table).await;
    let prefix = format!("{SAMPLE_USER}/skills/");
    let uploaded = local_stack::stack::upload_dir(&s3, bucket, &root.join("examples/skills"), &prefix).await?;
    eprintln!("uploaded {uploaded} files of examples/skills to s3://{bucket}/{SAMPLE_USER}/skills/");
    let uploaded = local_stack::stack::upload_dir(&s3, bucket, &root.join("examples/demo/skills"), &prefix).await?;
    eprintln!("uploaded {uploaded} files of examples/demo/skills (a skill with a script of its own)");
    let agents = format!("{SAMPLE_USER}/agents/");
    let uploaded = local_stack::stack::upload_dir(&s3, bucket, &root.join("examples/agents"), &agents).await?;
    eprintln!("uploaded {uploaded} files of examples/agents to s3://{bucket}/{agents}");
    Ok(())
}

/// `SANDBOX=local` over the sandbox image (built first when needed) when bubblewrap is there.
pub fn sandbox_settings(root: &Path) -> Option<String> {
    if Path::new("/usr/bin/bwrap").exists() {
        match crate::image::activate(root) {
            Ok(image) => Some(format!("SANDBOX=local\nSANDBOX_ROOT={}\n", image.root.display())),
            Err(err) => {
                eprintln!("the sandbox image could not be built ({err}): the functions will not offer execute");
                None
            }
        }
    } else {
        eprintln!("no bubblewrap (apt-get install bubblewrap): the functions will not offer execute");
        None
    }
}

/// What a deployed function gets from the template, pointed at the local stand-ins. The model is
/// the local loop's replay file, which answers, once used up, with a reply saying so rather than
/// failing the turn; `stream-turn` verifies tokens against the local issuer, exactly as it does
/// a deployed one (no bypass: a deployed function has no way to reach a loopback issuer).
pub fn environment(root: &Path, stack: &LocalStack, sandbox: Option<&str>) -> String {
    let replay: PathBuf = root.join(REPLAY_FILE);
    let environment = format!(
        "SESSIONS_TABLE={table}\n\
         SKILLS_BUCKET={bucket}\n\
         AWS_ENDPOINT_URL={endpoint}\n\
         AWS_ACCESS_KEY_ID=testing\n\
         AWS_SECRET_ACCESS_KEY=testing\n\
         AWS_REGION=us-east-1\n\
         AWS_EC2_METADATA_DISABLED=true\n\
         LLM_PROVIDER=replay\n\
         LLM_REPLAY_FILE={replay}\n\
         LLM_REPLAY_EXHAUSTED=answer\n\
         JWT_ISSUER={issuer}\n\
         JWT_AUDIENCE={audience}\n\
         BUNDLE_SIGNING_KEY={LOCAL_BUNDLE_KEY}\n\
         RUST_LOG=info\n",
        table = stack.table,
        bucket = stack.bucket,
        endpoint = stack.endpoint,
        replay = replay.display(),
        issuer = stack.issuer,
        audience = stack.audience,
    );
    environment + sandbox.unwrap_or_default()
}

/// The `NAME=value` lines of an environment file, as `cargo lambda watch --env-file` reads them.
pub fn parse_environment(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.trim().to_owned(), value.to_owned()))
        .collect()
}

#[cfg(test)]
mod loop_tests {
    use std::time::Duration;

    use local_stack::identity::IdentityProvider;
    use local_stack::lambda::{Function, Invocation};
    use local_stack::stack::sample_event;
    use serde_json::{json, Value};

    use super::*;

    fn stack(issuer: &str) -> LocalStack {
        LocalStack {
            endpoint: "http://127.0.0.1:5000".to_owned(),
            bucket: BUCKET.to_owned(),
            table: TABLE.to_owned(),
            issuer: issuer.to_owned(),
            audience: local_stack::identity::AUDIENCE.to_owned(),
        }
    }

    fn lookup(env: &[(String, String)]) -> impl Fn(&str) -> Option<String> + '_ {
        move |name| env.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone())
    }

    #[test]
    fn the_environment_configures_the_token_check_and_a_replay_that_answers_when_used_up() {
        let text = environment(&crate::root(), &stack("http://127.0.0.1:41234"), None);
        let env = parse_environment(&text);
        let jwt = agent_app::jwt::JwtConfig::from_lookup(lookup(&env)).expect("stream-turn starts with this");
        assert_eq!(jwt.issuer, "http://127.0.0.1:41234");
        assert_eq!(jwt.jwks_url, "http://127.0.0.1:41234/.well-known/jwks.json");
        assert_eq!(jwt.audiences, vec![local_stack::identity::AUDIENCE.to_owned()]);
        let model = llm::LlmConfig::from_lookup(lookup(&env)).expect("a replay configuration");
        assert_eq!(model.provider, llm::ProviderKind::Replay);
        assert!(model.replay_exhausted_answers);
        let replay = model.replay_file.expect("a replay file");
        assert!(replay.ends_with(REPLAY_FILE), "{}", replay.display());
        assert!(replay.exists(), "{}", replay.display());
        // Skills synced into the stack get bundles its functions install.
        let key = lookup(&env)(agent_app::bundle_key::BUNDLE_KEY_ENV).expect("a bundle key");
        assert!(sandbox::bundles::BundleKey::new(key.as_bytes()).is_ok());
        // Without bubblewrap the functions get no sandbox settings; with it, the local sandbox.
        assert!(!text.contains("SANDBOX"));
        let with_sandbox = environment(&crate::root(), &stack("http://127.0.0.1:1"), Some("SANDBOX=local\n"));
        assert!(with_sandbox.ends_with("RUST_LOG=info\nSANDBOX=local\n"), "{with_sandbox}");
    }

    #[test]
    fn every_turn_of_the_local_replay_file_loads_the_skill_then_answers() {
        let text = std::fs::read_to_string(crate::root().join(REPLAY_FILE)).unwrap();
        let replies: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        assert!(replies.len() >= 8 && replies.len().is_multiple_of(2), "{} replies", replies.len());
        for pair in replies.chunks(2) {
            assert_eq!(pair[0]["tool_calls"][0]["name"], "load_skill");
            assert_eq!(pair[0]["tool_calls"][0]["arguments"]["skill_path"], "escrituras/compraventa");
            assert_eq!(pair[1]["stop_reason"], "end_turn");
            assert!(pair[1]["content"].as_str().unwrap().contains("compraventa"));
        }
        // It also loads as the functions load it (the deltas join up to each reply's text).
        llm::ReplayModel::from_file(crate::root().join(REPLAY_FILE)).expect("a valid replay file");
    }

    #[test]
    fn the_streamed_event_gets_the_token() {
        let event = with_token(sample_event("stream-turn.json"), "abc.def.ghi");
        assert_eq!(event["headers"]["authorization"], "Bearer abc.def.ghi");
        assert_eq!(event["rawPath"], "/sessions/demo-session/turns");
    }

    fn response(invocation: Invocation) -> Value {
        match invocation {
            Invocation::Response(value) => value,
            other => panic!("expected a response, got {other:?}"),
        }
    }

    fn status_and_body(response: &Value) -> (u64, Value) {
        let body = response["body"].as_str().map_or(Value::Null, |text| serde_json::from_str(text).unwrap());
        (response["statusCode"].as_u64().expect("statusCode"), body)
    }

    fn http_turn_answer(function_response: &Value) -> String {
        let (status, body) = status_and_body(function_response);
        assert_eq!(status, 200, "{body}");
        body["reply"].as_str().unwrap_or_else(|| panic!("a reply in {body}")).to_owned()
    }

    /// The compiled functions, with the environment `cargo xtask local` writes and the stack it
    /// provisions, fed every sample event in the order docs/deployment.md gives them, and then more turns
    /// than the replay file holds.
    #[tokio::test(flavor = "multi_thread")]
    async fn every_sample_event_answers_in_the_local_loop() {
        let root = crate::root();
        let endpoint = local_stack::moto::moto().endpoint.clone();
        let (bucket, table) =
            (local_stack::moto::unique_name("skills-local"), local_stack::moto::unique_name("sessions-local"));
        provision(&root, &endpoint, &bucket, &table).await.unwrap();
        let identity = IdentityProvider::start().await;
        let stack = LocalStack {
            endpoint,
            bucket,
            table,
            issuer: identity.issuer.clone(),
            audience: local_stack::identity::AUDIENCE.to_owned(),
        };
        let env = parse_environment(&environment(&root, &stack, None));

        let http = Function::start("http-turn", &env).await;
        let first = http_turn_answer(&response(http.invoke(sample_event("http-turn.json")).await));
        assert!(first.contains("compraventa") && first.contains("nota simple"), "{first}");
        let ticket = http_turn_answer(&response(http.invoke(sample_event("http-turn-ticket.json")).await));
        assert!(ticket.contains("expediente"), "{ticket}");
        let (status, session) = status_and_body(&response(http.invoke(sample_event("http-get-session.json")).await));
        assert_eq!(status, 200, "{session}");
        assert_eq!(session["turns"].as_array().map(Vec::len), Some(2), "{session}");
        assert_eq!(session["history"].as_array().and_then(|history| history.last()).unwrap()["content"], ticket);
        let (status, body) = status_and_body(&response(http.invoke(sample_event("http-bad-request.json")).await));
        assert_eq!(status, 400, "{body}");
        let (status, body) = status_and_body(&response(http.invoke(sample_event("http-no-auth.json")).await));
        assert_eq!(status, 401, "{body}");

        let queue = Function::start("queue-turn", &env).await;
        let batch = response(queue.invoke(sample_event("sqs-batch.json")).await);
        assert_eq!(batch, json!({"batchItemFailures": [{"itemIdentifier": "7d0c6f0e-3b1a-4f4e-9a57-0d6a3c1b2e9f"}]}));

        let index = Function::start("skills-index", &env).await;
        for name in [
            "skills-index-rebuild.json",
            "s3-skill-created.json",
            "eventbridge-file-created.json",
            "eventbridge-agent-created.json",
        ] {
            let summary = response(index.invoke(sample_event(name)).await);
            assert_eq!(summary["tenants"], 1, "{name}: {summary}");
        }
        let summary = response(index.invoke(sample_event("s3-skill-removed.json")).await);
        assert!(summary.get("tenants").is_some(), "{summary}");

        // The placeholder token of events/stream-turn.json is refused; the one the local issuer
        // signed (what `cargo xtask local` writes to target/local/stream-turn.json) streams a turn.
        let streamed = Function::start("stream-turn", &env).await;
        let budget = Duration::from_secs(60);
        let mut refused = streamed.invoke_streaming(sample_event("stream-turn.json"), budget).await;
        assert_eq!(refused.status().await, 401);
        let token = identity.token_valid_for(SAMPLE_USER, TOKEN_SECONDS);
        let mut stream = streamed.invoke_streaming(with_token(sample_event("stream-turn.json"), &token), budget).await;
        assert_eq!(stream.status().await, 200);
        let (mut names, mut text) = (Vec::new(), String::new());
        while let Some(event) = stream.next_event().await {
            if event.name == "message.delta" {
                text.push_str(event.data["text"].as_str().unwrap_or_default());
            }
            names.push(event.name);
        }
        assert_eq!(names.first().map(String::as_str), Some("turn.started"), "{names:?}");
        assert_eq!(names.last().map(String::as_str), Some("turn.completed"), "{names:?}");
        assert!(names.iter().any(|name| name == "skill.loaded"), "{names:?}");
        assert!(names.iter().filter(|name| *name == "message.delta").count() > 1, "{names:?}");
        assert!(text.contains("compraventa"), "{text}");

        // Past the end of the file, a turn is still answered, by a reply that says why.
        let mut last = String::new();
        for _ in 0..6 {
            last = http_turn_answer(&response(http.invoke(sample_event("http-turn.json")).await));
        }
        assert!(last.contains("has no more replies"), "{last}");
    }
}
