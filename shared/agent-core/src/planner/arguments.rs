//! Prompt arguments from the user: the selected prompt is fetched, and when it needs arguments that
//! discovery could not fill (or the expert refuses the values), the user is asked and their next
//! message is read as the answer.

use std::collections::BTreeMap;

use super::{PendingArguments, PlanTask, Planner, PromptCandidate};
use crate::expert::{ExpertError, PromptArgument};

/// The longest value, in characters, the user's answer may give one argument. A prompt argument is
/// a name, a date or a clause; a longer answer is refused (and the question asked again) rather than
/// cut, since a cut value would change what the user meant.
pub(super) const MAX_ARGUMENT_CHARS: usize = 2_000;

/// Declared arguments kept per prompt, and the length their descriptions are cut to, so that an
/// expert's listing cannot swell the stored plan or the question.
const MAX_DECLARED_ARGUMENTS: usize = 32;
const MAX_DESCRIPTION_CHARS: usize = 300;

/// How much of an expert's refusal, and of a value already tried, the question and the final note quote.
const MAX_QUOTE_CHARS: usize = 300;

/// What fetching the selected prompt came to.
pub(super) enum Fetched {
    /// The prompt's messages, the task's instructions.
    Instructions(String),
    /// The user must supply arguments first: the question stored in the plan, and the reply.
    Ask(PendingArguments, String),
    /// The prompt could not be fetched for another reason: the line that says so in the final reply.
    Unavailable(String),
}

/// The user's answer to a [`PendingArguments`] question.
#[derive(Debug, PartialEq)]
pub(super) enum ArgumentAnswer {
    /// "none" or "skip": the task runs without the prompt.
    Skip,
    /// The prompt with the values given merged in.
    Filled(PromptCandidate),
    /// A value longer than [`MAX_ARGUMENT_CHARS`]: the question is asked again.
    TooLong,
    /// No value could be read from it: a new message for the planner.
    NotAnAnswer,
}

impl Planner<'_> {
    /// Fetches the selected prompt (`prompts/get`). Required arguments nobody filled are asked for
    /// before the call, and a refusal of the arguments (invalid params) asks for them after it;
    /// any other failure lets the task run without the prompt, and the final reply says so.
    pub(super) async fn fetch_prompt(&self, task: &PlanTask, prompt: &PromptCandidate) -> Fetched {
        let missing = missing_required(prompt);
        if !missing.is_empty() {
            tracing::info!(expert = %task.expert, prompt = %prompt.name, ?missing, "asking for the prompt's arguments");
            return ask(task, prompt, missing, None);
        }
        match self.experts.get_prompt(&task.expert, &prompt.name, &prompt.arguments).await {
            Ok(messages) => Fetched::Instructions(
                messages.iter().map(|m| format!("[{}] {}", m.role, m.text)).collect::<Vec<_>>().join("\n\n"),
            ),
            // With no declared arguments there is nothing the user could be asked for.
            Err(ExpertError::InvalidParams(reason)) if !prompt.declared.is_empty() => {
                tracing::info!(expert = %task.expert, prompt = %prompt.name, %reason, "the expert refused the prompt's arguments");
                ask(task, prompt, refused_arguments(prompt), Some(quote(&reason)))
            }
            Err(err) => {
                tracing::warn!(expert = %task.expert, prompt = %prompt.name, error = %err, "could not fetch the prompt");
                Fetched::Unavailable(format!(
                    "Note: the prompt \"{}\" of the expert {} could not be fetched ({}), so its task ran without it.",
                    prompt.name,
                    task.expert,
                    quote(&err.to_string())
                ))
            }
        }
    }
}

fn ask(task: &PlanTask, prompt: &PromptCandidate, asked: Vec<String>, refusal: Option<String>) -> Fetched {
    let pending = PendingArguments { prompt: prompt.clone(), asked, refusal };
    let question = arguments_question(task, &pending);
    Fetched::Ask(pending, question)
}

/// The prompt's declared arguments as kept with a candidate: at most [`MAX_DECLARED_ARGUMENTS`], with
/// descriptions cut.
pub(super) fn bounded_declared(arguments: &[PromptArgument]) -> Vec<PromptArgument> {
    arguments
        .iter()
        .take(MAX_DECLARED_ARGUMENTS)
        .map(|argument| PromptArgument {
            name: argument.name.clone(),
            description: cut(&argument.description, MAX_DESCRIPTION_CHARS),
            required: argument.required,
        })
        .collect()
}

/// Required arguments without a value.
fn missing_required(prompt: &PromptCandidate) -> Vec<String> {
    prompt
        .declared
        .iter()
        .filter(|argument| {
            argument.required && prompt.arguments.get(&argument.name).is_none_or(|value| value.trim().is_empty())
        })
        .map(|argument| argument.name.clone())
        .collect()
}

/// What to ask for when the expert refused the values: the refusal does not say which one, so the
/// required arguments, or every declared one when none is marked required.
fn refused_arguments(prompt: &PromptCandidate) -> Vec<String> {
    let required: Vec<String> = prompt.declared.iter().filter(|a| a.required).map(|a| a.name.clone()).collect();
    if required.is_empty() {
        prompt.declared.iter().map(|a| a.name.clone()).collect()
    } else {
        required
    }
}

