//! The skills index fed every file under a tenant's skills/ and agents/ and its published versions'
//! defaults and bundles, and the bundle maker fed a skill's or a published version's requirements.

use serde_json::json;

use super::render::{iam_matches, resources, Rendered};

#[test]
fn every_file_under_a_tenants_skills_and_its_agents_reach_the_skills_index_and_nothing_else_does() {
    let stack = Rendered::new(&[]);
    let bucket = stack.resource("SkillsBucket").expect("the bucket");
    assert_eq!(bucket["NotificationConfiguration"], json!({"EventBridgeConfiguration": {"EventBridgeEnabled": true}}));
    let rule = stack.resource("SkillsIndexRule").expect("the rule");
    let pattern = &rule["EventPattern"];
    assert_eq!(pattern["source"], json!(["aws.s3"]));
    assert_eq!(pattern["detail-type"], json!(["Object Created", "Object Deleted"]));
    assert_eq!(pattern["detail"]["bucket"]["name"], json!([bucket["BucketName"]]), "the rule watches the bucket");
    assert_eq!(rule["Targets"][0]["Arn"], json!("{SkillsIndexFunction}"));
    let wildcards: Vec<&str> = pattern["detail"]["object"]["key"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|key| key["wildcard"].as_str())
        .collect();
    // An EventBridge wildcard's `*` matches any run of characters, `/` included.
    let matched = |key: &str| wildcards.iter().any(|wildcard| iam_matches(wildcard, key));
    for key in [
        "user-1/skills/pdf/SKILL.md",
        "user-1/skills/pdf/forms/guide.md",
        "user-1/skills/docs/memo/examples/one.md",
        "user-1/skills/BASE_PROMPT.md",
        "user-1/agents/code-reviewer.md",
        "user-1/agents/team/nested.md",
        "user-1/skill-versions/defaults.json",
        "user-1/skill-versions/pdf/@files/0a1b/.bundle/0a1b.tar",
        "user-1/skill-versions/pdf/@files/0a1b/.bundle/unmet/rdkit",
    ] {
        assert!(matched(key), "{key} reaches the index");
    }
    for key in [
        "user-1/catalog/index.json",
        "user-1/workspaces/s1/blobs/SKILL.md",
        "user-1/sessions/s1/turn-3.json",
        "user-1/agents/notes.txt",
        // A version's own files are written before it is the default, which the index reads them at.
        "user-1/skill-versions/pdf/@files/0a1b/SKILL.md",
        "user-1/skill-versions/pdf/@v/00000001.json",
    ] {
        assert!(!matched(key), "{key} does not");
    }
    let permission = stack.resource("SkillsIndexInvokePermission").expect("the permission");
    assert_eq!(permission["Principal"], json!("events.amazonaws.com"));
    assert_eq!(permission["SourceArn"], json!("{SkillsIndexRule}"));
    let without_sandbox = Rendered::new(&[("Sandbox", "none")]);
    assert!(without_sandbox.resource("SkillsBundleFunction").is_none(), "no bundles without the sandbox image");
}

#[test]
fn with_the_sandbox_image_a_skills_requirements_reach_skills_index_in_that_image_which_writes_only_bundles() {
    let stack =
        Rendered::new(&[("Sandbox", "lambda"), ("SandboxImageUri", "123.dkr.ecr.eu-west-1.amazonaws.com/sandbox:1")]);
    let function = stack.resource("SkillsBundleFunction").expect("the bundle function");
    assert_eq!(function["ImageUri"], json!("123.dkr.ecr.eu-west-1.amazonaws.com/sandbox:1"), "the sandbox's own image");
    assert_eq!(function["ImageConfig"]["EntryPoint"], json!(["/var/runtime/skills-index"]));
    assert_eq!(function["Environment"]["Variables"]["SKILLS_INDEX"], json!("skip"));
    let rule = stack.resource("SkillsBundleRule").expect("the rule");
    assert_eq!(rule["Targets"][0]["Arn"], json!("{SkillsBundleFunction}"));
    let wildcards: Vec<String> = rule["EventPattern"]["detail"]["object"]["key"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|key| key["wildcard"].as_str().map(str::to_owned))
        .collect();
    let matched = |key: &str| wildcards.iter().any(|wildcard| iam_matches(wildcard, key));
    assert!(matched("u1/skills/fechas/requirements.txt") && matched("u1/skills/docs/fechas/scripts/requirements.txt"));
    assert!(matched("u1/skill-versions/fechas/@files/0a1b/requirements.txt"), "a published version's declaration");
    assert!(matched("u1/skill-versions/fechas/@files/0a1b/scripts/requirements.txt"));
    assert!(!matched("u1/skills/fechas/SKILL.md") && !matched("u1/workspaces/s/requirements.txt"));
    assert!(!matched("u1/skill-versions/fechas/@files/0a1b/SKILL.md"));
    let writes: Vec<String> = stack
        .function_statements("SkillsBundleFunction")
        .iter()
        .filter(|statement| statement["Action"].to_string().contains("s3:PutObject"))
        .flat_map(resources)
        .collect();
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert!(writes[0].ends_with("/*/skills/*/.bundle/*"), "only bundle folders are written: {writes:?}");
    assert!(writes[1].ends_with("/*/skill-versions/*/@files/*/.bundle/*"), "and versions' bundle folders: {writes:?}");
    let permission = stack.resource("SkillsBundleInvokePermission").expect("the permission");
    assert_eq!(permission["SourceArn"], json!("{SkillsBundleRule}"));
}
