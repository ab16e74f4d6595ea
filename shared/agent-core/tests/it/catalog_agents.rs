//! The tenant's agents in the catalog index, over the embedded store: built from a listing of
//! `{user}/agents/` with their bounds and skip reasons, kept current by `update_index`, listed from
//! the head a turn reads anyway (no request of their own), and loaded once per ETag.

use std::sync::Arc;

use agent_core::skills::agents::{AgentSkip, MAX_AGENTS, MAX_AGENT_FILE_BYTES};
use agent_core::skills::index::{build_index, decode_index, update_index, IndexRead, TenantFile, MAX_SKIPPED_AGENTS};
use agent_core::skills::{AgentDoc, AgentEntry, SkillLibrary};
use agent_core::UserId;
use local_store::MemoryObjectStore;

fn agent_md(name: &str, description: &str, extra: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n{extra}---\nYou are {name}.\n")
}

fn skill_md(name: &str) -> String {
    format!("---\nname: {name}\ndescription: Skill {name}.\n---\n# {name}\n")
}

/// A tenant with two skills, two good agents, one repaired and one of each way to be skipped.
fn tenant(store: &MemoryObjectStore, user: &str) -> UserId {
    store.insert(&format!("{user}/skills/pdf/SKILL.md"), skill_md("pdf"));
    store.insert(&format!("{user}/skills/docs/memo/SKILL.md"), skill_md("memo"));
    let agents = [
        ("code-reviewer.md", agent_md("code-reviewer", "Reviews code.", "tools: Read, Grep, Glob\nmodel: sonnet\n")),
        ("researcher.md", agent_md("researcher", "Researches a question.", "")),
        ("drafter.md", agent_md("Drafter", "Drafts contracts.", "tools: [Write, WebFetch]\n")),
        ("broken.md", "You are broken: no frontmatter.\n".to_owned()),
        ("general-purpose.md", agent_md("general-purpose", "Mine.", "")),
        ("Upper.md", agent_md("upper", "Bad file name.", "")),
        ("team/nested.md", agent_md("nested", "In a folder.", "")),
        ("notes.txt", "not an agent".to_owned()),
        (".hidden.md", agent_md("hidden", "Hidden.", "")),
    ];
    for (rel, text) in agents {
        store.insert(&format!("{user}/agents/{rel}"), text);
    }
    store.insert(&format!("{user}/agents/huge.md"), vec![b'x'; MAX_AGENT_FILE_BYTES as usize + 1]);
    UserId::parse(user).unwrap()
}

fn head_agents(store: &MemoryObjectStore, user: &str) -> (Vec<AgentEntry>, Vec<(String, String)>) {
    let bytes = store.bytes(&format!("{user}/catalog/index.json")).expect("an index");
    let IndexRead::Usable(head) = decode_index(&bytes).unwrap() else { panic!("a usable head") };
    let skipped = head.skipped_agents.into_iter().map(|s| (s.file, s.reason)).collect();
    (head.agents, skipped)
}

#[tokio::test]
async fn the_build_lists_agents_reads_only_what_may_be_one_and_names_every_skip() {
    let store = MemoryObjectStore::recording();
    let user = tenant(&store, "u1");
    let index = build_index(&store, &user).await.unwrap();
    assert_eq!(index.agents.keys().collect::<Vec<_>>(), ["code-reviewer", "drafter", "researcher"]);
    let reviewer = &index.agents["code-reviewer"];
    assert_eq!(reviewer.tools.as_deref().unwrap(), ["read_file", "grep", "glob"]);
    assert_eq!(reviewer.model.as_deref(), Some("sonnet"));
    assert!(reviewer.warnings.is_empty() && index.agents["researcher"].tools.is_none());
    let drafter = &index.agents["drafter"];
    assert_eq!(drafter.tools.as_deref().unwrap(), ["write_file"]);
    assert_eq!(drafter.warnings.len(), 2, "{:?}", drafter.warnings);
    let skipped: Vec<(&str, &str)> =
        index.skipped_agents.values().map(|s| (s.file.as_str(), s.reason.as_str())).collect();
    let huge = AgentSkip::TooLarge(MAX_AGENT_FILE_BYTES + 1).to_string();
    assert_eq!(
        skipped,
        [
            ("agents/Upper.md", skipped[0].1),
            ("agents/broken.md", "the file does not start with a `---` frontmatter line"),
            ("agents/general-purpose.md", AgentSkip::Reserved.to_string().as_str()),
            ("agents/huge.md", huge.as_str()),
            ("agents/team/nested.md", AgentSkip::Nested.to_string().as_str()),
        ]
    );
    assert!(skipped[0].1.contains("\"Upper\" is not an agent name"), "{}", skipped[0].1);
    let recorded = store.recorded();
    let agent_gets: Vec<&String> = recorded.iter().filter(|call| call.starts_with("get u1/agents/")).collect();
    assert_eq!(agent_gets.len(), 4, "only the four files that may be agents are read: {agent_gets:?}");
    assert!(!agent_gets.iter().any(|call| call.contains("huge")), "too large, judged from the listing");
    assert_eq!(recorded.iter().filter(|call| call.starts_with("list ")).count(), 2, "{recorded:?}");
}

