//! Published skills (issue 38) through the compiled `http-turn`: zips uploaded as numbered,
//! immutable versions, read back, promoted and rolled back, pinned by a turn, deleted, kept apart
//! by tenant, published concurrently, and hostile uploads refused with nothing stored. The helpers
//! here make the zips and the API Gateway events; each submodule is one theme.

mod beside;
mod concurrent;
mod deleting;
mod publishing;
mod refused_archives;
mod refused_requests;
mod serving;
mod staged;

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};

use base64::Engine;
use local_stack::lambda::Function;
use local_stack::stack::{get_event, status_and_body, turn_event, Stack};
use serde_json::{json, Value};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime};

pub(crate) use crate::uploads::{call, sha256_hex, Answered};

const OWNER: &str = "user-versions";
const STRANGER: &str = "user-versions-other";
/// The skill most tests publish: `category/name`.
const SKILL: &str = "notaria/poderes";

/// A SKILL.md naming the skill `name`, with `body` after its frontmatter.
fn skill_md(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\n{body}\n")
}

/// A SKILL.md of [`SKILL`] whose body is `body` (a text a test looks for in the model's requests).
fn poderes(body: &str) -> String {
    skill_md("poderes", "Redacta poderes notariales generales y especiales.", body)
}

/// How a zip is written: its files' modification time, their order, the compression, and an
/// optional top folder holding them (as a zip of the skill's folder has).
struct ZipStyle {
    modified: DateTime,
    reversed: bool,
    method: CompressionMethod,
    folder: Option<&'static str>,
}

impl Default for ZipStyle {
    fn default() -> Self {
        ZipStyle {
            modified: DateTime::from_date_and_time(2026, 1, 15, 10, 30, 0).expect("a date"),
            reversed: false,
            method: CompressionMethod::Deflated,
            folder: None,
        }
    }
}

/// `files` (path, bytes) as a deflated zip, in the order given.
fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    zip_styled(files, &ZipStyle::default())
}

fn zip_styled(files: &[(&str, &[u8])], style: &ZipStyle) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default()
        .compression_method(style.method)
        .last_modified_time(style.modified)
        .unix_permissions(0o644);
    let mut ordered: Vec<&(&str, &[u8])> = files.iter().collect();
    if style.reversed {
        ordered.reverse();
    }
    for (path, bytes) in ordered {
        let name = match style.folder {
            Some(folder) => format!("{folder}/{path}"),
            None => (*path).to_owned(),
        };
        writer.start_file(name, options).expect("start a zip entry");
        writer.write_all(bytes).expect("write a zip entry");
    }
    writer.finish().expect("finish the zip").into_inner()
}

/// The files of a zip, by path.
fn unzip(bytes: &[u8]) -> BTreeMap<String, Vec<u8>> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).expect("a readable zip");
    let mut files = BTreeMap::new();
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).expect("an entry");
        if entry.is_dir() {
            continue;
        }
        let name = entry.name().expect("a text name").to_string();
        let mut content = Vec::new();
        entry.read_to_end(&mut content).expect("inflate an entry");
        files.insert(name, content);
    }
    files
}

