//! Evals of a published skill version through the compiled functions: `POST .../evals` stores the
//! run as running and queues it on a FIFO queue on moto, queue-turn runs its cases as real turns
//! against a scripted model that loads the skill when asked about PDFs and grades the expectations,
//! the report is read back (a redelivery changes nothing), a promote's requirement is checked
//! against it, and the eval sessions stay out of the user's sessions.

use std::io::{Cursor, Write};

use base64::Engine;
use local_stack::lambda::Function;
use local_stack::model_server::{Received, Reply};
use local_stack::stack::{get_event, status_and_body, turn_event, Stack};
use serde_json::{json, Value};
use zip::write::SimpleFileOptions;

use crate::uploads::{call, Answered};

const USER: &str = "user-evals";
/// A `category/name` skill, so the routes read a two-segment path from the right.
const SKILL: &str = "oficina/pdf";

/// The scripted model: a grading request (its schema named `grading`) passes the first
/// expectation and fails the second; a conversation loads the skill when its last user message
/// speaks of PDFs and answers once it is loaded; anything else needs no skill.
fn decide(request: &Received) -> Reply {
    let body = &request.body;
    if body["response_format"]["json_schema"]["name"] == "grading" {
        let grading = json!({"expectations": [
            {"passed": true, "evidence": "The reply says: Here is your PDF."},
            {"passed": false, "evidence": "No table appears in the reply."}
        ]});
        return Reply::text(&grading.to_string());
    }
    let last = body["messages"].as_array().and_then(|messages| messages.last()).cloned().unwrap_or_default();
    match last["role"].as_str() {
        Some("tool") => Reply::text("Here is your PDF."),
        Some("user") if last["content"].to_string().to_lowercase().contains("pdf") => {
            Reply::tool("load_skill", json!({"skill_path": SKILL}))
        }
        _ => Reply::text("No skill needed."),
    }
}

/// A version's zip: its SKILL.md with `description` and, when `with_evals`, one eval case with two
/// expectations and four trigger queries (two that should load the skill, two that should not;
/// the model loads for the second of those too, as it mentions PDFs).
fn version_zip(description: &str, with_evals: bool) -> Vec<u8> {
    let skill_md = format!("---\nname: pdf\ndescription: {description}\n---\n\n# PDF\n\nAnswer with a PDF.\n");
    let mut files = vec![("SKILL.md", skill_md)];
    if with_evals {
        let evals = json!({"skill_name": "pdf", "evals": [{"id": 1, "prompt": "Make a pdf of the report",
            "expectations": ["The reply mentions a PDF", "The reply includes a table"]}]});
        let triggers = json!([
            {"query": "convert this pdf to text", "should_trigger": true},
            {"query": "merge two pdf files", "should_trigger": true},
            {"query": "what's the weather in Lisbon", "should_trigger": false},
            {"query": "tell me the history of the pdf format", "should_trigger": false}
        ]);
        files.push(("evals/evals.json", evals.to_string()));
        files.push(("evals/trigger_evals.json", triggers.to_string()));
    }
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (path, text) in files {
        writer.start_file(path, SimpleFileOptions::default()).expect("start a zip entry");
        writer.write_all(text.as_bytes()).expect("write a zip entry");
    }
    writer.finish().expect("finish the zip").into_inner()
}

/// An HTTP API event of `method` on `path` by `user`, with `body` as JSON when given.
fn event(user: &str, method: &str, path: &str, body: Option<&Value>) -> Value {
    let mut event = get_event(Some(user), "unused");
    event["routeKey"] = json!(format!("{method} /skills/{{proxy+}}"));
    event["requestContext"]["routeKey"] = event["routeKey"].clone();
    event["rawPath"] = json!(path);
    event["requestContext"]["http"]["path"] = json!(path);
    event["requestContext"]["http"]["method"] = json!(method);
    event["pathParameters"] = json!({"proxy": path.trim_start_matches("/skills/")});
    if let Some(body) = body {
        event["headers"]["content-type"] = json!("application/json");
        event["body"] = json!(body.to_string());
        event["isBase64Encoded"] = json!(false);
    }
    event
}

/// `PUT /skills/{SKILL}/versions` with `zip`: the version made.
async fn publish(http: &Function, zip: &[u8]) -> u64 {
    let mut put = event(USER, "PUT", &format!("/skills/{SKILL}/versions"), None);
    put["headers"]["content-type"] = json!("application/zip");
    put["body"] = json!(base64::engine::general_purpose::STANDARD.encode(zip));
    put["isBase64Encoded"] = json!(true);
    let answer = call(http, put).await;
    assert_eq!(answer.status, 201, "{}", text(&answer));
    answer.json()["version"].as_u64().expect("a version number")
}

