//! `cargo xtask skills validate` run as a user runs it: the compiled xtask binary on folders of
//! good, repaired and skipped skills, and their report as text and as JSON.

use std::collections::BTreeMap;

use agent_core::skills::frontmatter::{SkipReason, MAX_SKILL_MD_BYTES};

use crate::support::*;

#[test]
fn validate_lists_the_example_skills_and_passes() {
    let examples = local_stack::stack::repo_root().join("examples/skills");
    let output = xtask(&["skills", "validate", examples.to_str().unwrap()], &[]);
    let text = stdout(&output);
    assert!(output.status.success(), "exit {:?}\n{text}\n{}", output.status, stderr(&output));
    for file in ["contratos/arrendamiento/SKILL.md", "escrituras/compraventa/SKILL.md", "escrituras/hipoteca/SKILL.md"]
    {
        assert!(text.contains(file), "{file} is listed:\n{text}");
    }
    assert!(text.contains("tools: ls, read_file, write_file, edit_file, glob, grep"), "hipoteca's tools:\n{text}");
    assert!(text.contains("base prompt: BASE_PROMPT.md"), "the base prompt is reported:\n{text}");
    assert!(text.contains("3 skills loaded (0 with warnings), 0 skipped"), "the totals:\n{text}");
    // examples/agents is beside examples/skills, as a tenant's agents/ is beside its skills/.
    assert!(text.contains("agents/revisor-escrituras.md\n    tools: read_file, grep, glob, ls\n"), "{text}");
    assert!(text.contains("1 agent loaded (0 with warnings), 0 skipped"), "the agents' totals:\n{text}");

    let (output, report) = validate_json(&examples);
    assert!(output.status.success());
    assert_eq!(report["totals"]["loaded"], 3);
    assert_eq!(report["base_prompt"]["status"], "used");
    let compraventa = &report["loaded"][1];
    assert_eq!(compraventa["path"], "escrituras/compraventa");
    assert_eq!(compraventa["files"], 3, "its files besides SKILL.md");
}

#[test]
fn validate_names_each_skipped_file_and_its_reason_and_fails() {
    let scratch = Scratch::new();
    scratch.write("good/SKILL.md", skill_md("A usable skill.", "name: good\nallowed-tools: Read Write\n"));
    scratch.write("repaired/SKILL.md", skill_md("Usable after repairs.", "name: Another Name\n"));
    scratch.write("broken/SKILL.md", "no frontmatter here\n");
    scratch.write("a/b/c/SKILL.md", skill_md("Too deep.", ""));
    let large = skill_md("Too large.", "") + &"x".repeat(MAX_SKILL_MD_BYTES as usize);
    scratch.write("large/SKILL.md", &large);

    let output = xtask(&["skills", "validate", scratch.0.to_str().unwrap()], &[]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "a skipped skill fails the run:\n{text}");
    assert!(stderr(&output).contains("3 SKILL.md files would be skipped"), "{}", stderr(&output));
    for (file, reason) in [
        ("broken/SKILL.md", SkipReason::MissingOpening),
        ("a/b/c/SKILL.md", SkipReason::TooDeep),
        ("large/SKILL.md", SkipReason::TooLarge(large.len() as u64)),
    ] {
        assert!(text.contains(&format!("  {file}: {reason}\n")), "{file} and why:\n{text}");
    }
    assert!(text.contains("tools: read_file, write_file"), "Claude Code's names mapped:\n{text}");
    assert!(text.contains("repaired/SKILL.md (name: Another Name)"), "{text}");
    assert!(text.contains("warning: `name` \"Another Name\" differs from its folder \"repaired\""), "{text}");
    assert!(text.contains("2 skills loaded (1 with warnings), 3 skipped"), "{text}");

    let (_, report) = validate_json(&scratch.0);
    assert_eq!(files_of(&report["skipped"]), ["a/b/c/SKILL.md", "broken/SKILL.md", "large/SKILL.md"]);
    assert_eq!(files_of(&report["loaded"]), ["good/SKILL.md", "repaired/SKILL.md"]);
}

