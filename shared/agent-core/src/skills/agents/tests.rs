//! Agent files: good ones, lenient repairs, skips with their reasons, Claude Code's tool names, and
//! hostile sizes and shapes (nothing panics).

use super::*;

fn name(stem: &str) -> AgentName {
    AgentName::parse(stem).unwrap()
}

fn parse(stem: &str, text: &str) -> Result<AgentDoc, AgentSkip> {
    parse_agent_file(text.as_bytes().to_vec(), &name(stem), "etag-1".to_owned())
}

#[test]
fn a_claude_code_agent_reads_whole_with_no_warnings() {
    let text = "---\nname: code-reviewer\ndescription: Reviews code for quality. Use after every change.\n\
                tools: Read, Grep, Glob, Bash\nmodel: sonnet\ncolor: blue\n---\n\nYou are a senior reviewer.\n\nBe brief.\n";
    let doc = parse("code-reviewer", text).unwrap();
    assert_eq!(
        doc.entry,
        AgentEntry {
            name: "code-reviewer".to_owned(),
            description: "Reviews code for quality. Use after every change.".to_owned(),
            tools: Some(["read_file", "grep", "glob", "execute"].map(str::to_owned).to_vec()),
            model: Some("sonnet".to_owned()),
            etag: "etag-1".to_owned(),
            size: text.len() as u64,
            warnings: Vec::new(),
        }
    );
    assert_eq!(doc.prompt, "You are a senior reviewer.\n\nBe brief.", "the body, trimmed");
}

#[test]
fn tools_as_a_list_absent_or_empty() {
    let doc =
        parse("a", "---\nname: a\ndescription: d\ntools: [Read, Write, Edit, MultiEdit, TodoWrite]\n---\nP").unwrap();
    assert_eq!(
        doc.entry.tools,
        Some(["read_file", "write_file", "edit_file", "todowrite"].map(str::to_owned).to_vec())
    );
    for absent in ["", "tools:\n", "tools: ''\n", "tools: []\n"] {
        let doc = parse("a", &format!("---\nname: a\ndescription: d\n{absent}---\nP")).unwrap();
        assert_eq!(doc.entry.tools, None, "{absent:?}: every tool of the parent");
        assert!(doc.entry.warnings.is_empty(), "{absent:?}: {:?}", doc.entry.warnings);
    }
}

#[test]
fn unknown_tools_and_bash_patterns_are_warnings() {
    let doc =
        parse("a", "---\nname: a\ndescription: d\ntools: Read, WebFetch, Bash(git diff:*), mcp__github__x\n---\nP")
            .unwrap();
    assert_eq!(doc.entry.tools, Some(vec!["read_file".to_owned(), "execute".to_owned()]));
    assert_eq!(doc.entry.warnings.len(), 2, "{:?}", doc.entry.warnings);
    assert!(doc.entry.warnings[0].ends_with("does not have: WebFetch, mcp__github__x"), "{:?}", doc.entry.warnings);
    assert!(doc.entry.warnings[1].contains("Bash(git diff:*)"), "{:?}", doc.entry.warnings);
    // Only unknown tools: the agent gets none rather than every one.
    let doc = parse("a", "---\nname: a\ndescription: d\ntools: WebSearch\n---\nP").unwrap();
    assert_eq!(doc.entry.tools, Some(Vec::new()));
}

#[test]
fn repairs_become_warnings() {
    let long = "d".repeat(MAX_AGENT_DESCRIPTION_CHARS + 50);
    let text = format!("---\nname: Reviewer\ndescription: {long}\nmodel: [opus]\n---\n");
    let doc = parse("reviewer", &text).unwrap();
    assert_eq!(doc.entry.name, "reviewer", "the file's name wins");
    assert_eq!(doc.entry.description.chars().count(), MAX_AGENT_DESCRIPTION_CHARS);
    assert_eq!(doc.entry.model, None);
    let warnings = doc.entry.warnings.join("\n");
    for expected in
        ["1074 characters", "\"Reviewer\" differs from the file's name", "`model` is not text", "body is empty"]
    {
        assert!(warnings.contains(expected), "{expected}: {warnings}");
    }
    let doc = parse("helper", "---\ndescription: d\nmodel: inherit\n---\nP").unwrap();
    assert_eq!(doc.entry.model.as_deref(), Some("inherit"));
    assert!(doc.entry.warnings[0].contains("`name` is missing"), "{:?}", doc.entry.warnings);
    let arn = "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-sonnet-4-20250514-v1:0";
    let doc = parse("a", &format!("---\nname: a\ndescription: d\nmodel: {arn}\n---\nP")).unwrap();
    assert_eq!(doc.entry.model.as_deref(), Some(arn));
    let doc = parse("a", "---\nname: a\ndescription: d\nmodel: \"gpt 4; rm -rf\"\n---\nP").unwrap();
    assert_eq!(doc.entry.model, None);
    assert!(doc.entry.warnings[0].contains("not a model name"), "{:?}", doc.entry.warnings);
}

