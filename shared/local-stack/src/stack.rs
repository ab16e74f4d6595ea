//! One test's world: a bucket and a sessions table of its own in the shared moto_server, a
//! scripted model server, and the compiled functions wired to them through their environment.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{json, Value};

use crate::lambda::Function;
use crate::model_server::ModelServer;
use crate::moto;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("shared/local-stack is inside the repo")
}

/// A sample event from `events/`.
pub fn sample_event(name: &str) -> Value {
    let path = repo_root().join("events").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).expect("sample event")).expect("sample event is JSON")
}

/// The sample queue record (`events/sqs-batch.json`) with its message id, FIFO message group and
/// body replaced: a record as SQS would deliver it to `queue-turn`.
pub fn sqs_record(message_id: &str, group: &str, body: &str) -> Value {
    let mut record = sample_event("sqs-batch.json")["Records"][0].clone();
    record["messageId"] = Value::from(message_id);
    record["attributes"]["MessageGroupId"] = Value::from(group);
    record["body"] = Value::from(body);
    record
}

/// The bundle signing key every function of a test stack gets (`BUNDLE_SIGNING_KEY`), so bundles
/// built by its skills-index, or signed with [`test_bundle_key`], are installed.
pub const TEST_BUNDLE_KEY: &str = "test-stack-bundle-signing-key-not-a-secret";

/// [`TEST_BUNDLE_KEY`] as the runtime holds it.
pub fn test_bundle_key() -> sandbox::bundles::BundleKey {
    sandbox::bundles::BundleKey::new(TEST_BUNDLE_KEY.as_bytes()).expect("a usable key")
}

pub struct Stack {
    pub endpoint: String,
    pub bucket: String,
    pub table: String,
    pub model: ModelServer,
    pub s3: aws_sdk_s3::Client,
    pub dynamodb: aws_sdk_dynamodb::Client,
}

