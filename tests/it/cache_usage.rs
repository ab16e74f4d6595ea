//! Tokens as the provider counted them, and a turn's cost, through the compiled functions: the
//! input split into uncached, cache writes and cache reads, and the cost at the deployment's prices
//! (`MODEL_PRICES`), in the 200 body, in `turn.completed`, in the `turn summary` line and in the
//! EMF metrics, all telling the same numbers.

use std::time::Duration;

use local_stack::identity::IdentityProvider;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{status_and_body, turn_event, Stack};
use serde_json::{json, Value};

use crate::metrics::{emf_data, find, lines_after, summaries_of, total};
use crate::streaming::{all_events, stream_event};

const USER: &str = "user-cache-usage";
const MODEL: &str = "scripted-model";

/// The scripted model at $3 per million input tokens (cache writes $3.75, reads $0.30) and $15
/// per million output tokens.
fn prices() -> String {
    json!({"models": {MODEL: {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3}}}).to_string()
}

/// The cost of `usage` at [`prices`], in dollars.
fn cost_of(usage: &Value) -> f64 {
    let tokens = |key: &str| usage[key].as_u64().unwrap_or_else(|| panic!("{key} in {usage}")) as f64;
    (tokens("uncached_input_tokens") * 3.0
        + tokens("cache_write_tokens") * 3.75
        + tokens("cache_read_tokens") * 0.3
        + tokens("output_tokens") * 15.0)
        / 1e6
}

/// Checks a reply's `usage` (its parts add up to the input, and each is the sum of what the scripted
/// model reported to the turn's calls, `served` of them so far) and its `cost` (priced at [`prices`]).
fn check_reply(stack: &Stack, reply: &Value, calls: u64) {
    let usage = &reply["usage"];
    assert_eq!(usage["input_tokens"], 100 * calls, "{reply}");
    assert_eq!(usage["output_tokens"], 10 * calls, "{reply}");
    let parts: u64 = ["uncached_input_tokens", "cache_write_tokens", "cache_read_tokens"]
        .iter()
        .map(|key| usage[key].as_u64().unwrap_or_else(|| panic!("{key} in {usage}")))
        .sum();
    assert_eq!(parts, 100 * calls, "the input's parts add up to it: {usage}");
    let reported = stack.model.usages();
    let reported: Vec<_> = reported[reported.len() - calls as usize..].iter().map(|usage| usage.unwrap()).collect();
    let reads: u64 = reported.iter().map(|usage| usage.cache_read_tokens).sum();
    let writes: u64 = reported.iter().map(|usage| usage.cache_write_tokens).sum();
    assert_eq!(
        (usage["cache_read_tokens"].as_u64(), usage["cache_write_tokens"].as_u64()),
        (Some(reads), Some(writes))
    );
    let usd = reply["cost"]["usd"].as_f64().unwrap_or_else(|| panic!("a priced turn has a cost: {reply}"));
    assert!((usd - cost_of(usage)).abs() < 1e-9, "{usd} is the split at the table's prices: {reply}");
}

#[tokio::test]
async fn the_body_the_summary_and_the_metrics_tell_the_same_split_and_cost() {
    let stack = Stack::new().await;
    // Anthropic's format reports both cache writes and reads (OpenAI's reads only).
    let http = stack.http(&[("MODEL_PRICES", &prices()), ("LLM_PROVIDER", "anthropic")]).await;
    let mark = http.log_mark();
    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/a.md", "content": "a"})),
        Reply::text("Hecho."),
    ]);
    let (status, body) = status_and_body(&http.call(turn_event(Some(USER), "c1", json!({"message": "Escribe"}))).await);
    assert_eq!(status, 200, "{body}");
    check_reply(&stack, &body, 2);
    let usage = &body["usage"];
    // The first call writes the marked prefix (tools, system prompt) and the second reads it.
    assert!(usage["cache_write_tokens"].as_u64() > Some(0) && usage["cache_read_tokens"].as_u64() > Some(0), "{usage}");

    let lines = lines_after(&http, mark, 1).await;
    let summary = summaries_of(&lines)[0];
    for key in ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"] {
        assert_eq!(summary[key], usage[key], "{key}: {summary}");
        assert_eq!(summary["models"][MODEL][key], usage[key], "{key}: {summary}");
    }
    assert_eq!(summary["cost_usd"].as_f64(), body["cost"]["usd"].as_f64(), "{summary}");

    let data = emf_data(&lines);
    let model = [("Function", "http-turn"), ("Model", MODEL)];
    let count = |key: &str| usage[key].as_f64().unwrap();
    assert_eq!(total(&data, "InputTokens", "Count", &model), count("input_tokens"));
    assert_eq!(total(&data, "CacheReadInputTokens", "Count", &model), count("cache_read_tokens"));
    assert_eq!(total(&data, "CacheWriteInputTokens", "Count", &model), count("cache_write_tokens"));
    let cost = total(&data, "TurnCostUSD", "None", &[("Function", "http-turn")]);
    assert!((cost - body["cost"]["usd"].as_f64().unwrap()).abs() < 1e-12, "{cost}");

    // An unpriced model: tokens counted, no cost anywhere, and the body says which model.
    let unpriced = stack.http(&[]).await;
    let mark = unpriced.log_mark();
    stack.model.push([Reply::text("Hola.")]);
    let (status, body) =
        status_and_body(&unpriced.call(turn_event(Some(USER), "c2", json!({"message": "Hola"}))).await);
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["cost"]["usd"].clone(), body["cost"]["unpriced_models"].clone()), (Value::Null, json!([MODEL])));
    let lines = lines_after(&unpriced, mark, 1).await;
    assert!(summaries_of(&lines)[0]["cost_usd"].is_null());
    assert!(find(&emf_data(&lines), "TurnCostUSD", &[("Function", "http-turn")]).is_empty());
}

#[tokio::test]
async fn turn_completed_carries_the_split_and_the_cost() {
    let stack = Stack::new().await;
    let identity = IdentityProvider::start().await;
    let mut env = identity.env();
    let prices = prices();
    env.push(("MODEL_PRICES", prices.as_str()));
    let function = Function::start("stream-turn", &stack.env(&env)).await;
    stack.model.push([Reply::Chunks(["Hola ", "otra vez."].map(String::from).to_vec())]);
    let event = stream_event(Some(&identity.token(USER)), "cs1", json!({"message": "Hola"}), true);
    let events = all_events(&mut function.invoke_streaming(event, Duration::from_secs(60)).await).await;
    let done = events.last().unwrap();
    assert_eq!(done.name, "turn.completed");
    check_reply(&stack, &done.data, 1);
}
