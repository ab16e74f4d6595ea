//! SKILL.md frontmatter, read leniently as the Agent Skills client guide advises: a skill is
//! skipped only when it cannot be used, and everything repaired is reported as a warning.

use serde::Deserialize;
use thiserror::Error;

use crate::tool_names::{ESSENTIAL_TOOLS, FILE_TOOL_NAMES};

/// The Agent Skills specification's limits.
pub const SPEC_NAME_MAX: usize = 64;
pub const SPEC_DESCRIPTION_MAX: usize = 1024;
/// Largest SKILL.md read at all: its size is checked from the listing, before any download.
pub const MAX_SKILL_MD_BYTES: u64 = 512 * 1024;
/// Largest frontmatter block handed to the YAML parser, so its cost stays small and linear.
pub const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;
/// Deepest nesting of `[` / `{` flow collections in a frontmatter: the parser's cost grows with
/// the square of it.
pub const MAX_FRONTMATTER_FLOW_DEPTH: usize = 16;
/// Most YAML aliases (`*anchor`) in a frontmatter: each may expand a whole anchored subtree.
pub const MAX_FRONTMATTER_ALIASES: usize = 8;
/// Most lines in a frontmatter.
pub const MAX_FRONTMATTER_LINES: usize = 2000;
/// What the index keeps of long values: the listing never shows more than the spec's limits.
const KEPT_NAME_CHARS: usize = 128;
const KEPT_CATEGORY_CHARS: usize = 96;
const MAX_DECLARED_TOOLS: usize = 64;
const KEPT_TOOL_CHARS: usize = 128;

/// Why a SKILL.md cannot be used at all.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SkipReason {
    #[error("the file does not start with a `---` frontmatter line")]
    MissingOpening,
    #[error("the frontmatter has no closing `---` line")]
    MissingClosing,
    #[error("the frontmatter is larger than {MAX_FRONTMATTER_BYTES} bytes")]
    FrontmatterTooLarge,
    #[error("the frontmatter is not valid YAML: {0}")]
    Yaml(String),
    /// A shape that would make the YAML parser's cost superlinear; refused before parsing.
    #[error("the frontmatter {0}")]
    TooComplex(String),
    #[error("the frontmatter is not a YAML mapping")]
    NotAMapping,
    #[error("the frontmatter has no `description`, so no one could know when to use the skill")]
    MissingDescription,
    #[error("the frontmatter field `description` must be text")]
    DescriptionNotText,
    #[error("the file is not UTF-8 text")]
    NotText,
    #[error("the file is {0} bytes, more than the {MAX_SKILL_MD_BYTES} bytes a SKILL.md may have")]
    TooLarge(u64),
    #[error("the SKILL.md is nested too deeply: skills live at skills/{{name}}/SKILL.md, skills/{{category}}/{{name}}/SKILL.md or, as in a plugin marketplace, skills/[{{group}}/]{{plugin}}/skills/{{name}}/SKILL.md")]
    TooDeep,
    #[error("the skill's folder name is not usable: {0}")]
    BadFolder(String),
}

/// A SKILL.md's frontmatter as the runtime uses it, after repairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontmatter {
    /// The `name`, or the folder's name when it is missing or not text.
    pub name: String,
    /// The whole description (the listing truncates it to the spec's 1,024 characters).
    pub description: String,
    /// The frontmatter's `category`, used to group plain-layout skills in the listing.
    pub category: Option<String>,
    /// Our tool names the skill declares (`allowed-tools` or `tools`, Claude Code's names mapped);
    /// `None` when it declares none.
    pub tools: Option<Vec<String>>,
    /// The declared tool names as written.
    pub declared_tools: Option<Vec<String>>,
}

/// A usable skill's frontmatter and what was repaired on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub frontmatter: Frontmatter,
    pub warnings: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct RawFrontmatter {
    name: Option<serde_norway::Value>,
    description: Option<serde_norway::Value>,
    category: Option<serde_norway::Value>,
    tools: Option<serde_norway::Value>,
    #[serde(rename = "allowed-tools")]
    allowed_tools: Option<serde_norway::Value>,
}

