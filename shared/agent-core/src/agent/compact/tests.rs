//! Unit tests of a long turn through the loop: large results saved to files, older steps condensed
//! by the model or by a digest, the turn ending `ContextFull` with its work once nothing more fits,
//! and a request too large before any call still an error.

use std::collections::BTreeMap;
use std::time::Duration;

use agent_ports::testing::{FnModel, Script};
use async_trait::async_trait;
use serde_json::{json, Value};

use super::*;
use crate::agent::{self, Ending, ToolOutput, TurnEnv};
use crate::budget::estimate_request;
use crate::events::NoObserver;
use crate::message::{ChatResponse, ToolSpec};
use crate::model::ModelError;
use crate::prompt::{Section, SectionKind, SystemPrompt};

/// A model whose turn makes a reply per step of `steps` (`count` calls of the tool with `arguments`,
/// ids naming the step, each reply reporting 10 tokens in and 1 out) and then answers `answer`; it
/// answers condensing requests with `summary` (an error when `None`), and keeps every request.
fn long_turn_model(summary: Option<&str>, steps: &[(&str, usize, Value)], answer: &str) -> FnModel {
    let script = Script::default();
    for (step, (tool, count, arguments)) in steps.iter().enumerate() {
        let calls = (0..*count).map(|i| ToolCall::new(format!("c{step}_{i}"), *tool, arguments.clone())).collect();
        script.push(ChatResponse::calling(calls).with_usage(Usage::new(10, 1)));
    }
    script.push(ChatResponse::text(answer));
    let summary = summary.map(str::to_owned);
    FnModel::new(move |request| {
        if request.system != INSTRUCTIONS {
            return script.next_reply();
        }
        match &summary {
            Some(summary) => Ok(ChatResponse::text(summary).with_usage(Usage::new(100, 20))),
            None => Err(ModelError::InvalidResponse("the summary failed".into())),
        }
    })
}

/// The requests of the turn itself, the condensing ones left out.
fn turn_requests(model: &FnModel) -> Vec<ChatRequest> {
    model.requests().into_iter().filter(|r| r.system != INSTRUCTIONS).collect()
}

/// An environment with a protected skill document, where `ls` answers a small listing, `grep` a
/// result of `grep_bytes`, `load_skill` puts `skill_bytes` of instructions into the prompt, and
/// saved results go to `saved` (when `saves`).
struct Env {
    skill: String,
    skill_bytes: usize,
    grep_bytes: usize,
    saves: bool,
    saved: BTreeMap<String, String>,
}

impl Env {
    fn new() -> Self {
        Self { skill: String::new(), skill_bytes: 0, grep_bytes: 30_000, saves: true, saved: BTreeMap::new() }
    }
}

#[async_trait]
impl TurnEnv for Env {
    fn system_prompt(&self) -> SystemPrompt {
        let mut sections = vec![
            Section::new(SectionKind::Base, "You help. ".repeat(20)),
            Section::new(SectionKind::MandatorySkill, "<mandatory-skill>Always sign.</mandatory-skill>"),
        ];
        if !self.skill.is_empty() {
            sections.push(Section::new(SectionKind::SkillDocument, self.skill.clone()));
        }
        SystemPrompt { sections }
    }

    fn tools(&self) -> std::sync::Arc<[ToolSpec]> {
        ["ls", "grep", "load_skill", "read_file"]
            .iter()
            .map(|name| ToolSpec { name: (*name).into(), description: String::new(), parameters: json!({}) })
            .collect()
    }

    async fn call_tool(&mut self, call: &ToolCall) -> ToolOutput {
        match call.name.as_str() {
            "grep" => ToolOutput::from(format!("START{}END", "m".repeat(self.grep_bytes))),
            "load_skill" => {
                self.skill = "Rule. ".repeat(self.skill_bytes / 6);
                ToolOutput::from("Loaded.".to_owned())
            }
            _ => ToolOutput::from(format!("/workspace/a.md\n/workspace/b.md ({})", call.id)),
        }
    }

    fn reads_skill_text(&self, call: &ToolCall) -> bool {
        call.name == "load_skill"
    }

    async fn save_result(&mut self, call: &ToolCall, content: &str) -> Option<String> {
        let path = format!("/workspace/.results/{}.txt", call.id);
        self.saves.then(|| {
            self.saved.insert(path.clone(), content.to_owned());
            path
        })
    }
}

fn limits(input_tokens: usize) -> Limits {
    Limits { max_steps: 20, deadline: None, reserve: Duration::ZERO, input_tokens }
}