#[tokio::test]
async fn more_than_the_bound_are_skipped_unread_and_the_skipped_list_is_bounded_too() {
    let store = MemoryObjectStore::recording();
    let user = UserId::parse("many").unwrap();
    for i in 0..MAX_AGENTS + 5 {
        store.insert(&format!("many/agents/agent-{i:03}.md"), agent_md(&format!("agent-{i:03}"), "d", ""));
    }
    // `a-b` sorts after `a` by name, though `a-b.md` comes first by key.
    store.insert("many/agents/a-b.md", agent_md("a-b", "d", ""));
    store.insert("many/agents/a.md", agent_md("a", "d", ""));
    let index = build_index(&store, &user).await.unwrap();
    assert_eq!(index.agents.len(), MAX_AGENTS);
    assert_eq!(index.agents.keys().take(2).collect::<Vec<_>>(), ["a", "a-b"]);
    let past: Vec<&String> = index.skipped_agents.keys().collect();
    assert_eq!(past.len(), 7, "{past:?}");
    assert_eq!(past[0], &format!("agents/agent-{:03}.md", MAX_AGENTS - 2));
    assert_eq!(index.skipped_agents[past[0]].reason, AgentSkip::TooMany.to_string());
    let gets = store.recorded().iter().filter(|call| call.starts_with("get many/agents/")).count();
    assert_eq!(gets, MAX_AGENTS, "the files past the bound are not read");

    let stray = MemoryObjectStore::new();
    for i in 0..MAX_SKIPPED_AGENTS + 40 {
        stray.insert(&format!("stray/agents/notes/{i:04}.md"), "x");
    }
    let index = build_index(&stray, &UserId::parse("stray").unwrap()).await.unwrap();
    assert_eq!(index.skipped_agents.len(), MAX_SKIPPED_AGENTS);
    let rest = &index.skipped_agents["agents/"];
    assert!(rest.reason.starts_with("41 more files under agents/ cannot be used either"), "{}", rest.reason);
}

#[tokio::test]
async fn updates_apply_added_changed_and_removed_agents_reading_only_what_changed() {
    let store = MemoryObjectStore::recording();
    let user = tenant(&store, "u2");
    update_index(&store, &user, &[], true, None).await.unwrap();
    let (agents, _) = head_agents(&store, "u2");
    assert_eq!(agents.len(), 3);

    store.insert("u2/agents/planner.md", agent_md("planner", "Plans the work.", "model: inherit\n"));
    store.insert("u2/agents/researcher.md", agent_md("researcher", "Researches anything, now.", ""));
    store.remove("u2/agents/code-reviewer.md");
    store.remove("u2/agents/broken.md");
    let changed = ["planner.md", "researcher.md", "code-reviewer.md", "broken.md"].map(|f| TenantFile::Agent(f.into()));
    let before = store.recorded().len();
    let outcome = update_index(&store, &user, &changed, false, None).await.unwrap();
    assert_eq!((outcome.skills, outcome.agents, outcome.examined, outcome.rebuilt), (2, 3, 4, false));
    let calls: Vec<String> = store.recorded()[before..].to_vec();
    let agent_reads: Vec<&String> = calls.iter().filter(|call| call.starts_with("get u2/agents/")).collect();
    assert_eq!(agent_reads, ["get u2/agents/planner.md", "get u2/agents/researcher.md"], "unchanged ETags are kept");
    assert!(!calls.iter().any(|call| call == "list u2/skills/"), "the skills are not listed: {calls:?}");
    let (agents, skipped) = head_agents(&store, "u2");
    let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["drafter", "planner", "researcher"]);
    assert_eq!(agents[2].description, "Researches anything, now.");
    assert_eq!(agents[1].model.as_deref(), Some("inherit"));
    assert!(!skipped.iter().any(|(file, _)| file == "agents/broken.md"), "a removed skipped file is gone");

    // A skill's event leaves the agents as they are, without listing them.
    store.insert("u2/skills/new/SKILL.md", skill_md("new"));
    let before = store.recorded().len();
    update_index(&store, &user, &[TenantFile::Skill("new/SKILL.md".into())], false, None).await.unwrap();
    assert!(!store.recorded()[before..].iter().any(|call| call.contains("/agents/")));
    assert_eq!(head_agents(&store, "u2").0, agents);
}

