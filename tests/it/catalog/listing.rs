//! The listing the model sees and `GET /skills`: the budget at 10,000 and at 130 skills with
//! `find_skills`, lenient validation, nested SKILL.md files, categories.

use std::collections::BTreeMap;

use local_stack::model_server::Reply;
use local_stack::stack::{status_and_body, system_of, tool_names, tool_results, Stack};
use serde_json::{json, Value};

use super::{count, index_json, list_skills_event, run_index, skill_md, turn};

#[tokio::test]
async fn ten_thousand_skills_fit_the_listing_budget_and_find_skills_finds_any_of_them() {
    const USER: &str = "user-10k";
    const SKILLS: usize = 10_000;
    let stack = Stack::new().await;
    let mut objects: Vec<(String, Vec<u8>)> = (0..SKILLS)
        .map(|i| {
            let name = format!("skill-{i:05}");
            let body = skill_md(&name, &format!("Synthetic skill {i} about topic {} of the catalogue.", i % 97), "");
            (format!("{USER}/skills/area-{}/{name}/SKILL.md", i % 25), body.into_bytes())
        })
        .collect();
    // The one the model must find, by words only its description has.
    objects[4242].1 =
        skill_md("skill-04242", "Reconcile quarterly VAT returns against the bank ledger.", "").into_bytes();
    // Seeded in one request: the rebuild below reads each of them through S3's API.
    stack.seed_objects(objects).await;
    let indexer = stack.skills_index(&[]).await;
    let summary = run_index(&indexer, json!({"rebuild": {"user_id": USER}})).await;
    assert_eq!(summary["skills"], SKILLS as u64, "{summary}");

    stack.model.push([
        Reply::tool("find_skills", json!({"query": "VAT returns bank ledger"})),
        Reply::tool("load_skill", json!({"skill_path": "area-17/skill-04242"})),
        Reply::text("Loaded."),
    ]);
    let http = stack.http(&[("SKILL_LISTING_TOKENS", "2000")]).await;
    let mark = http.log_mark();
    let (status, body) = turn(&http, USER, "s1", "I need to reconcile my VAT return").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["current_skill"], "area-17/skill-04242");
    let requests = stack.model.requests();
    let system = system_of(&requests[0]);
    assert!(system.contains("This account has 10000 skills"), "the count is always named");
    assert!(system.contains("find_skills(query)"), "{system}");
    // The listing keeps to its budget (2,000 tokens ≈ 6,000 bytes); the rest is the base template.
    let template_bytes = system.len() - system.find("This account has").unwrap();
    assert!(template_bytes <= 6_000, "the listing takes {template_bytes} bytes");
    assert!(tool_names(&requests[0]).contains(&"find_skills".to_owned()));
    let found = &tool_results(&requests[1])[0];
    assert!(found.lines().nth(1).unwrap().contains("load_skill(\"area-17/skill-04242\")"), "best first: {found}");
    // The index is a small head and parts; searching read every part once, and the listing for this
    // budget (not the indexer's) was rendered from them and kept in the head for the next process.
    let head = index_json(&stack, USER).await;
    let parts = head["parts"].as_array().unwrap().len() as u64;
    assert_eq!(parts, 64, "10,000 skills in parts of about 256, rounded up to a power of two");
    let head_bytes = stack.get(&format!("{USER}/catalog/index.json")).await.unwrap().len();
    assert!(head_bytes < 64 * 1024, "the head is small: {head_bytes} bytes");
    let budgets: Vec<u64> =
        head["listings"].as_array().unwrap().iter().map(|l| l["budget"].as_u64().unwrap()).collect();
    assert_eq!(budgets, [2000, 3584], "{budgets:?}");
    let requests_made = http.storage_requests_since(mark).await;
    assert_eq!(count(&requests_made, "S3.ListObjectsV2"), 0, "{requests_made:?}");
    assert_eq!(count(&requests_made, "S3.GetObject"), 2 + parts, "head, parts, SKILL.md: {requests_made:?}");
    drop(http);

    // A new process at the same budget reads the head and the one part of the skill it loads.
    stack.model.push([Reply::tool("load_skill", json!({"skill_path": "area-17/skill-04242"})), Reply::text("Loaded.")]);
    let fresh = stack.http(&[("SKILL_LISTING_TOKENS", "2000")]).await;
    let mark = fresh.log_mark();
    let (status, body) = turn(&fresh, USER, "s2", "Reconcile my VAT return").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["current_skill"], "area-17/skill-04242");
    let again = stack.model.requests();
    assert_eq!(system_of(&again[again.len() - 2]), system, "the listing kept in the head is the one rendered");
    let requests_made = fresh.storage_requests_since(mark).await;
    assert_eq!(count(&requests_made, "S3.ListObjectsV2"), 0, "{requests_made:?}");
    assert_eq!(count(&requests_made, "S3.GetObject"), 3, "the head, one part, the SKILL.md: {requests_made:?}");
    assert_eq!(count(&requests_made, "S3.PutObject"), 0, "{requests_made:?}");
}