#[test]
fn unusable_files_are_skipped_with_their_reason() {
    let skip = |text: &str| parse("a", text).unwrap_err();
    assert_eq!(skip("You are a reviewer."), AgentSkip::Frontmatter(SkipReason::MissingOpening));
    assert_eq!(skip("---\nname: a\n"), AgentSkip::Frontmatter(SkipReason::MissingClosing));
    assert!(matches!(skip("---\nname: [a\n---\n"), AgentSkip::Frontmatter(SkipReason::Yaml(_))));
    assert_eq!(skip("---\n- a\n---\n"), AgentSkip::Frontmatter(SkipReason::NotAMapping));
    assert_eq!(skip("---\nname: a\n---\nP"), AgentSkip::MissingDescription);
    assert_eq!(skip("---\nname: a\ndescription: '  '\n---\nP"), AgentSkip::MissingDescription);
    assert_eq!(skip("---\ndescription: {a: b}\n---\nP"), AgentSkip::DescriptionNotText);
    assert!(matches!(skip("---\ndescription: d\ntools: {Read: true}\n---\nP"), AgentSkip::BadTools(_)));
    assert!(matches!(skip("---\ndescription: d\ntools: [[Read]]\n---\nP"), AgentSkip::BadTools(_)));
    let reason = skip("---\ndescription: d\ntools: 7\n---\n").to_string();
    assert!(reason.starts_with("the frontmatter field `tools`"), "{reason}");
    let not_text = parse_agent_file(vec![b'-', b'-', b'-', b'\n', 0xff, 0xfe], &name("a"), String::new());
    assert_eq!(not_text.unwrap_err(), AgentSkip::NotText);
    assert_eq!(
        AgentSkip::MissingDescription.to_string(),
        "the frontmatter has no `description`, so no one could know when to hand the agent a task"
    );
}

#[test]
fn hostile_sizes_and_shapes_are_refused_without_a_panic() {
    let huge = format!("---\ndescription: d\n---\n{}", "x".repeat(MAX_AGENT_FILE_BYTES as usize));
    assert!(matches!(parse("a", &huge), Err(AgentSkip::TooLarge(_))));
    let deep = format!("---\ndescription: d\nx: {}{}\n---\n", "[".repeat(40), "]".repeat(40));
    assert!(matches!(parse("a", &deep), Err(AgentSkip::Frontmatter(SkipReason::TooComplex(_)))));
    let laughs =
        format!("---\ndescription: d\na: &a [x, x]\nb: &b [{}]\nc: [{}]\n---\n", "*a, ".repeat(5), "*b, ".repeat(5));
    assert!(matches!(parse("a", &laughs), Err(AgentSkip::Frontmatter(SkipReason::TooComplex(_)))));
    let many_tools = format!("---\ndescription: d\ntools: {}\n---\n", "Read, ".repeat(5000));
    assert_eq!(parse("a", &many_tools).map(|doc| doc.entry.tools), Ok(Some(vec!["read_file".to_owned()])));
    for garbage in
        ["", "---", "---\n---", "\u{feff}---\n---\n", "---\n\0\n---\n", "---\ndescription: \"\\u0000\"\n---\n"]
    {
        let _ = parse("a", garbage);
    }
    // A name in the frontmatter as long as the file allows is kept short in the warning.
    let long_name = "n".repeat(10_000);
    let doc = parse("a", &format!("---\nname: {long_name}\ndescription: d\n---\nP")).unwrap();
    assert!(doc.entry.warnings[0].len() < 300, "{}", doc.entry.warnings[0].len());
}

#[test]
fn only_markdown_files_at_the_top_are_agents() {
    assert_eq!(classify_agent("code-reviewer.md"), AgentFile::Agent(name("code-reviewer")));
    assert_eq!(classify_agent("team/reviewer.md"), AgentFile::Unusable(AgentSkip::Nested));
    assert_eq!(classify_agent("general-purpose.md"), AgentFile::Unusable(AgentSkip::Reserved));
    for bad in ["Reviewer.md", "code_reviewer.md", "-a.md", "a b.md"] {
        assert!(matches!(classify_agent(bad), AgentFile::Unusable(AgentSkip::BadName(..))), "{bad}");
    }
    let long = format!("{}.md", "a".repeat(65));
    assert!(matches!(classify_agent(&long), AgentFile::Unusable(AgentSkip::BadName(..))));
    for other in ["notes.txt", "reviewer.MD", ".md", ".hidden.md", ".git/x.md", "team/.cache/x.md", "", "reviewer"] {
        assert_eq!(classify_agent(other), AgentFile::Other, "{other}");
    }
}
