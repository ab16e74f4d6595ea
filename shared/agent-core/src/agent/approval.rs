//! A person's decisions on tool calls that waited for approval: what the next turn request
//! carries, validated, and how the loop applies each one to its call.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{MAX_TOOL_ARGUMENT_BYTES, MAX_TOOL_CALLS_PER_REPLY};

/// Between a subagent's id and its call's id in the id a decision names (`sa-1/toolu_01`).
pub const SUBAGENT_CALL_SEPARATOR: char = '/';
/// Longest call id a decision may name: a model's id (up to 128 bytes) with a subagent's before it.
const MAX_DECISION_CALL_ID_BYTES: usize = 160;

/// Longest message a rejection may give the model, in bytes.
pub const MAX_REJECTION_MESSAGE_BYTES: usize = 4096;

/// What a person decided about one pending tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Run the call as the model made it.
    Approve,
    /// Run the call with these arguments instead.
    Edit { arguments: Value },
    /// Do not run the call; the model is told, with the person's message when there is one.
    Reject {
        #[serde(default)]
        message: Option<String>,
    },
}

/// One decision as a request writes it: the call it answers and the decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallDecision {
    pub call_id: String,
    #[serde(flatten)]
    pub decision: Decision,
}

/// The decisions of one request, by call id; every entry checked against the bounds of a call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decisions {
    by_call: BTreeMap<String, Decision>,
}

impl Decisions {
    /// Validates the decisions a request carries: at most one per call, no more than a reply can
    /// make, edited arguments a JSON object within a call's bound, rejection messages bounded.
    pub fn new(decisions: Vec<CallDecision>) -> Result<Self, String> {
        if decisions.is_empty() {
            return Err("`decisions` must answer at least one pending call".to_owned());
        }
        if decisions.len() > MAX_TOOL_CALLS_PER_REPLY {
            return Err(format!("`decisions` may answer at most {MAX_TOOL_CALLS_PER_REPLY} calls"));
        }
        let mut by_call = BTreeMap::new();
        for CallDecision { call_id, decision } in decisions {
            if call_id.is_empty() || call_id.len() > MAX_DECISION_CALL_ID_BYTES {
                return Err(format!("`call_id` must be 1 to {MAX_DECISION_CALL_ID_BYTES} bytes"));
            }
            match &decision {
                Decision::Edit { arguments } => {
                    if !arguments.is_object() {
                        return Err(format!("the edited `arguments` of call `{call_id}` must be a JSON object"));
                    }
                    let size = arguments.to_string().len();
                    if size > MAX_TOOL_ARGUMENT_BYTES {
                        return Err(format!(
                            "the edited `arguments` of call `{call_id}` are {size} bytes, over the limit of \
                             {MAX_TOOL_ARGUMENT_BYTES}"
                        ));
                    }
                }
                Decision::Reject { message: Some(message) } if message.len() > MAX_REJECTION_MESSAGE_BYTES => {
                    return Err(format!(
                        "the rejection `message` of call `{call_id}` is over {MAX_REJECTION_MESSAGE_BYTES} bytes"
                    ));
                }
                _ => {}
            }
            if by_call.insert(call_id.clone(), decision).is_some() {
                return Err(format!("call `{call_id}` is answered twice"));
            }
        }
        Ok(Self { by_call })
    }

    pub fn get(&self, call_id: &str) -> Option<&Decision> {
        self.by_call.get(call_id)
    }

    /// The ids answered, in order.
    pub fn call_ids(&self) -> impl Iterator<Item = &str> {
        self.by_call.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.by_call.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_call.is_empty()
    }

    /// The decisions on subagent `id`'s own calls, named by its model's call ids.
    pub(crate) fn of_subagent(&self, id: &str) -> Decisions {
        let by_call = self
            .by_call
            .iter()
            .filter_map(|(call_id, decision)| {
                let (subagent, call) = call_id.split_once(SUBAGENT_CALL_SEPARATOR)?;
                (subagent == id).then(|| (call.to_owned(), decision.clone()))
            })
            .collect();
        Decisions { by_call }
    }

    /// A canonical text of the decisions, for an idempotency key's fingerprint.
    pub fn fingerprint(&self) -> String {
        serde_json::to_string(&self.by_call).unwrap_or_default()
    }
}

/// The tool result a rejected call gets instead of running.
pub(super) fn rejection_result(message: Option<&str>) -> String {
    match message.map(str::trim).filter(|message| !message.is_empty()) {
        Some(message) => format!("The user rejected this call; it was not run. Their message: {message}"),
        None => "The user rejected this call; it was not run.".to_owned(),
    }
}

/// What a call whose arguments the person edited reports before its own result.
pub(super) const EDITED_NOTE: &str = "(The user edited this call's arguments before it ran.)\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subagents_decisions_are_found_by_its_id_and_named_by_its_own_call_ids() {
        let decisions = Decisions::new(vec![
            CallDecision { call_id: "c1".into(), decision: Decision::Approve },
            CallDecision { call_id: "sa-1/c2".into(), decision: Decision::Reject { message: None } },
            CallDecision { call_id: "sa-12/c2".into(), decision: Decision::Approve },
            CallDecision { call_id: "sa-1/x/y".into(), decision: Decision::Approve },
        ])
        .unwrap();
        let first = decisions.of_subagent("sa-1");
        assert_eq!(first.call_ids().collect::<Vec<_>>(), ["c2", "x/y"]);
        assert_eq!(first.get("c2"), Some(&Decision::Reject { message: None }));
        assert_eq!(decisions.of_subagent("sa-12").call_ids().collect::<Vec<_>>(), ["c2"]);
        assert!(decisions.of_subagent("sa-2").is_empty());
    }
    use serde_json::json;

    fn parse(value: Value) -> Result<Decisions, String> {
        let decisions: Vec<CallDecision> = serde_json::from_value(value).map_err(|err| err.to_string())?;
        Decisions::new(decisions)
    }

    #[test]
    fn the_three_decisions_read_as_a_request_writes_them() {
        let decisions = parse(json!([
            {"call_id": "a", "decision": "approve"},
            {"call_id": "b", "decision": "edit", "arguments": {"command": "ls"}},
            {"call_id": "c", "decision": "reject", "message": "No."},
        ]))
        .unwrap();
        assert_eq!(decisions.get("a"), Some(&Decision::Approve));
        assert_eq!(decisions.get("b"), Some(&Decision::Edit { arguments: json!({"command": "ls"}) }));
        assert_eq!(decisions.get("c"), Some(&Decision::Reject { message: Some("No.".into()) }));
        assert_eq!(decisions.call_ids().collect::<Vec<_>>(), ["a", "b", "c"]);
    }

    #[test]
    fn bad_decisions_are_refused_with_the_reason() {
        let twice = parse(json!([{"call_id": "a", "decision": "approve"}, {"call_id": "a", "decision": "approve"}]));
        assert!(twice.unwrap_err().contains("answered twice"));
        let not_object = parse(json!([{"call_id": "a", "decision": "edit", "arguments": "ls"}]));
        assert!(not_object.unwrap_err().contains("JSON object"));
        let unknown = parse(json!([{"call_id": "a", "decision": "maybe"}]));
        assert!(unknown.is_err());
        assert!(parse(json!([])).unwrap_err().contains("at least one"));
        let long = "x".repeat(MAX_REJECTION_MESSAGE_BYTES + 1);
        let long = parse(json!([{"call_id": "a", "decision": "reject", "message": long}]));
        assert!(long.unwrap_err().contains("over"));
    }
}
