//! The catalog's index: both layouts, built once and reused, `skills-index` fed S3 and EventBridge
//! events, the tenant's agents in its head, concurrent updates, a warm process's cache.

use std::collections::BTreeMap;

use local_stack::model_server::Reply;
use local_stack::stack::{system_of, tool_names, tool_results, Stack};
use serde_json::json;

use super::{count, index_json, run_index, skill_md, turn};

#[tokio::test]
async fn both_layouts_are_listed_loaded_and_forced() {
    const USER: &str = "user-layouts";
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    // The Agent Skills layout, as anthropics/skills publishes it: skills/{name}/SKILL.md.
    stack
        .put(
            &format!("{USER}/skills/pdf/SKILL.md"),
            skill_md("pdf", "Extract text and fill forms in PDF files.", "allowed-tools: Read Grep\n"),
        )
        .await;
    stack.put(&format!("{USER}/skills/pdf/forms.md"), "# Filling forms\n").await;
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "pdf"})),
        Reply::tool("ls", json!({"path": "/skills/pdf"})),
        Reply::text("PDF skill ready."),
        // The next turn forces the plain skill by its name.
        Reply::tool("read_file", json!({"file_path": "/skills/pdf/forms.md"})),
        Reply::text("Form filled."),
    ]);
    let http = stack.http(&[]).await;

    let (status, body) = turn(&http, USER, "s1", "Fill this PDF form").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["current_skill"], "pdf");
    let requests = stack.model.requests();
    let listing = system_of(&requests[0]);
    assert!(listing.contains("This account has 4 skills, all shown"), "{listing}");
    assert!(listing.contains("- pdf (load_skill(\"pdf\")): Extract text and fill forms in PDF files."), "{listing}");
    assert!(listing.contains("load_skill(\"escrituras/compraventa\")"), "{listing}");
    assert!(!tool_names(&requests[0]).contains(&"find_skills".to_owned()), "every skill is shown in full");
    assert!(system_of(&requests[1]).starts_with("---\nname: pdf"), "state 2 is the plain skill's SKILL.md");
    let ls = &tool_results(&requests[2])[1];
    assert!(ls.contains("/skills/pdf/forms.md") && ls.contains("/skills/pdf/SKILL.md"), "{ls}");

    let (status, body) = turn(&http, USER, "s2", "/pdf fill the form").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["forced_skill"], "pdf");
    let forced = &stack.model.requests()[3];
    // `allowed-tools: Read Grep` (Claude Code's names) means read_file and grep, plus the essentials.
    assert_eq!(tool_names(forced), ["abort", "grep", "read_file", "todoread", "todowrite"]);
    assert!(system_of(forced).contains("<mandatory-skill name=\"pdf\">"));
    assert!(tool_results(&stack.model.requests()[4])[0].contains("Filling forms"));
}

#[tokio::test]
async fn the_index_is_built_on_first_use_and_a_new_process_reads_only_it() {
    const USER: &str = "user-index";
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack.model.push((0..4).map(|_| Reply::text("ok")));
    let first = stack.http(&[]).await;
    let mark = first.log_mark();
    let (status, _) = turn(&first, USER, "s1", "hola").await;
    assert_eq!(status, 200);
    let cold = first.storage_requests_since(mark).await;
    assert_eq!(count(&cold, "S3.ListObjectsV2"), 2, "built from a listing of skills/ and one of agents/: {cold:?}");
    assert_eq!(count(&cold, "S3.PutObject"), 1, "and stored once: {cold:?}");
    let index = index_json(&stack, USER).await;
    assert_eq!(index["format"], agent_core::skills::index::INDEX_FORMAT);
    // A catalog this small is held whole in the index's head, one row per skill.
    assert_eq!(index["inline"]["skills"].as_array().unwrap().len(), 3, "one row per skill: {index}");
    assert!(index["base_prompt"]["text"].as_str().unwrap().starts_with("# Asistente"), "the base prompt is in it");
    drop(first);

    // A new process (a new Lambda environment) reads the index and nothing else of the catalog.
    let second = stack.http(&[]).await;
    let mark = second.log_mark();
    let (status, body) = turn(&second, USER, "s2", "hola").await;
    assert_eq!(status, 200, "{body}");
    let cold = second.storage_requests_since(mark).await;
    let expected: BTreeMap<String, u64> =
        [("DynamoDB.Query", 1), ("DynamoDB.TransactWriteItems", 1), ("S3.GetObject", 1)]
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
    assert_eq!(cold, expected, "one index GET, the session read (one Query, empty for a new session) and the commit");
    // A warm turn revalidates the index with a conditional GET (answered 304).
    let mark = second.log_mark();
    turn(&second, USER, "s3", "hola").await;
    assert_eq!(second.storage_requests_since(mark).await, expected);
    assert!(system_of(&stack.model.requests()[2]).contains("load_skill(\"escrituras/hipoteca\")"));
}

