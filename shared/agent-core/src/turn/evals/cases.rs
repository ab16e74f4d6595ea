//! A version's eval suite, in Anthropic skill-creator's formats: `evals/evals.json` (cases with a
//! prompt, input files and expectations a grader checks) and a trigger set (queries that should
//! or should not make the model load the skill), read from the version's own files and bounded.

use serde::Deserialize;
use serde_json::Value;

/// The file of cases with expectations, inside the skill's folder.
pub const EVALS_FILE: &str = "evals/evals.json";
/// Where a trigger set may be, first found wins (skill-creator leaves the name to its user).
pub const TRIGGER_FILES: [&str; 3] = ["evals/trigger_evals.json", "evals/triggers.json", "evals/eval_set.json"];
/// Most cases of each kind run from one suite.
pub const MAX_CASES: usize = 50;
/// Most expectations of one case.
pub const MAX_EXPECTATIONS: usize = 20;
/// Longest prompt, query or expectation, in bytes.
pub const MAX_TEXT_BYTES: usize = 16 * 1024;
/// Most input files of one case.
pub const MAX_CASE_FILES: usize = 5;

/// One case of `evals/evals.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalCase {
    pub id: String,
    pub prompt: String,
    pub expected_output: Option<String>,
    /// Input files, by path inside the skill's folder: attached to the turn.
    pub files: Vec<String>,
    pub expectations: Vec<String>,
}

/// One query of a trigger set.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerCase {
    pub query: String,
    pub should_trigger: bool,
}

/// What a version asks to be evaluated on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalSuite {
    pub evals: Vec<EvalCase>,
    pub triggers: Vec<TriggerCase>,
    /// Where the trigger set was read from, if any.
    pub trigger_file: Option<String>,
}

impl EvalSuite {
    pub fn is_empty(&self) -> bool {
        self.evals.is_empty() && self.triggers.is_empty()
    }
}

#[derive(Deserialize)]
struct EvalsFile {
    #[serde(default)]
    skill_name: Option<String>,
    evals: Vec<RawCase>,
}

#[derive(Deserialize)]
struct RawCase {
    #[serde(default)]
    id: Option<Value>,
    prompt: String,
    #[serde(default)]
    expected_output: Option<String>,
    #[serde(default)]
    files: Vec<String>,
    #[serde(default)]
    expectations: Vec<String>,
}

/// Reads `evals/evals.json` (when given) as the cases of the skill `name`, each bounded.
pub fn parse_evals(bytes: &[u8], name: &str) -> Result<Vec<EvalCase>, String> {
    let file: EvalsFile = serde_json::from_slice(bytes).map_err(|err| format!("{EVALS_FILE}: {err}"))?;
    if let Some(declared) = file.skill_name.as_deref().filter(|declared| *declared != name) {
        return Err(format!("{EVALS_FILE}: `skill_name` is {declared:?}, but the skill is {name:?}"));
    }
    if file.evals.len() > MAX_CASES {
        return Err(format!("{EVALS_FILE}: {} cases; at most {MAX_CASES} run", file.evals.len()));
    }
    let mut cases = Vec::with_capacity(file.evals.len());
    for (i, raw) in file.evals.into_iter().enumerate() {
        let id = match raw.id {
            Some(Value::Number(number)) => number.to_string(),
            Some(Value::String(text)) if !text.trim().is_empty() && text.len() <= 64 => text,
            None => (i + 1).to_string(),
            Some(_) => {
                return Err(format!("{EVALS_FILE}: case {} has an `id` that is not a number or short text", i + 1))
            }
        };
        let where_ = format!("{EVALS_FILE}: case {id}");
        bounded_text(&raw.prompt, &format!("{where_}: `prompt`"))?;
        if raw.expectations.len() > MAX_EXPECTATIONS {
            return Err(format!("{where_}: {} expectations; at most {MAX_EXPECTATIONS}", raw.expectations.len()));
        }
        for expectation in &raw.expectations {
            bounded_text(expectation, &format!("{where_}: an expectation"))?;
        }
        if raw.files.len() > MAX_CASE_FILES {
            return Err(format!("{where_}: {} files; at most {MAX_CASE_FILES}", raw.files.len()));
        }
        if cases.iter().any(|case: &EvalCase| case.id == id) {
            return Err(format!("{where_}: the id is used twice"));
        }
        cases.push(EvalCase {
            id,
            prompt: raw.prompt,
            expected_output: raw.expected_output.filter(|text| !text.trim().is_empty()),
            files: raw.files,
            expectations: raw.expectations,
        });
    }
    Ok(cases)
}

/// Reads a trigger set: an array of `{"query", "should_trigger"}`, or `{"evals": [...]}` whose
/// items name the text `query` or `prompt`.
pub fn parse_triggers(bytes: &[u8], file: &str) -> Result<Vec<TriggerCase>, String> {
    #[derive(Deserialize)]
    struct Raw {
        #[serde(default)]
        query: Option<String>,
        #[serde(default)]
        prompt: Option<String>,
        should_trigger: bool,
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Set {
        List(Vec<Raw>),
        Wrapped { evals: Vec<Raw> },
    }
    let set: Set = serde_json::from_slice(bytes).map_err(|err| format!("{file}: {err}"))?;
    let raw = match set {
        Set::List(items) | Set::Wrapped { evals: items } => items,
    };
    if raw.len() > MAX_CASES {
        return Err(format!("{file}: {} queries; at most {MAX_CASES} run", raw.len()));
    }
    raw.into_iter()
        .enumerate()
        .map(|(i, item)| {
            let query = item.query.or(item.prompt).ok_or_else(|| format!("{file}: item {} has no `query`", i + 1))?;
            bounded_text(&query, &format!("{file}: item {}", i + 1))?;
            Ok(TriggerCase { query, should_trigger: item.should_trigger })
        })
        .collect()
}

fn bounded_text(text: &str, what: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err(format!("{what} is empty"));
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(format!("{what} is longer than {MAX_TEXT_BYTES} bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_creator_formats_are_read() {
        let evals =
            br#"{"skill_name": "pdf", "evals": [{"id": 1, "prompt": "Fill the form", "expected_output": "A PDF",
            "files": ["evals/files/form.pdf"], "expectations": ["The output is a PDF"]}, {"prompt": "Merge two"}]}"#;
        let cases = parse_evals(evals, "pdf").unwrap();
        assert_eq!((cases[0].id.as_str(), cases[1].id.as_str()), ("1", "2"));
        assert_eq!(cases[0].files, ["evals/files/form.pdf"]);
        assert!(parse_evals(evals, "other").unwrap_err().contains("skill_name"));
        let list =
            br#"[{"query": "make a pdf", "should_trigger": true}, {"query": "weather?", "should_trigger": false}]"#;
        assert_eq!(parse_triggers(list, "t.json").unwrap().len(), 2);
        let wrapped = br#"{"evals": [{"prompt": "make a pdf", "should_trigger": true}]}"#;
        assert!(parse_triggers(wrapped, "t.json").unwrap()[0].should_trigger);
        assert!(parse_triggers(br#"[{"should_trigger": true}]"#, "t.json").unwrap_err().contains("no `query`"));
        let many = format!("[{}]", vec![r#"{"query":"q","should_trigger":true}"#; 51].join(","));
        assert!(parse_triggers(many.as_bytes(), "t.json").unwrap_err().contains("at most 50"));
    }
}
