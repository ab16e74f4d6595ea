//! An expert's tool that needs the user's input (MCP 2026-07-28 elicitation, the input-required
//! way): the turn ends with the expert's questions as the planner's clarification, the call waits in
//! the plan (`pending_input`) with the expert's state, and the next message is read as the answer and
//! sent back on the same call, whose result the task's next round is given.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::arguments::MAX_ARGUMENT_CHARS;
use super::{PlanState, PlanTask, Planner};
use crate::expert::{
    ExpertAnswer, ExpertCallOutcome, ExpertInputField, ExpertInputRequest, ExpertResume, ExpertToolCall, InputKind,
};

/// Times one call may come back asking again before the planner gives up on it.
pub(super) const MAX_INPUT_ROUNDS: u32 = 5;

/// How much of the resumed call's result the next round is shown in its instructions.
const MAX_RESUMED_CHARS: usize = 8_000;

/// A tool call waiting for the user's input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingInput {
    /// The namespaced tool and the arguments of the call, sent again with the answers.
    pub tool: String,
    pub arguments: Value,
    pub request: ExpertInputRequest,
    /// The times this call has asked.
    #[serde(default)]
    pub rounds: u32,
}

/// The user's message read against the questions.
#[derive(Debug, PartialEq)]
pub(super) enum InputAnswer {
    Answers(BTreeMap<String, ExpertAnswer>),
    /// The message does not answer: why, to say before asking again.
    Again(String),
}

/// The reply that asks the user.
pub(super) fn input_question(task: &PlanTask, pending: &PendingInput) -> String {
    let mut text = format!("The expert {} needs your answer to go on with the task \"{}\":\n", task.expert, task.task);
    let fields: Vec<&ExpertInputField> = pending.request.questions.iter().flat_map(|q| &q.fields).collect();
    for question in &pending.request.questions {
        if !question.message.is_empty() {
            text.push_str(&question.message);
            text.push('\n');
        }
        for field in &question.fields {
            text.push_str(&format!("- {}", field.name));
            if !field.options.is_empty() {
                text.push_str(&format!(" (one of: {})", field.options.join(", ")));
            }
            if !field.description.is_empty() {
                text.push_str(&format!(": {}", field.description));
            }
            if !field.required {
                text.push_str(" (optional)");
            }
            text.push('\n');
        }
    }
    text.push_str(if fields.len() > 1 {
        "Reply with one `name: value` line for each, or \"none\" to decline."
    } else {
        "Reply with your answer, or \"none\" to decline."
    });
    text
}

/// Reads the user's message: "none" (or "decline", "no", "skip") declines every question, "cancel"
/// dismisses them; otherwise the values, the whole message for a single field, one `name: value`
/// line each (or one line per field, in order) for several, checked against each field's type.
pub(super) fn read_input_answer(message: &str, request: &ExpertInputRequest) -> InputAnswer {
    let trimmed = message.trim();
    let every = |answer: ExpertAnswer| {
        InputAnswer::Answers(request.questions.iter().map(|q| (q.key.clone(), answer.clone())).collect())
    };
    match trimmed.to_lowercase().as_str() {
        "none" | "decline" | "no" | "skip" => return every(ExpertAnswer::Decline),
        "cancel" => return every(ExpertAnswer::Cancel),
        _ => {}
    }
    let fields: Vec<&ExpertInputField> = request.questions.iter().flat_map(|q| &q.fields).collect();
    let given: BTreeMap<String, String> = if fields.len() == 1 {
        BTreeMap::from([(fields[0].name.clone(), trimmed.to_owned())])
    } else {
        named_lines(trimmed, &fields)
    };
    let mut answers = BTreeMap::new();
    for question in &request.questions {
        let mut values = BTreeMap::new();
        for field in &question.fields {
            match given.get(&field.name).filter(|value| !value.is_empty()) {
                Some(raw) => match typed(field, raw) {
                    Ok(value) => {
                        values.insert(field.name.clone(), value);
                    }
                    Err(why) => return InputAnswer::Again(why),
                },
                None if field.required => {
                    return InputAnswer::Again(format!("I could not read a value for `{}` in that answer.", field.name))
                }
                None => {}
            }
        }
        answers.insert(question.key.clone(), ExpertAnswer::Accept(values));
    }
    InputAnswer::Answers(answers)
}