#[tokio::test]
async fn skills_index_applies_added_changed_and_removed_skills_and_the_next_turn_sees_each() {
    const USER: &str = "user-events";
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack.model.push((0..4).map(|_| Reply::text("ok")));
    let http = stack.http(&[]).await;
    let indexer = stack.skills_index(&[]).await;
    turn(&http, USER, "s0", "hola").await;

    // Added.
    let key = format!("{USER}/skills/pdf/SKILL.md");
    stack.put(&key, skill_md("pdf", "Work with PDF files.", "")).await;
    let summary = run_index(&indexer, stack.s3_event(&[&key], true)).await;
    assert_eq!(summary["updated"], 1, "{summary}");
    turn(&http, USER, "s1", "hola").await;
    assert!(system_of(&stack.model.requests()[1]).contains("- pdf (load_skill(\"pdf\")): Work with PDF files."));

    // Changed.
    stack.put(&key, skill_md("pdf", "Read, merge and split PDF documents.", "")).await;
    run_index(&indexer, stack.s3_event(&[&key], true)).await;
    turn(&http, USER, "s2", "hola").await;
    let system = system_of(&stack.model.requests()[2]);
    assert!(system.contains("Read, merge and split PDF documents.") && !system.contains("Work with PDF files."));

    // Removed; and a workspace blob or another prefix never touches the index.
    stack.delete(&key).await;
    let blob = format!("{USER}/workspaces/s1/blobs/SKILL.md");
    let summary = run_index(&indexer, stack.s3_event(&[&key, &blob], false)).await;
    assert_eq!((summary["updated"].as_u64(), summary["ignored"].as_u64()), (Some(1), Some(1)), "{summary}");
    turn(&http, USER, "s3", "hola").await;
    let system = system_of(&stack.model.requests()[3]);
    assert!(!system.contains("load_skill(\"pdf\")") && system.contains("This account has 3 skills"), "{system}");
}

#[tokio::test]
async fn an_agent_put_straight_into_the_bucket_reaches_the_head_through_skills_index_and_costs_turns_nothing() {
    const USER: &str = "user-agents";
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    let indexer = stack.skills_index(&[]).await;
    let summary = run_index(&indexer, json!({"rebuild": {"user_id": USER}})).await;
    assert_eq!((summary["skills"].as_u64(), summary["agents"].as_u64()), (Some(3), Some(0)), "{summary}");

    // Added, in the EventBridge form the template delivers; a bad file name is skipped, with why.
    let key = format!("{USER}/agents/revisor.md");
    let agent = |description: &str| {
        format!("---\nname: revisor\ndescription: {description}\ntools: Read, Grep\nmodel: haiku\n---\nRevisa.\n")
    };
    stack.put(&key, agent("Revisa borradores.")).await;
    let bad = format!("{USER}/agents/Revisor_Viejo.md");
    stack.put(&bad, agent("Un nombre que no vale.")).await;
    for key in [&key, &bad] {
        let summary = run_index(&indexer, stack.bridge_event(key, true)).await;
        assert_eq!(summary["updated"], 1, "{summary}");
    }
    let index = index_json(&stack, USER).await;
    assert_eq!(index["format"], agent_core::skills::index::INDEX_FORMAT);
    let agents = index["agents"].as_array().expect("the head carries the agents");
    assert_eq!(agents.len(), 1, "{index}");
    assert_eq!(agents[0]["name"], "revisor");
    assert_eq!(agents[0]["tools"], json!(["read_file", "grep"]));
    assert_eq!(agents[0]["model"], "haiku");
    assert_eq!(index["skipped_agents"][0]["file"], "agents/Revisor_Viejo.md", "{index}");

    // Changed, then removed (a notification this time).
    stack.put(&key, agent("Revisa borradores de escrituras.")).await;
    run_index(&indexer, stack.bridge_event(&key, true)).await;
    assert_eq!(index_json(&stack, USER).await["agents"][0]["description"], "Revisa borradores de escrituras.");
    stack.delete(&bad).await;
    let summary = run_index(&indexer, stack.s3_event(&[&bad], false)).await;
    assert_eq!((summary["updated"].as_u64(), summary["ignored"].as_u64()), (Some(1), Some(0)), "{summary}");
    assert!(index_json(&stack, USER).await.get("skipped_agents").is_none(), "the skipped file is gone");

    // A cold turn reads the head and nothing of the agents.
    stack.model.push([Reply::text("ok")]);
    let http = stack.http(&[]).await;
    let mark = http.log_mark();
    let (status, body) = turn(&http, USER, "s1", "hola").await;
    assert_eq!(status, 200, "{body}");
    let cold = http.storage_requests_since(mark).await;
    assert_eq!(count(&cold, "S3.GetObject"), 1, "the index's head alone: {cold:?}");
    assert_eq!(count(&cold, "S3.ListObjectsV2"), 0, "{cold:?}");
}

