//! The compiled functions with `LLM_PROVIDER=bedrock`: the model is reached through the AWS SDK's
//! Converse call (`http-turn`) and ConverseStream call (`stream-turn`) at
//! `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` (the scripted server), while storage goes to moto through
//! `AWS_ENDPOINT_URL`.

use std::time::Duration;

use local_stack::identity::IdentityProvider;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, status_and_body, turn_event, Stack};
use serde_json::{json, Value};

use crate::streaming::{all_events, deltas, names, stream_event};

const USER: &str = "user-a";
const MODEL: &str = "us.anthropic.claude-sonnet-4-20250514-v1:0";

/// The texts of a Converse request's tool results, in order.
fn tool_results(request: &Value) -> Vec<String> {
    let mut results = Vec::new();
    for message in request["messages"].as_array().unwrap() {
        for block in message["content"].as_array().unwrap() {
            if let Some(result) = block.get("toolResult") {
                results.push(result["content"][0]["text"].as_str().unwrap().to_owned());
            }
        }
    }
    results
}

#[tokio::test]
async fn a_bedrock_turn_with_a_tool_call_completes_and_is_committed() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "escrituras/compraventa"})),
        Reply::text("Skill cargada por Bedrock."),
    ]);
    let endpoint = stack.model.endpoint();
    let http = stack
        .http(&[
            ("LLM_PROVIDER", "bedrock"),
            ("LLM_MODEL", MODEL),
            // Bedrock needs neither; empty counts as unset.
            ("LLM_BASE_URL", ""),
            ("LLM_API_KEY", ""),
            ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", &endpoint),
        ])
        .await;

    let event = turn_event(Some(USER), "s1", json!({ "message": "Quiero una compraventa" }));
    let (status, body) = status_and_body(&http.call(event).await);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "Skill cargada por Bedrock.");
    assert_eq!(body["steps"], 2);
    assert_eq!(body["current_skill"], "escrituras/compraventa");
    assert_eq!(body["usage"]["input_tokens"], 200);

    // Both calls went to the scripted Converse endpoint, not to moto, signed with SigV4.
    let paths = stack.model.paths();
    assert_eq!(paths, ["/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse"; 2]);
    for authorization in stack.model.authorizations() {
        let authorization = authorization.expect("signed");
        assert!(authorization.starts_with("AWS4-HMAC-SHA256 Credential=test/"), "{authorization}");
        assert!(authorization.contains("/us-east-1/bedrock/aws4_request"), "{authorization}");
    }
    let requests = stack.model.requests();
    let system = requests[0]["system"][0]["text"].as_str().unwrap();
    assert!(system.contains("load_skill(\"escrituras/hipoteca\")"), "the listing: {system}");
    let tool_blocks = requests[0]["toolConfig"]["tools"].as_array().unwrap();
    let tools: Vec<&str> = tool_blocks.iter().filter_map(|tool| tool["toolSpec"]["name"].as_str()).collect();
    assert!(tools.contains(&"load_skill"), "{tools:?}");
    // A Claude model on Bedrock accepts cache points: after the tools and the stable system text,
    // with the tail (the date) after it.
    assert!(tool_blocks.last().unwrap().get("cachePoint").is_some(), "{tool_blocks:?}");
    assert!(requests[0]["system"][1].get("cachePoint").is_some(), "{}", requests[0]["system"]);
    assert!(requests[0]["system"][2]["text"].as_str().unwrap().contains("Today is "), "{}", requests[0]["system"]);
    assert_eq!(requests[0]["inferenceConfig"]["maxTokens"], 4096);
    // The second call carries the tool call and its result as Converse blocks.
    let assistant = &requests[1]["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][0]["toolUse"]["toolUseId"], "tooluse_1_0");
    assert_eq!(assistant["content"][0]["toolUse"]["input"], json!({"skill_path": "escrituras/compraventa"}));
    assert!(
        tool_results(&requests[1])[0].contains("escrituras/compraventa loaded"),
        "{:?}",
        tool_results(&requests[1])
    );

    // The turn is committed: the session holds the request and the reply.
    let (status, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["version"], 1);
    let history = session["history"].as_array().unwrap();
    assert_eq!(history.first().unwrap()["content"], "Quiero una compraventa");
    assert_eq!(history.last().unwrap()["content"], "Skill cargada por Bedrock.");
}

#[tokio::test]
async fn a_streamed_bedrock_turn_sends_deltas_as_converse_stream_yields_them_and_commits_once() {
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    let delay = Duration::from_millis(250);
    stack.model.set_chunk_delay(delay);
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "escrituras/compraventa"})),
        // Throttled before the first delta: retried, and the client sees nothing of it.
        Reply::Status(429),
        Reply::Chunks(["Compraventa ", "lista ", "por ", "Bedrock."].map(String::from).to_vec()),
    ]);
    let identity = IdentityProvider::start().await;
    let endpoint = stack.model.endpoint();
    let mut env = identity.env();
    env.extend([
        ("LLM_PROVIDER", "bedrock"),
        ("LLM_MODEL", MODEL),
        ("LLM_BASE_URL", ""),
        ("LLM_API_KEY", ""),
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", endpoint.as_str()),
    ]);
    let function = Function::start("stream-turn", &stack.env(&env)).await;

    let event = stream_event(Some(&identity.token(USER)), "s1", json!({"message": "Quiero una compraventa"}), true);
    let mut stream = function.invoke_streaming(event, Duration::from_secs(120)).await;
    let prelude = stream.prelude().await;
    assert_eq!(prelude["statusCode"], 200, "{prelude}");
    let events = all_events(&mut stream).await;
    assert_eq!(
        names(&events),
        [
            "turn.started",
            "model.call",
            "tool.call",
            "tool.result",
            "skill.loaded",
            "model.call",
            "message.delta",
            "message.delta",
            "message.delta",
            "message.delta",
            "turn.completed"
        ]
    );
    // The deltas reached the client as the model produced them, not all at the end.
    let first_delta = events.iter().find(|event| event.name == "message.delta").unwrap().at;
    let completed = events.last().unwrap();
    assert!(completed.at.duration_since(first_delta) >= delay * 3, "the deltas were not streamed");
    assert_eq!(completed.data["reply"], "Compraventa lista por Bedrock.");
    assert_eq!(deltas(&events), "Compraventa lista por Bedrock.");
    assert_eq!(completed.data["current_skill"], "escrituras/compraventa");
    assert_eq!(completed.data["version"], 1);
    assert!(stream.error_trailer().await.is_none());

    // Every call went to ConverseStream, signed; the throttled one was repeated once.
    let stream_path = "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse-stream";
    assert_eq!(stack.model.paths(), [stream_path; 3]);
    assert!(stack.model.authorizations().iter().all(|header| header.as_deref().is_some_and(|header| {
        header.starts_with("AWS4-HMAC-SHA256 Credential=test/") && header.contains("/us-east-1/bedrock/aws4_request")
    })));
    // The streamed tool call went back to the model as a Converse toolUse block with its input whole.
    let requests = stack.model.requests();
    assert_eq!(
        requests[1]["messages"][1]["content"][0]["toolUse"]["input"],
        json!({"skill_path": "escrituras/compraventa"})
    );
    assert_eq!(requests[1], requests[2], "the retry repeats the same request");

    // What the client was told is what was committed.
    let http = stack.http(&[]).await;
    let (status, session) = status_and_body(&http.call(get_event(Some(USER), "s1")).await);
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["version"], 1);
    assert_eq!(session["history"].as_array().unwrap().last().unwrap()["content"], "Compraventa lista por Bedrock.");
}