/// `name: value` lines by field name (any case), or, when no line names a field and there is one
/// line per field, the lines in order.
fn named_lines(message: &str, fields: &[&ExpertInputField]) -> BTreeMap<String, String> {
    let lines: Vec<&str> = message.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
    let mut named = BTreeMap::new();
    for line in &lines {
        if let Some((name, value)) = line.split_once(':') {
            let name = name.trim().trim_start_matches('-').trim();
            if let Some(field) = fields.iter().find(|field| field.name.eq_ignore_ascii_case(name)) {
                named.insert(field.name.clone(), value.trim().to_owned());
            }
        }
    }
    if named.is_empty() && lines.len() == fields.len() {
        return fields.iter().zip(&lines).map(|(field, line)| (field.name.clone(), (*line).to_owned())).collect();
    }
    named
}

/// A value of the field's type, or why it is not one.
fn typed(field: &ExpertInputField, raw: &str) -> Result<Value, String> {
    if raw.chars().count() > MAX_ARGUMENT_CHARS {
        return Err(format!("The value for `{}` is longer than {MAX_ARGUMENT_CHARS} characters.", field.name));
    }
    let not_a = |what: &str| format!("`{raw}` is not {what} for `{}`.", field.name);
    match field.kind {
        InputKind::Text if field.options.is_empty() => Ok(Value::String(raw.to_owned())),
        InputKind::Text => field
            .options
            .iter()
            .find(|option| option.eq_ignore_ascii_case(raw))
            .map(|option| Value::String(option.clone()))
            .ok_or_else(|| format!("`{raw}` is not one of {} for `{}`.", field.options.join(", "), field.name)),
        InputKind::Integer => raw.parse::<i64>().map(Value::from).map_err(|_| not_a("a whole number")),
        InputKind::Number => raw
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| not_a("a number")),
        InputKind::Boolean => match raw.to_lowercase().as_str() {
            "yes" | "y" | "true" | "si" | "sí" => Ok(Value::Bool(true)),
            "no" | "n" | "false" => Ok(Value::Bool(false)),
            _ => Err(not_a("yes or no")),
        },
    }
}

/// What sending the answers back came to.
pub(super) enum Resumed {
    /// The call finished (or failed): the note for the task's next round.
    Note(String),
    /// It asks again: the reply that asks.
    AskAgain(String),
}