#[tokio::test]
async fn concurrent_index_updates_all_survive() {
    const USER: &str = "user-race";
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    let indexers = [stack.skills_index(&[]).await, stack.skills_index(&[]).await];
    run_index(&indexers[0], json!({"rebuild": {"user_id": USER}})).await;

    // Two functions update the same tenant's index at the same time, five rounds, a skill each.
    for round in 0..5 {
        let keys: Vec<String> =
            (0..2).map(|side| format!("{USER}/skills/race/skill-{round}-{side}/SKILL.md")).collect();
        for key in &keys {
            stack.put(key, skill_md("x", "A skill written during a race.", "")).await;
        }
        let (a, b) = tokio::join!(
            run_index(&indexers[0], stack.s3_event(&[&keys[0]], true)),
            run_index(&indexers[1], stack.s3_event(&[&keys[1]], true)),
        );
        assert_eq!((a["updated"].as_u64(), b["updated"].as_u64()), (Some(1), Some(1)), "{a} {b}");
    }
    let index = index_json(&stack, USER).await;
    // Each skill is a row whose first field is its path (in the head: the catalog is small).
    let skills: Vec<&str> =
        index["inline"]["skills"].as_array().unwrap().iter().map(|row| row[0].as_str().unwrap()).collect();
    for round in 0..5 {
        for side in 0..2 {
            assert!(skills.contains(&format!("race/skill-{round}-{side}").as_str()), "lost an update: {round}-{side}");
        }
    }
    assert_eq!(skills.len(), 13);
}

#[tokio::test]
async fn a_warm_process_does_not_fetch_a_workspace_blob_it_already_has() {
    const USER: &str = "user-blobs";
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/notes.md", "content": "first draft"})),
        Reply::text("Written."),
        Reply::tool("read_file", json!({"file_path": "/workspace/notes.md"})),
        Reply::text("Read."),
        Reply::tool("read_file", json!({"file_path": "/workspace/notes.md"})),
        Reply::text("Read again."),
    ]);
    let http = stack.http(&[]).await;
    turn(&http, USER, "s1", "write it").await;
    let mark = http.log_mark();
    let (status, _) = turn(&http, USER, "s1", "read it").await;
    assert_eq!(status, 200);
    assert!(tool_results(&stack.model.requests()[3]).last().unwrap().contains("first draft"));
    let warm = http.storage_requests_since(mark).await;
    assert_eq!(count(&warm, "S3.GetObject"), 1, "only the index revalidation; the blob was cached: {warm:?}");

    // A new process has no cache: it fetches the blob once.
    let cold = stack.http(&[]).await;
    let mark = cold.log_mark();
    turn(&cold, USER, "s1", "read it again").await;
    assert!(tool_results(&stack.model.requests()[5]).last().unwrap().contains("first draft"));
    let requests = cold.storage_requests_since(mark).await;
    assert_eq!(count(&requests, "S3.GetObject"), 2, "the index and the blob: {requests:?}");
}