/// `method` on `/skills/{SKILL}{path}` with `body`.
async fn skill_call(http: &Function, method: &str, path: &str, body: Option<Value>) -> Answered {
    call(http, event(USER, method, &format!("/skills/{SKILL}{path}"), body.as_ref())).await
}

fn text(answer: &Answered) -> String {
    format!("{} {}", answer.status, String::from_utf8_lossy(&answer.bytes))
}

/// Delivers `records` to queue-turn: the ids it reports failed.
async fn deliver(worker: &Function, records: Vec<Value>) -> Vec<Value> {
    let response = worker.call(json!({ "Records": records })).await;
    response["batchItemFailures"].as_array().expect("batchItemFailures").clone()
}

#[tokio::test]
async fn a_versions_evals_run_from_the_queue_and_gate_its_promote() {
    let stack = Stack::new().await;
    let sqs = aws_sdk_sqs::Client::new(&local_stack::moto::sdk_config(&stack.endpoint).await);
    let queue_url = local_stack::moto::create_fifo_queue(&sqs).await;
    let http = stack.http(&[("TURN_QUEUE_URL", queue_url.as_str())]).await;
    let worker = stack.queue(&[("TURN_QUEUE_URL", queue_url.as_str()), ("TURN_MAX_RECEIVE_COUNT", "3")]).await;
    stack.model.decide(decide);

    // Version 1 (the default) has no evals; version 2, not promoted, has them.
    assert_eq!(publish(&http, &version_zip("Makes PDFs.", false)).await, 1);
    assert_eq!(publish(&http, &version_zip("Makes PDFs of reports, better.", true)).await, 2);

    // Runs that cannot be made are refused and nothing is queued.
    let runs = |runs: u64| Some(json!({"runs": runs}));
    let answer = skill_call(&http, "POST", "/versions/1/evals", None).await;
    assert_eq!((answer.status, answer.code()), (400, "bad_request".to_owned()), "{}", text(&answer));
    assert!(answer.json()["error"]["message"].as_str().unwrap().contains("has no evals"), "{}", text(&answer));
    assert_eq!(skill_call(&http, "POST", "/versions/9/evals", None).await.status, 404);
    assert_eq!(skill_call(&http, "POST", "/versions/2/evals", runs(11)).await.status, 400);
    assert_eq!(skill_call(&http, "GET", "/versions/9/evals", None).await.status, 404);
    assert_eq!(skill_call(&http, "GET", "/versions/2/evals/1764111111-00000000", None).await.status, 404);
    let unqueued = stack.http(&[]).await;
    let answer = skill_call(&unqueued, "POST", "/versions/2/evals", runs(2)).await;
    assert_eq!((answer.status, answer.code()), (501, "evals_need_a_queue".to_owned()), "{}", text(&answer));

    // A user's own turn, which the evals must leave alone.
    let (status, mine) = status_and_body(&http.call(turn_event(Some(USER), "mine", json!({"message": "hola"}))).await);
    assert_eq!(status, 200, "{mine}");

    let answer = skill_call(&http, "POST", "/versions/2/evals", runs(2)).await;
    assert_eq!(answer.status, 202, "{}", text(&answer));
    let accepted = answer.json();
    let run_id = accepted["run_id"].as_str().expect("run_id").to_owned();
    let poll = format!("/skills/{SKILL}/versions/2/evals/{run_id}");
    assert_eq!(accepted, json!({"run_id": run_id, "status": "running", "poll": poll}));
    assert_eq!(answer.header("location"), Some(poll.as_str()));
    let running = skill_call(&http, "GET", &format!("/versions/2/evals/{run_id}"), None).await;
    assert_eq!((running.status, running.json()["status"].as_str()), (200, Some("running")), "{}", text(&running));

    let records = local_stack::moto::take_queue_records(&sqs, &queue_url).await;
    assert_eq!(records.len(), 1, "one record, and none of the refused runs");
    let record: Value = serde_json::from_str(records[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        record,
        json!({"kind": "skill_eval", "user_id": USER, "skill": SKILL, "version": 2, "runs": 2, "run_id": run_id})
    );
    let group = records[0]["attributes"]["MessageGroupId"].as_str().unwrap();
    assert!(group.starts_with("eval-") && group.len() == 37, "{group}");

    let before = stack.model.requests().len();
    assert!(deliver(&worker, records.clone()).await.is_empty());
    // The eval case: two runs of a load, an answer and a grading; the trigger queries: two runs
    // each of a load and an answer (three queries), or an answer alone (one).
    let calls = stack.model.requests().len() - before;
    assert_eq!(calls, 2 * 3 + 3 * 2 * 2 + 2, "model requests of the run");

    let answer = skill_call(&http, "GET", &format!("/versions/2/evals/{run_id}"), None).await;
    assert_eq!(answer.status, 200, "{}", text(&answer));
    let report = answer.json();
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!((report["skill"].as_str(), report["version"].as_u64()), (Some(SKILL), Some(2)));
    assert_eq!(report["runs_per_case"], 2);
    assert_eq!(report["summary"]["trigger_rate"], 0.75, "six of eight trigger runs right");
    let summary = &report["summary"];
    assert_eq!((summary["triggered_when_wanted"].as_u64(), summary["wanted"].as_u64()), (Some(4), Some(4)));
    assert_eq!(report["summary"]["triggered_when_not_wanted"], 2);
    assert_eq!(report["summary"]["pass_rate"], 0.5);
    let cases = report["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 5);
    assert!(cases.iter().all(|case| case["runs"].as_array().map(Vec::len) == Some(2)), "{report}");
    for run in cases[0]["runs"].as_array().unwrap() {
        assert_eq!((run["loaded"].as_bool(), run["loaded_version"].as_u64()), (Some(true), Some(2)), "{run}");
        let graded = run["expectations"].as_array().expect("graded expectations");
        assert_eq!(graded.len(), 2);
        assert_eq!((graded[0]["passed"].as_bool(), graded[1]["passed"].as_bool()), (Some(true), Some(false)));
        assert!(graded[1]["evidence"].as_str().is_some_and(|evidence| evidence.contains("No table")), "{run}");
    }

    // A redelivered record runs nothing again and leaves the report as it was.
    let mut again = records[0].clone();
    again["attributes"]["ApproximateReceiveCount"] = json!("2");
    assert!(deliver(&worker, vec![again]).await.is_empty());
    assert_eq!(stack.model.requests().len() - before, calls, "no model call on a redelivery");
    let reread = skill_call(&http, "GET", &format!("/versions/2/evals/{run_id}"), None).await;
    assert_eq!(reread.json(), report);
    let listed = skill_call(&http, "GET", "/versions/2/evals", None).await.json();
    assert_eq!((listed["skill"].as_str(), listed["version"].as_u64()), (Some(SKILL), Some(2)), "{listed}");
    let listed_runs = listed["runs"].as_array().expect("runs");
    assert_eq!(listed_runs.len(), 1);
    assert_eq!(
        (listed_runs[0]["run_id"].as_str(), listed_runs[0]["status"].as_str()),
        (Some(&*run_id), Some("completed"))
    );
    assert_eq!(listed_runs[0].get("cases"), None, "a list shows no cases");
    assert_eq!(listed_runs[0]["summary"], report["summary"]);

    // A promote that requires more than the run reached is refused; one it meets is made.
    let refused =
        skill_call(&http, "PUT", "/default", Some(json!({"version": 2, "require": {"trigger_rate": 0.8}}))).await;
    assert_eq!((refused.status, refused.code()), (409, "eval_requirement_not_met".to_owned()), "{}", text(&refused));
    assert!(refused.json()["error"]["message"].as_str().unwrap().contains("75%"), "{}", text(&refused));
    assert_eq!(skill_call(&http, "GET", "/versions", None).await.json()["default"], 1);
    let require = json!({"version": 2, "require": {"trigger_rate": 0.7, "pass_rate": 0.5}});
    let promoted = skill_call(&http, "PUT", "/default", Some(require)).await;
    assert_eq!(promoted.status, 200, "{}", text(&promoted));
    assert_eq!((promoted.json()["version"].as_u64(), promoted.json()["previous"].as_u64()), (Some(2), Some(1)));
    // Version 1 never ran its evals.
    let unrun = skill_call(&http, "PUT", "/default", Some(json!({"version": 1, "require": {"pass_rate": 0.1}}))).await;
    assert_eq!(unrun.status, 409, "{}", text(&unrun));

    // The eval turns ran in sessions of their own, which the user neither sees nor can write to.
    let mut list = get_event(Some(USER), "unused");
    list["rawPath"] = json!("/sessions");
    list["requestContext"]["http"]["path"] = json!("/sessions");
    list["pathParameters"] = json!({});
    let (status, sessions) = status_and_body(&http.call(list).await);
    assert_eq!(status, 200, "{sessions}");
    let ids: Vec<&str> =
        sessions["sessions"].as_array().unwrap().iter().filter_map(|session| session["session_id"].as_str()).collect();
    assert_eq!(ids, ["mine"], "{sessions}");
    let (status, refused) =
        status_and_body(&http.call(turn_event(Some(USER), "_eval.x", json!({"message": "hi"}))).await);
    assert_eq!(status, 400, "{refused}");
}
