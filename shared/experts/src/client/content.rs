//! Tool and prompt content flattened to text for the model.

use rmcp::model::ContentBlock;
use serde_json::Value;

/// Text of one content block. Other kinds are named rather than dropped, so the model knows
/// something was there; embedded text resources are inlined.
pub(super) fn content_text(block: &ContentBlock) -> String {
    // Read through JSON: the wire shape is the MCP spec's, steadier than the SDK's Rust types.
    content_value_text(&serde_json::to_value(block).unwrap_or(Value::Null))
}

/// [`content_text`] of a block as JSON, as a task's inlined result carries it.
pub(super) fn content_value_text(value: &Value) -> String {
    let field = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    match value.get("type").and_then(Value::as_str) {
        Some("text") => field(value, "text").unwrap_or_default(),
        Some("resource") => {
            let resource = value.get("resource").cloned().unwrap_or(Value::Null);
            match field(&resource, "text") {
                Some(text) => text,
                None => format!("[binary resource omitted: {}]", field(&resource, "uri").unwrap_or_default()),
            }
        }
        Some("resource_link") => format!("[resource link: {}]", field(value, "uri").unwrap_or_default()),
        Some(kind) => {
            format!("[{kind} content omitted: {}]", field(value, "mimeType").unwrap_or_else(|| "unknown".into()))
        }
        None => "[unreadable content omitted]".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattens_content_blocks() {
        let block = |json: Value| serde_json::from_value::<ContentBlock>(json).unwrap();
        assert_eq!(content_text(&block(serde_json::json!({"type": "text", "text": "hi"}))), "hi");
        assert_eq!(
            content_text(&block(serde_json::json!({"type": "image", "data": "AA==", "mimeType": "image/png"}))),
            "[image content omitted: image/png]"
        );
        assert_eq!(
            content_text(&block(serde_json::json!({"type": "resource",
                "resource": {"uri": "file:///a", "text": "inline"}}))),
            "inline"
        );
        assert_eq!(
            content_text(&block(serde_json::json!({"type": "resource_link", "uri": "file:///b", "name": "b"}))),
            "[resource link: file:///b]"
        );
    }
}
