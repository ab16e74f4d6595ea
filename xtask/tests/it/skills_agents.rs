//! `cargo xtask skills validate|sync` with the tenant's agents, run as a user runs them: the agents
//! folder beside a `skills` folder (or named by `--agents`) reported agent by agent, and synced to the
//! tenant's `agents/` in moto_server, where the rebuilt index lists them.

use agent_core::skills::agents::MAX_AGENT_FILE_BYTES;
use serde_json::Value;

use crate::support::*;

fn agent_md(name: &str, description: &str, extra: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n{extra}---\n\nYou are {name}.\n")
}

fn names(list: &Value) -> Vec<String> {
    list.as_array().expect("a list").iter().map(|entry| entry["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn validate_reports_the_agents_beside_a_skills_folder_and_fails_on_a_skipped_one() {
    let scratch = Scratch::new();
    scratch.write("skills/pdf/SKILL.md", skill_md("Fills PDF forms.", "name: pdf\n"));
    let reviewer = agent_md("code-reviewer", "Reviews code.", "tools: Read, Grep, Bash\nmodel: sonnet\n");
    scratch.write("agents/code-reviewer.md", reviewer);
    scratch.write("agents/drafter.md", agent_md("Drafter", "Drafts contracts.", "tools: Write, WebFetch\n"));
    scratch.write("agents/broken.md", "You are broken.\n");
    scratch.write("agents/huge.md", "x".repeat(MAX_AGENT_FILE_BYTES as usize + 1));
    scratch.write("agents/notes.txt", "not an agent, so not reported\n");
    let skills = scratch.0.join("skills");

    let output = xtask(&["skills", "validate", skills.to_str().unwrap()], &[]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "a skipped agent fails the run:\n{text}");
    assert!(stderr(&output).contains("2 agent files would be skipped"), "{}", stderr(&output));
    for expected in [
        "  agents/code-reviewer.md\n    tools: read_file, grep, execute\n    model: sonnet\n",
        "  agents/drafter.md\n    tools: write_file\n    warning: `name` \"Drafter\" differs from the file's name",
        "warning: `tools` names tools this runtime does not have: WebFetch",
        "  agents/broken.md: the file does not start with a `---` frontmatter line\n",
        &format!("  agents/huge.md: the file is {} bytes, more than the", MAX_AGENT_FILE_BYTES + 1),
        "1 skill loaded (0 with warnings), 0 skipped",
        "2 agents loaded (1 with warnings), 2 skipped",
    ] {
        assert!(text.contains(expected), "{expected:?} in:\n{text}");
    }
    assert!(!text.contains("notes.txt"), "{text}");

    let (_, report) = validate_json(&skills);
    assert_eq!(names(&report["agents"]["loaded"]), ["code-reviewer", "drafter"]);
    assert_eq!(files_of(&report["agents"]["skipped"]), ["agents/broken.md", "agents/huge.md"]);
    assert_eq!((report["totals"]["agents"].as_u64(), report["totals"]["skipped_agents"].as_u64()), (Some(2), Some(2)));
    assert_eq!(report["agents"]["loaded"][0]["model"], "sonnet");

    std::fs::remove_file(scratch.0.join("agents/broken.md")).unwrap();
    std::fs::remove_file(scratch.0.join("agents/huge.md")).unwrap();
    let (output, _) = validate_json(&skills);
    assert!(output.status.success(), "warnings alone pass: {}", stderr(&output));
}

#[test]
fn only_a_folder_named_skills_takes_the_agents_beside_it_and_agents_names_any_folder() {
    let scratch = Scratch::new();
    scratch.write("mine/pdf/SKILL.md", skill_md("Fills PDF forms.", ""));
    scratch.write("agents/helper.md", agent_md("helper", "Helps.", ""));
    let mine = scratch.0.join("mine");
    let (output, report) = validate_json(&mine);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(report["agents"].is_null(), "an agents/ beside another folder may be anything: {report:#}");
    assert!(!stdout(&xtask(&["skills", "validate", mine.to_str().unwrap()], &[])).contains("agents"));

    let agents = scratch.0.join("agents");
    let args = ["skills", "validate", mine.to_str().unwrap(), "--agents", agents.to_str().unwrap(), "--json"];
    let output = xtask(&args, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(names(&report["agents"]["loaded"]), ["helper"]);

    let output = xtask(&["skills", "validate", mine.to_str().unwrap(), "--agents", "/no/such/agents"], &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("--agents /no/such/agents: there is no such folder"), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread")]
async fn sync_makes_the_agents_folder_the_tenants_agents_and_leaves_them_alone_without_one() {
    let endpoint = local_stack::moto::moto().endpoint.clone();
    let config = local_stack::moto::sdk_config(&endpoint).await;
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&config).force_path_style(true).build());
    let bucket = local_stack::moto::unique_name("agents");
    local_stack::moto::create_bucket(&s3, &bucket).await;
    let objects = aws_store::S3ObjectStore::new(s3.clone(), &bucket);
    for (key, text) in [("u1/agents/stale.md", "an agent no longer in the folder"), ("u0/agents/theirs.md", "theirs")] {
        s3.put_object().bucket(&bucket).key(key).body(text.as_bytes().to_vec().into()).send().await.unwrap();
    }
    let scratch = Scratch::new();
    scratch.write("skills/alpha/SKILL.md", skill_md("Alpha.", ""));
    scratch.write("agents/planner.md", agent_md("planner", "Plans the work.", "tools: [Read, TodoWrite]\n"));
    scratch.write("agents/researcher.md", agent_md("researcher", "Researches.", "model: haiku\n"));
    scratch.write("agents/bad.md", "no frontmatter\n");
    let aws = [
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ];
    let skills = scratch.0.join("skills");
    let sync = |dir: &std::path::Path| {
        let args = ["skills", "sync", dir.to_str().unwrap(), "--user", "u1", "--bucket", &bucket, "--no-bundles"];
        tokio::task::block_in_place(|| xtask(&args, &aws))
    };

    let output = sync(&skills);
    assert!(output.status.success(), "{}", stderr(&output));
    let summary = "alpha: version 1 (new), default\nskills: 1 new version, 0 unchanged, 0 deleted; files: 3 uploaded, \
                   0 unchanged, 1 removed; 1 skills indexed, 0 skipped; 2 agents indexed, 1 skipped\n";
    assert_eq!(stdout(&output), summary);
    let stored = etags(&s3, &bucket, "u1/agents/").await;
    assert_eq!(
        stored.keys().collect::<Vec<_>>(),
        ["u1/agents/bad.md", "u1/agents/planner.md", "u1/agents/researcher.md"]
    );
    let index = head(&objects, "u1").await;
    let agents: Vec<String> = index.agents.iter().map(|a| format!("{} {:?} {:?}", a.name, a.tools, a.model)).collect();
    assert_eq!(agents, [r#"planner Some(["read_file", "todowrite"]) None"#, r#"researcher None Some("haiku")"#]);
    assert_eq!(index.skipped_agents[0].file, "agents/bad.md");
    assert_eq!(etags(&s3, &bucket, "u0/").await.len(), 1, "another tenant's agents are untouched");

    let output = sync(&skills);
    assert_eq!(
        stdout(&output),
        "alpha: version 1 (unchanged), default\nskills: 0 new versions, 1 unchanged, 0 deleted; files: 0 uploaded, \
         3 unchanged, 0 removed; 1 skills indexed, 0 skipped; 2 agents indexed, 1 skipped\n"
    );

    // A skills folder with no agents beside it leaves the tenant's agents as they are.
    let alone = Scratch::new();
    alone.write("skills/alpha/SKILL.md", skill_md("Alpha.", ""));
    let output = sync(&alone.0.join("skills"));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "alpha: version 1 (unchanged), default\nskills: 0 new versions, 1 unchanged, 0 deleted; files: 0 uploaded, \
         0 unchanged, 0 removed; 1 skills indexed, 0 skipped\n"
    );
    assert_eq!(etags(&s3, &bucket, "u1/agents/").await, stored);
    assert_eq!(head(&objects, "u1").await.agents.len(), 2, "the rebuilt index still lists them");
}
