//! What the demo model says and writes, by name: the texts of `console/demo-model/texts.json`.

use std::sync::OnceLock;

use serde_json::Value;

/// The texts the demo says and writes, and the browser tests expect, by their names there.
pub(super) fn texts() -> &'static Value {
    static TEXTS: OnceLock<Value> = OnceLock::new();
    TEXTS.get_or_init(|| {
        serde_json::from_str(include_str!("../../../console/demo-model/texts.json")).expect("the demo's texts")
    })
}

/// One text of `texts.json`.
pub(super) fn say(name: &str) -> &'static str {
    texts()[name].as_str().unwrap_or_else(|| panic!("texts.json has no text {name}"))
}
