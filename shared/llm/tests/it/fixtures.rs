//! Fixtures the provider tests share: a delta sink, a provider's configuration, small requests.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_ports::{ChatRequest, DeltaSink, JsonSchemaFormat, Message};
use llm::{LlmConfig, ProviderKind};
use serde_json::json;
use tokio::sync::Notify;

/// Collects deltas, and opens the scripted server's gate at the first one.
pub struct Collect {
    deltas: Mutex<Vec<String>>,
    first: Arc<Notify>,
}

impl Collect {
    /// `first` is notified when the first delta arrives.
    pub fn new(first: Arc<Notify>) -> Collect {
        Collect { deltas: Mutex::default(), first }
    }

    pub fn deltas(&self) -> Vec<String> {
        self.deltas.lock().unwrap().clone()
    }
}

impl DeltaSink for Collect {
    fn delta(&self, text: &str) {
        let mut deltas = self.deltas.lock().unwrap();
        if deltas.is_empty() {
            self.first.notify_one();
        }
        deltas.push(text.to_owned());
    }
}

/// A provider's configuration against a scripted server at `base_url`: three attempts 1 ms apart
/// and a 5 s timeout, so that retries cost the tests nothing.
pub fn config(provider: ProviderKind, base_url: String, model: &str) -> LlmConfig {
    let mut config = LlmConfig::new(provider, base_url, model);
    config.max_attempts = 3;
    config.retry_base_delay = Duration::from_millis(1);
    config.timeout = Duration::from_secs(5);
    config
}

/// One user message under a short system prompt.
pub fn request_with_system() -> ChatRequest {
    ChatRequest { system: "sys".into(), messages: vec![Message::user("hi")], ..Default::default() }
}

/// A closed schema: `additionalProperties: false` and every property required, as OpenAI's strict mode wants.
pub fn plan_format() -> JsonSchemaFormat {
    JsonSchemaFormat {
        name: "plan".to_string(),
        schema: json!({
            "type": "object",
            "properties": {"steps": {"type": "array", "items": {"type": "string"}}},
            "required": ["steps"],
            "additionalProperties": false
        }),
    }
}
