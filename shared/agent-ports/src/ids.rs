//! Validated identifiers: every id that ends up in a storage key passes through here first.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// An identifier that failed validation; the message is safe to show a client.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid {kind}: {reason}")]
pub struct InvalidId {
    pub kind: &'static str,
    pub reason: &'static str,
}

/// Accepts 1..=max characters from a conservative alphabet, so an id can never
/// carry a key separator (`/`, `#`), a traversal (`..`) or a control character.
fn check(value: &str, kind: &'static str, max: usize, extra: &[char]) -> Result<(), InvalidId> {
    if value.is_empty() {
        return Err(InvalidId { kind, reason: "must not be empty" });
    }
    if value.len() > max {
        return Err(InvalidId { kind, reason: "is too long" });
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_' || extra.contains(&c);
    if !value.chars().all(allowed) {
        return Err(InvalidId { kind, reason: "contains characters that are not allowed" });
    }
    if value.starts_with('.') {
        return Err(InvalidId { kind, reason: "must not start with a dot" });
    }
    Ok(())
}

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident, $kind:literal, $max:literal, $extra:expr) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn parse(value: impl Into<String>) -> Result<Self, InvalidId> {
                let value = value.into();
                check(&value, $kind, $max, $extra)?;
                Ok(Self(value))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = InvalidId;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                Self::parse(value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// The tenant: the JWT `sub` claim, or the trusted `user_id` of a queue record.
    UserId, "user id", 128, &['.', '@', ':', '+', '=', '|']
);
id_type!(
    /// A conversation of one user.
    SessionId, "session id", 128, &['.']
);
id_type!(
    /// A ticket whose files appear read-only under `/ticket`.
    TicketId, "ticket id", 128, &['.']
);

/// A tenant agent's name, which is also its file's name (`{user}/agents/{name}.md`) and the
/// subagent type the model asks for: 1 to 64 lowercase ASCII letters, digits and hyphens, the first
/// a letter or a digit (Claude Code's subagent names).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AgentName(String);

impl AgentName {
    /// Most characters in an agent's name.
    pub const MAX_CHARS: usize = 64;

    pub fn parse(value: impl Into<String>) -> Result<Self, InvalidId> {
        let value = value.into();
        let kind = "agent name";
        if value.is_empty() {
            return Err(InvalidId { kind, reason: "must not be empty" });
        }
        if value.len() > Self::MAX_CHARS {
            return Err(InvalidId { kind, reason: "is longer than 64 characters" });
        }
        if !value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            return Err(InvalidId { kind, reason: "may only hold lowercase letters, digits and hyphens" });
        }
        if value.starts_with('-') {
            return Err(InvalidId { kind, reason: "must start with a letter or a digit" });
        }
        Ok(Self(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for AgentName {
    type Error = InvalidId;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(value)
    }
}

impl From<AgentName> for String {
    fn from(value: AgentName) -> String {
        value.0
    }
}

impl fmt::Display for AgentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A skill's address: `category/name` (the layout `skills/{category}/{name}/SKILL.md`), a plain
/// `name` (the Agent Skills layout `skills/{name}/SKILL.md`), or a Claude Code plugin's skill,
/// `{plugin}/skills/{name}` or `{group}/{plugin}/skills/{name}` (a plugin marketplace's layout),
/// each segment validated. The address is also the skill's folder under the tenant's `skills/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SkillPath {
    /// The folders above the skill's own, joined by `/`: `category`, `plugin/skills` or
    /// `group/plugin/skills`.
    folder: Option<String>,
    /// The category shown for the skill: the category folder, or the plugin's folder.
    category: Option<String>,
    name: String,
}

/// The folder a Claude Code plugin keeps its skills in.
const PLUGIN_SKILLS: &str = "skills";

impl SkillPath {
    /// Parses `category/name`, a plain `name`, `plugin/skills/name` or `group/plugin/skills/name`.
    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        let value = value.trim().trim_matches('/');
        let segments: Vec<&str> = value.split('/').collect();
        match segments.as_slice() {
            [name] => Self::plain(name),
            [category, name] => Self::new(category, name),
            [plugin, PLUGIN_SKILLS, name] => Self::in_plugin(None, plugin, name),
            [group, plugin, PLUGIN_SKILLS, name] => Self::in_plugin(Some(group), plugin, name),
            _ => Err(InvalidId {
                kind: "skill path",
                reason: "is not name, category/name, plugin/skills/name or group/plugin/skills/name",
            }),
        }
    }

    pub fn new(category: &str, name: &str) -> Result<Self, InvalidId> {
        check(category, "skill category", 96, &['.'])?;
        check(name, "skill name", 96, &['.'])?;
        Ok(Self { folder: Some(category.to_owned()), category: Some(category.to_owned()), name: name.to_owned() })
    }

    /// A skill with no category folder: `skills/{name}/SKILL.md`.
    pub fn plain(name: &str) -> Result<Self, InvalidId> {
        check(name, "skill name", 96, &['.'])?;
        Ok(Self { folder: None, category: None, name: name.to_owned() })
    }

    /// A plugin's skill, `{group}/{plugin}/skills/{name}/SKILL.md` (the group is optional), as a
    /// repository laid out as a Claude Code plugin marketplace holds it; its category is the plugin.
    pub fn in_plugin(group: Option<&str>, plugin: &str, name: &str) -> Result<Self, InvalidId> {
        if let Some(group) = group {
            check(group, "plugin group", 96, &['.'])?;
        }
        check(plugin, "plugin", 96, &['.'])?;
        check(name, "skill name", 96, &['.'])?;
        let folder = match group {
            Some(group) => format!("{group}/{plugin}/{PLUGIN_SKILLS}"),
            None => format!("{plugin}/{PLUGIN_SKILLS}"),
        };
        Ok(Self { folder: Some(folder), category: Some(plugin.to_owned()), name: name.to_owned() })
    }

    /// The category the skill is shown under (its category folder or its plugin), `None` for a
    /// plain skill.
    pub fn category(&self) -> Option<&str> {
        self.category.as_deref()
    }

    /// The first folder of the skill's address (its category, plugin or plugin group), `None` for
    /// a plain skill: a skill whose first folder is a plain skill's folder lies inside that skill.
    pub fn top_folder(&self) -> Option<&str> {
        self.folder.as_deref().map(|folder| folder.split('/').next().unwrap_or(folder))
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl TryFrom<String> for SkillPath {
    type Error = InvalidId;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<SkillPath> for String {
    fn from(value: SkillPath) -> String {
        value.to_string()
    }
}

impl fmt::Display for SkillPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.folder {
            Some(folder) => write!(f, "{folder}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// Longest path of a memory file, in bytes, after `/memories/`.
pub const MAX_MEMORY_PATH_BYTES: usize = 256;

/// A file of the user's long-term memory (`/memories` in the file tools), by its path relative to
/// it: `preferencias.md`, `clientes/garcia.md`. It becomes the key `{user}/memories/{path}`, so it
/// is held to the form the file tools normalise paths to: segments that are neither empty nor `.`
/// or `..`, no backslash, no control character, no percent escape (`%2e`), no trailing
/// whitespace, at most [`MAX_MEMORY_PATH_BYTES`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MemoryPath(String);

impl MemoryPath {
    pub fn parse(value: impl Into<String>) -> Result<Self, InvalidId> {
        let value = value.into();
        let invalid = |reason| Err(InvalidId { kind: "memory path", reason });
        if value.is_empty() {
            return invalid("must not be empty");
        }
        if value.len() > MAX_MEMORY_PATH_BYTES {
            return invalid("is longer than 256 bytes");
        }
        if value.chars().any(|c| c.is_control() || c == '\\') {
            return invalid("contains a control character or a backslash");
        }
        if value.ends_with(char::is_whitespace) {
            return invalid("must not end with whitespace");
        }
        let escaped =
            value.as_bytes().windows(3).any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit());
        if escaped {
            return invalid("contains a percent escape");
        }
        if value.split('/').any(|segment| matches!(segment, "" | "." | "..")) {
            return invalid("has an empty, `.` or `..` segment");
        }
        Ok(Self(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for MemoryPath {
    type Error = InvalidId;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(value)
    }
}

impl From<MemoryPath> for String {
    fn from(value: MemoryPath) -> String {
        value.0
    }
}

impl fmt::Display for MemoryPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_separators_and_traversal() {
        for bad in ["", "a/b", "a#b", "..", ".hidden", "a b", "a%2fb", "é"] {
            assert!(UserId::parse(bad).is_err(), "{bad:?} should be rejected");
            assert!(SessionId::parse(bad).is_err(), "{bad:?} should be rejected");
        }
        assert_eq!(UserId::parse("auth0|123").unwrap().as_str(), "auth0|123");
        assert_eq!(UserId::parse("user-1@example.com").unwrap().as_str(), "user-1@example.com");
        assert!(SessionId::parse("x".repeat(129)).is_err());
    }

    #[test]
    fn skill_paths_have_two_clean_segments() {
        let skill = SkillPath::parse("escrituras/compraventa").unwrap();
        assert_eq!((skill.category(), skill.name()), (Some("escrituras"), "compraventa"));
        assert_eq!(skill.to_string(), "escrituras/compraventa");
        let plain = SkillPath::parse("pdf").unwrap();
        assert_eq!((plain.category(), plain.name(), plain.to_string().as_str()), (None, "pdf", "pdf"));
        for bad in ["a/b/c", "../b", "a/..", "a//b", "", "..", "/", "a/skills/..", ".p/skills/n", "a/b/c/skills/n"] {
            assert!(SkillPath::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn agent_names_are_claude_codes_lowercase_names() {
        for good in ["reviewer", "code-reviewer", "a", "9lives", "a-", &"a".repeat(64)] {
            assert_eq!(AgentName::parse(good).unwrap().as_str(), good);
        }
        for bad in ["", "-a", "Reviewer", "code_reviewer", "a.md", "a/b", "..", "é", &"a".repeat(65)] {
            assert!(AgentName::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn plugin_skills_keep_their_folder_and_show_their_plugin() {
        let skill = SkillPath::parse("engineering-team/skills/a11y-audit").unwrap();
        assert_eq!((skill.category(), skill.name()), (Some("engineering-team"), "a11y-audit"));
        assert_eq!(
            (skill.top_folder(), skill.to_string().as_str()),
            (Some("engineering-team"), "engineering-team/skills/a11y-audit")
        );
        let grouped = SkillPath::parse("engineering-team/playwright-pro/skills/coverage").unwrap();
        assert_eq!((grouped.category(), grouped.top_folder()), (Some("playwright-pro"), Some("engineering-team")));
        assert_eq!(grouped.to_string(), "engineering-team/playwright-pro/skills/coverage");
        assert_eq!(SkillPath::parse(&grouped.to_string()).unwrap(), grouped);
    }

    #[test]
    fn memory_paths_are_clean_relative_paths() {
        for good in ["prefs.md", "clientes/garcía ñ.md", " a.md", "a...b", ".notas/x", "50%.md"] {
            assert_eq!(MemoryPath::parse(good).unwrap().as_str(), good);
        }
        let long = "a".repeat(MAX_MEMORY_PATH_BYTES + 1);
        for bad in
            ["", "/a", "a/", "a//b", "./a", "a/../b", "..", "a%2fb", "%2E%2e", "a\\b", "a\0b", "a\nb", "a ", &long]
        {
            assert!(MemoryPath::parse(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(MemoryPath::parse("a".repeat(MAX_MEMORY_PATH_BYTES)).is_ok());
    }
}