impl Planner<'_> {
    /// Sends the answers back on the waiting call of the current task.
    pub(super) async fn resume_input(
        &self,
        state: &mut PlanState,
        pending: PendingInput,
        answers: BTreeMap<String, ExpertAnswer>,
        deadline: Option<std::time::Instant>,
    ) -> Resumed {
        let Some(task) = state.tasks.get(state.position).cloned() else {
            return Resumed::Note(String::new());
        };
        // A new invocation's session names the expert's tools before a call can reach them.
        if let Err(error) = self.experts.tools(&task.expert).await {
            return Resumed::Note(format!("The call of `{}` could not be finished: {error}", pending.tool));
        }
        let call = ExpertToolCall {
            tool: pending.tool.clone(),
            arguments: pending.arguments.clone(),
            deadline,
            resume: Some(ExpertResume { answers, request_state: pending.request.request_state.clone() }),
        };
        let shown = match self.experts.call_tool(call).await {
            Ok(ExpertCallOutcome::Done(result)) => {
                let text: String = result.text.chars().take(MAX_RESUMED_CHARS).collect();
                if result.is_error {
                    format!("Error (the tool reported a failure): {text}")
                } else {
                    text
                }
            }
            Ok(ExpertCallOutcome::NeedsInput(request)) if pending.rounds + 1 < MAX_INPUT_ROUNDS => {
                let again = PendingInput { request, rounds: pending.rounds + 1, ..pending };
                let question = input_question(&task, &again);
                state.pending_input = Some(again);
                return Resumed::AskAgain(question);
            }
            Ok(ExpertCallOutcome::NeedsInput(_)) => {
                format!("Error: the expert asked for input {MAX_INPUT_ROUNDS} times and the call was given up.")
            }
            Err(error) => format!("Error: {error}"),
        };
        tracing::info!(expert = %task.expert, tool = %pending.tool, "the expert's call went on with the user's answer");
        Resumed::Note(format!(
            "The tool `{}` was called with {} and needed the user's answer first. With the user's answer it \
             returned:\n{shown}",
            pending.tool, pending.arguments
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expert::ExpertQuestion;

    fn field(name: &str, kind: InputKind, options: &[&str], required: bool) -> ExpertInputField {
        ExpertInputField {
            name: name.into(),
            description: format!("The {name}."),
            required,
            kind,
            options: options.iter().map(|o| o.to_string()).collect(),
        }
    }

    fn request(fields: Vec<ExpertInputField>) -> ExpertInputRequest {
        ExpertInputRequest {
            questions: vec![ExpertQuestion { key: "q".into(), message: "Tell me.".into(), fields }],
            request_state: Some("s".into()),
        }
    }

    fn accepted(answer: InputAnswer) -> BTreeMap<String, Value> {
        match answer {
            InputAnswer::Answers(mut answers) => match answers.remove("q") {
                Some(ExpertAnswer::Accept(values)) => values,
                other => panic!("{other:?}"),
            },
            InputAnswer::Again(why) => panic!("{why}"),
        }
    }

    #[test]
    fn one_field_takes_the_whole_message_checked_against_its_options() {
        let seat = request(vec![field("seat", InputKind::Text, &["window", "aisle"], true)]);
        assert_eq!(accepted(read_input_answer(" Window ", &seat))["seat"], "window");
        assert!(matches!(read_input_answer("middle", &seat), InputAnswer::Again(why) if why.contains("window, aisle")));
        assert_eq!(
            read_input_answer("none", &seat),
            InputAnswer::Answers(BTreeMap::from([("q".to_owned(), ExpertAnswer::Decline)]))
        );
        assert_eq!(
            read_input_answer("cancel", &seat),
            InputAnswer::Answers(BTreeMap::from([("q".to_owned(), ExpertAnswer::Cancel)]))
        );
    }

    #[test]
    fn several_fields_by_name_or_in_order_with_their_types() {
        let form = request(vec![
            field("bags", InputKind::Integer, &[], true),
            field("insured", InputKind::Boolean, &[], true),
            field("note", InputKind::Text, &[], false),
        ]);
        let values = accepted(read_input_answer("Insured: yes\nbags: 2", &form));
        assert_eq!((values["bags"].clone(), values["insured"].clone()), (Value::from(2), Value::Bool(true)));
        assert!(!values.contains_key("note"), "an optional field left out");
        let in_order = accepted(read_input_answer("3\nno\nfragile", &form));
        assert_eq!(in_order["note"], "fragile");
        assert!(
            matches!(read_input_answer("bags: two\ninsured: yes", &form), InputAnswer::Again(why) if why.contains("whole number"))
        );
        assert!(matches!(read_input_answer("insured: yes", &form), InputAnswer::Again(why) if why.contains("`bags`")));
    }

    #[test]
    fn the_question_names_each_field() {
        let task = PlanTask {
            expert: "travel".into(),
            task: "Book the trip".into(),
            status: super::super::TaskStatus::Pending,
            result: None,
            rounds: 0,
            prompt_failure: None,
        };
        let pending = PendingInput {
            tool: "travel__book_trip".into(),
            arguments: serde_json::json!({}),
            request: request(vec![field("seat", InputKind::Text, &["window", "aisle"], true)]),
            rounds: 0,
        };
        let question = input_question(&task, &pending);
        assert!(question.starts_with("The expert travel needs your answer to go on with the task \"Book the trip\""));
        assert!(question.contains("Tell me.\n- seat (one of: window, aisle): The seat.\n"), "{question}");
    }
}
