//! The catalog index over the embedded store: built once and revalidated, rebuilt when its format is
//! older, left alone when it is newer, and updated entry by entry without losing concurrent updates.

use std::sync::atomic::Ordering;

use agent_core::skills::index::{update_index, INDEX_FORMAT};
use agent_core::skills::SkillLibrary;
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
    assert_eq!(store.calls.object_lists.load(Ordering::Relaxed), 1);
    assert_eq!(store.calls.object_puts.load(Ordering::Relaxed), 1, "the index is stored");
    let gets = store.calls.object_gets.load(Ordering::Relaxed);

    let again = library.catalog(&store, &user).await.unwrap();
    assert!(std::sync::Arc::ptr_eq(&catalog, &again), "unchanged: the same parsed snapshot");
    assert_eq!(store.calls.object_gets.load(Ordering::Relaxed), gets + 1, "one conditional GET");
    assert_eq!(store.calls.object_lists.load(Ordering::Relaxed), 1, "no listing");

    // A new process reads the stored index: one GET, no listing.
    let fresh = SkillLibrary::new();
    assert_eq!(fresh.catalog(&store, &user).await.unwrap().len(), 50);
    assert_eq!(store.calls.object_lists.load(Ordering::Relaxed), 1);
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
    update_index(&store, &user, &[], true).await.unwrap();
    let files: Vec<String> = (0..20).map(|i| format!("new/skill-{i}/SKILL.md")).collect();
    for file in &files {
        store.insert(&format!("u3/skills/{file}"), skill_md("x", "added"));
    }
    let updates = files.iter().map(|file| update_index(&store, &user, std::slice::from_ref(file), false));
    for outcome in futures::future::join_all(updates).await {
        outcome.unwrap();
    }
    let catalog = SkillLibrary::new().catalog(&store, &user).await.unwrap();
    assert_eq!(catalog.len(), 22);
}

fn store_bytes(store: &MemoryObjectStore, key: &str) -> Vec<u8> {
    futures::executor::block_on(agent_core::ObjectStore::get(store, key)).unwrap().unwrap().bytes
}