#[tokio::test]
async fn lenient_validation_skips_only_unusable_skills_and_get_skills_shows_why_to_its_owner_only() {
    const USER: &str = "user-lenient";
    let stack = Stack::new().await;
    let long = "d".repeat(1068);
    let files: Vec<(&str, String)> = vec![
        ("claude-api/SKILL.md", format!("---\nname: claude-api\ndescription: {long}\n---\nbody\n")),
        (
            "review/SKILL.md",
            skill_md("Code_Review", "Review code.", "allowed-tools: Read, Bash(git diff:*), WebFetch\n"),
        ),
        ("nameless/SKILL.md", "---\ndescription: Has no name.\n---\nbody\n".to_owned()),
        ("plain-text/SKILL.md", "Just text, no frontmatter.\n".to_owned()),
        ("broken-yaml/SKILL.md", "---\nname: [broken\ndescription: x\n---\n".to_owned()),
        ("no-description/SKILL.md", "---\nname: no-description\n---\n".to_owned()),
        ("a/b/deep/SKILL.md", skill_md("deep", "Too deep.", "")),
        ("huge/SKILL.md", format!("{}{}", skill_md("huge", "Too large.", ""), "x".repeat(600 * 1024))),
    ];
    for (file, body) in &files {
        stack.put(&format!("{USER}/skills/{file}"), body.clone()).await;
    }
    stack.put("user-other/skills/theirs/SKILL.md", skill_md("theirs", "Another tenant's skill.", "")).await;
    // An agent file with no description beside a usable one: skipped, as a SKILL.md would be.
    stack.put(&format!("{USER}/agents/notes.md"), "---\nname: notes\n---\nbody\n").await;
    stack.put(&format!("{USER}/agents/helper.md"), "---\nname: helper\ndescription: Helps.\n---\nbody\n").await;
    let http = stack.http(&[]).await;

    let (status, body) = status_and_body(&http.call(list_skills_event(USER, &[])).await);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["count"], 3, "{body}");
    let skills = body["skills"].as_array().unwrap();
    let by_path = |path: &str| skills.iter().find(|s| s["path"] == path).unwrap_or_else(|| panic!("{path}: {body}"));
    assert!(by_path("claude-api")["warnings"][0].as_str().unwrap().contains("1068 characters"));
    let review = by_path("review");
    assert_eq!(review["name"], "Code_Review");
    assert_eq!(review["tools"], json!(["read_file"]));
    assert_eq!(review["declared_tools"], json!(["Read", "Bash(git diff:*)", "WebFetch"]));
    let warnings = review["warnings"].to_string();
    assert!(warnings.contains("lowercase") && warnings.contains("differs from its folder"), "{warnings}");
    assert!(warnings.contains("does not have: WebFetch"), "{warnings}");
    assert!(
        warnings.contains("names Bash(git diff:*), which runs commands, and this deployment has no sandbox"),
        "{warnings}"
    );
    assert_eq!(by_path("nameless")["name"], "nameless");

    let skipped: BTreeMap<String, String> = body["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["file"].as_str().unwrap().to_owned(), s["reason"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(skipped.len(), 5, "{skipped:?}");
    assert!(skipped["plain-text/SKILL.md"].contains("frontmatter"));
    assert!(skipped["broken-yaml/SKILL.md"].contains("not valid YAML"));
    assert!(skipped["no-description/SKILL.md"].contains("description"));
    assert!(skipped["a/b/deep/SKILL.md"].contains("nested too deeply"));
    assert!(skipped["huge/SKILL.md"].contains("bytes"));
    let agents = body["skipped_agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1, "{body}");
    assert_eq!(agents[0]["file"], "agents/notes.md");
    assert!(agents[0]["reason"].as_str().unwrap().contains("no `description`"), "{body}");
    // Each skip and repair was logged with the file it concerns, relative to the tenant's skills/
    // (the line carries the turn's tenant tag, never the user id).
    let skipping: Vec<String> = http.logs().into_iter().filter(|line| line.contains("skipping skill")).collect();
    assert!(skipping.iter().any(|line| line.contains("broken-yaml/SKILL.md")), "{skipping:?}");
    assert!(skipping.iter().all(|line| !line.contains(USER)), "{skipping:?}");

    // Paging: a cursor continues after the last path of the previous page.
    let (_, page) = status_and_body(&http.call(list_skills_event(USER, &[("limit", "2")])).await);
    assert_eq!(page["skills"].as_array().unwrap().len(), 2);
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    let (_, rest) = status_and_body(&http.call(list_skills_event(USER, &[("limit", "2"), ("cursor", &cursor)])).await);
    assert_eq!(rest["skills"].as_array().unwrap().len(), 1);
    assert_eq!(rest["next_cursor"], Value::Null);
    let (status, _) = status_and_body(&http.call(list_skills_event(USER, &[("limit", "0")])).await);
    assert_eq!(status, 400);

    // Another tenant sees only its own library.
    let (status, theirs) = status_and_body(&http.call(list_skills_event("user-other", &[])).await);
    assert_eq!(status, 200);
    assert_eq!(theirs["count"], 1);
    assert_eq!(theirs["skills"][0]["path"], "theirs");
    assert_eq!(theirs["skipped"], json!([]));
    assert_eq!(theirs["skipped_agents"], json!([]));
    let mut anonymous = list_skills_event(USER, &[]);
    anonymous["requestContext"].as_object_mut().unwrap().remove("authorizer");
    assert_eq!(status_and_body(&http.call(anonymous).await).0, 401);
}

/// A SKILL.md at any depth inside a skill's folder (claude-skills' `skill-tester/assets/sample-skill/`)
/// is one of that skill's files; only one that no skill encloses is reported as nested too deeply.
#[tokio::test]
async fn a_skill_md_deep_inside_a_skill_is_one_of_its_files_not_a_skipped_skill() {
    const USER: &str = "user-nested";
    let stack = Stack::new().await;
    let files = [
        ("pdf/SKILL.md", skill_md("pdf", "Work with PDF files.", "")),
        ("pdf/examples/SKILL.md", skill_md("examples", "An example skill.", "")),
        ("pdf/examples/deeper/SKILL.md", skill_md("deeper", "A deeper example.", "")),
        ("skill-tester/SKILL.md", skill_md("skill-tester", "Test skills.", "")),
        ("skill-tester/assets/sample-skill/SKILL.md", skill_md("sample-skill", "A sample.", "")),
        ("docs/guide/SKILL.md", skill_md("guide", "Write guides.", "")),
        ("docs/guide/samples/inner/SKILL.md", skill_md("inner", "A sample inside a guide.", "")),
        ("a/b/deep/SKILL.md", skill_md("deep", "Too deep.", "")),
    ];
    for (file, body) in &files {
        stack.put(&format!("{USER}/skills/{file}"), body.clone()).await;
    }
    let http = stack.http(&[]).await;
    let (status, body) = status_and_body(&http.call(list_skills_event(USER, &[])).await);
    assert_eq!(status, 200, "{body}");
    let paths: Vec<&str> = body["skills"].as_array().unwrap().iter().map(|s| s["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["docs/guide", "pdf", "skill-tester"], "{body}");
    assert_eq!(body["skipped"], json!([{"file": "a/b/deep/SKILL.md", "reason": body["skipped"][0]["reason"]}]));
    assert!(body["skipped"][0]["reason"].as_str().unwrap().contains("nested too deeply"), "{body}");
    assert_eq!(body["skipped_count"], 1, "{body}");
    // The index build warns about the one skipped file only, naming it.
    let warnings: Vec<String> = http.logs().into_iter().filter(|line| line.contains("skipping skill")).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("a/b/deep/SKILL.md"), "{warnings:?}");
}

/// `GET /skills` names the category the listing groups a skill under: its category folder, else
/// its frontmatter's `category`.
#[tokio::test]
async fn get_skills_shows_the_category_the_listing_groups_by() {
    const USER: &str = "user-categories";
    let stack = Stack::new().await;
    stack.upload_example_skills(USER).await;
    stack
        .put(&format!("{USER}/skills/pdf/SKILL.md"), skill_md("pdf", "Fill PDF forms.", "category: documents\n"))
        .await;
    stack.put(&format!("{USER}/skills/plain/SKILL.md"), skill_md("plain", "No category.", "")).await;
    // The category layout without a `category` field, as most collections publish it.
    stack.put(&format!("{USER}/skills/docs/guide/SKILL.md"), skill_md("guide", "Write guides.", "")).await;
    stack.model.push([Reply::text("Hola.")]);
    let http = stack.http(&[]).await;
    let (status, body) = status_and_body(&http.call(list_skills_event(USER, &[])).await);
    assert_eq!(status, 200, "{body}");
    let categories: BTreeMap<&str, Value> = body["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["path"].as_str().unwrap(), s["category"].clone()))
        .collect();
    assert_eq!(categories["escrituras/compraventa"], "escrituras", "{body}");
    assert_eq!(categories["contratos/arrendamiento"], "contratos", "{body}");
    assert_eq!(categories["pdf"], "documents", "{body}");
    assert_eq!(categories["docs/guide"], "docs", "{body}");
    assert_eq!(categories["plain"], Value::Null, "{body}");
    // The listing the model sees groups them the same way.
    let (status, _) = turn(&http, USER, "s1", "Hola").await;
    assert_eq!(status, 200);
    let listing = system_of(&stack.model.requests()[0]);
    assert!(listing.contains("### docs\n- guide") && listing.contains("### documents\n- pdf"), "{listing}");
}

/// A collection the size of K-Dense-AI/claude-scientific-skills (134 skills, descriptions of 150 to
/// 400 characters) under the default listing budget (3,584 tokens for the default 32k-token model):
/// the listing uses its budget on whole descriptions for as many skills as fit, names the rest, and
/// says so.
#[tokio::test]
async fn a_collection_of_a_hundred_and_thirty_skills_fills_its_listing_budget() {
    const USER: &str = "user-scientific";
    const SKILLS: usize = 134;
    const BUDGET_BYTES: usize = 3584 * 3;
    let stack = Stack::new().await;
    let topics =
        ["single-cell RNA-seq", "protein structures", "chemical compounds", "genomic variants", "clinical trials"];
    let descriptions: Vec<String> = (0..SKILLS)
        .map(|i| {
            let mut text = format!(
                "Toolkit {i} for {} analysis. Load, filter and normalise data, run the standard workflow and plot results.",
                topics[i % topics.len()]
            );
            let target = 150 + (i * 37) % 251;
            while text.len() < target {
                text.push_str(" Use it when the user asks for reproducible pipelines with publication-quality figures.");
            }
            text.truncate(target);
            text.trim_end().to_owned()
        })
        .collect();
    let objects: Vec<(String, Vec<u8>)> = descriptions
        .iter()
        .enumerate()
        .map(|(i, description)| {
            let name = format!("sci-tool-{i:03}");
            (format!("{USER}/skills/{name}/SKILL.md"), skill_md(&name, description, "").into_bytes())
        })
        .collect();
    stack.put_many(objects).await;
    stack.model.push([Reply::text("Hola.")]);
    let http = stack.http(&[]).await;
    let (status, body) = turn(&http, USER, "s1", "Hola").await;
    assert_eq!(status, 200, "{body}");
    let requests = stack.model.requests();
    let system = system_of(&requests[0]);
    let listing = &system[system.find("This account has").unwrap_or_else(|| panic!("a listing: {system}"))..];
    // What /memories is for follows the listing, and is not part of it.
    let listing = listing.split("\n\n## Memory\n").next().unwrap_or(listing);
    assert!(listing.len() <= BUDGET_BYTES, "{} bytes", listing.len());
    assert!(
        listing.len() * 10 >= BUDGET_BYTES * 9,
        "the listing uses most of its budget: {} bytes\n{listing}",
        listing.len()
    );
    let whole = descriptions.iter().filter(|d| listing.contains(&format!("\")): {d}\n"))).count();
    assert!(whole >= 20, "{whole} whole descriptions\n{listing}");
    assert!(
        listing.starts_with(&format!(
            "This account has {SKILLS} skills; to save space, not all are shown in full: {whole} with the full description"
        )),
        "{listing}"
    );
    for i in 0..SKILLS {
        assert!(listing.contains(&format!("sci-tool-{i:03}")), "every skill is named");
    }
    assert!(tool_names(&requests[0]).contains(&"find_skills".to_owned()));
}
