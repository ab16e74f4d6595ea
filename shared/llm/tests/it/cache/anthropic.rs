//! Anthropic: `cache_control` on the last tool, the stable system block and the last message's last
//! block; the usage's `cache_creation_input_tokens` and `cache_read_input_tokens` as writes and reads.

use super::*;

const MODEL: &str = "claude-sonnet-4-5";
const ANTHROPIC: ProviderKind = ProviderKind::Anthropic;

#[tokio::test]
async fn anthropic_marks_the_tools_the_stable_system_and_the_last_block() {
    let body = sent(ANTHROPIC, |_| {}, MODEL, &step(1, "Today is 2026-11-29.")).await;
    let marker = json!({"type": "ephemeral"});
    let tools = body["tools"].as_array().unwrap();
    assert_eq!(tools.last().unwrap()["cache_control"], marker, "the last tool");
    assert!(tools[..tools.len() - 1].iter().all(|tool| tool.get("cache_control").is_none()));
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": stable_system(), "cache_control": marker},
               {"type": "text", "text": "Today is 2026-11-29."}]),
        "the stable part is marked, the tail after it is not"
    );
    let messages = body["messages"].as_array().unwrap();
    let last = messages.last().unwrap()["content"].as_array().unwrap();
    assert_eq!(last.last().unwrap()["type"], "tool_result");
    assert_eq!(last.last().unwrap()["cache_control"], marker, "the breakpoint that moves");
    assert_eq!(count_key(&body, "cache_control"), 3, "{body}");
    assert!(count_key(&body, "cache_control") <= 4, "Anthropic's limit");

    let plain = ChatRequest { system_tail: String::new(), messages: vec![Message::user("hi")], ..step(0, "") };
    let body = sent(ANTHROPIC, |_| {}, MODEL, &plain).await;
    assert_eq!(body["system"].as_array().unwrap().len(), 1, "no empty tail block");
    assert_eq!(body["messages"][0]["content"][0]["cache_control"], marker);
}

#[tokio::test]
async fn anthropic_takes_the_configured_ttl_and_marks_nothing_when_off() {
    let body = sent(ANTHROPIC, one_hour, MODEL, &step(1, "tail")).await;
    assert_eq!(count_key(&body, "cache_control"), 3);
    assert_eq!(body["system"][0]["cache_control"], json!({"type": "ephemeral", "ttl": "1h"}));
    assert_eq!(body["tools"][1]["cache_control"], json!({"type": "ephemeral", "ttl": "1h"}));

    let body = sent(ANTHROPIC, off, MODEL, &step(1, "")).await;
    assert_eq!(count_key(&body, "cache_control"), 0, "{body}");
    assert_eq!(body["system"], json!(stable_system()), "a plain string, as before caching");
    let body = sent(ANTHROPIC, off, MODEL, &step(1, "tail")).await;
    assert_eq!(count_key(&body, "cache_control"), 0, "{body}");
    assert_eq!(body["system"][1], json!({"type": "text", "text": "tail"}));
}

/// Two steps of a loop: the first writes its prefix, the second reads it and writes its own growth.
async fn a_growing_conversation_reads_the_previous_step(streamed: bool) {
    let requests = [step(1, "tail"), step(2, "tail")];
    let replies = converse(ANTHROPIC, MODEL, &requests, streamed).await;
    for (response, reported) in &replies {
        assert_eq!(response.usage, core_usage(*reported), "parsed as reported");
        assert_eq!(
            response.usage.input_tokens,
            reported.uncached_input_tokens() + reported.cache_read_tokens + reported.cache_write_tokens
        );
    }
    let (first, second) = (replies[0].0.usage, replies[1].0.usage);
    assert_eq!(first.cache_read_tokens, 0);
    assert!(first.cache_write_tokens > 0 && first.cache_write_tokens <= first.input_tokens, "{first:?}");
    assert_eq!(second.cache_read_tokens, first.cache_write_tokens, "the whole first step is read: {second:?}");
    assert!(second.cache_write_tokens > 0, "the new step is written: {second:?}");
    assert!(second.input_tokens > first.input_tokens);
}

#[tokio::test]
async fn anthropic_usage_splits_buffered() {
    a_growing_conversation_reads_the_previous_step(false).await;
}

#[tokio::test]
async fn anthropic_usage_splits_streamed() {
    a_growing_conversation_reads_the_previous_step(true).await;
}

#[tokio::test]
async fn anthropic_a_new_tail_still_reads_the_stable_prefix() {
    let requests = [step(1, "Today is 2026-11-29."), step(1, "Today is 2026-11-30.")];
    let replies = converse(ANTHROPIC, MODEL, &requests, false).await;
    let (first, second) = (replies[0].0.usage, replies[1].0.usage);
    assert!(second.cache_read_tokens > 0, "tools and stable system are read: {second:?}");
    assert!(second.cache_read_tokens < first.cache_write_tokens, "not the messages after the tail: {second:?}");
    assert_eq!(
        second.cache_read_tokens + second.cache_write_tokens,
        first.cache_write_tokens,
        "same size, rewritten from the tail"
    );
}

#[tokio::test]
async fn anthropic_fixed_totals_are_split_by_the_cached_share() {
    let server = ModelServer::start_with(vec![Reply::text("a"), Reply::text("b")]).await;
    let model = build(ANTHROPIC, &config(ANTHROPIC, &server, MODEL));
    let first = model.complete(&step(1, "")).await.unwrap().usage;
    let second = model.complete(&step(1, "")).await.unwrap().usage;
    assert_eq!((first.input_tokens, first.output_tokens), (100, 10), "the totals tests count on");
    assert_eq!((first.cache_read_tokens, first.cache_write_tokens), (0, 100), "all of it up to the last block");
    assert_eq!((second.cache_read_tokens, second.cache_write_tokens), (100, 0), "the same request, all read");
}

#[tokio::test]
async fn anthropic_the_moving_breakpoint_goes_before_a_transient_reminder() {
    let body = sent(ANTHROPIC, |_| {}, MODEL, &step_with_reminder(1)).await;
    let last = body["messages"].as_array().unwrap().last().unwrap()["content"].as_array().unwrap().clone();
    assert_eq!((last[0]["type"].as_str(), last[1]["type"].as_str()), (Some("tool_result"), Some("text")));
    assert_eq!(last[0]["cache_control"], json!({"type": "ephemeral"}), "on the last block the next call repeats");
    assert!(last[1].get("cache_control").is_none(), "not on the reminder");

    let replies = converse(ANTHROPIC, MODEL, &[step_with_reminder(1), step_with_reminder(2)], false).await;
    let (first, second) = (replies[0].0.usage, replies[1].0.usage);
    assert!(first.cache_write_tokens < first.input_tokens, "the reminder is not written: {first:?}");
    assert_eq!(second.cache_read_tokens, first.cache_write_tokens, "the next step reads it all: {second:?}");
}