/// The question for a prompt's arguments: what each is for, the value tried when there was one,
/// and how to answer.
pub(super) fn arguments_question(task: &PlanTask, pending: &PendingArguments) -> String {
    let prompt = &pending.prompt;
    let mut question = String::new();
    if let Some(refusal) = &pending.refusal {
        question.push_str(&format!(
            "The expert {} did not accept the arguments of its prompt \"{}\": {refusal}\n",
            task.expert, prompt.name
        ));
    }
    let one = pending.asked.len() == 1;
    question.push_str(&format!(
        "To use the prompt \"{}\" of the expert {} for the task \"{}\", I need {}:\n",
        prompt.name,
        task.expert,
        task.task,
        if one { "this value" } else { "these values" }
    ));
    for name in &pending.asked {
        question.push_str(&format!("- {name}"));
        if let Some(argument) = prompt.declared.iter().find(|a| &a.name == name) {
            if !argument.description.trim().is_empty() {
                question.push_str(&format!(": {}", argument.description.trim()));
            }
        }
        if let Some(value) = prompt.arguments.get(name).filter(|v| !v.trim().is_empty()) {
            question.push_str(&format!(" (tried: \"{}\")", quote(value)));
        }
        question.push('\n');
    }
    question.push_str(if one {
        "Reply with the value, or \"none\" to go on without the prompt."
    } else {
        "Reply with one line per value, as `name: value`, or \"none\" to go on without the prompt."
    });
    question
}

/// Reads the user's answer to an arguments question. `name: value` (or `name = value`) lines give
/// values by name; otherwise a question for one argument takes the whole message as its value, and
/// one for several takes one line per argument, in order, when the counts match. Values are bounded
/// here, before they can reach `prompts/get`.
pub(super) fn read_arguments(message: &str, pending: &PendingArguments) -> ArgumentAnswer {
    let answer = message.trim();
    let word = answer.trim_end_matches('.').trim();
    if word.eq_ignore_ascii_case("none") || word.eq_ignore_ascii_case("skip") {
        return ArgumentAnswer::Skip;
    }
    let mut values = labelled_values(answer, &pending.prompt.declared);
    if let [only] = pending.asked.as_slice() {
        // Labels count only when they name what was asked: otherwise they are part of the value.
        if !values.contains_key(only) {
            values = BTreeMap::from([(only.clone(), answer.to_owned())]);
        }
    } else if values.is_empty() {
        let lines: Vec<&str> = answer.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
        if lines.len() != pending.asked.len() {
            return ArgumentAnswer::NotAnAnswer;
        }
        values.extend(pending.asked.iter().cloned().zip(lines.into_iter().map(str::to_owned)));
    }
    values.retain(|_, value| !value.is_empty());
    if values.is_empty() {
        return ArgumentAnswer::NotAnAnswer;
    }
    if values.values().any(|value| value.chars().count() > MAX_ARGUMENT_CHARS) {
        return ArgumentAnswer::TooLong;
    }
    let mut prompt = pending.prompt.clone();
    prompt.arguments.extend(values);
    ArgumentAnswer::Filled(prompt)
}

/// `name: value` or `name = value` lines whose name is a declared argument (any case, an optional
/// `-` or `*` bullet before it), under the declared spelling.
fn labelled_values(answer: &str, declared: &[PromptArgument]) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    for line in answer.lines() {
        let line = line.trim().trim_start_matches(['-', '*']).trim_start();
        let Some(at) = line.find([':', '=']) else { continue };
        let (label, value) = (line[..at].trim().trim_matches('`'), line[at + 1..].trim());
        if let Some(argument) = declared.iter().find(|a| a.name.eq_ignore_ascii_case(label)) {
            values.insert(argument.name.clone(), value.to_owned());
        }
    }
    values
}

/// `text` on one line, cut to [`MAX_QUOTE_CHARS`] characters.
fn quote(text: &str) -> String {
    cut(&text.replace(['\n', '\r'], " "), MAX_QUOTE_CHARS)
}

