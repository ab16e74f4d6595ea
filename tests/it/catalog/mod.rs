//! The tenant's skill catalog at any size, through the compiled functions against moto: both
//! layouts, the index built once and reused, `skills-index` fed S3 events, concurrent updates,
//! the budgeted listing with `find_skills` at 10,000 skills, lenient validation and `GET /skills`,
//! and the tenant's agents kept in the index's head.

mod index;
mod listing;

use std::collections::BTreeMap;
use std::time::Duration;

use local_stack::lambda::{Function, Invocation};
use local_stack::stack::{status_and_body, turn_event, Stack};
use serde_json::{json, Value};

async fn turn(function: &Function, user: &str, session: &str, message: &str) -> (u16, Value) {
    status_and_body(&function.call(turn_event(Some(user), session, json!({ "message": message }))).await)
}

/// An HTTP API event for `GET /skills` (with an optional query string) by `user`.
fn list_skills_event(user: &str, query: &[(&str, &str)]) -> Value {
    let mut event = local_stack::stack::get_event(Some(user), "unused");
    event["rawPath"] = json!("/skills");
    event["requestContext"]["http"]["path"] = json!("/skills");
    event["pathParameters"] = json!({});
    let params: serde_json::Map<String, Value> = query.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    event["queryStringParameters"] = Value::Object(params);
    event["rawQueryString"] = json!(query.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&"));
    event
}

fn skill_md(name: &str, description: &str, extra: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n{extra}---\n\n# {name}\n\nInstructions of {name}.\n")
}

async fn index_json(stack: &Stack, user: &str) -> Value {
    let bytes = stack.get(&format!("{user}/catalog/index.json")).await.expect("the index exists");
    serde_json::from_slice(&bytes).expect("the index is JSON")
}

async fn run_index(function: &Function, event: Value) -> Value {
    match function.invoke_with_budget(event, Duration::from_secs(240)).await {
        Invocation::Response(value) => value,
        Invocation::Error(error) => panic!("skills-index failed: {error}"),
        Invocation::Stream(_) => panic!("skills-index streamed its answer"),
    }
}

fn count(operations: &BTreeMap<String, u64>, operation: &str) -> u64 {
    operations.get(operation).copied().unwrap_or(0)
}
