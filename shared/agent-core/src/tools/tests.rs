//! Tests of the skills environment inside the agent loop: the `model.call` event says which prompt
//! state each call is made in (state 1 with the listing's counts, state 2 once a skill is current,
//! forced or loaded), how far the context budget shrank the listing, and what the request carried.
//! The object store is an in-memory fake of the storage port and the model a scripted one.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::json;

use super::*;
use crate::agent::{self, Limits};
use crate::budget;
use crate::events::{ListingShown, TurnEvent, TurnObserver};
use crate::message::{ChatRequest, Message};
use crate::prompt::{PromptTemplate, PromptVars, SkillPromptMode, DEFAULT_TEMPLATE};
use crate::skills::SkillLibrary;
use crate::{SessionId, UserId};
use agent_ports::testing::ScriptedModel;
use local_store::MemoryObjectStore as MemStore;

const USER: &str = "u1";

/// Two skills under `u1/skills`, with descriptions long enough that the listing has smaller tiers
/// (the names alone take far less room).
fn seeded() -> MemStore {
    let store = MemStore::recording();
    for (path, description) in [
        ("escrituras/compraventa", "Redacta escrituras de compraventa de inmuebles con todas sus cláusulas. "),
        ("escrituras/hipoteca", "Redacta escrituras de préstamo hipotecario y revisa sus condiciones. "),
    ] {
        let description = description.repeat(4);
        let name = path.rsplit('/').next().unwrap();
        let skill_md = format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\nInstrucciones.\n");
        store.insert(&format!("{USER}/skills/{path}/SKILL.md"), skill_md);
    }
    store
}

#[derive(Default)]
struct Collect(Mutex<Vec<TurnEvent>>);

impl TurnObserver for Collect {
    fn event(&self, event: TurnEvent) {
        self.0.lock().unwrap().push(event);
    }

    fn wants_deltas(&self) -> bool {
        false
    }
}

impl Collect {
    fn model_calls(&self) -> Vec<TurnEvent> {
        self.0.lock().unwrap().iter().filter(|event| event.name() == "model.call").cloned().collect()
    }
}

/// The request's tokens as `budget::estimate_request` counts them, from what the model received.
fn estimate(request: &ChatRequest) -> usize {
    let system = prompt::SystemPrompt {
        sections: vec![
            Section::new(SectionKind::Base, request.system.clone()),
            Section::new(SectionKind::Tail, request.system_tail.clone()),
        ],
    };
    budget::estimate_request(&system, &request.messages, budget::estimate_tools(&request.tools))
}

/// Runs one turn of the skills strategy over `store`'s skills: `force` forces that skill first,
/// `input_tokens` bounds each request.
async fn turn(
    store: &MemStore,
    model: &ScriptedModel,
    template: &PromptTemplate,
    force: Option<&str>,
    input_tokens: usize,
) -> Collect {
    let user = UserId::parse(USER).unwrap();
    let library = SkillLibrary::new();
    let catalog = library.catalog(store, &user).await.unwrap();
    let listing = catalog.listing(store, 4000).await.unwrap();
    let vars = PromptVars::default();
    let vfs = Vfs::new(store, user.clone(), SessionId::parse("S1").unwrap(), None, BTreeMap::new());
    let loaded = LoadedVersions::default();
    let source = SkillSource { library: &library, objects: store, user: &user, catalog: &catalog, loaded: &loaded };
    let shared = TurnShared::new(vfs, source, listing, template, &vars, SkillPromptMode::Replace);
    let mut env = SkillsEnv::new(shared, Vec::new());
    if let Some(path) = force {
        let doc = env.load_skill(path).await.unwrap();
        env.force(doc).await;
    }
    let limits = Limits { max_steps: 5, deadline: None, reserve: std::time::Duration::ZERO, input_tokens };
    let events = Collect::default();
    agent::run(model, &mut env, Vec::new(), Message::user("Prepara una compraventa"), &limits, &events).await.unwrap();
    events
}

