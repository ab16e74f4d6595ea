//! Recording live replies and replaying them, and choosing the provider from the environment.

use super::*;

#[tokio::test]
async fn recorded_replies_replay_identically() {
    let server = ModelServer::start_with(vec![
        ok(json!({
            "choices": [{"finish_reason": "tool_calls", "message": {"content": "Looking.", "tool_calls": [
                {"id": "call_x", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"x.md\"}"}},
                {"id": "call_y", "type": "function", "function": {"name": "read_file", "arguments": "not json"}}
            ]}}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 8}
        })),
        ok(openai_text("All done.")),
    ])
    .await;
    let record_file = temp_path("record.jsonl");
    let mut live_config = config(ProviderKind::OpenAi, format!("{}/v1", server.endpoint()));
    live_config.record_file = Some(record_file.clone());

    let live = build(&live_config).await.unwrap();
    let live_replies =
        vec![live.complete(&full_request()).await.unwrap(), live.complete(&simple_request()).await.unwrap()];
    assert_eq!(live_replies[0].tool_calls[1].arguments, json!("not json"));
    assert_eq!(live_replies[1].content, "All done.");

    let recorded = std::fs::read_to_string(&record_file).unwrap();
    let lines: Vec<&str> = recorded.lines().collect();
    assert_eq!(lines.len(), 2, "{recorded}");
    assert_eq!(serde_json::from_str::<ChatResponse>(lines[0]).unwrap(), live_replies[0]);

    let replay = build(&LlmConfig::replay(&record_file)).await.unwrap();
    let replayed =
        vec![replay.complete(&simple_request()).await.unwrap(), replay.complete(&simple_request()).await.unwrap()];
    assert_eq!(replayed, live_replies);
    assert_eq!(server.received().len(), 2, "replay must not touch the network");

    match replay.complete(&simple_request()).await {
        Err(ModelError::Config(message)) => {
            assert!(message.contains("exhausted after 2 replies"), "{message}");
            assert!(message.contains(&record_file.display().to_string()), "{message}");
        }
        other => panic!("expected exhaustion, got {other:?}"),
    }
}

#[tokio::test]
async fn malformed_replay_file_names_the_line() {
    let path = temp_path("malformed.jsonl");
    let good = serde_json::to_string(&ChatResponse {
        content: "fine".to_string(),
        tool_calls: vec![],
        usage: Usage::default(),
        stop_reason: StopReason::EndTurn,
    })
    .unwrap();
    std::fs::write(&path, format!("{good}\n\n{good}\n{{\"content\": \"no other fields\"}}\n")).unwrap();
    match build(&LlmConfig::replay(&path)).await {
        Err(ModelError::Config(message)) => assert!(message.contains("line 4"), "{message}"),
        Err(other) => panic!("expected a Config error, got {other:?}"),
        Ok(_) => panic!("a malformed replay file must not load"),
    }
}

#[tokio::test]
async fn missing_replay_file_is_a_config_error() {
    let path = temp_path("absent.jsonl");
    assert!(matches!(build(&LlmConfig::replay(&path)).await, Err(ModelError::Config(_))));
}

#[tokio::test]
async fn build_from_lookup_selects_the_provider() {
    let server = ModelServer::start_with(vec![ok(anthropic_text("via build"))]).await;
    let base = server.endpoint();
    let config = LlmConfig::from_lookup(move |name| match name {
        "LLM_PROVIDER" => Some("anthropic".to_string()),
        "LLM_BASE_URL" => Some(base.clone()),
        "LLM_MODEL" => Some("claude-test".to_string()),
        "LLM_API_KEY" => Some(KEY.to_string()),
        "LLM_RETRY_BASE_MS" => Some("1".to_string()),
        _ => None,
    })
    .unwrap();
    let model = build(&config).await.unwrap();
    assert_eq!(model.complete(&simple_request()).await.unwrap().content, "via build");
    let Received { path, body, .. } = server.received().remove(0);
    assert_eq!(path, "/v1/messages");
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], 4096);
}