/// Splits off the YAML between the opening and closing `---` lines, and the body after them.
fn frontmatter_block(text: &str) -> Result<(&str, &str), SkipReason> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Err(SkipReason::MissingOpening);
    }
    let start = first.len();
    let mut end = start;
    for line in lines {
        if line.trim_end() == "---" {
            return Ok((&text[start..end], &text[end + line.len()..]));
        }
        end += line.len();
        if end - start > MAX_FRONTMATTER_BYTES {
            return Err(SkipReason::FrontmatterTooLarge);
        }
    }
    Err(SkipReason::MissingClosing)
}

/// One linear pass over the frontmatter that refuses the shapes whose parse is superlinear (deep flow
/// nesting, alias expansion) or needlessly long, so the YAML parser only ever sees bounded input.
/// Quoted text is skipped, so brackets and asterisks inside strings do not count.
fn check_shape(block: &str) -> Result<(), SkipReason> {
    let lines = block.lines().count();
    if lines > MAX_FRONTMATTER_LINES {
        return Err(SkipReason::TooComplex(format!("has {lines} lines, more than {MAX_FRONTMATTER_LINES}")));
    }
    let (mut depth, mut deepest, mut aliases) = (0usize, 0usize, 0usize);
    let mut quote: Option<char> = None;
    // The character before the current one, ignoring spaces: an alias starts a value.
    let mut before = '\n';
    let mut chars = block.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some('"') if c == '\\' => {
                chars.next();
                continue;
            }
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' if matches!(before, '\n' | ':' | '[' | '{' | ',' | '-' | '?') => quote = Some(c),
                '[' | '{' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                '*' if matches!(before, '\n' | ':' | '[' | '{' | ',' | '-' | '?')
                    && chars.peek().is_some_and(|next| next.is_alphanumeric() || *next == '_') =>
                {
                    aliases += 1
                }
                '#' if before == '\n' || before == ' ' => {
                    // A comment runs to the end of the line.
                    for next in chars.by_ref() {
                        if next == '\n' {
                            break;
                        }
                    }
                    before = '\n';
                    continue;
                }
                _ => {}
            },
        }
        if quote.is_none() && c == '\n' {
            before = '\n';
        } else if c != ' ' && c != '\t' {
            before = c;
        } else if quote.is_none() && before == '\n' {
            // Indentation keeps "start of line".
        } else if c == ' ' && before != '\n' {
            before = if matches!(before, ':' | '[' | '{' | ',' | '-' | '?') { before } else { ' ' };
        }
    }
    if deepest > MAX_FRONTMATTER_FLOW_DEPTH {
        return Err(SkipReason::TooComplex(format!(
            "nests `[`/`{{` collections {deepest} deep, more than {MAX_FRONTMATTER_FLOW_DEPTH}"
        )));
    }
    if aliases > MAX_FRONTMATTER_ALIASES {
        return Err(SkipReason::TooComplex(format!(
            "uses {aliases} YAML aliases (`*name`), more than {MAX_FRONTMATTER_ALIASES}"
        )));
    }
    Ok(())
}

pub(crate) fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => text[..cut].to_owned(),
        None => text.to_owned(),
    }
}

pub(crate) fn scalar_text(value: &serde_norway::Value) -> Option<String> {
    match value {
        serde_norway::Value::String(text) => Some(text.trim().to_owned()),
        serde_norway::Value::Number(number) => Some(number.to_string()),
        serde_norway::Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// The spec's rule for `name`: 1–64 lowercase letters, digits and hyphens, not starting or
/// ending with a hyphen, no two hyphens in a row.
pub fn spec_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("is empty");
    }
    if name.chars().count() > SPEC_NAME_MAX {
        return Some("is longer than 64 characters");
    }
    if !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        return Some("may only hold lowercase letters, digits and hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Some("must not start or end with a hyphen");
    }
    if name.contains("--") {
        return Some("must not hold two hyphens in a row");
    }
    None
}