/// The first `max` characters of `text`, with `…` when it was longer.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argument(name: &str, required: bool) -> PromptArgument {
        PromptArgument { name: name.into(), description: format!("The {name}."), required }
    }

    fn prompt(declared: Vec<PromptArgument>, filled: &[(&str, &str)]) -> PromptCandidate {
        PromptCandidate {
            name: "draft_deed".into(),
            description: String::new(),
            match_confidence: 0.9,
            arguments: filled.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            declared,
        }
    }

    fn pending(asked: &[&str]) -> PendingArguments {
        PendingArguments {
            prompt: prompt(vec![argument("deed_type", true), argument("notary", true), argument("note", false)], &[]),
            asked: asked.iter().map(|s| s.to_string()).collect(),
            refusal: None,
        }
    }

    fn filled(answer: ArgumentAnswer) -> BTreeMap<String, String> {
        match answer {
            ArgumentAnswer::Filled(prompt) => prompt.arguments,
            other => panic!("expected values, got {other:?}"),
        }
    }

    fn task() -> PlanTask {
        PlanTask {
            expert: "alpha".into(),
            task: "Draft the deed".into(),
            status: super::super::TaskStatus::Pending,
            result: None,
            rounds: 0,
            prompt_failure: None,
        }
    }

    #[test]
    fn required_arguments_without_a_value_are_missing() {
        let declared = vec![argument("deed_type", true), argument("notary", true), argument("note", false)];
        assert_eq!(missing_required(&prompt(declared.clone(), &[])), ["deed_type", "notary"]);
        assert_eq!(missing_required(&prompt(declared.clone(), &[("deed_type", "sale"), ("notary", " ")])), ["notary"]);
        assert!(missing_required(&prompt(declared, &[("deed_type", "sale"), ("notary", "Ruiz")])).is_empty());
        // A refusal asks for the required ones, or every declared one when none is required.
        assert_eq!(refused_arguments(&prompt(vec![argument("a", false), argument("b", true)], &[])), ["b"]);
        assert_eq!(refused_arguments(&prompt(vec![argument("a", false), argument("b", false)], &[])), ["a", "b"]);
    }

    #[test]
    fn one_argument_takes_the_whole_answer() {
        let one = pending(&["deed_type"]);
        assert_eq!(
            filled(read_arguments("  compraventa de vivienda \n", &one))["deed_type"],
            "compraventa de vivienda"
        );
        assert_eq!(filled(read_arguments("deed_type: donación", &one))["deed_type"], "donación");
        // A label that is not the asked argument's name is part of the value.
        assert_eq!(filled(read_arguments("Tipo: herencia", &one))["deed_type"], "Tipo: herencia");
        assert_eq!(filled(read_arguments("note: urgent", &one))["deed_type"], "note: urgent");
        for skip in ["none", "None.", " skip ", "SKIP"] {
            assert_eq!(read_arguments(skip, &one), ArgumentAnswer::Skip, "{skip}");
        }
        assert_eq!(read_arguments("   ", &one), ArgumentAnswer::NotAnAnswer);
    }

    #[test]
    fn several_arguments_by_name_or_by_line() {
        let two = pending(&["deed_type", "notary"]);
        let values = filled(read_arguments("- Deed_Type: sale\n* `notary` = Ruiz: Madrid", &two));
        assert_eq!((values["deed_type"].as_str(), values["notary"].as_str()), ("sale", "Ruiz: Madrid"));
        // Only some named: the rest stays missing and is asked for again.
        assert_eq!(filled(read_arguments("notary: Ruiz", &two)).len(), 1);
        let values = filled(read_arguments("sale\n\nRuiz\n", &two));
        assert_eq!((values["deed_type"].as_str(), values["notary"].as_str()), ("sale", "Ruiz"));
        // Neither named nor one line each: a new message.
        assert_eq!(read_arguments("Actually, write me a poem instead.", &two), ArgumentAnswer::NotAnAnswer);
    }

    #[test]
    fn answers_are_bounded() {
        let one = pending(&["deed_type"]);
        let at_bound = "é".repeat(MAX_ARGUMENT_CHARS);
        assert_eq!(filled(read_arguments(&at_bound, &one))["deed_type"], at_bound);
        assert_eq!(read_arguments(&format!("{at_bound}x"), &one), ArgumentAnswer::TooLong);
        let two = pending(&["deed_type", "notary"]);
        assert_eq!(read_arguments(&format!("notary: {at_bound}!"), &two), ArgumentAnswer::TooLong);
    }

    #[test]
    fn the_question_names_each_argument_and_how_to_answer() {
        let mut asked = pending(&["deed_type"]);
        let question = arguments_question(&task(), &asked);
        assert!(question.contains("prompt \"draft_deed\" of the expert alpha"), "{question}");
        assert!(question.contains("- deed_type: The deed_type.\n"), "{question}");
        assert!(question.contains("Reply with the value, or \"none\""), "{question}");
        asked.asked.push("notary".into());
        asked.prompt.arguments.insert("notary".into(), "x".repeat(1000));
        asked.refusal = Some("notary must be on record".into());
        let question = arguments_question(&task(), &asked);
        assert!(question.starts_with("The expert alpha did not accept"), "{question}");
        assert!(question.contains("as `name: value`"), "{question}");
        assert!(question.contains(&format!("(tried: \"{}…\")", "x".repeat(MAX_QUOTE_CHARS))), "{question}");
    }

    #[test]
    fn declared_arguments_are_bounded() {
        let many: Vec<PromptArgument> = (0..40)
            .map(|i| PromptArgument { name: format!("a{i}"), description: "d".repeat(1000), required: true })
            .collect();
        let kept = bounded_declared(&many);
        assert_eq!(kept.len(), MAX_DECLARED_ARGUMENTS);
        assert_eq!(kept[0].description.chars().count(), MAX_DESCRIPTION_CHARS + 1);
    }
}
