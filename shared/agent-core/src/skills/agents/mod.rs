//! The tenant's agents: Claude Code subagent files, `{user}/agents/{name}.md`, each a YAML
//! frontmatter (`name`, `description`, `tools`, `model`) and a body that is the subagent's system
//! prompt. Read leniently as SKILL.md files are ([`super::frontmatter`]): a file is skipped only when
//! it cannot be used, with its reason, and what is repaired becomes a warning.
//!
//! An agent is its file's name: the stem is the subagent type the model asks for and the key its
//! file is read from, so it must be a valid [`AgentName`]; a frontmatter `name` that differs is
//! reported and the stem is used. `tools` is Claude Code's (a comma-separated string or a list;
//! absent means every tool of the parent), mapped to ours as a skill's `allowed-tools` are.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::frontmatter::{
    declared_tool_names, frontmatter_mapping, our_tools, scalar_text, truncate_chars, SkipReason, SPEC_DESCRIPTION_MAX,
};
use crate::ids::AgentName;

/// Largest agent file read at all: its size is checked from the listing, before any download.
pub const MAX_AGENT_FILE_BYTES: u64 = 64 * 1024;
/// Most agents a tenant has: they travel in the catalog's head, which every turn reads. The files
/// past this bound (by name) are skipped without being read.
pub const MAX_AGENTS: usize = 50;
/// Most characters of a description the index keeps; the rest is cut, with a warning.
pub const MAX_AGENT_DESCRIPTION_CHARS: usize = SPEC_DESCRIPTION_MAX;
/// The built-in subagent type's name, which no tenant agent may take.
pub const BUILT_IN_AGENT: &str = "general-purpose";
/// Most characters of a `model`: ids and ARNs are shorter.
const MAX_MODEL_CHARS: usize = 128;
/// What the index keeps of a frontmatter `name` quoted in a warning.
const KEPT_NAME_CHARS: usize = 128;

/// One usable agent, as the catalog lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentEntry {
    /// The file's stem: the subagent type, and `{user}/agents/{name}.md`.
    pub name: String,
    /// When to hand the agent a task (at most [`MAX_AGENT_DESCRIPTION_CHARS`] characters).
    pub description: String,
    /// Our tool names the agent may use (Claude Code's names mapped); `None`: every tool its
    /// parent has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The frontmatter's `model` as written (`inherit`, `sonnet`, `opus`, `haiku` or a model id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub etag: String,
    pub size: u64,
    /// What was repaired on the way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A loaded agent: its entry and its body, the subagent's system prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDoc {
    pub entry: AgentEntry,
    pub prompt: String,
}

/// Why an agent file cannot be used at all.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AgentSkip {
    /// No frontmatter, YAML that does not parse, or a shape too costly to parse.
    #[error(transparent)]
    Frontmatter(#[from] SkipReason),
    #[error("agents live at agents/{{name}}.md: a folder inside agents/ holds none")]
    Nested,
    #[error("the file name {0:?} is not an agent name: {1}")]
    BadName(String, String),
    #[error("`{BUILT_IN_AGENT}` is the built-in subagent's name; name this agent otherwise")]
    Reserved,
    #[error("the file is {0} bytes, more than the {MAX_AGENT_FILE_BYTES} bytes an agent file may have")]
    TooLarge(u64),
    #[error("the file is not UTF-8 text")]
    NotText,
    #[error("the frontmatter has no `description`, so no one could know when to hand the agent a task")]
    MissingDescription,
    #[error("the frontmatter field `description` must be text")]
    DescriptionNotText,
    /// A `tools` that does not read would give the agent every tool, more than its author meant.
    #[error("the frontmatter field `tools` {0}")]
    BadTools(&'static str),
    #[error("more than {MAX_AGENTS} agents: only the first {MAX_AGENTS} by name are read")]
    TooMany,
}

/// Where a file under `{user}/agents/` sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentFile {
    /// `{name}.md`.
    Agent(AgentName),
    /// A `.md` file that cannot be an agent (in a folder, or a name that is not usable).
    Unusable(AgentSkip),
    /// Anything else (not Markdown, or hidden): not the index's business.
    Other,
}

/// Classifies `rel`, a key relative to `{user}/agents/`.
pub fn classify_agent(rel: &str) -> AgentFile {
    // Hidden files and folders (`.git/`, `.DS_Store`) are never an agent, as sync never uploads one.
    if rel.is_empty() || rel.split('/').any(|part| part.starts_with('.')) {
        return AgentFile::Other;
    }
    let Some(stem) = rel.strip_suffix(".md") else { return AgentFile::Other };
    if stem.contains('/') {
        return AgentFile::Unusable(AgentSkip::Nested);
    }
    if stem == BUILT_IN_AGENT {
        return AgentFile::Unusable(AgentSkip::Reserved);
    }
    match AgentName::parse(stem) {
        Ok(name) => AgentFile::Agent(name),
        Err(err) => {
            AgentFile::Unusable(AgentSkip::BadName(truncate_chars(stem, KEPT_NAME_CHARS), err.reason.to_owned()))
        }
    }
}

