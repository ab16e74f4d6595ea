//! The catalog index over the embedded store: built once and revalidated, rebuilt when its format is
//! older, left alone when it is newer, and updated entry by entry without losing concurrent updates.
//! A large catalog is read in parts: a cold process reads the head, and a part only for a skill it
//! looks up. The tenant's settings travel in the head.

use std::sync::atomic::Ordering;

use agent_core::skills::index::stored::{self, IndexHead, RETIRED_PART_SECS};
use agent_core::skills::index::{decode_index, update_index, IndexRead, TenantFile, INDEX_FORMAT};
use agent_core::skills::Resolved;
use agent_core::skills::SkillLibrary;
use agent_core::SkillPath;
use agent_core::UserId;
use local_store::MemoryObjectStore;

fn skill_md(name: &str, description: &str) -> Vec<u8> {
    format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n").into_bytes()
}

fn tenant(store: &MemoryObjectStore, user: &str, skills: usize) -> UserId {
    for i in 0..skills {
        store.insert(&format!("{user}/skills/cat{}/skill-{i}/SKILL.md", i % 3), skill_md(&format!("skill-{i}"), "d"));
    }
    UserId::parse(user).unwrap()
}

#[tokio::test]
async fn built_once_then_revalidated_without_reading_any_skill() {
    let store = MemoryObjectStore::new();
    let user = tenant(&store, "u1", 50);
    let library = SkillLibrary::new();
    let catalog = library.catalog(&store, &user).await.unwrap();
    assert_eq!(catalog.len(), 50);
    assert_eq!(store.calls.object_lists.load(Ordering::Relaxed), 2, "one listing of skills/, one of agents/");
    assert_eq!(store.calls.object_puts.load(Ordering::Relaxed), 1, "the index is stored");
    let gets = store.calls.object_gets.load(Ordering::Relaxed);

    let again = library.catalog(&store, &user).await.unwrap();
    assert!(std::sync::Arc::ptr_eq(&catalog, &again), "unchanged: the same parsed snapshot");
    assert_eq!(store.calls.object_gets.load(Ordering::Relaxed), gets + 1, "one conditional GET");
    assert_eq!(store.calls.object_lists.load(Ordering::Relaxed), 2, "no listing");

    // A new process reads the stored index: one GET, no listing.
    let fresh = SkillLibrary::new();
    assert_eq!(fresh.catalog(&store, &user).await.unwrap().len(), 50);
    assert_eq!(store.calls.object_lists.load(Ordering::Relaxed), 2);
}

