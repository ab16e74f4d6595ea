//! `cargo xtask skills eval` run as a user runs it: the compiled xtask binary against a local
//! stack's environment file (moto on loopback, a scripted model server as the deployment's model),
//! the eval turns run through the functions' own turn service, the report stored with the version,
//! the requirement gating the exit status and the promote.

use agent_core::ids::SkillPath;
use agent_core::skills::versions::{self, SkillFileBytes};
use agent_core::turn::evals;
use agent_core::UserId;
use local_stack::model_server::{ModelServer, Received, Reply};
use serde_json::{json, Value};

use crate::support::*;

fn version_files(description: &str) -> Vec<SkillFileBytes> {
    let file = |path: &str, text: String| SkillFileBytes { path: path.into(), bytes: text.into_bytes() };
    vec![
        file("SKILL.md", format!("---\nname: pdf\ndescription: {description}\n---\n# PDF\nAnswer with a PDF.\n")),
        file(
            "evals/evals.json",
            json!({"skill_name": "pdf", "evals": [{"id": 1, "prompt": "Make a pdf of the report",
                "expectations": ["The reply mentions a PDF", "The reply includes a table"]}]})
            .to_string(),
        ),
        file(
            "evals/trigger_evals.json",
            json!([
                {"query": "convert this pdf to text", "should_trigger": true},
                {"query": "merge two pdf files", "should_trigger": true},
                {"query": "what's the weather in Lisbon", "should_trigger": false},
                {"query": "tell me the history of the pdf format", "should_trigger": false}
            ])
            .to_string(),
        ),
    ]
}

