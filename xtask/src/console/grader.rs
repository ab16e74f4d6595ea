//! The demo model as the evals' grader: a request with `response_format` named `grading`
//! (agent-core's `turn::evals::grade`) shows a run's final reply and its numbered expectations, and
//! is answered with the JSON its schema asks for, one item per expectation. An expectation passes
//! when its words are in the reply: the words it quotes (`«…»`, `"…"`, `“…”`), or, when it quotes
//! none, each of its words of four letters or more. The evidence says which were found or missed,
//! in the words of `console/demo-model/texts.json`.

use local_stack::model_server::{Received, Reply};
use serde_json::{json, Value};

use super::seen;
use super::texts::say;

/// The name agent-core's grader gives its response format.
const GRADING: &str = "grading";
/// What opens the reply the grader is shown, and what opens the expectations after it.
const REPLY_HEADING: &str = "## The agent's final reply\n";
const EXPECTATIONS_HEADING: &str = "\n## Expectations\n";
/// Pairs of quotes an expectation may set words in.
const QUOTES: [(char, char); 3] = [('«', '»'), ('"', '"'), ('“', '”')];

/// Whether `request` is the grader's.
pub fn is_grading(request: &Received) -> bool {
    request.body["response_format"]["json_schema"]["name"] == GRADING
}

/// The grading of the expectations the request shows, as the grader's JSON.
pub fn grade(request: &Received) -> Reply {
    let messages = request.body["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
    let shown = messages
        .iter()
        .rev()
        .find(|message| message["role"] == "user")
        .map(|message| seen::text_of(&message["content"]))
        .unwrap_or_default();
    let (reply, expectations) = read(&shown);
    let graded: Vec<Value> = expectations
        .iter()
        .map(|expectation| {
            let (passed, evidence) = judge(expectation, &reply);
            json!({ "passed": passed, "evidence": evidence })
        })
        .collect();
    Reply::text(&json!({ "expectations": graded }).to_string())
}

/// The reply the grader is shown and the expectations, in order (an expectation's later lines
/// joined to it).
fn read(shown: &str) -> (String, Vec<String>) {
    let Some(at) = shown.rfind(EXPECTATIONS_HEADING) else { return (String::new(), Vec::new()) };
    let (before, after) = (&shown[..at], &shown[at + EXPECTATIONS_HEADING.len()..]);
    let reply = before.find(REPLY_HEADING).map_or("", |start| &before[start + REPLY_HEADING.len()..]);
    let mut expectations: Vec<String> = Vec::new();
    for line in after.lines() {
        let next = format!("{}. ", expectations.len() + 1);
        match line.strip_prefix(&next) {
            Some(text) => expectations.push(text.to_owned()),
            None => {
                if let Some(last) = expectations.last_mut() {
                    last.push('\n');
                    last.push_str(line);
                }
            }
        }
    }
    (reply.trim().to_owned(), expectations)
}

/// Whether `reply` meets `expectation`, and the evidence.
fn judge(expectation: &str, reply: &str) -> (bool, String) {
    let wanted = quoted(expectation);
    let wanted = if wanted.is_empty() { long_words(expectation) } else { wanted };
    let said = reply.to_lowercase();
    let (found, missing): (Vec<&String>, Vec<&String>) =
        wanted.iter().partition(|words| said.contains(&words.to_lowercase()));
    let list = |words: &[&String]| words.iter().map(|words| format!("«{words}»")).collect::<Vec<_>>().join(", ");
    if missing.is_empty() {
        (true, say("GRADE_FOUND").replace("{words}", &list(&found)))
    } else {
        (false, say("GRADE_MISSING").replace("{words}", &list(&missing)))
    }
}

/// The texts `expectation` sets in quotes.
fn quoted(expectation: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (open, close) in QUOTES {
        let mut rest = expectation;
        while let Some(start) = rest.find(open) {
            let after = &rest[start + open.len_utf8()..];
            let Some(end) = after.find(close) else { break };
            let text = after[..end].trim();
            if !text.is_empty() {
                found.push(text.to_owned());
            }
            rest = &after[end + close.len_utf8()..];
        }
    }
    found
}

/// The words of four letters or more in `expectation`.
fn long_words(expectation: &str) -> Vec<String> {
    expectation
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() >= 4)
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod grader_tests {
    use super::*;

    fn request(content: &str) -> Received {
        Received {
            path: "/v1/chat/completions".to_owned(),
            headers: Default::default(),
            body: json!({
                "messages": [{"role": "system", "content": "You grade one run"}, {"role": "user", "content": content}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "grading", "schema": {}, "strict": true}},
            }),
            at: std::time::Instant::now(),
        }
    }

    #[test]
    fn each_expectation_passes_when_its_words_are_in_the_reply() {
        let shown = "## The user's request\n¿Cuándo abre?\n\n## What the agent did\n- steps: 2\n\n\
                     ## The agent's final reply\nAbre de 9:00 a 14:00, de lunes a viernes.\n\n## Expectations\n\
                     1. La respuesta dice «9:00 a 14:00»\n2. La respuesta dice «16:00 a 19:00»\n\
                     3. lunes y viernes\n4. Habla de\nlos sábados\n";
        let asked = request(shown);
        assert!(is_grading(&asked));
        let Reply::Text(text) = grade(&asked) else { panic!("a text reply") };
        let graded: Value = serde_json::from_str(&text).unwrap();
        let passed: Vec<bool> =
            graded["expectations"].as_array().unwrap().iter().map(|e| e["passed"].as_bool().unwrap()).collect();
        assert_eq!(passed, [true, false, true, false]);
        assert_eq!(graded["expectations"][0]["evidence"], say("GRADE_FOUND").replace("{words}", "«9:00 a 14:00»"));
        assert_eq!(graded["expectations"][1]["evidence"], say("GRADE_MISSING").replace("{words}", "«16:00 a 19:00»"));
        assert_eq!(
            graded["expectations"][3]["evidence"],
            say("GRADE_MISSING").replace("{words}", "«Habla», «sábados»")
        );
        let mut turn = asked.clone();
        turn.body["response_format"] = Value::Null;
        assert!(!is_grading(&turn));
    }
}