#[tokio::test]
async fn model_calls_go_from_state_1_with_the_listing_to_state_2_after_load_skill() {
    let store = seeded();
    let template = PromptTemplate::parse(DEFAULT_TEMPLATE).unwrap();
    let arguments = json!({"skill_path": "escrituras/compraventa"});
    let model = ScriptedModel::default().tool(LOAD_SKILL, arguments.clone()).text("Listo.");
    let events = turn(&store, &model, &template, None, 100_000).await;
    let requests = model.requests();
    let names = |request: &ChatRequest| request.tools.iter().map(|tool| tool.name.clone()).collect::<Vec<_>>();

    let calls = events.model_calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        calls[0],
        TurnEvent::ModelCall {
            step: 1,
            state: 1,
            skill: None,
            forced: false,
            listing: Some(ListingShown { total: 2, shown_in_full: 2, search: false, tier: 0 }),
            tools: names(&requests[0]),
            prompt_tokens: estimate(&requests[0]),
        }
    );
    assert_eq!(
        calls[1],
        TurnEvent::ModelCall {
            step: 2,
            state: 2,
            skill: Some("escrituras/compraventa".into()),
            forced: false,
            listing: None,
            tools: names(&requests[1]),
            prompt_tokens: estimate(&requests[1]),
        }
    );
    assert_eq!(names(&requests[0])[0], LOAD_SKILL);
    assert!(!names(&requests[0]).contains(&FIND_SKILLS.to_owned()), "every skill is shown in full");

    // The events around the tool call, in order, with the arguments and the result text.
    let all = events.0.lock().unwrap().clone();
    let order: Vec<&str> = all.iter().map(TurnEvent::name).collect();
    assert_eq!(order, ["model.call", "tool.call", "tool.result", "skill.loaded", "model.call"]);
    let TurnEvent::ToolCall { arguments: sent, .. } = &all[1] else { panic!("{:?}", all[1]) };
    assert_eq!(sent, &arguments);
    let TurnEvent::ToolResult { content, truncated, bytes, .. } = &all[2] else { panic!("{:?}", all[2]) };
    assert!(content.starts_with("Skill escrituras/compraventa loaded."), "{content}");
    assert_eq!((*bytes, *truncated), (content.len(), false));
}

#[tokio::test]
async fn a_forced_skill_is_state_2_from_the_first_call() {
    let store = seeded();
    let template = PromptTemplate::parse(DEFAULT_TEMPLATE).unwrap();
    let model = ScriptedModel::default().text("Listo.");
    let events = turn(&store, &model, &template, Some("escrituras/hipoteca"), 100_000).await;
    let calls = events.model_calls();
    let [TurnEvent::ModelCall { step: 1, state: 2, skill, forced: true, listing: None, tools, .. }] = calls.as_slice()
    else {
        panic!("{calls:?}")
    };
    assert_eq!(skill.as_deref(), Some("escrituras/hipoteca"));
    assert!(!tools.contains(&LOAD_SKILL.to_owned()), "{tools:?}");

    // From the second call on, the reminder closes the request and is marked as its own, so a
    // provider's moving cache breakpoint goes on the message before it.
    let model = ScriptedModel::default().tool("ls", serde_json::json!({"path": "/workspace"})).text("Listo.");
    turn(&store, &model, &template, Some("escrituras/hipoteca"), 100_000).await;
    let requests = model.requests();
    assert_eq!(requests.iter().map(|request| request.transient_messages).collect::<Vec<_>>(), [0, 1]);
    let Some(Message::User { content, .. }) = requests[1].messages.last() else { panic!("{:?}", requests[1]) };
    assert!(content.contains("skill"), "the reminder is the last message: {content}");
}