#[tokio::test]
async fn an_older_format_is_rebuilt_and_a_newer_one_is_left_alone() {
    let store = MemoryObjectStore::new();
    let user = tenant(&store, "u2", 4);
    let key = "u2/catalog/index.json";
    store.insert(key, br#"{"format": 0, "skills": {}}"#.to_vec());
    assert_eq!(SkillLibrary::new().catalog(&store, &user).await.unwrap().len(), 4);
    let stored: serde_json::Value = serde_json::from_slice(&store_bytes(&store, key)).unwrap();
    assert_eq!(stored["format"], INDEX_FORMAT, "replaced by the current format");

    let newer = format!(r#"{{"format": {}, "skills": "a shape this build cannot read"}}"#, INDEX_FORMAT + 1);
    store.insert(key, newer.clone().into_bytes());
    assert_eq!(SkillLibrary::new().catalog(&store, &user).await.unwrap().len(), 4, "built in memory");
    assert_eq!(store_bytes(&store, key), newer.into_bytes(), "never overwritten");
}

#[tokio::test]
async fn concurrent_updates_of_one_tenant_all_land() {
    let store = MemoryObjectStore::new();
    let user = tenant(&store, "u3", 2);
    update_index(&store, &user, &[], true, None).await.unwrap();
    let files: Vec<TenantFile> = (0..20).map(|i| TenantFile::Skill(format!("new/skill-{i}/SKILL.md"))).collect();
    for file in &files {
        let TenantFile::Skill(rel) = file else { unreachable!() };
        store.insert(&format!("u3/skills/{rel}"), skill_md("x", "added"));
    }
    let updates = files.iter().map(|file| update_index(&store, &user, std::slice::from_ref(file), false, None));
    for outcome in futures::future::join_all(updates).await {
        outcome.unwrap();
    }
    let catalog = SkillLibrary::new().catalog(&store, &user).await.unwrap();
    assert_eq!(catalog.len(), 22);
}

fn store_bytes(store: &MemoryObjectStore, key: &str) -> Vec<u8> {
    futures::executor::block_on(agent_core::ObjectStore::get(store, key)).unwrap().unwrap().bytes
}

/// A tenant of `skills` skills with descriptions long enough that its index needs parts: names
/// `skill-{i}` in categories `cat0`..`cat6`, and one skill whose frontmatter name is not its folder's.
fn large_tenant(store: &MemoryObjectStore, user: &str, skills: usize) -> UserId {
    let long = "Handles a kind of document the tenant works with, step by step. ".repeat(3);
    for i in 0..skills {
        store.insert(&format!("{user}/skills/cat{}/skill-{i}/SKILL.md", i % 7), skill_md(&format!("skill-{i}"), &long));
        store.insert(&format!("{user}/skills/cat{}/skill-{i}/reference.md", i % 7), b"ref".to_vec());
    }
    store.insert(&format!("{user}/skills/tools/renamed/SKILL.md"), skill_md("Contract Drafter", "Drafts contracts."));
    UserId::parse(user).unwrap()
}

fn head(store: &MemoryObjectStore, user: &UserId) -> IndexHead {
    match decode_index(&store_bytes(store, &format!("{user}/catalog/index.json"))).unwrap() {
        IndexRead::Usable(head) => *head,
        other => panic!("not a usable head: {other:?}"),
    }
}

#[tokio::test]
async fn a_cold_process_reads_the_head_and_only_the_part_of_the_skill_it_loads() {
    let store = MemoryObjectStore::new();
    let user = large_tenant(&store, "big", 2000);
    update_index(&store, &user, &[], true, Some(3584)).await.unwrap();
    let stored = head(&store, &user);
    assert_eq!(stored.total, 2001);
    assert_eq!(stored.parts.len(), 8, "2,001 skills in parts of about 256");
    assert_eq!(stored.listings.iter().map(|l| l.budget).collect::<Vec<_>>(), [3584]);
    let head_bytes = store_bytes(&store, "big/catalog/index.json").len();
    assert!(head_bytes < 64 * 1024, "the head is small: {head_bytes} bytes");

    let library = SkillLibrary::new();
    let gets = || store.calls.object_gets.load(Ordering::Relaxed);
    let before = gets();
    let catalog = library.catalog(&store, &user).await.unwrap();
    let listing = catalog.listing(&store, 3584).await.unwrap();
    assert_eq!(gets() - before, 1, "the head alone gives the count and the listing");
    assert_eq!(listing.total, 2001);
    assert!(listing.search, "2,001 skills cannot all be shown in full");

    let path = SkillPath::parse("cat3/skill-10").unwrap();
    let (entry, files) = catalog.skill_files(&store, &path).await.unwrap().expect("indexed");
    assert_eq!((entry.name.as_str(), files.len()), ("skill-10", 1));
    assert_eq!(gets() - before, 2, "one part for the skill");
    let Resolved::Found(by_name) = catalog.resolve(&store, "SKILL-10").await.unwrap() else { panic!("by name") };
    assert_eq!(by_name.path, path);
    assert_eq!(gets() - before, 2, "a name is in its folder's part, already read");
    let Resolved::Found(renamed) = catalog.resolve(&store, "contract drafter").await.unwrap() else {
        panic!("by frontmatter name")
    };
    assert_eq!(renamed.path.to_string(), "tools/renamed");
    assert!(matches!(catalog.resolve(&store, "no-such-skill").await.unwrap(), Resolved::NotFound));

    // Search and suggestions read the whole catalog, once per snapshot.
    let found = catalog.find(&store, "contract drafter", 3).await.unwrap();
    assert_eq!(found[0].path.to_string(), "tools/renamed");
    let reads = gets();
    assert!(reads - before <= 2 + stored.parts.len() as u64);
    assert_eq!(catalog.closest(&store, "skill-1O", 1).await.unwrap()[0].to_string(), "cat1/skill-1");
    assert_eq!(gets(), reads, "nothing read again");
    let view = catalog.view(&store).await.unwrap();
    assert_eq!(view.entries.len(), 2001);
}

#[tokio::test]
async fn an_update_rewrites_one_part_and_retires_the_old_one_until_no_turn_can_read_it() {
    let store = MemoryObjectStore::new();
    let user = large_tenant(&store, "upd", 1500);
    update_index(&store, &user, &[], true, Some(3584)).await.unwrap();
    let before = head(&store, &user);
    let library = SkillLibrary::new();
    let warm = library.catalog(&store, &user).await.unwrap();
    let path = SkillPath::parse("cat2/skill-9").unwrap();
    warm.get(&store, &path).await.unwrap().expect("a skill");

    store.insert("upd/skills/cat2/skill-9/SKILL.md", skill_md("skill-9", "Rewritten."));
    let puts = store.calls.object_puts.load(Ordering::Relaxed);
    update_index(&store, &user, &[TenantFile::Skill("cat2/skill-9/SKILL.md".to_owned())], false, Some(3584))
        .await
        .unwrap();
    assert_eq!(store.calls.object_puts.load(Ordering::Relaxed) - puts, 2, "the changed part and the head");
    let after = head(&store, &user);
    let replaced: Vec<&str> =
        before.parts.iter().zip(&after.parts).filter(|(a, b)| a.id != b.id).map(|(a, _)| a.id.as_str()).collect();
    assert_eq!(replaced.len(), 1);
    assert_eq!(after.retired.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), replaced);
    let old_key = stored::part_key(&user, replaced[0]);
    assert!(store_exists(&store, &old_key), "a turn that read the old head may still read it");

    // The next turn sees the new version; the parts it had read and that did not change are kept.
    let gets = store.calls.object_gets.load(Ordering::Relaxed);
    let fresh = library.catalog(&store, &user).await.unwrap();
    assert_eq!(fresh.get(&store, &path).await.unwrap().unwrap().description, "Rewritten.");
    assert_eq!(store.calls.object_gets.load(Ordering::Relaxed) - gets, 2, "the head and the changed part");

    // Once no turn can still hold the old head, the next write deletes the part.
    let index = stored::join(&after, stored::read_parts(&store, &user, &after).await.unwrap());
    let later = after.retired[0].since + RETIRED_PART_SECS;
    let etag = agent_core::ObjectStore::get(&store, "upd/catalog/index.json").await.unwrap().unwrap().etag;
    let condition = agent_core::store::WriteCondition::Matches(etag);
    let (newest, _) = stored::write_index(&store, &user, &index, condition, Some(&after), None, later).await.unwrap();
    assert!(newest.retired.is_empty());
    assert!(!store_exists(&store, &old_key));
    assert_eq!(newest.listings.iter().map(|l| l.budget).collect::<Vec<_>>(), [3584], "budgets are kept");
}

#[tokio::test]
async fn a_listing_budget_the_head_lacks_is_rendered_once_and_kept_in_the_head() {
    let store = MemoryObjectStore::new();
    let user = large_tenant(&store, "bud", 1200);
    update_index(&store, &user, &[], true, Some(3584)).await.unwrap();
    let catalog = SkillLibrary::new().catalog(&store, &user).await.unwrap();
    let listing = catalog.listing(&store, 1000).await.unwrap();
    assert_eq!(listing.total, 1201);
    let budgets: Vec<usize> = head(&store, &user).listings.iter().map(|l| l.budget).collect();
    assert_eq!(budgets, [1000, 3584]);
    let gets = store.calls.object_gets.load(Ordering::Relaxed);
    let other = SkillLibrary::new().catalog(&store, &user).await.unwrap();
    assert_eq!(*other.listing(&store, 1000).await.unwrap(), *listing);
    assert_eq!(store.calls.object_gets.load(Ordering::Relaxed) - gets, 1, "from the head alone");
}

fn store_exists(store: &MemoryObjectStore, key: &str) -> bool {
    futures::executor::block_on(agent_core::ObjectStore::get(store, key)).unwrap().is_some()
}

#[tokio::test]
async fn the_tenants_settings_ride_in_the_head_and_follow_each_change() {
    let store = MemoryObjectStore::new();
    let user = large_tenant(&store, "settled", 600);
    let settings = TenantFile::Skill("settings.json".to_owned());
    let call = |name: &str, command: &str| agent_core::ToolCall {
        id: "c".into(),
        name: name.into(),
        arguments: serde_json::json!({ "command": command, "file_path": "/workspace/a" }),
    };
    store.insert(
        "settled/skills/settings.json",
        br#"{"permissions": {"ask": ["Bash(git push:*)", "Edit(x)"]}}"#.to_vec(),
    );
    update_index(&store, &user, &[], true, None).await.unwrap();
    let stored = head(&store, &user);
    assert!(!stored.parts.is_empty(), "a catalog in parts");
    let entry = stored.settings.expect("the settings in the head");
    assert_eq!((entry.ask.as_slice(), entry.problems.len()), (["Bash(git push:*)".to_owned()].as_slice(), 1));
    // A cold process gets the rules from the head alone.
    let catalog = SkillLibrary::new().catalog(&store, &user).await.unwrap();
    assert!(catalog.approvals().requires(&call("execute", "git push origin")));
    assert!(!catalog.approvals().requires(&call("write_file", "")));

    store.insert("settled/skills/settings.json", br#"{"permissions": {"ask": ["Write"]}}"#.to_vec());
    update_index(&store, &user, std::slice::from_ref(&settings), false, None).await.unwrap();
    let catalog = SkillLibrary::new().catalog(&store, &user).await.unwrap();
    assert!(catalog.approvals().requires(&call("write_file", "")));
    assert!(!catalog.approvals().requires(&call("execute", "git push origin")));

    agent_core::ObjectStore::delete(&store, "settled/skills/settings.json").await.unwrap();
    update_index(&store, &user, &[settings], false, None).await.unwrap();
    assert_eq!(head(&store, &user).settings, None);
    assert!(SkillLibrary::new().catalog(&store, &user).await.unwrap().approvals().is_empty());
}
