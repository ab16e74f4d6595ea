//! Sections 3 to 6: the release `http-turn` binary through the Lambda Runtime API: cold starts,
//! the system prompt, peak RSS, and the storage requests it logs.

use std::time::{Duration, Instant};

use agent_core::UserId;
use local_stack::lambda::Function;
use local_stack::stack::{status_and_body, system_of, tool_names, tool_results, turn_event, Stack};
use serde_json::{json, Value};

use crate::{
    ms, ops_text, peak_rss_kib, scripted_turn, tenant_skills, Ops, COLD_STARTS, COLD_START_PAUSE, MESSAGE, RSS_TURNS,
    UPLOAD_BATCH,
};

pub(crate) struct FunctionFigures {
    /// Process spawn → first reply, one per fresh process.
    pub(crate) cold_starts: Vec<Duration>,
    /// Each cold start less its turn's waits on storage ([`storage_waits`]).
    pub(crate) cold_starts_less_storage: Vec<Duration>,
    /// The first model request of the first cold turn.
    pub(crate) system_prompt: String,
    pub(crate) tools: Vec<String>,
    /// Storage requests the function logged for each process's cold turn.
    pub(crate) log_cold: Vec<Ops>,
    /// ... and for each warm turn of the last process.
    pub(crate) log_warm: Vec<Ops>,
    pub(crate) rss_kib: Option<u64>,
}

/// Queues the scripted turn's model replies; returns the position its first model request will
/// have among the requests the model server records. Done before a timed turn starts: reading the
/// recorded requests copies them all.
pub(crate) fn script_turn(stack: &Stack) -> usize {
    let first = stack.model.requests().len();
    stack.model.push(scripted_turn());
    first
}

/// One scripted turn of `function` (queued by [`script_turn`], which returned `first`), checked like
/// the in-process one: it must answer 200, call the model three times and see no failed tool call.
/// Returns the wall time from `started` to the answer, the first model request of the turn, the
/// storage requests the function logged, and its waits on storage ([`storage_waits`]).
pub(crate) async fn function_turn(
    stack: &Stack,
    function: &Function,
    user: &UserId,
    session: &str,
    (first, started): (usize, Instant),
) -> (Duration, Value, Ops, Duration) {
    let mark = function.log_mark();
    let response = function.call(turn_event(Some(user.as_str()), session, json!({"message": MESSAGE}))).await;
    let wall = started.elapsed();
    let (status, body) = status_and_body(&response);
    assert_eq!(status, 200, "the benchmark turn failed: {body}");
    let requests = stack.model.requests();
    assert_eq!(requests.len() - first, 3, "the turn should call the model three times; {body}");
    assert_eq!(stack.model.remaining(), 0);
    for result in tool_results(requests.last().unwrap()) {
        assert!(!result.starts_with("Error"), "a tool call of the benchmark failed: {result}");
    }
    let ops = function.storage_requests_since(mark).await;
    let waits = storage_waits(&function.logs_since(mark));
    (wall, requests[first].clone(), ops, waits)
}

/// The turn's waits on storage as its summary line reports them: the session and catalog loads
/// (made at once, so the longer of the two) and the commit. Zero when the line is missing.
pub(crate) fn storage_waits(lines: &[String]) -> Duration {
    let summary = lines
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["fields"]["message"] == "turn summary");
    let Some(summary) = summary else { return Duration::ZERO };
    let step = |name: &str| summary["fields"][name].as_f64().unwrap_or(0.0);
    let ms = step("session_load_ms").max(step("catalog_ms")) + step("commit_ms");
    Duration::from_secs_f64(ms / 1000.0)
}

pub(crate) async fn function_figures(stack: &Stack, user: &UserId) -> FunctionFigures {
    let mut figures = FunctionFigures {
        cold_starts: Vec::new(),
        cold_starts_less_storage: Vec::new(),
        system_prompt: String::new(),
        tools: Vec::new(),
        log_cold: Vec::new(),
        log_warm: Vec::new(),
        rss_kib: None,
    };
    for run in 0..COLD_STARTS {
        // A cold start is a new process on a quiet machine: let the previous phase's work settle.
        tokio::time::sleep(COLD_START_PAUSE).await;
        let first = script_turn(stack);
        let started = Instant::now();
        let http = stack.http(&[]).await;
        let session = format!("coldstart{run}");
        let (wall, first_request, ops, waits) = function_turn(stack, &http, user, &session, (first, started)).await;
        eprintln!(
            "  http-turn cold start {}: {:.0} ms ({:.0} ms of it on storage), logged {}",
            run + 1,
            ms(wall),
            ms(waits),
            ops_text(&ops)
        );
        figures.cold_starts.push(wall);
        figures.cold_starts_less_storage.push(wall.saturating_sub(waits));
        figures.log_cold.push(ops);
        if run == 0 {
            figures.system_prompt = system_of(&first_request);
            figures.tools = tool_names(&first_request);
        }
        if run + 1 == COLD_STARTS {
            // The same session goes on, as a user's conversation does.
            for _ in 1..RSS_TURNS {
                let first = script_turn(stack);
                let (_, _, ops, _) = function_turn(stack, &http, user, &session, (first, Instant::now())).await;
                figures.log_warm.push(ops);
            }
            figures.rss_kib = http.pid().and_then(peak_rss_kib);
        }
    }
    figures
}
/// Uploads a tenant's objects, `UPLOAD_BATCH` at a time (each batch 32 requests at a time);
/// returns how many.
pub(crate) async fn upload(stack: &Stack, user: &UserId, skills: usize) -> usize {
    let objects: Vec<(String, Vec<u8>)> =
        tenant_skills(skills).into_iter().map(|(key, bytes)| (format!("{user}/{key}"), bytes)).collect();
    let count = objects.len();
    let started = Instant::now();
    let mut objects = objects.into_iter();
    let mut done = 0;
    loop {
        let batch: Vec<(String, Vec<u8>)> = objects.by_ref().take(UPLOAD_BATCH).collect();
        if batch.is_empty() {
            break;
        }
        done += batch.len();
        stack.put_many(batch).await;
        let elapsed = started.elapsed().as_secs_f64();
        eprintln!("  {user}: {done}/{count} objects in {elapsed:.1} s ({:.0}/s)", done as f64 / elapsed);
    }
    count
}