/// Seven replies of 40 `ls` calls each, then an answer, in a context of 6,000 tokens.
fn long_turn(summary: Option<&str>) -> FnModel {
    let ls = ("ls", 40, json!({"path": "/workspace", "note": "n".repeat(40)}));
    long_turn_model(summary, &vec![ls; 7], "Hecho.")
}

async fn run(model: &FnModel, env: &mut Env, limit: usize) -> Result<agent::LoopOutcome, ModelError> {
    let request = Message::user("Revisa todo el espacio de trabajo y resume lo que hay.");
    agent::run(model, env, Vec::new(), request, &limits(limit), &NoObserver).await
}

#[tokio::test]
async fn a_long_turn_condenses_its_older_steps_with_the_model_and_keeps_every_step() {
    let model = long_turn(Some("Se listó /workspace siete veces: a.md y b.md."));
    let mut env = Env::new();
    let outcome = run(&model, &mut env, 6_000).await.unwrap();
    assert_eq!((outcome.ending, outcome.reply.as_str()), (Ending::Answered, "Hecho."));
    assert_eq!(outcome.steps, 8);
    let condensing = model.requests().iter().filter(|r| r.system == INSTRUCTIONS).count();
    assert!(condensing >= 1, "the model condensed the older steps");
    assert_eq!(outcome.usage.input_tokens, 7 * 10 + condensing as u64 * 100, "the condensing calls are counted");
    let requests = turn_requests(&model);
    assert_eq!(requests.len(), 8);
    for request in &requests {
        assert!(request.system.contains("<mandatory-skill>Always sign.</mandatory-skill>"));
        assert_eq!(request.messages[0], Message::user("Revisa todo el espacio de trabajo y resume lo que hay."));
        let tokens = estimate_request(
            &SystemPrompt { sections: vec![Section::new(SectionKind::Base, request.system.clone())] },
            &request.messages,
            crate::budget::estimate_tools(&request.tools),
        );
        assert!(tokens <= 6_000, "a request of {tokens} tokens");
    }
    let last = requests.last().unwrap();
    let Message::User { content, .. } = &last.messages[1] else { panic!("{:?}", last.messages[1]) };
    assert!(content.starts_with(HEADER) && content.contains("a.md y b.md"), "{content}");
    // The condensing request saw the user's request and the steps, never the skill's rules.
    let condense = model.requests().into_iter().find(|r| r.system == INSTRUCTIONS).unwrap();
    let Message::User { content, .. } = &condense.messages[0] else { panic!() };
    assert!(content.contains("Revisa todo el espacio") && content.contains("Assistant called ls("), "{content}");
    // Every step is kept for the stored history: the request, 7 replies with 40 results each, the answer.
    assert_eq!(outcome.messages.len(), 1 + 7 * 41 + 1);
}

#[tokio::test]
async fn a_failed_summary_becomes_a_digest_of_the_calls() {
    let model = long_turn(None);
    let mut env = Env::new();
    let outcome = run(&model, &mut env, 6_000).await.unwrap();
    assert_eq!(outcome.ending, Ending::Answered);
    let last = turn_requests(&model).pop().unwrap();
    let Message::User { content, .. } = &last.messages[1] else { panic!("{:?}", last.messages[1]) };
    assert!(content.starts_with(HEADER) && content.contains("no summary could be made"), "{content}");
    assert!(content.contains("- ls({\"note\":"), "the short arguments: {content}");
    assert!(content.contains(" bytes: /workspace/a.md"), "the results' sizes and first lines: {content}");
    assert!(
        content.contains("this call was not run. Call it again in your next reply if you still need it. (24 times)"),
        "{content}"
    );
}

#[tokio::test]
async fn a_large_result_is_saved_and_the_next_request_names_its_file() {
    let model = long_turn_model(None, &[("grep", 1, json!({"pattern": "m"}))], "Visto.");
    let mut env = Env::new();
    let outcome = run(&model, &mut env, 28_672).await.unwrap();
    assert_eq!(outcome.ending, Ending::Answered);
    let saved = &env.saved["/workspace/.results/c0_0.txt"];
    assert_eq!(saved.len(), 30_008, "the whole result is in the file");
    let second = &turn_requests(&model)[1];
    let Some(Message::Tool { content, .. }) = second.messages.get(2) else { panic!("{:?}", second.messages) };
    assert!(content.contains("saved to /workspace/.results/c0_0.txt"), "{content}");
    assert!(content.contains("\nSTART") && content.ends_with("END") && content.len() < 6_000, "{content}");
}

