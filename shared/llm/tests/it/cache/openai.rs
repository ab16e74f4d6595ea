//! OpenAI: the system and its tail in one message, `prompt_cache_key` and, when configured,
//! `prompt_cache_retention`; `prompt_tokens_details.cached_tokens` as reads.

use super::*;

const MODEL: &str = "gpt-4o-mini";
const OPENAI: ProviderKind = ProviderKind::OpenAi;

#[tokio::test]
async fn openai_sends_the_cache_key_and_the_tail_last() {
    let body = sent(OPENAI, |_| {}, MODEL, &step(1, "\n\nToday is 2026-11-29.\n")).await;
    assert_eq!(body["prompt_cache_key"], "tenant-a:state-1");
    assert!(body.get("prompt_cache_retention").is_none(), "opt-in only");
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": format!("{}\n\nToday is 2026-11-29.\n", stable_system())})
    );

    let retained = |config: &mut LlmConfig| config.prompt_cache.openai_retention = Some("24h".into());
    let body = sent(OPENAI, retained, MODEL, &step(1, "")).await;
    assert_eq!(body["prompt_cache_retention"], "24h");
    assert_eq!(body["messages"][0]["content"], stable_system(), "no tail, no separator");

    let body = sent(OPENAI, off, MODEL, &step(1, "")).await;
    assert!(body.get("prompt_cache_key").is_none(), "{body}");
    let keyless = ChatRequest { cache_key: None, ..step(1, "") };
    assert!(sent(OPENAI, |_| {}, MODEL, &keyless).await.get("prompt_cache_key").is_none());
}

async fn a_growing_conversation_reads_the_previous_step(streamed: bool) {
    let requests = [step(1, "tail"), step(2, "tail")];
    let replies = converse(OPENAI, MODEL, &requests, streamed).await;
    for (response, reported) in &replies {
        assert_eq!(response.usage, core_usage(*reported), "parsed as reported");
        assert_eq!(response.usage.cache_write_tokens, 0, "OpenAI reports no writes");
    }
    let (first, second) = (replies[0].0.usage, replies[1].0.usage);
    assert_eq!(first.cache_read_tokens, 0);
    assert!(second.cache_read_tokens >= 1024 && second.cache_read_tokens % 128 == 0, "{second:?}");
    // The whole first request is read, down to OpenAI's steps of 128 tokens.
    assert!(second.cache_read_tokens <= first.input_tokens, "{second:?}");
    assert!(second.cache_read_tokens + 128 >= first.input_tokens, "{first:?} {second:?}");
}

#[tokio::test]
async fn openai_usage_splits_buffered() {
    a_growing_conversation_reads_the_previous_step(false).await;
}

#[tokio::test]
async fn openai_usage_splits_streamed() {
    a_growing_conversation_reads_the_previous_step(true).await;
}
