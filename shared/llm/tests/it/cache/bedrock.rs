//! Bedrock Converse: `cachePoint` blocks after the tools, the stable system text and the last
//! message, only where the model takes them; `cacheReadInputTokens` and `cacheWriteInputTokens`.

use super::*;

const CLAUDE: &str = "us.anthropic.claude-sonnet-4-20250514-v1:0";
const CLAUDE_1H: &str = "global.anthropic.claude-sonnet-4-5-20250929-v1:0";
const NOVA: &str = "us.amazon.nova-pro-v1:0";
const BEDROCK: ProviderKind = ProviderKind::Bedrock;

fn point() -> Value {
    json!({"cachePoint": {"type": "default"}})
}

#[tokio::test]
async fn bedrock_claude_takes_cache_points_after_tools_system_and_messages() {
    let body = sent(BEDROCK, |_| {}, CLAUDE, &step(1, "Today is 2026-11-29.")).await;
    assert_eq!(
        body["system"],
        json!([{"text": stable_system()}, point(), {"text": "Today is 2026-11-29."}]),
        "the tail after the cache point"
    );
    let tools = body["toolConfig"]["tools"].as_array().unwrap();
    assert_eq!((tools.len(), tools.last().unwrap()), (3, &point()), "after the last tool");
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["content"].as_array().unwrap().last().unwrap(), &point());
    assert_eq!(count_key(&body, "cachePoint"), 3, "{body}");
}

#[tokio::test]
async fn bedrock_nova_takes_none_after_the_tools() {
    let body = sent(BEDROCK, |_| {}, NOVA, &step(1, "")).await;
    assert_eq!(body["system"], json!([{"text": stable_system()}, point()]));
    assert_eq!(body["toolConfig"]["tools"].as_array().unwrap().len(), 2, "Nova refuses a tools cache point");
    assert_eq!(count_key(&body, "cachePoint"), 2, "{body}");
}

#[tokio::test]
async fn bedrock_models_without_caching_get_no_cache_point() {
    for model in [
        "meta.llama3-1-70b-instruct-v1:0",
        "mistral.mistral-large-2407-v1:0",
        "anthropic.claude-3-5-sonnet-20240620-v1:0",
    ] {
        let body = sent(BEDROCK, |_| {}, model, &step(1, "tail")).await;
        assert_eq!(count_key(&body, "cachePoint"), 0, "{model}: {body}");
        assert_eq!(body["system"], json!([{"text": stable_system()}, {"text": "tail"}]), "{model}");
    }
    let body = sent(BEDROCK, off, CLAUDE, &step(1, "")).await;
    assert_eq!(count_key(&body, "cachePoint"), 0, "caching off: {body}");
}

#[tokio::test]
async fn bedrock_one_hour_only_where_the_model_offers_it() {
    let body = sent(BEDROCK, one_hour, CLAUDE_1H, &step(1, "")).await;
    let hour = json!({"cachePoint": {"type": "default", "ttl": "1h"}});
    assert_eq!(body["system"][1], hour);
    assert_eq!(count_key(&body, "ttl"), 3, "{body}");
    let body = sent(BEDROCK, one_hour, CLAUDE, &step(1, "")).await;
    assert_eq!((count_key(&body, "cachePoint"), count_key(&body, "ttl")), (3, 0), "five minutes: {body}");
}

async fn a_growing_conversation_reads_the_previous_step(streamed: bool) {
    let requests = [step(1, "tail"), step(2, "tail")];
    let replies = converse(BEDROCK, CLAUDE, &requests, streamed).await;
    for (response, reported) in &replies {
        assert_eq!(response.usage, core_usage(*reported), "parsed as reported");
    }
    let (first, second) = (replies[0].0.usage, replies[1].0.usage);
    assert_eq!(first.cache_read_tokens, 0);
    assert!(first.cache_write_tokens > 0, "{first:?}");
    assert_eq!(second.cache_read_tokens, first.cache_write_tokens, "the whole first step is read: {second:?}");
    assert!(second.cache_write_tokens > 0, "{second:?}");
}

#[tokio::test]
async fn bedrock_usage_splits_buffered() {
    a_growing_conversation_reads_the_previous_step(false).await;
}

#[tokio::test]
async fn bedrock_usage_splits_streamed() {
    a_growing_conversation_reads_the_previous_step(true).await;
}

#[tokio::test]
async fn bedrock_a_new_tail_still_reads_the_stable_prefix() {
    let requests = [step(1, "Today is 2026-11-29."), step(1, "Today is 2026-11-30.")];
    let replies = converse(BEDROCK, NOVA, &requests, false).await;
    let (first, second) = (replies[0].0.usage, replies[1].0.usage);
    assert!(second.cache_read_tokens > 0, "the stable system is read: {second:?}");
    assert_eq!(second.cache_read_tokens + second.cache_write_tokens, first.cache_write_tokens, "{second:?}");
}

#[tokio::test]
async fn bedrock_the_moving_cache_point_goes_before_a_transient_reminder() {
    let body = sent(BEDROCK, |_| {}, CLAUDE, &step_with_reminder(1)).await;
    let last = body["messages"].as_array().unwrap().last().unwrap()["content"].clone();
    assert!(last[0].get("toolResult").is_some(), "{last}");
    assert_eq!(last[1], point(), "after the tool result the next call repeats");
    assert_eq!(last[2]["text"], "Reminder 1: stay within the skill.");

    let replies = converse(BEDROCK, CLAUDE, &[step_with_reminder(1), step_with_reminder(2)], true).await;
    let (first, second) = (replies[0].0.usage, replies[1].0.usage);
    assert!(first.cache_write_tokens < first.input_tokens, "{first:?}");
    assert_eq!(second.cache_read_tokens, first.cache_write_tokens, "{second:?}");
}
