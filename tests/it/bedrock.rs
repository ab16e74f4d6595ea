//! The compiled `http-turn` function with `LLM_PROVIDER=bedrock`: the model is reached through the AWS
//! SDK's Converse call at `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` (the scripted server), while storage
//! goes to moto through `AWS_ENDPOINT_URL`.

use serde_json::{json, Value};
use tests::model_server::Reply;
use tests::stack::{get_event, status_and_body, turn_event, Stack};

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
    let tools: Vec<&str> = requests[0]["toolConfig"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["toolSpec"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"load_skill"), "{tools:?}");
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