#[tokio::test]
async fn a_forced_skill_with_file_tools_is_told_what_memories_are_for_and_one_without_is_not() {
    let store = seeded();
    let skill_md = "---\nname: notas\ndescription: Toma notas.\nallowed-tools: todowrite\n---\n# notas\n";
    store.insert(&format!("{USER}/skills/notas/SKILL.md"), skill_md.to_owned());
    let template = PromptTemplate::parse(DEFAULT_TEMPLATE).unwrap();

    let with_files = ScriptedModel::default().text("Listo.");
    turn(&store, &with_files, &template, Some("escrituras/hipoteca"), 100_000).await;
    let system = &with_files.requests()[0].system;
    let memory = system.find(prompt::MEMORY_SECTION).expect("the memory section");
    assert!(memory < system.find("<skill-reminder").unwrap(), "the reminder still closes the prompt");

    let without_files = ScriptedModel::default().text("Listo.");
    turn(&store, &without_files, &template, Some("notas"), 100_000).await;
    let request = &without_files.requests()[0];
    assert!(!request.tools.iter().any(|tool| tool.name == "ls"), "{:?}", request.tools);
    assert!(!request.system.contains("## Memory"), "{}", request.system);
}

#[tokio::test]
async fn the_tier_counts_how_far_the_budget_shrank_the_listing_for_the_call() {
    let store = seeded();
    // A base template of placeholders only, so the listing is the largest section to trim.
    let template = PromptTemplate::parse(
        "{date}{name}{language}{profile}{initial_context_title}{initial_context_description}{skill}",
    )
    .unwrap();
    let roomy = ScriptedModel::default().text("Listo.");
    let calls = turn(&store, &roomy, &template, None, 100_000).await.model_calls();
    let [TurnEvent::ModelCall { prompt_tokens: full, listing: Some(listing), .. }] = calls.as_slice() else {
        panic!("{calls:?}")
    };
    assert_eq!(listing.tier, 0);

    // One token less than the whole request: the listing falls back to its next tier, once.
    let tight = ScriptedModel::default().text("Listo.");
    let calls = turn(&store, &tight, &template, None, full - 1).await.model_calls();
    let [TurnEvent::ModelCall { prompt_tokens, listing: Some(listing), .. }] = calls.as_slice() else {
        panic!("{calls:?}")
    };
    assert_eq!(*listing, ListingShown { total: 2, shown_in_full: 2, search: false, tier: 1 });
    assert!(prompt_tokens < full, "{prompt_tokens} < {full}");
    assert_eq!(*prompt_tokens, estimate(&tight.requests()[0]));
    assert_ne!(roomy.requests()[0].system, tight.requests()[0].system);
}

#[tokio::test]
async fn task_is_offered_when_the_turn_runs_subagents() {
    let store = seeded();
    let user = UserId::parse(USER).unwrap();
    let library = SkillLibrary::new();
    let catalog = library.catalog(&store, &user).await.unwrap();
    let listing = catalog.listing(&store, 4000).await.unwrap();
    let template = PromptTemplate::parse(DEFAULT_TEMPLATE).unwrap();
    let vars = PromptVars::default();
    let vfs = Vfs::new(&store, user.clone(), SessionId::parse("S1").unwrap(), None, BTreeMap::new());
    let loaded = LoadedVersions::default();
    let source = SkillSource { library: &library, objects: &store, user: &user, catalog: &catalog, loaded: &loaded };
    let model = ScriptedModel::default();
    let limits = Limits { max_steps: 5, deadline: None, reserve: std::time::Duration::ZERO, input_tokens: 100_000 };
    let shared = TurnShared::new(vfs, source, listing, &template, &vars, SkillPromptMode::Replace)
        .with_subagents(Delegation::new(&model, limits, SubagentConfig::default()));
    let env = SkillsEnv::new(shared, Vec::new());
    let names: Vec<String> = env.tools().iter().map(|tool| tool.name.clone()).collect();
    assert!(names.contains(&TASK.to_owned()), "{names:?}");
}
