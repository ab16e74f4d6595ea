//! Unit tests of the context budget: the trimming order, what it keeps, and the models' limits.

use super::*;
use crate::message::ToolCall;
use crate::prompt::{Section, SectionKind};

fn prompt() -> SystemPrompt {
    SystemPrompt {
        sections: vec![
            Section::new(SectionKind::Base, "base ".repeat(30)),
            Section::new(SectionKind::MandatorySkill, "<mandatory-skill>rules</mandatory-skill>"),
            Section::new(SectionKind::Memory, "memory ".repeat(220)),
            Section::new(SectionKind::Reminder, "<skill-reminder/>"),
        ],
    }
}

fn history() -> Vec<Message> {
    vec![
        Message::user("old question ".repeat(50)),
        Message::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCall { id: "1".into(), name: "ls".into(), arguments: serde_json::json!({}) }],
        },
        Message::Tool {
            tool_call_id: "1".into(),
            name: "ls".into(),
            content: "listing ".repeat(50),
            files: Vec::new(),
        },
        Message::assistant("old answer ".repeat(50)),
        Message::user("current request"),
        Message::Tool {
            tool_call_id: "2".into(),
            name: "read_file".into(),
            content: "big ".repeat(3000),
            files: Vec::new(),
        },
    ]
}

#[test]
fn under_the_limit_nothing_changes() {
    let (mut system, mut messages) = (prompt(), history());
    assert!(fit(&mut system, &mut messages, 4, 0, 1_000_000, true).is_empty());
    assert_eq!(messages, history());
}

#[test]
fn trims_in_order_and_keeps_skill_and_request() {
    let (mut system, mut messages) = (prompt(), history());
    let limit = 1200;
    let trims = fit(&mut system, &mut messages, 4, 0, limit, true);
    assert!(matches!(trims[0], Trim::DroppedMessages { count: 4, .. }), "{trims:?}");
    assert!(matches!(trims[1], Trim::DroppedSection { .. }), "{trims:?}");
    assert!(matches!(trims[2], Trim::TruncatedMessage { index: 1, .. }), "{trims:?}");
    assert_eq!(messages[0], Message::user("current request"));
    assert!(system.render().contains("<mandatory-skill>rules</mandatory-skill>"));
    assert!(system.render().starts_with(&"base ".repeat(30)), "the base prompt is kept whole");
    assert!(!system.render().contains("memory"), "an optional section went");
    assert!(system.render().ends_with("<skill-reminder/>"));
    assert!(estimate_request(&system, &messages, 0) <= limit);
}

#[test]
fn without_trimming_the_system_prompt_the_turn_is_cut_and_the_prompt_kept() {
    let (mut system, mut messages) = (prompt(), history());
    let trims = fit(&mut system, &mut messages, 4, 0, 1200, false);
    assert_eq!(system, prompt(), "the cached prefix is left as it is");
    assert!(cuts_the_turn(&trims), "so the loop condenses the turn's older steps first: {trims:?}");
}

#[test]
fn a_base_prompt_that_alone_does_not_fit_is_never_cut() {
    let mut system = SystemPrompt {
        sections: vec![
            Section::new(SectionKind::Base, "policy ".repeat(2000)),
            Section::new(SectionKind::Tail, "Today is 2026-11-29."),
        ],
    };
    let before = system.clone();
    let mut messages = vec![Message::user("current request")];
    let trims = fit(&mut system, &mut messages, 0, 0, 1000, true);
    assert!(matches!(trims.last(), Some(Trim::StillOver { .. })), "{trims:?}");
    assert_eq!(system, before);
    let parts = estimate_text(&"policy ".repeat(2000)) + estimate_text("Today is 2026-11-29.");
    assert_eq!(estimate_request(&system, &messages, 0), parts + estimate_message(&messages[0]), "the tail counts");
}

#[test]
fn a_tool_call_and_its_result_are_dropped_together() {
    let (mut system, mut messages) = (prompt(), history());
    system.sections.clear();
    let without_first = estimate_request(&system, &messages[1..], 0);
    fit(&mut system, &mut messages, 4, 0, without_first - 1, true);
    assert!(!matches!(messages[0], Message::Tool { .. }), "never starts with an orphan tool result");
}

#[test]
fn the_skill_listing_shrinks_by_tier_and_is_never_dropped() {
    let mut listing = Section::new(SectionKind::SkillListing, "full listing ".repeat(400));
    listing.fallbacks = vec!["names only ".repeat(100), "9 skills in 2 categories".to_owned()];
    let mut system = SystemPrompt { sections: vec![Section::new(SectionKind::Base, "base"), listing] };
    let mut messages = vec![Message::user("current request")];
    let trims = fit(&mut system, &mut messages, 0, 0, 500, true);
    assert!(matches!(trims[0], Trim::ShrunkListing { .. }), "{trims:?}");
    assert!(system.render().contains("names only"), "{}", system.render());
    let trims = fit(&mut system, &mut messages, 0, 0, 10, true);
    assert!(trims.iter().any(|t| matches!(t, Trim::ShrunkListing { .. })), "{trims:?}");
    assert!(system.render().contains("9 skills in 2 categories"), "the smallest tier stays: {}", system.render());
}

fn write(id: &str, bytes: usize) -> Message {
    Message::Assistant {
        content: String::new(),
        tool_calls: vec![ToolCall {
            id: id.into(),
            name: "write_file".into(),
            arguments: serde_json::json!({"file_path": format!("/workspace/{id}.md"), "content": "w".repeat(bytes)}),
        }],
    }
}

fn written(id: &str) -> Message {
    Message::Tool {
        tool_call_id: id.into(),
        name: "write_file".into(),
        content: format!("Updated file {id}"),
        files: Vec::new(),
    }
}