impl Stack {
    pub async fn new() -> Stack {
        let endpoint = moto::moto().endpoint.clone();
        let config = moto::sdk_config(&endpoint).await;
        let s3 =
            aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&config).force_path_style(true).build());
        let dynamodb = aws_sdk_dynamodb::Client::new(&config);
        let bucket = moto::unique_name("skills");
        let table = moto::unique_name("sessions");
        moto::create_bucket(&s3, &bucket).await;
        moto::create_sessions_table(&dynamodb, &table).await;
        let model = ModelServer::start().await;
        Stack { endpoint, bucket, table, model, s3, dynamodb }
    }

    /// The environment a deployed function would get, pointed at the local peers.
    pub fn env(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = [
            ("SESSIONS_TABLE", self.table.as_str()),
            ("SKILLS_BUCKET", self.bucket.as_str()),
            ("AWS_ENDPOINT_URL", self.endpoint.as_str()),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
            ("LLM_PROVIDER", "openai"),
            ("LLM_BASE_URL", self.model.base_url.as_str()),
            ("LLM_MODEL", "scripted-model"),
            ("LLM_API_KEY", "sk-test-secret"),
            ("LLM_MAX_ATTEMPTS", "2"),
            ("LLM_RETRY_BASE_MS", "1"),
            ("BUNDLE_SIGNING_KEY", TEST_BUNDLE_KEY),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for (key, value) in extra {
            env.retain(|(k, _)| k != key);
            env.push((key.to_string(), value.to_string()));
        }
        env
    }

    pub async fn http(&self, extra: &[(&str, &str)]) -> Function {
        Function::start("http-turn", &self.env(extra)).await
    }

    pub async fn queue(&self, extra: &[(&str, &str)]) -> Function {
        Function::start("queue-turn", &self.env(extra)).await
    }

    pub async fn skills_index(&self, extra: &[(&str, &str)]) -> Function {
        Function::start("skills-index", &self.env(extra)).await
    }

    /// The S3 event notification S3 sends for `key` in this stack's bucket: `created` picks
    /// `ObjectCreated:Put` (from `events/s3-skill-created.json`), otherwise `ObjectRemoved:Delete`.
    pub fn s3_event(&self, keys: &[&str], created: bool) -> Value {
        let sample = sample_event(if created { "s3-skill-created.json" } else { "s3-skill-removed.json" });
        let template = sample["Records"][0].clone();
        let records: Vec<Value> = keys
            .iter()
            .map(|key| {
                let mut record = template.clone();
                record["s3"]["bucket"]["name"] = json!(self.bucket);
                record["s3"]["bucket"]["arn"] = json!(format!("arn:aws:s3:::{}", self.bucket));
                // S3 URL-encodes keys in events, with `+` for a space.
                record["s3"]["object"]["key"] = json!(key.replace(' ', "+"));
                record
            })
            .collect();
        json!({ "Records": records })
    }

    /// The EventBridge event S3 sends for `key` (what the template's `SkillsIndexRule` delivers),
    /// from the sample event with this stack's bucket.
    pub fn bridge_event(&self, key: &str, created: bool) -> Value {
        let mut event = sample_event("eventbridge-file-created.json");
        event["detail-type"] = json!(if created { "Object Created" } else { "Object Deleted" });
        event["detail"]["bucket"]["name"] = json!(self.bucket);
        event["detail"]["object"]["key"] = json!(key);
        event
    }

    pub async fn delete(&self, key: &str) {
        self.s3.delete_object().bucket(&self.bucket).key(key).send().await.expect("delete object");
    }

    /// The object's bytes, or `None` when there is none.
    pub async fn get(&self, key: &str) -> Option<Vec<u8>> {
        match self.s3.get_object().bucket(&self.bucket).key(key).send().await {
            Ok(object) => Some(object.body.collect().await.expect("read object").into_bytes().to_vec()),
            Err(_) => None,
        }
    }

    /// Puts many objects, 32 at a time.
    pub async fn put_many(&self, objects: Vec<(String, Vec<u8>)>) {
        use futures::stream::{self, StreamExt};
        stream::iter(objects)
            .map(|(key, bytes)| async move { self.put(&key, bytes).await })
            .buffer_unordered(32)
            .collect::<Vec<()>>()
            .await;
    }

    /// Puts `objects` (key, bytes) into the bucket in one request to the test moto's seed path
    /// (`moto_serial.py`), which stores them through moto's S3 backend as `PutObject` would: for a
    /// test's thousands of objects, whose uploading is not what it checks.
    pub async fn seed_objects(&self, objects: Vec<(String, Vec<u8>)>) {
        use base64::Engine;
        let objects: Vec<(String, String)> = objects
            .into_iter()
            .map(|(key, bytes)| (key, base64::engine::general_purpose::STANDARD.encode(bytes)))
            .collect();
        let response = reqwest::Client::new()
            .post(format!("{}/_local_stack/seed-s3-objects", self.endpoint))
            .json(&json!({"bucket": self.bucket, "objects": objects}))
            .send()
            .await
            .expect("moto answers the seed");
        let status = response.status();
        assert_eq!(status, reqwest::StatusCode::NO_CONTENT, "seed: {}", response.text().await.unwrap_or_default());
    }

    pub async fn put(&self, key: &str, bytes: impl Into<Vec<u8>>) {
        self.s3.put_object().bucket(&self.bucket).key(key).body(bytes.into().into()).send().await.expect("put object");
    }

    /// Uploads `examples/skills` under `{user}/skills/`.
    pub async fn upload_example_skills(&self, user: &str) {
        let skills = repo_root().join("examples/skills");
        upload_dir(&self.s3, &self.bucket, &skills, &format!("{user}/skills/"))
            .await
            .expect("upload the example skills");
    }

    pub async fn object_keys(&self, prefix: &str) -> Vec<String> {
        let listed = self.s3.list_objects_v2().bucket(&self.bucket).prefix(prefix).send().await.expect("list");
        listed.contents().iter().filter_map(|o| o.key().map(str::to_owned)).collect()
    }

    /// The raw session meta item, as an operator would see it.
    pub async fn session_item(&self, user: &str, session: &str) -> Option<HashMap<String, AttributeValue>> {
        self.dynamodb
            .get_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(format!("{user}#{session}")))
            .key("sk", AttributeValue::S(aws_store::META_SORT_KEY.to_owned()))
            .consistent_read(true)
            .send()
            .await
            .expect("get item")
            .item
    }

    /// Every item of the table, to prove that a refused request wrote nothing.
    pub async fn item_count(&self) -> usize {
        self.dynamodb.scan().table_name(&self.table).send().await.expect("scan").items().len()
    }
}

