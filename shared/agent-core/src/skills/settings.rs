//! The tenant's `settings.json` at the top of its skills folder, in Claude Code's settings format:
//! `permissions.ask` and `permissions.allow` are approval rules the tenant adds to the
//! deployment's. Read by the index like the base prompt, so a turn gets them from the head it reads
//! anyway; a rule that cannot be used is left out with the reason, the rest still apply.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::permissions::{ApprovalPolicy, ApprovalRule, MAX_APPROVAL_RULES};

/// The tenant's settings file, relative to `{user}/skills/`.
pub const SETTINGS_FILE: &str = "settings.json";
/// Largest `settings.json` read.
pub const MAX_SETTINGS_BYTES: u64 = 64 * 1024;

/// The tenant's `settings.json` as the index keeps it: the usable rules as written, and what was
/// left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingsEntry {
    pub etag: String,
    pub size: u64,
    /// `permissions.ask`: calls that wait for a person, besides those the deployment names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ask: Vec<String>,
    /// `permissions.allow`: exceptions to the tenant's own `ask` rules (never to the deployment's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Why the file, or a rule of it, is not used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl SettingsEntry {
    /// Reads `text`; whatever cannot be used is named in `problems`, and nothing of it applies.
    pub fn parse(etag: String, size: u64, text: &str) -> Self {
        let mut entry = Self { etag, size, ..Self::default() };
        let document: Value = match serde_json::from_str(text) {
            Ok(document) => document,
            Err(err) => {
                entry.problems.push(format!("it is not JSON: {err}"));
                return entry;
            }
        };
        let permissions = match document.get("permissions") {
            None => return entry,
            Some(Value::Object(permissions)) => permissions,
            Some(_) => {
                entry.problems.push("`permissions` is not an object".to_owned());
                return entry;
            }
        };
        entry.ask = rules(permissions.get("ask"), "ask", &mut entry.problems);
        entry.allow = rules(permissions.get("allow"), "allow", &mut entry.problems);
        if permissions.get("deny").is_some() {
            entry.problems.push(
                "`permissions.deny` is not applied: a skill's `allowed-tools` limits its tools, and `ask` makes a \
                 person decide"
                    .to_owned(),
            );
        }
        entry
    }

    /// The tenant's approval rules. They were checked when the entry was made; one that no longer
    /// parses (an index written by another build) is left out.
    pub fn policy(&self) -> ApprovalPolicy {
        let parsed = |rules: &[String]| rules.iter().filter_map(|rule| ApprovalRule::parse(rule).ok()).collect();
        ApprovalPolicy::from_rules(parsed(&self.ask), parsed(&self.allow))
    }
}

/// The usable rules of `permissions.{list}`, at most [`MAX_APPROVAL_RULES`].
fn rules(value: Option<&Value>, list: &str, problems: &mut Vec<String>) -> Vec<String> {
    let items = match value {
        None => return Vec::new(),
        Some(Value::Array(items)) => items,
        Some(_) => {
            problems.push(format!("`permissions.{list}` is not a list of rules"));
            return Vec::new();
        }
    };
    let mut usable = Vec::new();
    for item in items {
        let Some(rule) = item.as_str() else {
            problems.push(format!("`permissions.{list}` holds {item}, which is not a rule"));
            continue;
        };
        if usable.len() == MAX_APPROVAL_RULES {
            problems
                .push(format!("`permissions.{list}` has more than {MAX_APPROVAL_RULES} rules; the rest are left out"));
            break;
        }
        match ApprovalRule::parse(rule) {
            Ok(_) => usable.push(rule.trim().to_owned()),
            Err(reason) => problems.push(format!("`permissions.{list}`: {reason}")),
        }
    }
    usable
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;
    use serde_json::json;

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall { id: "c".into(), name: name.into(), arguments }
    }

    #[test]
    fn claude_code_permissions_become_the_tenants_rules_and_bad_ones_are_named() {
        let text = json!({
            "model": "ignored",
            "permissions": {
                "ask": ["Write", "Bash(git push:*)", "Edit(/workspace/**)", 7],
                "allow": ["Bash(git push origin main)"],
                "deny": ["WebFetch"],
            }
        })
        .to_string();
        let entry = SettingsEntry::parse("e".into(), text.len() as u64, &text);
        assert_eq!(entry.ask, ["Write", "Bash(git push:*)"]);
        assert_eq!(entry.allow, ["Bash(git push origin main)"]);
        assert_eq!(entry.problems.len(), 3, "{:?}", entry.problems);
        assert!(entry.problems[0].contains("only `Bash(...)`"), "{:?}", entry.problems);
        assert!(entry.problems[1].contains("holds 7"), "{:?}", entry.problems);
        assert!(entry.problems[2].contains("deny"), "{:?}", entry.problems);
        let policy = entry.policy();
        assert!(policy.requires(&call("write_file", json!({"file_path": "/workspace/a"}))));
        assert!(policy.requires(&call("execute", json!({"command": "git push --force"}))));
        assert!(!policy.requires(&call("execute", json!({"command": "git push origin main"}))));
        assert!(!policy.requires(&call("execute", json!({"command": "ls"}))));
    }

    #[test]
    fn a_file_that_is_not_settings_applies_nothing_and_says_why() {
        for (text, problem) in [("{", "not JSON"), (r#"{"permissions": []}"#, "not an object")] {
            let entry = SettingsEntry::parse("e".into(), 1, text);
            assert!(entry.policy().is_empty());
            assert!(entry.problems.iter().any(|p| p.contains(problem)), "{text}: {:?}", entry.problems);
        }
        let entry = SettingsEntry::parse("e".into(), 2, "{}");
        assert!(entry.policy().is_empty() && entry.problems.is_empty());
        let many = json!({"permissions": {"ask": vec!["execute"; MAX_APPROVAL_RULES + 1]}}).to_string();
        let entry = SettingsEntry::parse("e".into(), 3, &many);
        assert_eq!(entry.ask.len(), MAX_APPROVAL_RULES);
        assert!(entry.problems[0].contains("more than"), "{:?}", entry.problems);
    }
}
