//! The client at each revision the SDK's server serves: 2026-07-28 (stateless, its routing headers,
//! cache hints, input-required results, tasks) and 2025-06-18 (the handshake, as before).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use experts::{Called, McpClient, McpError, Scope, ToolCall};
use local_stack::experts::{ExpertOptions, ExpertServer};
use serde_json::json;

use crate::expert;

const TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread")]
async fn a_2026_server_is_spoken_to_statelessly_with_routing_headers() {
    let server = ExpertServer::start_with(&ExpertOptions::default().record().cache(60_000, "public"));
    let client = McpClient::connect(&expert(&server, "modern"), TIMEOUT).await.unwrap();
    assert_eq!(client.protocol_version(), "2026-07-28");
    let listed = client.list_tools_cacheable().await.unwrap();
    assert_eq!(listed.items.len(), 4);
    assert_eq!((listed.cache.ttl, listed.cache.scope), (Some(Duration::from_secs(60)), Scope::Public));
    assert_eq!(client.call_tool("add", json!({"a": 1, "b": 2})).await.unwrap().text, "3");
    client.close().await;

    let requests = server.requests();
    let methods: Vec<_> = requests.iter().map(|r| r["method"].as_str().unwrap_or_default()).collect();
    assert_eq!(methods, ["server/discover", "tools/list", "tools/call"], "no initialize, no notifications");
    for request in &requests {
        assert_eq!(request["version"], "2026-07-28", "{request}");
        assert_eq!(request["session"], serde_json::Value::Null, "no Mcp-Session-Id: {request}");
        assert_eq!(request["mcp_method"], request["method"], "{request}");
        assert_eq!(request["meta"], true, "the _meta envelope on every request: {request}");
    }
    assert_eq!(requests[2]["mcp_name"], "add");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_2025_06_18_server_gets_the_handshake_after_the_probe() {
    let server = ExpertServer::start_with(&ExpertOptions::default().record().revision_2025_06_18());
    let client = McpClient::connect(&expert(&server, "legacy"), TIMEOUT).await.unwrap();
    assert_eq!(client.protocol_version(), "2025-06-18");
    assert!(!client.is_stateless());
    let listed = client.list_tools_cacheable().await.unwrap();
    assert_eq!(listed.cache.ttl, None, "a 2025 list is never kept");
    assert_eq!(client.call_tool("add", json!({"a": 2, "b": 2})).await.unwrap().text, "4");
    client.close().await;

    let requests = server.requests();
    let posts: Vec<_> = requests.iter().filter(|r| r["http"] == "POST").collect();
    assert_eq!(posts[0]["method"], "server/discover", "refused with 400 by the 2025 server");
    assert_eq!(posts[1]["method"], "initialize");
    let later: Vec<_> = posts.iter().skip(2).collect();
    assert!(later.iter().any(|r| r["method"] == "tools/call"));
    for request in later {
        assert_eq!(request["version"], "2025-06-18", "{request}");
        assert!(request["session"].is_string(), "a session: {request}");
    }

    // The process remembers the server is pre-2026: the next connection skips the probe.
    let before = server.requests().len();
    let again = McpClient::connect(&expert(&server, "legacy"), TIMEOUT).await.unwrap();
    assert_eq!(again.protocol_version(), "2025-06-18");
    again.close().await;
    let requests = server.requests();
    let posts: Vec<_> = requests[before..].iter().filter(|r| r["http"] == "POST").collect();
    assert_eq!(posts[0]["method"], "initialize", "no second probe: {posts:?}");
    assert!(!posts.iter().any(|r| r["method"] == "server/discover"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_input_required_result_is_answered_on_a_retry_with_its_state() {
    let server = ExpertServer::start_with(&ExpertOptions::default().modern_tools());
    let client = McpClient::connect(&expert(&server, "travel"), TIMEOUT).await.unwrap();
    let asked = match client.call(ToolCall::new("book_trip", json!({"destination": "Lima"}))).await.unwrap() {
        Called::InputRequired(asked) => asked,
        other => panic!("{other:?}"),
    };
    assert_eq!(asked.requests["seat"]["params"]["message"], "Which seat for the trip to Lima?");
    let mut retry = ToolCall::new("book_trip", json!({"destination": "Lima"}));
    retry.input_responses =
        Some(BTreeMap::from([("seat".to_owned(), json!({"action": "accept", "content": {"seat": "aisle"}}))]));
    retry.request_state = asked.request_state.clone();
    match client.call(retry).await.unwrap() {
        Called::Done(outcome) => assert_eq!(outcome.text, "Booked the trip to Lima with a aisle seat."),
        other => panic!("{other:?}"),
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_call_runs_as_a_task_past_the_request_timeout_and_is_cancelled_at_the_deadline() {
    let server = ExpertServer::start_with(&ExpertOptions::default().modern_tools().record());
    // Each request may take 1 s; the report takes 1.5 s, so only a task finishes it.
    let client = McpClient::connect(&expert(&server, "reports"), Duration::from_secs(1)).await.unwrap();
    let mut call = ToolCall::new("long_report", json!({"topic": "sales", "seconds": 1.5}));
    call.deadline = Some(Instant::now() + Duration::from_secs(8));
    match client.call(call).await.unwrap() {
        Called::Done(outcome) => assert_eq!(outcome.text, "The report on sales is ready."),
        other => panic!("{other:?}"),
    }
    assert!(server.count("tasks/get") >= 2, "polled: {:?}", server.requests());

    let mut call = ToolCall::new("long_report", json!({"topic": "costs", "seconds": 30}));
    call.deadline = Some(Instant::now() + Duration::from_millis(600));
    let started = Instant::now();
    let error = client.call(call).await.unwrap_err();
    assert!(matches!(error, McpError::Timeout(_)), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "gave up at the deadline");
    assert_eq!(server.count("tasks/cancel"), 1, "the task was cancelled");
    client.close().await;
}