/// Uploads every file under `dir` to `bucket`, each at `prefix` followed by its path relative to
/// `dir`; answers how many files it uploaded.
pub async fn upload_dir(s3: &aws_sdk_s3::Client, bucket: &str, dir: &Path, prefix: &str) -> Result<usize, String> {
    let mut pending = vec![dir.to_path_buf()];
    let mut uploaded = 0;
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).map_err(|err| format!("read {}: {err}", folder.display()))? {
            let path = entry.map_err(|err| err.to_string())?.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let relative = path.strip_prefix(dir).map_err(|err| err.to_string())?.to_string_lossy().replace('\\', "/");
            let bytes = std::fs::read(&path).map_err(|err| format!("read {}: {err}", path.display()))?;
            s3.put_object()
                .bucket(bucket)
                .key(format!("{prefix}{relative}"))
                .body(bytes.into())
                .send()
                .await
                .map_err(|err| format!("upload {relative}: {err}"))?;
            uploaded += 1;
        }
    }
    Ok(uploaded)
}

/// An HTTP API event for `POST /sessions/{session}/turns` by `user` (no authorizer when `None`).
pub fn turn_event(user: Option<&str>, session: &str, body: Value) -> Value {
    let mut event = sample_event("http-turn.json");
    event["rawPath"] = json!(format!("/sessions/{session}/turns"));
    event["requestContext"]["http"]["path"] = json!(format!("/sessions/{session}/turns"));
    event["pathParameters"] = json!({ "session_id": session });
    event["body"] = match body {
        Value::String(raw) => Value::String(raw),
        other => Value::String(other.to_string()),
    };
    set_user(&mut event, user);
    event
}

/// An HTTP API event for `GET /sessions/{session}` by `user`.
pub fn get_event(user: Option<&str>, session: &str) -> Value {
    let mut event = sample_event("http-get-session.json");
    event["rawPath"] = json!(format!("/sessions/{session}"));
    event["requestContext"]["http"]["path"] = json!(format!("/sessions/{session}"));
    event["pathParameters"] = json!({ "session_id": session });
    set_user(&mut event, user);
    event
}

/// An HTTP API event for `GET /sessions/{session}/files/{path}` by `user`; `path` is sent as
/// given (percent-encoding included), as a client's request line carries it.
pub fn file_event(user: Option<&str>, session: &str, path: &str) -> Value {
    let mut event = sample_event("http-get-session.json");
    let raw_path = format!("/sessions/{session}/files/{path}");
    event["routeKey"] = json!("GET /sessions/{session_id}/files/{proxy+}");
    event["requestContext"]["routeKey"] = event["routeKey"].clone();
    event["rawPath"] = json!(raw_path);
    event["requestContext"]["http"]["path"] = json!(raw_path);
    event["pathParameters"] = json!({ "session_id": session, "proxy": path });
    set_user(&mut event, user);
    event
}

fn set_user(event: &mut Value, user: Option<&str>) {
    match user {
        Some(user) => event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = json!(user),
        None => {
            if let Some(context) = event["requestContext"].as_object_mut() {
                context.remove("authorizer");
            }
        }
    }
}

/// The status and parsed JSON body of an HTTP function response.
pub fn status_and_body(response: &Value) -> (u16, Value) {
    let status = response["statusCode"].as_u64().expect("statusCode") as u16;
    let body = response["body"].as_str().map(|b| serde_json::from_str(b).expect("JSON body")).unwrap_or(Value::Null);
    (status, body)
}

/// The system prompt a scripted-model request carried (OpenAI form: the first message).
pub fn system_of(request: &Value) -> String {
    let messages = request["messages"].as_array().expect("messages");
    assert_eq!(messages[0]["role"], "system", "the system prompt goes first");
    messages[0]["content"].as_str().unwrap_or_default().to_owned()
}

/// The names of the tools offered in a request, sorted.
pub fn tool_names(request: &Value) -> Vec<String> {
    let mut names: Vec<String> = request["tools"]
        .as_array()
        .map(|tools| tools.iter().map(|t| t["function"]["name"].as_str().unwrap().to_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// The content of every tool result the model was shown, in order.
pub fn tool_results(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}