/// An HTTP API event: `method` on `path` (as a client sends it, percent-encoding included, with
/// `query`) by `user`, with no body.
fn event(user: &str, method: &str, path: &str, query: &[(&str, &str)]) -> Value {
    let mut event = get_event(Some(user), "unused");
    event["routeKey"] = json!(format!("{method} /skills/{{proxy+}}"));
    event["requestContext"]["routeKey"] = event["routeKey"].clone();
    event["rawPath"] = json!(path);
    event["requestContext"]["http"]["path"] = json!(path);
    event["requestContext"]["http"]["method"] = json!(method);
    event["pathParameters"] = json!({"proxy": path.trim_start_matches("/skills/")});
    let params: serde_json::Map<String, Value> = query.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    event["queryStringParameters"] = Value::Object(params);
    event["rawQueryString"] = json!(query.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&"));
    event
}

/// `event` carrying `bytes` as a zip, base64 as API Gateway hands a binary body over.
fn with_zip(mut event: Value, bytes: &[u8]) -> Value {
    event["headers"]["content-type"] = json!("application/zip");
    event["headers"]["content-length"] = json!(bytes.len().to_string());
    event["body"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
    event["isBase64Encoded"] = json!(true);
    event
}

/// `event` carrying `body` as JSON.
fn with_json(mut event: Value, body: &Value) -> Value {
    let text = body.to_string();
    event["headers"]["content-type"] = json!("application/json");
    event["headers"]["content-length"] = json!(text.len().to_string());
    event["body"] = json!(text);
    event["isBase64Encoded"] = json!(false);
    event
}

/// `PUT /skills/{skill}/versions` with `zip`, and `?promote=` when given.
fn upload_event(user: &str, skill: &str, zip: &[u8], promote: Option<bool>) -> Value {
    let promote = promote.map(|promote| promote.to_string());
    let query: Vec<(&str, &str)> = promote.iter().map(|value| ("promote", value.as_str())).collect();
    with_zip(event(user, "PUT", &format!("/skills/{skill}/versions"), &query), zip)
}

async fn upload(http: &Function, user: &str, skill: &str, zip: &[u8], promote: Option<bool>) -> Answered {
    call(http, upload_event(user, skill, zip, promote)).await
}

/// `GET` of `path` (relative to `/skills/{skill}`, empty for the skill itself).
async fn get(http: &Function, user: &str, skill: &str, path: &str) -> Answered {
    call(http, event(user, "GET", &format!("/skills/{skill}{path}"), &[])).await
}

/// `GET /skills/{skill}/versions`.
async fn versions(http: &Function, user: &str, skill: &str) -> Answered {
    get(http, user, skill, "/versions").await
}

/// `PUT /skills/{skill}/default` making `version` the default.
async fn promote(http: &Function, user: &str, skill: &str, version: u64) -> Answered {
    let event = event(user, "PUT", &format!("/skills/{skill}/default"), &[]);
    call(http, with_json(event, &json!({"version": version}))).await
}

/// `DELETE /skills/{skill}{path}` (`path` empty for the whole skill).
async fn delete(http: &Function, user: &str, skill: &str, path: &str) -> Answered {
    call(http, event(user, "DELETE", &format!("/skills/{skill}{path}"), &[])).await
}

/// The paths `GET /skills` lists for `user`.
async fn listed_skills(http: &Function, user: &str) -> Vec<String> {
    let answer = call(http, event(user, "GET", "/skills", &[])).await;
    assert_eq!(answer.status, 200, "{}", String::from_utf8_lossy(&answer.bytes));
    let skills = answer.json()["skills"].as_array().cloned().unwrap_or_default();
    skills.iter().filter_map(|skill| skill["path"].as_str().map(str::to_owned)).collect()
}

/// A turn of `user` in `session` with `body`: the status and the answer.
async fn turn(http: &Function, user: &str, session: &str, body: Value) -> (u16, Value) {
    status_and_body(&http.call(turn_event(Some(user), session, body)).await)
}

/// `GET /sessions/{session}` of `user`.
async fn session(http: &Function, user: &str, session: &str) -> Value {
    let (status, body) = status_and_body(&http.call(get_event(Some(user), session)).await);
    assert_eq!(status, 200, "{body}");
    body
}

/// The `problems` of a refused upload: (file, message) each.
fn problems(answer: &Answered) -> Vec<(Option<String>, String)> {
    let body = answer.json();
    let listed = body["problems"].as_array().unwrap_or_else(|| panic!("a `problems` list: {body}"));
    listed
        .iter()
        .map(|problem| {
            let file = problem["file"].as_str().map(str::to_owned);
            (file, problem["message"].as_str().expect("a problem's message").to_owned())
        })
        .collect()
}

/// What the function answered, as text for an assertion's message.
fn text(answer: &Answered) -> String {
    format!("{} {}", answer.status, String::from_utf8_lossy(&answer.bytes))
}

/// Every object of `user`'s published skills (`{user}/skill-versions/`).
async fn stored_versions(stack: &Stack, user: &str) -> Vec<String> {
    stack.object_keys(&format!("{user}/skill-versions/")).await
}