/// Claude Code's tool names, as skills copied from public repositories declare them, mapped to ours.
pub(crate) fn our_tool_name(declared: &str) -> Option<&'static str> {
    let ours = FILE_TOOL_NAMES.iter().chain(ESSENTIAL_TOOLS.iter()).find(|name| **name == declared);
    if let Some(name) = ours {
        return Some(name);
    }
    match declared {
        "Read" => Some("read_file"),
        "Write" => Some("write_file"),
        "Edit" | "MultiEdit" => Some("edit_file"),
        "Glob" => Some("glob"),
        "Grep" => Some("grep"),
        "LS" => Some("ls"),
        "TodoWrite" => Some("todowrite"),
        "TodoRead" => Some("todoread"),
        // Claude Code calls its subagent tool `Task` (later `Agent`).
        "Task" | "Agent" | "task" => Some("task"),
        // `Bash(prefix:*)` keeps its pattern in `declared_tools`; a forced skill's commands obey it.
        "Bash" | "execute" => Some("execute"),
        bash if bash.starts_with("Bash(") && bash.ends_with(')') => Some("execute"),
        _ => None,
    }
}

/// Splits a tool declaration on whitespace and commas outside parentheses, so `Bash(git add:*)`
/// stays one name.
fn split_tool_text(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            c if depth == 0 && (c.is_whitespace() || c == ',') => {
                if !current.is_empty() {
                    names.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        names.push(current);
    }
    names
}

pub(crate) fn declared_tool_names(value: &serde_norway::Value) -> Result<Vec<String>, &'static str> {
    let names = match value {
        serde_norway::Value::Null => Vec::new(),
        serde_norway::Value::String(text) => split_tool_text(text),
        serde_norway::Value::Sequence(items) => {
            let mut names = Vec::new();
            for item in items {
                match scalar_text(item) {
                    Some(text) => names.extend(split_tool_text(&text)),
                    None => return Err("holds an entry that is not a tool name"),
                }
            }
            names
        }
        _ => return Err("must be a list or a space-separated string"),
    };
    Ok(names.into_iter().take(MAX_DECLARED_TOOLS).map(|name| truncate_chars(&name, KEPT_TOOL_CHARS)).collect())
}

/// Our tool names for `declared` (Claude Code's names mapped, each once, in declared order), and
/// the declared names this runtime has no tool for.
pub(crate) fn our_tools(declared: &[String]) -> (Vec<String>, Vec<&str>) {
    let mut ours: Vec<String> = Vec::new();
    let mut unknown: Vec<&str> = Vec::new();
    for name in declared {
        match our_tool_name(name) {
            Some(tool) if !ours.iter().any(|t| t == tool) => ours.push(tool.to_owned()),
            Some(_) => {}
            None => unknown.push(name),
        }
    }
    (ours, unknown)
}

/// The frontmatter of `text` as a YAML mapping, and the body after it: bounded and checked for
/// costly shapes before the parser sees it.
pub(crate) fn frontmatter_mapping(text: &str) -> Result<(serde_norway::Value, &str), SkipReason> {
    let (block, body) = frontmatter_block(text)?;
    check_shape(block)?;
    let value: serde_norway::Value = serde_norway::from_str(block).map_err(|err| SkipReason::Yaml(err.to_string()))?;
    if !matches!(value, serde_norway::Value::Mapping(_)) {
        return Err(SkipReason::NotAMapping);
    }
    Ok((value, body))
}

