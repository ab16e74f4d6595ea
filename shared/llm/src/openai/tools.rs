//! A request's tools as the Chat Completions API wants them, encoded once per tool list: a turn's
//! model calls share one list, so its schemas are written at the turn's first call only.

use std::sync::{Arc, Mutex, PoisonError};

use agent_ports::ToolSpec;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

/// A request's tools, encoded as the `tools` array.
#[derive(Clone)]
pub(super) struct EncodedTools(Arc<Box<RawValue>>);

impl Serialize for EncodedTools {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// The last tool list a request carried and its encoding. A turn's model calls share one list
/// (`ChatRequest::tools`), so its 12 or so schemas are encoded at the turn's first call only;
/// holding the list keeps its address from being reused by another.
#[derive(Default)]
pub(super) struct ToolsCache(Mutex<Option<(Arc<[ToolSpec]>, EncodedTools)>>);

impl ToolsCache {
    /// `tools` encoded, or `None` for an empty list (the field is then left out).
    pub(super) fn encoded(&self, tools: &Arc<[ToolSpec]>) -> Option<EncodedTools> {
        if tools.is_empty() {
            return None;
        }
        let mut last = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((list, encoded)) = last.as_ref() {
            if Arc::ptr_eq(list, tools) {
                return Some(encoded.clone());
            }
        }
        let wire: Vec<WireTool<'_>> = tools
            .iter()
            .map(|tool| WireTool {
                kind: "function",
                function: WireFunction {
                    name: &tool.name,
                    description: &tool.description,
                    parameters: &tool.parameters,
                },
            })
            .collect();
        // A `ToolSpec` always encodes (names, texts and a JSON value).
        let encoded = EncodedTools(Arc::new(serde_json::value::to_raw_value(&wire).ok()?));
        *last = Some((tools.clone(), encoded.clone()));
        Some(encoded)
    }
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: format!("the \"{name}\" tool"),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }
    }

    fn value(encoded: &EncodedTools) -> Value {
        serde_json::to_value(encoded).unwrap()
    }

    #[test]
    fn a_list_is_encoded_once_and_another_list_for_itself() {
        let cache = ToolsCache::default();
        let list: Arc<[ToolSpec]> = Arc::from(vec![tool("ls"), tool("read_file")]);
        let first = cache.encoded(&list).unwrap();
        assert_eq!(
            value(&first)[1],
            json!({"type": "function", "function": {"name": "read_file", "description": "the \"read_file\" tool",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}})
        );
        assert!(Arc::ptr_eq(&first.0, &cache.encoded(&list).unwrap().0), "the same list: the same encoding");
        // Another list, even with the same names, is encoded for itself.
        let other: Arc<[ToolSpec]> = Arc::from(vec![tool("ls")]);
        let second = cache.encoded(&other).unwrap();
        assert!(!Arc::ptr_eq(&first.0, &second.0));
        assert_eq!(value(&second).as_array().map(Vec::len), Some(1));
        assert!(cache.encoded(&Arc::from(Vec::new())).is_none(), "no tools: no `tools` field");
    }
}