#[derive(Debug, Deserialize)]
struct RawAgent {
    name: Option<serde_norway::Value>,
    description: Option<serde_norway::Value>,
    tools: Option<serde_norway::Value>,
    model: Option<serde_norway::Value>,
}

/// Parses the agent file `name.md` (its bytes, read at `etag`). Skips it only when it cannot be
/// used (too large, not text, no frontmatter, no description, a `tools` that does not read);
/// repairs and reports everything else.
pub fn parse_agent_file(bytes: Vec<u8>, name: &AgentName, etag: String) -> Result<AgentDoc, AgentSkip> {
    let size = bytes.len() as u64;
    if size > MAX_AGENT_FILE_BYTES {
        return Err(AgentSkip::TooLarge(size));
    }
    let text = String::from_utf8(bytes).map_err(|_| AgentSkip::NotText)?;
    let (value, body) = frontmatter_mapping(&text)?;
    let raw: RawAgent = serde_norway::from_value(value).map_err(|err| SkipReason::Yaml(err.to_string()))?;
    let mut warnings = Vec::new();

    let description = match &raw.description {
        None | Some(serde_norway::Value::Null) => return Err(AgentSkip::MissingDescription),
        Some(value) => scalar_text(value).ok_or(AgentSkip::DescriptionNotText)?,
    };
    if description.is_empty() {
        return Err(AgentSkip::MissingDescription);
    }
    let chars = description.chars().count();
    let description = match chars > MAX_AGENT_DESCRIPTION_CHARS {
        true => {
            warnings.push(format!(
                "`description` has {chars} characters; the catalog keeps the first {MAX_AGENT_DESCRIPTION_CHARS}"
            ));
            truncate_chars(&description, MAX_AGENT_DESCRIPTION_CHARS)
        }
        false => description,
    };

    match raw.name.as_ref().and_then(scalar_text).filter(|declared| !declared.is_empty()) {
        Some(declared) if declared == name.as_str() => {}
        Some(declared) => warnings.push(format!(
            "`name` {:?} differs from the file's name; the agent is called {:?}",
            truncate_chars(&declared, KEPT_NAME_CHARS),
            name.as_str()
        )),
        None => warnings
            .push(format!("`name` is missing or not text; the agent is called {:?}, its file's name", name.as_str())),
    }

    let tools = match &raw.tools {
        None | Some(serde_norway::Value::Null) => None,
        Some(value) => {
            let declared = declared_tool_names(value).map_err(AgentSkip::BadTools)?;
            match declared.is_empty() {
                // Claude Code reads an empty `tools` as an absent one.
                true => None,
                false => Some(mapped_tools(&declared, &mut warnings)),
            }
        }
    };

    let model = match &raw.model {
        None | Some(serde_norway::Value::Null) => None,
        Some(value) => match scalar_text(value).filter(|model| !model.is_empty()) {
            Some(model) if usable_model(&model) => Some(model),
            Some(model) => {
                warnings.push(format!(
                    "`model` {:?} is not a model name or id; the parent's model is used",
                    truncate_chars(&model, MAX_MODEL_CHARS)
                ));
                None
            }
            None => {
                warnings.push("`model` is not text; the parent's model is used".to_owned());
                None
            }
        },
    };

    let prompt = body.trim().to_owned();
    if prompt.is_empty() {
        warnings.push("the body is empty: the agent has no system prompt of its own".to_owned());
    }
    let entry = AgentEntry { name: name.as_str().to_owned(), description, tools, model, etag, size, warnings };
    Ok(AgentDoc { entry, prompt })
}

/// Our names for the declared tools, with a warning for those this runtime does not have and for
/// a `Bash(...)` pattern, which a subagent's commands are not held to.
fn mapped_tools(declared: &[String], warnings: &mut Vec<String>) -> Vec<String> {
    let (ours, unknown) = our_tools(declared);
    if !unknown.is_empty() {
        warnings.push(format!("`tools` names tools this runtime does not have: {}", unknown.join(", ")));
    }
    let patterns: Vec<&str> =
        declared.iter().map(String::as_str).filter(|name| name.starts_with("Bash(") && name.ends_with(')')).collect();
    if !patterns.is_empty() {
        warnings.push(format!(
            "`tools` limits commands by pattern ({}); an agent's `execute` runs any command",
            patterns.join(", ")
        ));
    }
    ours
}

/// A model alias or id: `inherit`, `sonnet`, a provider's id, an inference profile's ARN.
fn usable_model(model: &str) -> bool {
    model.len() <= MAX_MODEL_CHARS
        && model.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '/' | '@' | '+'))
}

#[cfg(test)]
mod tests;
