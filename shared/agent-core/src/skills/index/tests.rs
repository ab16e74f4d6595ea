//! Layouts, file ownership and format versions.

use super::*;
use crate::skills::frontmatter::SkipReason;

#[test]
fn classifies_both_layouts() {
    assert_eq!(classify("pdf/SKILL.md"), SkillFile::Skill(SkillPath::plain("pdf").unwrap()));
    assert_eq!(classify("docs/pdf/SKILL.md"), SkillFile::Skill(SkillPath::new("docs", "pdf").unwrap()));
    assert_eq!(classify("a/b/c/SKILL.md"), SkillFile::Unusable(SkipReason::TooDeep));
    assert!(matches!(classify("a b/SKILL.md"), SkillFile::Unusable(SkipReason::BadFolder(_))));
    assert_eq!(classify("BASE_PROMPT.md"), SkillFile::BasePrompt);
    assert_eq!(classify("settings.json"), SkillFile::Settings);
    assert_eq!(classify("pdf/settings.json"), SkillFile::Other);
    assert_eq!(classify("pdf/reference.md"), SkillFile::Other);
    assert!(matches!(classify("SKILL.md"), SkillFile::Unusable(SkipReason::BadFolder(_))));
    // A plugin marketplace's layout, with and without a group folder; deeper is still too deep.
    let plugin = SkillPath::in_plugin(None, "eng", "a11y").unwrap();
    assert_eq!(classify("eng/skills/a11y/SKILL.md"), SkillFile::Skill(plugin));
    let grouped = SkillPath::in_plugin(Some("eng"), "pw", "review").unwrap();
    assert_eq!(classify("eng/pw/skills/review/SKILL.md"), SkillFile::Skill(grouped));
    assert_eq!(classify("a/b/c/skills/d/SKILL.md"), SkillFile::Unusable(SkipReason::TooDeep));
    assert_eq!(classify("a/b/skills/d/e/SKILL.md"), SkillFile::Unusable(SkipReason::TooDeep));
    // Hidden folders hold no skill.
    assert_eq!(classify(".gemini/skills/a11y/SKILL.md"), SkillFile::Other);
    assert_eq!(classify("pdf/.cache/SKILL.md"), SkillFile::Other);
}

#[test]
fn tenant_files_come_only_from_a_tenants_skills_and_agents_prefixes() {
    let (user, file) = tenant_file("u1/skills/pdf/SKILL.md").unwrap();
    assert_eq!((user.as_str(), file), ("u1", TenantFile::Skill("pdf/SKILL.md".to_owned())));
    assert!(tenant_file("u1/workspaces/s/blobs/abc").is_none());
    assert!(tenant_file("u1/tickets/t/SKILL.md").is_none());
    assert_eq!(tenant_file("u1/skills/pdf/notes.md").unwrap().1, TenantFile::Skill("pdf/notes.md".to_owned()));
    assert!(tenant_file("../skills/pdf/SKILL.md").is_none());
    assert!(tenant_file("u1/skills/a/b/c/SKILL.md").is_some(), "reported as unusable, not ignored");
    assert_eq!(tenant_file("u1/agents/reviewer.md").unwrap().1, TenantFile::Agent("reviewer.md".to_owned()));
    assert_eq!(tenant_file("u1/agents/team/x.md").unwrap().1, TenantFile::Agent("team/x.md".to_owned()), "skipped");
    for ignored in ["u1/agents/notes.txt", "u1/agents/.x.md", "u1/agents/", "../agents/a.md", "u1/skills/"] {
        assert!(tenant_file(ignored).is_none(), "{ignored}");
    }
}

#[test]
fn files_belong_to_the_skills_of_their_folders() {
    let names = |rel| owners(rel).into_iter().map(|(skill, inside)| format!("{skill}:{inside}")).collect::<Vec<_>>();
    assert_eq!(names("pdf/reference.md"), ["pdf:reference.md"]);
    assert_eq!(names("docs/memo/examples/one.md"), ["docs:memo/examples/one.md", "docs/memo:examples/one.md"]);
    assert_eq!(names("docs/memo/SKILL.md"), ["docs:memo/SKILL.md"], "a skill's own SKILL.md is not its file");
    assert!(names("pdf/SKILL.md").is_empty() && names("BASE_PROMPT.md").is_empty());
    let meta = |key: &str, size: u64| ObjectMeta {
        key: key.to_owned(),
        etag: format!("\"{size}\""),
        size,
        last_modified: None,
    };
    let listed = [meta("pdf/a.md", 1), meta("pdf/b/c.md", 2), meta("other/x.md", 3)];
    let files = files_of(|skill| skill.to_string() == "pdf", listed.iter().map(|meta| (meta.key.as_str(), meta)));
    let file = |rel: &str, size: u64| IndexedFile { rel: rel.to_owned(), size, etag: format!("\"{size}\"") };
    assert_eq!(files["pdf"], Some(vec![file("a.md", 1), file("b/c.md", 2)]), "each file with its size and ETag");
    let many: Vec<ObjectMeta> = (0..=MAX_INDEXED_FILES).map(|i| meta(&format!("big/{i}.md"), 1)).collect();
    let files = files_of(|_| true, many.iter().map(|meta| (meta.key.as_str(), meta)));
    assert_eq!(files["big"], None, "more files than the index keeps");
}

#[test]
fn older_formats_ask_for_a_rebuild() {
    assert_eq!(decode_index(br#"{"format": 0, "skills": {}}"#).unwrap(), IndexRead::Older);
    assert_eq!(decode_index(br#"{"format":3,"skills":[]}"#).unwrap(), IndexRead::Older);
    assert_eq!(decode_index(br#"{"format": 99, "skills": {"a": 7}}"#).unwrap(), IndexRead::NewerUnreadable);
    assert!(decode_index(b"not json").is_err());
    let encoded = stored::encode(&CatalogIndex::default(), &[], Vec::new());
    assert_eq!(decode_index(&encoded.head_bytes).unwrap(), IndexRead::Usable(Box::new(encoded.head)));
}