#[tokio::test]
async fn a_result_that_cannot_be_saved_is_cut() {
    let model = long_turn_model(None, &[("grep", 1, json!({"pattern": "m"}))], "Visto.");
    let mut env = Env { saves: false, grep_bytes: 100_000, ..Env::new() };
    run(&model, &mut env, 100_000).await.unwrap();
    let second = &turn_requests(&model)[1];
    let Some(Message::Tool { content, .. }) = second.messages.get(2) else { panic!("{:?}", second.messages) };
    assert!(content.contains("[truncated: showing 65536 of 100008 bytes"), "{}", &content[content.len() - 100..]);
}

#[tokio::test]
async fn a_turn_whose_skill_fills_the_context_ends_context_full_with_its_work() {
    let steps = [("ls", 2, json!({})), ("load_skill", 1, json!({}))];
    let model = long_turn_model(Some("unused"), &steps, "Nunca.");
    let mut env = Env { skill_bytes: 30_000, ..Env::new() };
    let outcome = run(&model, &mut env, 6_000).await.unwrap();
    assert_eq!((outcome.ending, outcome.steps), (Ending::ContextFull, 2));
    assert!(outcome.reply.contains("no longer fits") && outcome.reply.contains("saved"), "{}", outcome.reply);
    assert_eq!(outcome.messages.last(), Some(&Message::assistant(outcome.reply.clone())), "the reply is stored");
    assert_eq!(outcome.messages.len(), 1 + 3 + 2 + 1, "both steps are kept");
    assert_eq!(model.requests().len(), 2, "no request over the limit was sent, and no condensing that could not help");
}

#[tokio::test]
async fn a_request_over_the_limit_before_any_call_is_still_an_error() {
    let model = long_turn_model(Some("unused"), &[], "Nunca.");
    let mut env = Env::new();
    let request = Message::user("x".repeat(30_000));
    let result = agent::run(&model, &mut env, Vec::new(), request, &limits(6_000), &NoObserver).await;
    assert!(matches!(result, Err(ModelError::ContextTooLarge { limit: 6_000, .. })), "{result:?}");
    assert!(model.requests().is_empty());
}

#[test]
fn the_view_puts_the_condensed_steps_after_the_request() {
    let step = |id: &str| {
        vec![
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall { id: id.into(), name: "ls".into(), arguments: json!({}) }],
            },
            Message::Tool { tool_call_id: id.into(), name: "ls".into(), content: "a".into(), files: Vec::new() },
        ]
    };
    let mut conversation = vec![Message::user("old"), Message::assistant("old answer"), Message::user("now")];
    assert_eq!(compactable_until(&conversation, 2, None), None, "no step yet");
    conversation.extend(step("1"));
    assert_eq!(compactable_until(&conversation, 2, None), None, "the newest step is never condensed");
    conversation.extend(step("2"));
    conversation.extend(step("3"));
    assert_eq!(compactable_until(&conversation, 2, None), Some(7));
    let compacted = Compacted { covers: 7, text: "two steps".into(), by_model: true };
    assert_eq!(compactable_until(&conversation, 2, Some(&compacted)), None);
    let view = view(&conversation, 2, Some(&compacted));
    assert_eq!(view.len(), 3 + 1 + 2);
    assert_eq!(view[2], Message::user("now"));
    assert_eq!(view[3], Message::user(format!("{HEADER}\ntwo steps")));
    assert_eq!(view[4], conversation[7]);
}

#[test]
fn a_digest_leaves_skill_text_out() {
    let steps = vec![
        Message::Assistant {
            content: "Cargo la habilidad.".into(),
            tool_calls: vec![ToolCall { id: "k".into(), name: "load_skill".into(), arguments: json!({"skill": "x"}) }],
        },
        Message::Tool {
            tool_call_id: "k".into(),
            name: "load_skill".into(),
            content: "SECRET RULES".into(),
            files: Vec::new(),
        },
    ];
    let text = digest(Some("Before."), &steps, &|call: &ToolCall| call.name == "load_skill");
    assert!(text.starts_with("Before.\n") && text.contains("- said: Cargo la habilidad."), "{text}");
    assert!(text.contains("- load_skill({\"skill\":\"x\"}) gave 12 bytes of skill content"), "{text}");
    assert!(!text.contains("SECRET"), "{text}");
}
