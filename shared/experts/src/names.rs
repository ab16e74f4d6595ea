//! Expert tools as the model sees them: `{expert}__{tool}`, made to fit provider name rules, and mapped back.
//!
//! Providers accept tool names of at most 64 characters from `[A-Za-z0-9_-]` (Gemini also wants a
//! letter or `_` first), while MCP tool names may be longer or use other characters. Names are
//! sanitized, shortened with a hash when needed, and de-duplicated; the reverse map is the only way
//! back, so an expert or tool name that itself contains `__` is never mis-split.

use std::collections::{BTreeMap, BTreeSet};

use agent_ports::ToolSpec;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::client::McpTool;
use crate::config::Expert;

/// Between the expert's name and the tool's.
pub const TOOL_SEPARATOR: &str = "__";

/// The longest tool name every supported provider accepts.
pub const MAX_TOOL_NAME: usize = 64;

/// Which expert tool a name offered to the model stands for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExpertTool {
    pub expert: String,
    pub tool: String,
}

/// The names handed out for one turn and the way back from each.
#[derive(Debug, Clone, Default)]
pub struct ToolNamespace {
    reserved: BTreeSet<String>,
    by_name: BTreeMap<String, ExpertTool>,
    by_tool: BTreeMap<ExpertTool, String>,
}

impl ToolNamespace {
    pub fn new() -> Self {
        Self::default()
    }

    /// A namespace that never hands out `reserved` names, such as the agent's built-in tools.
    pub fn with_reserved<S: Into<String>>(reserved: impl IntoIterator<Item = S>) -> Self {
        Self { reserved: reserved.into_iter().map(Into::into).collect(), ..Self::default() }
    }

    /// The spec to offer the model for `tool` of `expert`; offering the same tool again gives the same name.
    pub fn offer(&mut self, expert: &Expert, tool: &McpTool) -> ToolSpec {
        let key = ExpertTool { expert: expert.name.clone(), tool: tool.name.clone() };
        let name = match self.by_tool.get(&key) {
            Some(name) => name.clone(),
            None => {
                let name = self.unique_name(&key);
                self.by_name.insert(name.clone(), key.clone());
                self.by_tool.insert(key, name.clone());
                name
            }
        };
        ToolSpec { name, description: describe(expert, tool), parameters: parameters(&tool.input_schema) }
    }

    /// The expert tool behind a name the model called, if it is one of ours.
    pub fn resolve(&self, name: &str) -> Option<&ExpertTool> {
        self.by_name.get(name)
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    fn unique_name(&self, key: &ExpertTool) -> String {
        let taken = |name: &str| self.by_name.contains_key(name) || self.reserved.contains(name);
        let readable = sanitize(&format!("{}{TOOL_SEPARATOR}{}", key.expert, key.tool));
        if readable.len() <= MAX_TOOL_NAME && !taken(&readable) {
            return readable;
        }
        // Too long, or two originals sanitized alike: keep a readable head and add a hash of the original.
        let digest = hex::encode(Sha256::digest(format!("{}\0{}", key.expert, key.tool)));
        for attempt in 0u32.. {
            let suffix = match attempt {
                0 => format!("_{}", &digest[..8]),
                n => format!("_{}{n}", &digest[..8]),
            };
            let head: String = readable.chars().take(MAX_TOOL_NAME - suffix.len()).collect();
            let candidate = format!("{head}{suffix}");
            if !taken(&candidate) {
                return candidate;
            }
        }
        unreachable!("the attempt counter is unbounded")
    }
}

/// Keeps `[A-Za-z0-9_-]`, maps everything else to `_`, and makes sure the name starts with a letter or `_`.
fn sanitize(raw: &str) -> String {
    let mut name: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        name.insert(0, '_');
    }
    name
}

/// The tool's description prefixed with the expert it belongs to, so the model can tell experts apart.
fn describe(expert: &Expert, tool: &McpTool) -> String {
    let about = tool.description.as_deref().map(str::trim).filter(|d| !d.is_empty()).unwrap_or("(no description)");
    match &expert.description {
        Some(description) => format!("[Expert {}: {description}] {about}", expert.name),
        None => format!("[Expert {}] {about}", expert.name),
    }
}

/// MCP requires object schemas; anything else is replaced so providers do not reject the whole request.
fn parameters(schema: &Value) -> Value {
    match schema {
        Value::Object(map) if map.get("type").and_then(Value::as_str) == Some("object") => schema.clone(),
        _ => json!({"type": "object", "properties": {}}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> McpTool {
        McpTool { name: name.into(), description: Some("Adds.".into()), input_schema: json!({"type": "object"}) }
    }

    fn valid(name: &str) -> bool {
        name.len() <= MAX_TOOL_NAME
            && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn namespaces_and_maps_back() {
        let expert = Expert::new("calc", "http://127.0.0.1:1/mcp").unwrap().with_description("Arithmetic");
        let mut names = ToolNamespace::new();
        let spec = names.offer(&expert, &tool("add"));
        assert_eq!(spec.name, "calc__add");
        assert_eq!(spec.description, "[Expert calc: Arithmetic] Adds.");
        assert_eq!(names.resolve("calc__add"), Some(&ExpertTool { expert: "calc".into(), tool: "add".into() }));
        assert_eq!(names.offer(&expert, &tool("add")).name, "calc__add");
        assert_eq!(names.len(), 1);
        assert!(names.resolve("calc__sub").is_none());
    }

    #[test]
    fn sanitizes_shortens_and_deduplicates() {
        let expert = Expert::new("1st-expert", "http://127.0.0.1:1/mcp").unwrap();
        let mut names = ToolNamespace::with_reserved(["_1st-expert__a_b"]);
        let dotted = names.offer(&expert, &tool("a.b")).name;
        let slashed = names.offer(&expert, &tool("a/b")).name;
        let long = names.offer(&expert, &tool(&"x".repeat(100))).name;
        for name in [&dotted, &slashed, &long] {
            assert!(valid(name), "{name}");
        }
        assert_ne!(dotted, "_1st-expert__a_b", "reserved names are never handed out");
        assert_ne!(dotted, slashed);
        assert_eq!(names.resolve(&slashed).unwrap().tool, "a/b");
        assert_eq!(names.resolve(&long).unwrap().tool, "x".repeat(100));
        assert_eq!(names.offer(&expert, &tool(&"x".repeat(100))).name, long);
    }

    #[test]
    fn replaces_non_object_schemas() {
        assert_eq!(parameters(&json!(true)), json!({"type": "object", "properties": {}}));
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        assert_eq!(parameters(&schema), schema);
    }
}
