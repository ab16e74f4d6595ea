//! An expert's input-required result made into the port's questions, and the user's answers made
//! into the `inputResponses` of the retried call. Only form elicitations can be put to the user; a
//! sampling or roots request, a URL elicitation, or a schema past the bounds fails the call with a
//! message the model may read.

use std::collections::BTreeMap;

use agent_ports::expert::{ExpertAnswer, ExpertInputField, ExpertInputRequest, ExpertQuestion, InputKind};
use serde_json::{json, Value};

use crate::client::InputRequired;

/// Bounds on what an expert may ask in one result, so that its questions stay a readable reply and a
/// small part of the stored plan.
pub const MAX_QUESTIONS: usize = 8;
pub const MAX_FIELDS: usize = 16;
const MAX_MESSAGE_CHARS: usize = 1_000;
const MAX_DESCRIPTION_CHARS: usize = 300;
const MAX_OPTIONS: usize = 32;
const MAX_NAME_CHARS: usize = 64;
/// The expert's opaque state is stored in the plan until the user answers.
pub const MAX_REQUEST_STATE_BYTES: usize = 16 * 1024;

/// The questions of an input-required result, or why they cannot be asked.
pub fn questions(input: InputRequired) -> Result<ExpertInputRequest, String> {
    if input.requests.is_empty() {
        return Err("the expert asked for input without saying what".into());
    }
    if input.requests.len() > MAX_QUESTIONS {
        return Err(format!("the expert asked more than {MAX_QUESTIONS} questions at once"));
    }
    if input.request_state.as_ref().is_some_and(|state| state.len() > MAX_REQUEST_STATE_BYTES) {
        return Err(format!("the expert's request state is over {MAX_REQUEST_STATE_BYTES} bytes"));
    }
    let questions =
        input.requests.into_iter().map(|(key, request)| question(key, &request)).collect::<Result<Vec<_>, _>>()?;
    Ok(ExpertInputRequest { questions, request_state: input.request_state })
}

fn question(key: String, request: &Value) -> Result<ExpertQuestion, String> {
    let method = request.get("method").and_then(Value::as_str).unwrap_or_default();
    if method != "elicitation/create" {
        return Err(format!("the expert asked for `{method}`, which only an elicitation of the user can answer"));
    }
    let params = request.get("params").cloned().unwrap_or(Value::Null);
    if params.get("mode").and_then(Value::as_str).unwrap_or("form") != "form" {
        return Err("the expert asked the user to open a URL, which the planner does not do".into());
    }
    let message = cut(params.get("message").and_then(Value::as_str).unwrap_or_default(), MAX_MESSAGE_CHARS);
    let schema = params.get("requestedSchema").cloned().unwrap_or(Value::Null);
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let properties = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    if properties.len() > MAX_FIELDS {
        return Err(format!("the expert asked for more than {MAX_FIELDS} values at once"));
    }
    let fields = properties
        .iter()
        .map(|(name, property)| {
            if name.chars().count() > MAX_NAME_CHARS {
                return Err("the expert asked for a value with an overlong name".to_owned());
            }
            let options: Vec<String> = property
                .get("enum")
                .or_else(|| property.get("items").and_then(|items| items.get("enum")))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .take(MAX_OPTIONS)
                .map(|option| cut(option, MAX_NAME_CHARS))
                .collect();
            let kind = match property.get("type").and_then(Value::as_str) {
                Some("number") => InputKind::Number,
                Some("integer") => InputKind::Integer,
                Some("boolean") => InputKind::Boolean,
                _ => InputKind::Text,
            };
            let description = property
                .get("description")
                .or_else(|| property.get("title"))
                .and_then(Value::as_str)
                .map(|text| cut(text, MAX_DESCRIPTION_CHARS))
                .unwrap_or_default();
            Ok(ExpertInputField {
                name: name.clone(),
                description,
                required: required.contains(&name.as_str()),
                kind,
                options,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(ExpertQuestion { key, message, fields })
}

/// The `inputResponses` of the retried call: one `ElicitResult` per question.
pub fn responses(answers: &BTreeMap<String, ExpertAnswer>) -> BTreeMap<String, Value> {
    answers
        .iter()
        .map(|(key, answer)| {
            let result = match answer {
                ExpertAnswer::Accept(values) => json!({"action": "accept", "content": values}),
                ExpertAnswer::Decline => json!({"action": "decline"}),
                ExpertAnswer::Cancel => json!({"action": "cancel"}),
            };
            (key.clone(), result)
        })
        .collect()
}

fn cut(text: &str, chars: usize) -> String {
    text.chars().take(chars).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elicitation(message: &str, schema: Value) -> Value {
        json!({"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": schema}})
    }

    #[test]
    fn a_form_elicitation_becomes_a_question() {
        let schema = json!({"type": "object", "required": ["seat"], "properties": {
            "seat": {"type": "string", "enum": ["window", "aisle"], "description": "Where to sit."},
            "bags": {"type": "integer", "title": "Bags"}}});
        let input = InputRequired {
            requests: BTreeMap::from([("seat".to_owned(), elicitation("Which seat?", schema))]),
            request_state: Some("opaque".into()),
        };
        let asked = questions(input).unwrap();
        assert_eq!(asked.request_state.as_deref(), Some("opaque"));
        let question = &asked.questions[0];
        assert_eq!((question.key.as_str(), question.message.as_str()), ("seat", "Which seat?"));
        let bags = &question.fields[0];
        assert_eq!(
            (bags.name.as_str(), bags.kind, bags.required, bags.description.as_str()),
            ("bags", InputKind::Integer, false, "Bags")
        );
        let seat = &question.fields[1];
        assert_eq!(
            (seat.kind, seat.required, seat.options.clone()),
            (InputKind::Text, true, vec!["window".into(), "aisle".into()])
        );
    }

    #[test]
    fn what_cannot_be_asked_of_a_user_is_refused() {
        let one = |request: Value| InputRequired {
            requests: BTreeMap::from([("k".to_owned(), request)]),
            request_state: None,
        };
        let sampling = json!({"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}});
        assert!(questions(one(sampling)).unwrap_err().contains("sampling/createMessage"));
        let url = json!({"method": "elicitation/create", "params": {"mode": "url", "message": "m", "url": "https://x", "elicitationId": "1"}});
        assert!(questions(one(url)).unwrap_err().contains("URL"));
        let state = InputRequired { requests: BTreeMap::new(), request_state: Some("s".into()) };
        assert!(questions(state).is_err(), "nothing to ask");
        let huge = InputRequired {
            requests: BTreeMap::from([("k".to_owned(), elicitation("m", json!({"properties": {}})))]),
            request_state: Some("x".repeat(MAX_REQUEST_STATE_BYTES + 1)),
        };
        assert!(questions(huge).unwrap_err().contains("request state"));
    }

    #[test]
    fn answers_become_elicit_results() {
        let answers = BTreeMap::from([
            ("a".to_owned(), ExpertAnswer::Accept(BTreeMap::from([("seat".to_owned(), json!("window"))]))),
            ("b".to_owned(), ExpertAnswer::Decline),
            ("c".to_owned(), ExpertAnswer::Cancel),
        ]);
        let sent = responses(&answers);
        assert_eq!(sent["a"], json!({"action": "accept", "content": {"seat": "window"}}));
        assert_eq!(sent["b"], json!({"action": "decline"}));
        assert_eq!(sent["c"], json!({"action": "cancel"}));
    }
}