#[test]
fn a_skill_md_deep_inside_a_skill_is_one_of_its_files() {
    let scratch = Scratch::new();
    scratch.write("pdf/SKILL.md", skill_md("Fills PDF forms.", ""));
    scratch.write("pdf/examples/SKILL.md", skill_md("An example inside the skill.", ""));
    scratch.write("pdf/examples/deeper/SKILL.md", "not even frontmatter\n");
    scratch.write("docs/memo/SKILL.md", skill_md("Writes memos.", ""));
    scratch.write("docs/memo/templates/old/SKILL.md", skill_md("Nested too deeply, but inside memo.", ""));
    scratch.write(".git/config", "[core]\n");
    std::os::unix::fs::symlink("/etc/hostname", scratch.0.join("pdf/outside")).expect("a link out");
    std::os::unix::fs::symlink(scratch.0.join("pdf/SKILL.md"), scratch.0.join("pdf/copy.md")).expect("a link in");
    scratch.write("BASE_PROMPT.md", "Hello {unknown}\n");

    let (output, report) = validate_json(&scratch.0);
    assert_eq!(report["totals"]["skipped"], 0, "{report:#}");
    assert_eq!(files_of(&report["loaded"]), ["docs/memo/SKILL.md", "pdf/SKILL.md"]);
    assert_eq!(report["loaded"][1]["files"], 3, "pdf's files: its two inner SKILL.md and the link inside the folder");
    let inside: BTreeMap<String, String> = report["inside_a_skill"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| (entry["file"].as_str().unwrap().to_owned(), entry["skill"].as_str().unwrap().to_owned()))
        .collect();
    let expected = [
        ("docs/memo/templates/old/SKILL.md", "docs/memo"),
        ("pdf/examples/SKILL.md", "pdf"),
        ("pdf/examples/deeper/SKILL.md", "pdf"),
    ];
    assert_eq!(inside, expected.map(|(file, skill)| (file.to_owned(), skill.to_owned())).into());
    let ignored: Vec<&str> =
        report["ignored"].as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(ignored, [".git", "pdf/outside"], "hidden entries and links out of the folder are left out");
    // No skill is skipped, but a base prompt every turn would refuse still fails the run.
    assert_eq!(report["base_prompt"]["status"], "invalid");
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("BASE_PROMPT.md is not a usable template"), "{}", stderr(&output));

    std::fs::remove_file(scratch.0.join("BASE_PROMPT.md")).unwrap();
    let (output, report) = validate_json(&scratch.0);
    assert!(output.status.success(), "skills inside skills are not skips: {}", stderr(&output));
    assert_eq!(report["base_prompt"]["status"], "absent");
    assert_eq!(report["settings"]["status"], "absent");
}

#[test]
fn validate_reports_the_approval_rules_of_settings_json_and_fails_on_one_left_out() {
    let scratch = Scratch::new();
    scratch.write("pdf/SKILL.md", skill_md("Fills PDF forms.", ""));
    scratch.write("settings.json", r#"{"permissions": {"ask": ["Bash(git push:*)", "Write"], "allow": ["Write"]}}"#);
    let output = xtask(&["skills", "validate", scratch.0.to_str().unwrap()], &[]);
    let text = stdout(&output);
    assert!(output.status.success(), "{text}\n{}", stderr(&output));
    assert!(
        text.contains(
            "settings: settings.json (75 bytes)\n  asks approval for: Bash(git push:*), Write\n  except: Write\n"
        ),
        "{text}"
    );

    scratch.write("settings.json", r#"{"permissions": {"ask": ["Edit(/workspace/**)", "Bash(rm:*)"]}}"#);
    let (output, report) = validate_json(&scratch.0);
    assert_eq!(output.status.code(), Some(1), "{report:#}");
    assert!(stderr(&output).contains("settings.json has 1 problem"), "{}", stderr(&output));
    assert_eq!(report["settings"]["ask"], serde_json::json!(["Bash(rm:*)"]));
    assert!(report["settings"]["problems"][0].as_str().unwrap().contains("only `Bash(...)`"), "{report:#}");
}

#[test]
fn validate_refuses_a_folder_that_does_not_exist() {
    let output = xtask(&["skills", "validate", "/no/such/skills"], &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("there is no folder /no/such/skills"), "{}", stderr(&output));
    let output = xtask(&["skills", "frobnicate"], &[]);
    assert!(!output.status.success() && stderr(&output).contains("usage: cargo xtask skills"));
}

/// Imports a script makes only inside `try: … except ImportError` are the skill's optional needs,
/// in the text and the JSON, named as an upload through the API names them (the core's scan).
#[test]
fn validate_names_the_optional_needs_of_each_skill() {
    let scratch = Scratch::new();
    scratch.write("charts/SKILL.md", skill_md("Draws charts.", "name: charts\n"));
    let script = "import os\ntry:\n    import plotly\nexcept ImportError:\n    plotly = None\n";
    scratch.write("charts/scripts/draw.py", script);
    scratch.write("plain/SKILL.md", skill_md("No scripts.", "name: plain\n"));

    let output = xtask(&["skills", "validate", scratch.0.to_str().unwrap()], &[]);
    let text = stdout(&output);
    assert!(output.status.success(), "{text}\n{}", stderr(&output));
    assert!(text.contains("    optional needs (imported only inside try: … except ImportError): plotly\n"), "{text}");
    assert_eq!(text.matches("optional needs").count(), 1, "a skill without any says nothing:\n{text}");

    let (_, report) = validate_json(&scratch.0);
    assert_eq!(report["loaded"][0]["optional_needs"], serde_json::json!(["plotly"]));
    assert_eq!(report["loaded"][1]["optional_needs"], serde_json::json!([]));
    let files = vec![agent_core::skills::versions::SkillFileBytes {
        path: "scripts/draw.py".into(),
        bytes: script.as_bytes().to_vec(),
    }];
    assert_eq!(agent_core::skills::versions::optional_needs(&files), ["plotly"], "the API's scan agrees");
}