#[tokio::test]
async fn a_turn_lists_agents_from_the_head_it_reads_and_loads_one_once_per_etag() {
    let store = MemoryObjectStore::recording();
    let user = tenant(&store, "u3");
    update_index(&store, &user, &[], true, None).await.unwrap();
    let library = SkillLibrary::new();
    let before = store.recorded().len();
    let catalog = library.catalog(&store, &user).await.unwrap();
    let names: Vec<&str> = catalog.agents().iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["code-reviewer", "drafter", "researcher"]);
    assert_eq!(catalog.skipped_agents().len(), 5);
    assert_eq!(store.recorded()[before..], ["get u3/catalog/index.json"], "the head alone");

    let entry = catalog.agent("code-reviewer").expect("an agent").clone();
    assert!(catalog.agent("nobody").is_none() && catalog.agent("general-purpose").is_none());
    let doc = library.agent_doc(&store, &user, &entry).await.unwrap().expect("loaded");
    assert_eq!(*doc, AgentDoc { entry: entry.clone(), prompt: "You are code-reviewer.".to_owned() });
    let before = store.recorded().len();
    let again = library.agent_doc(&store, &user, &entry).await.unwrap().unwrap();
    assert!(Arc::ptr_eq(&doc, &again) && store.recorded().len() == before, "cached by ETag: no request");

    // A new version is read once; the entry comes from the file as it reads now.
    store.insert("u3/agents/code-reviewer.md", agent_md("code-reviewer", "Reviews harder.", "tools: Read\n"));
    update_index(&store, &user, &[TenantFile::Agent("code-reviewer.md".into())], false, None).await.unwrap();
    let fresh = library.catalog(&store, &user).await.unwrap();
    let newer = fresh.agent("code-reviewer").unwrap().clone();
    assert_ne!(newer.etag, entry.etag);
    let doc = library.agent_doc(&store, &user, &newer).await.unwrap().unwrap();
    assert_eq!(
        (doc.entry.description.as_str(), doc.entry.tools.as_deref()),
        ("Reviews harder.", Some(&["read_file".to_owned()][..]))
    );

    // Gone, unusable now, or a name that could not be a key: nothing, and no error.
    store.remove("u3/agents/researcher.md");
    let researcher = fresh.agent("researcher").unwrap();
    assert_eq!(library.agent_doc(&store, &user, researcher).await.unwrap(), None);
    store.insert("u3/agents/drafter.md", "no frontmatter any more");
    let drafter = fresh.agent("drafter").unwrap();
    assert_eq!(library.agent_doc(&store, &user, drafter).await.unwrap(), None);
    let forged = AgentEntry { name: "../skills/pdf/SKILL".to_owned(), ..newer };
    let before = store.recorded().len();
    assert_eq!(library.agent_doc(&store, &user, &forged).await.unwrap(), None);
    assert_eq!(store.recorded().len(), before, "never a key");
}

#[tokio::test]
async fn a_large_catalog_still_carries_its_agents_in_the_head_and_an_older_index_is_rebuilt() {
    let store = MemoryObjectStore::recording();
    let long = "Handles a kind of document the tenant works with, step by step. ".repeat(3);
    for i in 0..1200 {
        store
            .insert(&format!("big/skills/cat{}/skill-{i}/SKILL.md", i % 7), format!("---\ndescription: {long}\n---\n"));
    }
    store.insert("big/agents/helper.md", agent_md("helper", "Helps.", ""));
    // An index of format 4 has no agents: it is rebuilt.
    store.insert("big/catalog/index.json", br#"{"format":4,"total":0}"#.to_vec());
    let user = UserId::parse("big").unwrap();
    let catalog = SkillLibrary::new().catalog(&store, &user).await.unwrap();
    assert_eq!(catalog.agents().len(), 1);
    let (agents, _) = head_agents(&store, "big");
    assert_eq!(agents[0].name, "helper");
    let bytes = store.bytes("big/catalog/index.json").unwrap();
    let IndexRead::Usable(head) = decode_index(&bytes).unwrap() else { panic!() };
    assert!(!head.parts.is_empty(), "a catalog in parts");

    let before = store.recorded().len();
    let cold = SkillLibrary::new().catalog(&store, &user).await.unwrap();
    assert_eq!(cold.agents()[0].name, "helper");
    assert_eq!(store.recorded()[before..], ["get big/catalog/index.json"], "no part is read for the agents");
}