/// Parses a SKILL.md found in the folder `folder`. Skips it only when it cannot be used (no
/// frontmatter, YAML that does not parse, no description); repairs and reports everything else.
pub fn parse_skill_md(text: &str, folder: &str) -> Result<Parsed, SkipReason> {
    let (value, _) = frontmatter_mapping(text)?;
    let raw: RawFrontmatter = serde_norway::from_value(value).map_err(|err| SkipReason::Yaml(err.to_string()))?;
    let mut warnings = Vec::new();

    let description = match &raw.description {
        None | Some(serde_norway::Value::Null) => return Err(SkipReason::MissingDescription),
        Some(value) => scalar_text(value).ok_or(SkipReason::DescriptionNotText)?,
    };
    if description.is_empty() {
        return Err(SkipReason::MissingDescription);
    }
    let description_chars = description.chars().count();
    if description_chars > SPEC_DESCRIPTION_MAX {
        warnings.push(format!(
            "`description` has {description_chars} characters, more than the specification's {SPEC_DESCRIPTION_MAX}; \
             the listing shows the first {SPEC_DESCRIPTION_MAX}"
        ));
    }

    let name = match raw.name.as_ref().and_then(scalar_text).filter(|name| !name.is_empty()) {
        Some(name) => {
            if let Some(problem) = spec_name_problem(&name) {
                warnings.push(format!("`name` {name:?} {problem} (Agent Skills specification)"));
            }
            if name != folder {
                warnings.push(format!("`name` {name:?} differs from its folder {folder:?}"));
            }
            truncate_chars(&name, KEPT_NAME_CHARS)
        }
        None => {
            warnings.push(format!("`name` is missing or not text; using the folder name {folder:?}"));
            folder.to_owned()
        }
    };

    let category = match &raw.category {
        None | Some(serde_norway::Value::Null) => None,
        Some(value) => match scalar_text(value).filter(|c| !c.is_empty()) {
            Some(category) => Some(truncate_chars(&category, KEPT_CATEGORY_CHARS)),
            None => {
                warnings.push("`category` is not text; ignored".to_owned());
                None
            }
        },
    };

    // `allowed-tools` is the specification's field; `tools` is this runtime's older spelling.
    let declared = match raw.allowed_tools.as_ref().or(raw.tools.as_ref()) {
        None => None,
        Some(value) => match declared_tool_names(value) {
            Ok(names) => Some(names),
            Err(problem) => {
                warnings.push(format!("`allowed-tools` {problem}; ignored"));
                None
            }
        },
    };
    let tools = declared.as_ref().map(|declared| {
        let (ours, unknown) = our_tools(declared);
        if !unknown.is_empty() {
            warnings.push(format!("`allowed-tools` names tools this runtime does not have: {}", unknown.join(", ")));
        }
        ours
    });

    Ok(Parsed { frontmatter: Frontmatter { name, description, category, tools, declared_tools: declared }, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_well_formed_skill_has_no_warnings() {
        let parsed = parse_skill_md(
            "---\nname: compraventa\ndescription: Escrituras de compraventa\ncategory: escrituras\nallowed-tools: read_file ls\n---\n# Body\n",
            "compraventa",
        )
        .unwrap();
        assert_eq!(parsed.warnings, Vec::<String>::new());
        assert_eq!(parsed.frontmatter.tools, Some(vec!["read_file".to_owned(), "ls".to_owned()]));
        assert_eq!(parsed.frontmatter.category.as_deref(), Some("escrituras"));
    }

    #[test]
    fn skips_only_what_cannot_be_used() {
        assert_eq!(parse_skill_md("# no frontmatter", "a"), Err(SkipReason::MissingOpening));
        assert_eq!(parse_skill_md("---\nname: a\n", "a"), Err(SkipReason::MissingClosing));
        assert!(matches!(parse_skill_md("---\nname: [a\n---\n", "a"), Err(SkipReason::Yaml(_))));
        assert_eq!(parse_skill_md("---\nname: a\n---\n", "a"), Err(SkipReason::MissingDescription));
        assert_eq!(parse_skill_md("---\nname: a\ndescription: ''\n---\n", "a"), Err(SkipReason::MissingDescription));
        assert_eq!(parse_skill_md("---\n- a\n---\n", "a"), Err(SkipReason::NotAMapping));
        assert_eq!(parse_skill_md("---\ndescription: [1]\n---\n", "a"), Err(SkipReason::DescriptionNotText));
        let huge = format!("---\ndescription: x\n{}---\n", "k: v\n".repeat(MAX_FRONTMATTER_BYTES / 4));
        assert_eq!(parse_skill_md(&huge, "a"), Err(SkipReason::FrontmatterTooLarge));
    }

    #[test]
    fn repairs_and_warns() {
        let long = "d".repeat(1068);
        let parsed =
            parse_skill_md(&format!("---\nname: Claude_API\ndescription: {long}\n---\n"), "claude-api").unwrap();
        assert_eq!(parsed.frontmatter.name, "Claude_API");
        assert_eq!(parsed.frontmatter.description.len(), 1068, "kept whole; the listing truncates");
        let warnings = parsed.warnings.join("\n");
        assert!(warnings.contains("1068 characters"), "{warnings}");
        assert!(warnings.contains("lowercase letters"), "{warnings}");
        assert!(warnings.contains("differs from its folder"), "{warnings}");

        let parsed = parse_skill_md("---\ndescription: no name\n---\n", "pdf").unwrap();
        assert_eq!(parsed.frontmatter.name, "pdf");
        assert!(parsed.warnings[0].contains("missing"), "{:?}", parsed.warnings);
    }

    #[test]
    fn claude_code_tool_names_map_to_ours_and_the_rest_is_reported() {
        let parsed = parse_skill_md(
            "---\nname: a\ndescription: b\nallowed-tools: Read, Grep Bash(git add:*) WebFetch MultiEdit Edit\n---\n",
            "a",
        )
        .unwrap();
        assert_eq!(
            parsed.frontmatter.tools,
            Some(vec!["read_file".to_owned(), "grep".to_owned(), "execute".to_owned(), "edit_file".to_owned()])
        );
        assert_eq!(
            parsed.frontmatter.declared_tools.as_deref().unwrap(),
            ["Read", "Grep", "Bash(git add:*)", "WebFetch", "MultiEdit", "Edit"]
        );
        assert!(parsed.warnings[0].ends_with("have: WebFetch"), "{:?}", parsed.warnings);
        let parsed = parse_skill_md("---\nname: a\ndescription: b\ntools: [read_file, ls]\n---\n", "a").unwrap();
        assert_eq!(parsed.frontmatter.tools, Some(vec!["read_file".to_owned(), "ls".to_owned()]));
    }

    #[test]
    fn spec_names() {
        for good in ["pdf", "claude-api", "a1-b2"] {
            assert_eq!(spec_name_problem(good), None, "{good}");
        }
        for bad in ["", "PDF", "-a", "a-", "a--b", "a_b", &"a".repeat(65)] {
            assert!(spec_name_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn shapes_with_superlinear_parses_are_refused_before_the_parser_and_ordinary_text_is_not() {
        let skill = |frontmatter: &str| parse_skill_md(&format!("---\ndescription: d\n{frontmatter}---\n"), "a");
        let too_complex = |result: Result<Parsed, SkipReason>| matches!(result, Err(SkipReason::TooComplex(_)));
        assert!(too_complex(skill(&format!("x: {}{}\n", "[".repeat(17), "]".repeat(17)))));
        assert!(too_complex(skill(&format!("x: {}1{}\n", "{a: ".repeat(17), "}".repeat(17)))));
        let laughs = format!("a: &a [x, x]\nb: &b [{}]\nc: [{}]\n", "*a, ".repeat(5), "*b, ".repeat(5));
        assert!(too_complex(skill(&laughs)));
        assert!(too_complex(skill(&"k: v\n".repeat(MAX_FRONTMATTER_LINES + 1))));
        // Asterisks, brackets and quotes in ordinary text are not structure.
        let ordinary = "metadata:\n  note: \"use [[[[[[[[[[[[[[[[[[x]]]]]]]]]]]]]]]]]] and *bold*\"\n  \
                        other: Matches *.md files, **bold** text and a [link](http://x) # a comment *a *b *c *d *e *f *g *h *i\n\
                        tools: [Read, Grep]\n";
        assert!(skill(ordinary).is_ok(), "{:?}", skill(ordinary));
        // A few aliases are fine.
        assert!(skill("a: &a x\nb: *a\n").is_ok());
    }
}
