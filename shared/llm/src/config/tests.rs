//! The configuration's tests: each variable read, its defaults, and its errors.

use super::*;
use std::collections::HashMap;

fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |name| map.get(name).cloned()
}

fn config_message(result: Result<LlmConfig, ModelError>) -> String {
    match result {
        Err(ModelError::Config(message)) => message,
        other => panic!("expected a Config error, got {other:?}"),
    }
}

#[test]
fn openai_defaults() {
    let config = LlmConfig::from_lookup(lookup(&[("LLM_MODEL", "gpt-4o-mini")])).unwrap();
    assert_eq!(config.provider, ProviderKind::OpenAi);
    assert_eq!(config.base_url, OPENAI_DEFAULT_BASE_URL);
    assert_eq!(config.model, "gpt-4o-mini");
    assert_eq!(config.api_key, None);
    assert_eq!(config.timeout, Duration::from_secs(60));
    assert_eq!(config.max_attempts, 4);
    assert_eq!(config.retry_base_delay, Duration::from_millis(500));
    assert_eq!(config.max_tokens, 4096);
    assert_eq!(config.replay_file, None);
    assert_eq!(config.record_file, None);
    assert_eq!(config.model_name(), "openai:gpt-4o-mini");
}

#[test]
fn anthropic_with_overrides() {
    let config = LlmConfig::from_lookup(lookup(&[
        ("LLM_PROVIDER", "Anthropic"),
        ("LLM_MODEL", "claude-sonnet-4-5"),
        ("LLM_API_KEY", "sk-ant-secret"),
        ("LLM_BASE_URL", "http://127.0.0.1:8080/"),
        ("LLM_TIMEOUT_SECS", "5"),
        ("LLM_MAX_ATTEMPTS", "2"),
        ("LLM_RETRY_BASE_MS", "0"),
        ("LLM_MAX_TOKENS", "1000"),
        ("LLM_RECORD_FILE", "/tmp/rec.jsonl"),
    ]))
    .unwrap();
    assert_eq!(config.provider, ProviderKind::Anthropic);
    assert_eq!(config.base_url, "http://127.0.0.1:8080");
    assert_eq!(config.api_key.as_deref(), Some("sk-ant-secret"));
    assert_eq!(config.timeout, Duration::from_secs(5));
    assert_eq!(config.max_attempts, 2);
    assert_eq!(config.retry_base_delay, Duration::ZERO);
    assert_eq!(config.max_tokens, 1000);
    assert_eq!(config.record_file, Some(PathBuf::from("/tmp/rec.jsonl")));
}

#[test]
fn anthropic_default_url_and_required_key() {
    let config =
        LlmConfig::from_lookup(lookup(&[("LLM_PROVIDER", "anthropic"), ("LLM_MODEL", "m"), ("LLM_API_KEY", "k")]))
            .unwrap();
    assert_eq!(config.base_url, ANTHROPIC_DEFAULT_BASE_URL);

    let message = config_message(LlmConfig::from_lookup(lookup(&[("LLM_PROVIDER", "anthropic"), ("LLM_MODEL", "m")])));
    assert!(message.contains("LLM_API_KEY"), "{message}");
}

#[test]
fn bedrock_needs_a_model_but_no_key_nor_url() {
    for model in [
        "anthropic.claude-3-5-sonnet-20240620-v1:0",
        "us.anthropic.claude-sonnet-4-20250514-v1:0",
        "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0",
    ] {
        let config = LlmConfig::from_lookup(lookup(&[("LLM_PROVIDER", "Bedrock"), ("LLM_MODEL", model)])).unwrap();
        assert_eq!(config.provider, ProviderKind::Bedrock);
        assert_eq!(config.model, model);
        assert_eq!(config.base_url, "", "the SDK picks the endpoint");
        assert_eq!(config.api_key, None);
        assert_eq!(config.model_name(), format!("bedrock:{model}"));
    }

    let message = config_message(LlmConfig::from_lookup(lookup(&[("LLM_PROVIDER", "bedrock")])));
    assert!(message.contains("LLM_MODEL") && message.contains("bedrock"), "{message}");
}

#[test]
fn bedrock_takes_an_endpoint_and_ignores_a_key() {
    let config = LlmConfig::from_lookup(lookup(&[
        ("LLM_PROVIDER", "bedrock"),
        ("LLM_MODEL", "amazon.nova-pro-v1:0"),
        ("LLM_BASE_URL", "https://bedrock-runtime.eu-west-1.amazonaws.com/"),
        ("LLM_API_KEY", "sk-not-for-bedrock"),
        ("LLM_MAX_ATTEMPTS", "3"),
    ]))
    .unwrap();
    assert_eq!(config.base_url, "https://bedrock-runtime.eu-west-1.amazonaws.com");
    assert_eq!(config.api_key, None);
    assert_eq!(config.max_attempts, 3);

    let message = config_message(LlmConfig::from_lookup(lookup(&[
        ("LLM_PROVIDER", "bedrock"),
        ("LLM_MODEL", "m"),
        ("LLM_BASE_URL", "bedrock-runtime.us-east-1.amazonaws.com"),
    ])));
    assert!(message.contains("LLM_BASE_URL"), "{message}");
}

#[test]
fn replay_needs_only_a_file() {
    let config = LlmConfig::from_lookup(lookup(&[("LLM_PROVIDER", "replay"), ("LLM_REPLAY_FILE", "r.jsonl")])).unwrap();
    assert_eq!(config.provider, ProviderKind::Replay);
    assert_eq!(config.replay_file, Some(PathBuf::from("r.jsonl")));
    assert_eq!(config.model_name(), "replay:r.jsonl");

    let message = config_message(LlmConfig::from_lookup(lookup(&[("LLM_PROVIDER", "replay")])));
    assert!(message.contains("LLM_REPLAY_FILE"), "{message}");
}