fn arguments(message: &Message) -> &serde_json::Value {
    match message {
        Message::Assistant { tool_calls, .. } => &tool_calls[0].arguments,
        _ => panic!("not a reply: {message:?}"),
    }
}

#[test]
fn earlier_calls_arguments_go_first_and_the_newest_reply_keeps_its_own() {
    let mut system = SystemPrompt { sections: vec![Section::new(SectionKind::Base, "base ".repeat(100))] };
    let mut messages = vec![
        Message::user("old question"),
        write("a", 60_000),
        written("a"),
        Message::assistant("old answer"),
        Message::user("current request"),
        write("b", 90_000),
        written("b"),
        write("c", 3_000),
        written("c"),
    ];
    let trims = fit(&mut system, &mut messages, 4, 0, 2_000, true);
    assert!(matches!(trims[..], [Trim::CutArguments { calls: 2, .. }]), "{trims:?}");
    assert!(!cuts_the_turn(&trims), "earlier calls' arguments are not the turn's last resort");
    assert_eq!(messages.len(), 9, "no message was dropped");
    assert_eq!(arguments(&messages[1])["content"], "[60000 bytes cut to fit the model's context]");
    assert_eq!(arguments(&messages[5])["file_path"], "/workspace/b.md");
    assert_eq!(arguments(&messages[7])["content"], "w".repeat(3_000), "the newest reply's arguments stay");
    assert!(estimate_request(&system, &messages, 0) <= 2_000);
}

#[test]
fn the_newest_replys_arguments_are_cut_when_they_are_the_largest_thing_left() {
    let mut system = SystemPrompt { sections: vec![] };
    let mut messages = vec![
        Message::user("current request"),
        Message::Tool {
            tool_call_id: "r".into(),
            name: "read_file".into(),
            content: "r".repeat(3_000),
            files: Vec::new(),
        },
        write("b", 200_000),
        written("b"),
    ];
    let trims = fit(&mut system, &mut messages, 0, 0, 1_500, true);
    assert!(matches!(trims[..], [Trim::CutNewestArguments { .. }]), "{trims:?}");
    assert!(cuts_the_turn(&trims), "the current turn was cut");
    assert_eq!(
        messages[1],
        Message::Tool {
            tool_call_id: "r".into(),
            name: "read_file".into(),
            content: "r".repeat(3_000),
            files: Vec::new()
        }
    );
    assert!(estimate_request(&system, &messages, 0) <= 1_500);
}

#[test]
fn a_request_over_the_limit_on_its_own_is_still_over() {
    let mut system = SystemPrompt { sections: vec![] };
    let mut messages = vec![Message::user("q".repeat(30_000)), write("b", 20_000), written("b")];
    let trims = fit(&mut system, &mut messages, 0, 0, 1_000, true);
    assert!(matches!(trims.last(), Some(Trim::StillOver { limit: 1_000, .. })), "{trims:?}");
    assert_eq!(messages[0], Message::user("q".repeat(30_000)), "the request is never cut");
    assert!(arguments(&messages[1])["content"].as_str().unwrap().contains("cut"), "the rest was");
}

#[test]
fn known_models_have_limits() {
    assert_eq!(default_context_tokens("gpt-4o-mini"), 128_000);
    assert_eq!(default_context_tokens("anthropic/claude-sonnet-4"), 200_000);
    assert_eq!(default_context_tokens("my-local-model"), DEFAULT_CONTEXT_TOKENS);
    assert_eq!(default_context_tokens("gpt-4.1-mini"), 1_047_576, "a dot in the name is not a prefix");
    assert_eq!(default_context_tokens("llama3.1:8b"), 128_000);
    assert_eq!(default_context_tokens("llama3"), 8_192);
}

#[test]
fn bedrock_ids_have_their_models_limits() {
    for (model, limit) in [
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", 200_000),
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", 200_000),
        ("eu.anthropic.claude-3-7-sonnet-20250219-v1:0", 200_000),
        ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", 200_000),
        (
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0",
            200_000,
        ),
        ("arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0", 200_000),
        ("meta.llama3-1-70b-instruct-v1:0", 128_000),
        ("us.meta.llama3-2-11b-instruct-v1:0", 128_000),
        ("meta.llama3-8b-instruct-v1:0", 8_192),
        ("amazon.nova-pro-v1:0", 300_000),
        ("us.amazon.nova-micro-v1:0", 128_000),
        ("openai.gpt-oss-120b-1:0", 128_000),
        ("mistral.mistral-7b-instruct-v0:2", 32_768),
        ("arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3", DEFAULT_CONTEXT_TOKENS),
    ] {
        assert_eq!(default_context_tokens(model), limit, "{model}");
    }
}

#[test]
fn json_is_estimated_as_its_compact_text() {
    let values = [
        serde_json::json!({}),
        serde_json::json!({"file_path": "/workspace/notes.md", "content": "ñandú \"quoted\"\n", "n": [1, 2.5, null]}),
        serde_json::json!("x".repeat(1_000)),
    ];
    for value in values {
        assert_eq!(estimate::estimate_json(&value), estimate_text(&value.to_string()), "{value}");
    }
}

#[test]
fn the_system_prompt_is_estimated_as_the_text_it_renders_to() {
    let mut system = prompt();
    system.sections.insert(1, Section::new(SectionKind::Tail, "\n\nToday is 2026-11-30.\n"));
    assert_eq!(system.rendered_lens(), (system.render().len(), system.render_tail().len()));
    assert_eq!(estimate_system(&system), estimate_text(&system.render()) + estimate_text(&system.render_tail()));
    let messages = history();
    assert_eq!(
        estimate_request(&system, &messages, 7),
        estimate_system(&system) + messages.iter().map(estimate_message).sum::<usize>() + 7
    );
}