/// Loads `pdf` whenever the user's message says "pdf" (so one of the two queries that should not
/// load it does: a trigger rate of 75%), answers after the load, and grades one expectation of two
/// passed (a pass rate of 50%).
fn decide(request: &Received) -> Reply {
    if request.body.get("response_format").is_some_and(|format| !format.is_null()) {
        let grading = json!({"expectations": [
            {"passed": true, "evidence": "The reply says: Here is your PDF."},
            {"passed": false, "evidence": "No table appears in the reply."}
        ]});
        return Reply::Text(grading.to_string());
    }
    let last = request.body["messages"].as_array().and_then(|messages| messages.last()).cloned().unwrap_or_default();
    match last["role"].as_str() {
        Some("tool") => Reply::text("Here is your PDF."),
        Some("user") if last["content"].to_string().contains("pdf") => {
            Reply::tool("load_skill", json!({"skill_path": "pdf"}))
        }
        _ => Reply::text("No skill needed."),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_runs_a_versions_evals_stores_the_report_and_promotes_only_past_the_requirement() {
    let endpoint = local_stack::moto::moto().endpoint.clone();
    let config = local_stack::moto::sdk_config(&endpoint).await;
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&config).force_path_style(true).build());
    let (bucket, table) = (local_stack::moto::unique_name("eval"), local_stack::moto::unique_name("eval-sessions"));
    local_stack::moto::create_bucket(&s3, &bucket).await;
    local_stack::moto::create_sessions_table(&aws_sdk_dynamodb::Client::new(&config), &table).await;
    let objects = aws_store::S3ObjectStore::new(s3.clone(), &bucket);
    let (user, skill) = (UserId::parse("u1").unwrap(), SkillPath::parse("pdf").unwrap());
    versions::publish(&objects, &user, &skill, version_files("Old PDF work."), "t", 1, None, None).await.unwrap();
    let candidate = versions::publish(&objects, &user, &skill, version_files("PDF work, better."), "t", 2, None, None)
        .await
        .unwrap()
        .record;
    assert_eq!(candidate.version, 2);
    let default = || async {
        let (defaults, _) = versions::defaults(&objects, &user).await.unwrap();
        defaults.skills.get("pdf").map(|chosen| (chosen.version, chosen.set_by.clone()))
    };
    assert_eq!(default().await, Some((1, "t".to_owned())));

    let model = ModelServer::start().await;
    model.decide(decide);
    // The local stack's environment file, as `cargo xtask local` writes it, with this test's moto
    // and its model server as the deployment's model.
    let settings = Scratch::new();
    let env_file = settings.0.join("local.env");
    std::fs::write(
        &env_file,
        format!(
            "SESSIONS_TABLE={table}\nSKILLS_BUCKET={bucket}\nAWS_ENDPOINT_URL={endpoint}\nAWS_ACCESS_KEY_ID=testing\n\
             AWS_SECRET_ACCESS_KEY=testing\nAWS_REGION=us-east-1\nAWS_EC2_METADATA_DISABLED=true\n\
             LLM_PROVIDER=openai\nLLM_BASE_URL={}\nLLM_MODEL=eval-model\nLLM_API_KEY=test\n",
            model.base_url
        ),
    )
    .unwrap();
    let env_path = env_file.to_str().unwrap();
    let local = [("XTASK_LOCAL_ENV", env_path), ("LLM_PROVIDER", ""), ("SANDBOX", "")];
    let run = |args: &[&str]| {
        let mut all = vec!["skills", "eval"];
        all.extend_from_slice(args);
        tokio::task::block_in_place(|| xtask(&all, &local))
    };

    // The newest version, below the requirement: the table, the reason, exit 1, no promote.
    let output = run(&["pdf", "--user", "u1", "--runs", "1", "--require", "trigger=0.8,pass=0.5", "--promote"]);
    assert_eq!(output.status.code(), Some(1), "{}\n{}", stdout(&output), stderr(&output));
    let table = stdout(&output);
    assert!(table.starts_with("pdf v2 — 1 run(s) per case, model eval-model\n"), "{table}");
    assert!(table.contains("trigger rate 75% · pass rate 50% · 0 failed run(s)"), "{table}");
    assert!(stderr(&output).contains("trigger rate 75% is below the required 80%"), "{}", stderr(&output));
    assert!(stderr(&output).contains("the requirement is not met: "), "{}", stderr(&output));
    assert!(stderr(&output).contains("; pdf version 2 is not promoted"), "{}", stderr(&output));
    assert_eq!(default().await, Some((1, "t".to_owned())), "not promoted");
    let stored = evals::list_reports(&objects, &user, &skill, 2).await.unwrap();
    assert_eq!(stored.len(), 1);
    let first = &stored[0];
    assert_eq!((first.status.as_str(), first.summary.trigger_rate), ("completed", Some(0.75)));
    assert_eq!(first.cases.len(), 5);
    assert!(first.cases[0].runs[0].loaded_version == Some(2), "{:?}", first.cases[0]);

    // Met: promoted, and the report as JSON.
    let output =
        run(&["pdf", "--user", "u1", "--runs", "1", "--require", "trigger=75%,pass=0.5", "--promote", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).expect("the report as JSON");
    assert_eq!((report["version"].as_u64(), report["status"].as_str()), (Some(2), Some("completed")));
    assert_eq!(report["summary"]["pass_rate"].as_f64(), Some(0.5));
    assert!(stderr(&output).contains("promoted: pdf now serves version 2 (was version 1)"), "{}", stderr(&output));
    assert_eq!(default().await, Some((2, "cargo xtask skills eval".to_owned())));
    let stored = evals::list_reports(&objects, &user, &skill, 2).await.unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[0].run_id, report["run_id"].as_str().unwrap(), "newest first");

    // The older version by number, without a requirement: exit 0, its own report.
    let output = run(&["pdf", "--user", "u1", "--version", "1", "--runs", "1"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).starts_with("pdf v1 — "), "{}", stdout(&output));
    assert_eq!(evals::list_reports(&objects, &user, &skill, 1).await.unwrap().len(), 1);

    // What does not exist is said, nothing is run.
    let output = run(&["pdf", "--user", "u1", "--version", "9"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("pdf has no version 9 for u1"), "{}", stderr(&output));
    let output = run(&["nothing", "--user", "u1"]);
    assert!(stderr(&output).contains("nothing has no published version for u1"), "{}", stderr(&output));
    let output = tokio::task::block_in_place(|| {
        xtask(&["skills", "eval", "pdf", "--user", "u1"], &[("XTASK_LOCAL_ENV", "/nonexistent/local.env")])
    });
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("no local stack"), "{}", stderr(&output));
}