#[test]
fn a_used_up_replay_fails_unless_told_to_answer() {
    let replay = [("LLM_PROVIDER", "replay"), ("LLM_REPLAY_FILE", "r.jsonl")];
    assert!(!LlmConfig::from_lookup(lookup(&replay)).unwrap().replay_exhausted_answers);
    let answer = [replay[0], replay[1], ("LLM_REPLAY_EXHAUSTED", "answer")];
    assert!(LlmConfig::from_lookup(lookup(&answer)).unwrap().replay_exhausted_answers);
    let error = [replay[0], replay[1], ("LLM_REPLAY_EXHAUSTED", "error")];
    assert!(!LlmConfig::from_lookup(lookup(&error)).unwrap().replay_exhausted_answers);
    let message =
        config_message(LlmConfig::from_lookup(lookup(&[replay[0], replay[1], ("LLM_REPLAY_EXHAUSTED", "loop")])));
    assert!(message.contains("LLM_REPLAY_EXHAUSTED"), "{message}");
}

#[test]
fn invalid_values_are_config_errors() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("LLM_PROVIDER", "gemini"), ("LLM_MODEL", "m")], "LLM_PROVIDER"),
        (&[], "LLM_MODEL"),
        (&[("LLM_MODEL", "m"), ("LLM_BASE_URL", "localhost:11434")], "LLM_BASE_URL"),
        (&[("LLM_MODEL", "m"), ("LLM_TIMEOUT_SECS", "soon")], "LLM_TIMEOUT_SECS"),
        (&[("LLM_MODEL", "m"), ("LLM_TIMEOUT_SECS", "0")], "LLM_TIMEOUT_SECS"),
        (&[("LLM_MODEL", "m"), ("LLM_MAX_ATTEMPTS", "0")], "LLM_MAX_ATTEMPTS"),
        (&[("LLM_MODEL", "m"), ("LLM_MAX_ATTEMPTS", "-1")], "LLM_MAX_ATTEMPTS"),
        (&[("LLM_MODEL", "m"), ("LLM_RETRY_BASE_MS", "1.5")], "LLM_RETRY_BASE_MS"),
        (&[("LLM_MODEL", "m"), ("LLM_MAX_TOKENS", "99999999999")], "LLM_MAX_TOKENS"),
    ];
    for (vars, needle) in cases {
        let message = config_message(LlmConfig::from_lookup(lookup(vars)));
        assert!(message.contains(needle), "{vars:?}: {message}");
    }
}

#[test]
fn file_input_is_known_per_provider_and_model_unless_set() {
    let input = |vars: &[(&str, &str)]| LlmConfig::from_lookup(lookup(vars)).unwrap().file_input();
    let all = FileInput::all;
    assert_eq!(input(&[("LLM_MODEL", "gpt-4o")]), all(ImageTokens::Tiles512));
    let anthropic = [("LLM_PROVIDER", "anthropic"), ("LLM_MODEL", "m"), ("LLM_API_KEY", "k")];
    assert_eq!(input(&anthropic), all(ImageTokens::PixelsOver750));
    for (model, expected) in [
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", all(ImageTokens::PixelsOver750)),
        ("arn:aws:bedrock:us-east-1:1:inference-profile/eu.amazon.nova-pro-v1:0", all(ImageTokens::PixelsOver750)),
        ("meta.llama3-70b-instruct-v1:0", FileInput::TEXT_ONLY),
    ] {
        assert_eq!(input(&[("LLM_PROVIDER", "bedrock"), ("LLM_MODEL", model)]), expected, "{model}");
    }
    let set = |value| input(&[("LLM_MODEL", "gpt-4o"), ("LLM_FILE_INPUT", value)]);
    assert_eq!(set("AUTO"), all(ImageTokens::Tiles512));
    assert_eq!(set("none"), FileInput { images: false, documents: false, ..all(ImageTokens::Tiles512) });
    assert_eq!(set("images"), FileInput { documents: false, ..all(ImageTokens::Tiles512) });
    assert_eq!(set(" images, pdf "), all(ImageTokens::Tiles512));
    let llama = [("LLM_PROVIDER", "bedrock"), ("LLM_MODEL", "meta.llama3"), ("LLM_FILE_INPUT", "images")];
    assert!(input(&llama).images, "a setting overrides what auto knows");
    let message = config_message(LlmConfig::from_lookup(lookup(&[("LLM_MODEL", "m"), ("LLM_FILE_INPUT", "video")])));
    assert!(message.contains("LLM_FILE_INPUT"), "{message}");
}

#[test]
fn empty_values_count_as_unset() {
    let config =
        LlmConfig::from_lookup(lookup(&[("LLM_MODEL", "m"), ("LLM_API_KEY", ""), ("LLM_PROVIDER", "")])).unwrap();
    assert_eq!(config.provider, ProviderKind::OpenAi);
    assert_eq!(config.api_key, None);
}

#[test]
fn debug_redacts_the_key() {
    let mut config = LlmConfig::new(ProviderKind::OpenAi, "http://x", "m");
    config.api_key = Some("sk-very-secret".to_string());
    let printed = format!("{config:?}");
    assert!(!printed.contains("sk-very-secret"), "{printed}");
    assert!(printed.contains("[redacted]"), "{printed}");
}
