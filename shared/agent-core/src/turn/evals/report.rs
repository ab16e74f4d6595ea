//! What an eval run found: each case's runs (loaded or not, steps, tools, commands, files, tokens
//! and cost, each expectation as graded), the rates a release is judged by, and the requirement a promote
//! may set on them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One run of one case: what the turn did and, for an eval case, how its expectations were graded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaseRun {
    pub run: u32,
    /// The skill was loaded by the model (or forced) during the turn.
    pub loaded: bool,
    pub forced: bool,
    /// The version loaded, when it was the skill under evaluation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_version: Option<u32>,
    pub steps: u32,
    /// Tool calls by tool name.
    pub tools: BTreeMap<String, u32>,
    /// The commands `execute` ran, in order.
    pub commands: Vec<String>,
    /// Files the turn wrote (their `/workspace` paths).
    pub files: Vec<String>,
    /// What the turn and its grading spent.
    #[serde(flatten)]
    pub spent: Spend,
    /// The reply, cut to a few kilobytes.
    pub reply: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expectations: Vec<GradedExpectation>,
    /// Why the turn or its grading failed; a failed run counts as not loaded and not passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Tokens and money an eval spent: a run's turn and grading, or a whole run's. Flattened into its
/// holder's JSON (`input_tokens`, `uncached_input_tokens`, `cache_read_tokens`, ..., `cost_usd`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// The cache reads and writes are parts of the input.
    #[serde(flatten)]
    pub usage: crate::message::Usage,
    /// US dollars over the priced calls; `None` when none was priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Spend {
    /// Adds what a call (a turn, its grading) or another spend cost.
    pub fn add(&mut self, usage: &crate::message::Usage, cost_usd: Option<f64>) {
        self.usage.add(*usage);
        if let Some(usd) = cost_usd {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + usd);
        }
    }

    /// Input and output tokens together.
    pub fn tokens(&self) -> u64 {
        self.usage.input_tokens + self.usage.output_tokens
    }
}

/// One expectation as the grader saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradedExpectation {
    pub text: String,
    pub passed: bool,
    /// The grader's reasoning: where in the turn it found (or missed) what the expectation says.
    pub evidence: String,
}

/// One case and its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseReport {
    /// `eval` (from `evals/evals.json`) or `trigger`.
    pub kind: String,
    pub id: String,
    pub prompt: String,
    /// For a trigger case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub should_trigger: Option<bool>,
    pub runs: Vec<CaseRun>,
}

/// The rates of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Trigger runs where the skill was loaded exactly when it should have been, over all trigger
    /// runs; `None` without a trigger set.
    pub trigger_rate: Option<f64>,
    /// Trigger runs that should have loaded the skill and did, and that should not and did.
    pub triggered_when_wanted: u32,
    pub wanted: u32,
    pub triggered_when_not_wanted: u32,
    pub not_wanted: u32,
    /// Expectations graded passed, over all graded (every run of every eval case); `None` without
    /// expectations.
    pub pass_rate: Option<f64>,
    pub expectations_passed: u32,
    pub expectations: u32,
    /// Eval-case runs that loaded the skill.
    pub eval_runs_loaded: u32,
    pub eval_runs: u32,
    pub failed_runs: u32,
    /// Every run's, added up.
    #[serde(flatten)]
    pub spent: Spend,
}

/// A whole eval run of one version, as stored with it and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    pub run_id: String,
    pub skill: String,
    pub version: u32,
    /// `running` while it runs in the background, then `completed` or `failed`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub runs_per_case: u32,
    pub model: String,
    /// Unix seconds.
    pub started_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<i64>,
    pub summary: Summary,
    pub cases: Vec<CaseReport>,
}

impl EvalReport {
    /// A run just accepted, before any case ran.
    pub fn running(run_id: &str, skill: &str, version: u32, runs: u32, model: &str, now: i64) -> Self {
        Self {
            run_id: run_id.to_owned(),
            skill: skill.to_owned(),
            version,
            status: "running".to_owned(),
            error: None,
            runs_per_case: runs,
            model: model.to_owned(),
            started_at: now,
            finished_at: None,
            summary: Summary::default(),
            cases: Vec::new(),
        }
    }

    /// Computes the summary from the cases.
    pub fn summarise(&mut self) {
        let mut summary = Summary::default();
        for case in &self.cases {
            for run in &case.runs {
                summary.spent.add(&run.spent.usage, run.spent.cost_usd);
                summary.failed_runs += u32::from(run.error.is_some());
                match case.should_trigger {
                    Some(true) => {
                        summary.wanted += 1;
                        summary.triggered_when_wanted += u32::from(run.loaded);
                    }
                    Some(false) => {
                        summary.not_wanted += 1;
                        summary.triggered_when_not_wanted += u32::from(run.loaded);
                    }
                    None => {
                        summary.eval_runs += 1;
                        summary.eval_runs_loaded += u32::from(run.loaded);
                        summary.expectations += run.expectations.len() as u32;
                        summary.expectations_passed += run.expectations.iter().filter(|e| e.passed).count() as u32;
                    }
                }
            }
        }
        let trigger_runs = summary.wanted + summary.not_wanted;
        let right = summary.triggered_when_wanted + (summary.not_wanted - summary.triggered_when_not_wanted);
        summary.trigger_rate = (trigger_runs > 0).then(|| f64::from(right) / f64::from(trigger_runs));
        summary.pass_rate = (summary.expectations > 0)
            .then(|| f64::from(summary.expectations_passed) / f64::from(summary.expectations));
        self.summary = summary;
    }

    /// The report as a table: one row per case, then the rates.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{} v{} — {} run(s) per case, model {}\n",
            self.skill, self.version, self.runs_per_case, self.model
        );
        out.push_str(&format!(
            "{:<8} {:<6} {:<44} {:>8} {:>12} {:>8}\n",
            "kind", "id", "prompt", "loaded", "expectations", "tokens"
        ));
        for case in &self.cases {
            let loaded = case.runs.iter().filter(|run| run.loaded).count();
            let graded: usize = case.runs.iter().map(|run| run.expectations.len()).sum();
            let passed: usize = case.runs.iter().map(|run| run.expectations.iter().filter(|e| e.passed).count()).sum();
            let tokens: u64 = case.runs.iter().map(|run| run.spent.tokens()).sum();
            let prompt: String =
                case.prompt.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(42).collect();
            let kind = match case.should_trigger {
                Some(true) => "trigger+",
                Some(false) => "trigger-",
                None => "eval",
            };
            let expectations = if graded == 0 { "-".to_owned() } else { format!("{passed}/{graded}") };
            out.push_str(&format!(
                "{kind:<8} {:<6} {prompt:<44} {:>8} {expectations:>12} {tokens:>8}\n",
                case.id,
                format!("{loaded}/{}", case.runs.len()),
            ));
        }
        let rate = |rate: Option<f64>| rate.map_or_else(|| "-".to_owned(), |rate| format!("{:.0}%", rate * 100.0));
        let cost = self.summary.spent.cost_usd.map_or_else(String::new, |usd| format!(" · ${usd:.4}"));
        out.push_str(&format!(
            "trigger rate {} · pass rate {} · {} failed run(s) · {} tokens ({} read from cache){cost}\n",
            rate(self.summary.trigger_rate),
            rate(self.summary.pass_rate),
            self.summary.failed_runs,
            self.summary.spent.tokens(),
            self.summary.spent.usage.cache_read_tokens,
        ));
        out
    }
}

/// The rates a version must reach before it may become the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Requirement {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_rate: Option<f64>,
}

impl Requirement {
    /// Reads `trigger=0.8,pass=0.9` (either part alone, rates from 0 to 1 or percentages).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut requirement = Requirement::default();
        for part in text.split(',').map(str::trim).filter(|part| !part.is_empty()) {
            let (name, value) = part.split_once('=').ok_or_else(|| format!("{part:?}: expected name=rate"))?;
            let value = value.trim();
            let rate = match value.strip_suffix('%') {
                Some(percent) => percent.trim().parse::<f64>().map(|p| p / 100.0),
                None => value.parse::<f64>(),
            }
            .map_err(|_| format!("{part:?}: the rate is not a number"))?;
            let rate = Some(rate)
                .filter(|rate| (0.0..=1.0).contains(rate))
                .ok_or(format!("{part:?}: a rate is from 0 to 1"))?;
            match name.trim() {
                "trigger" | "trigger_rate" => requirement.trigger_rate = Some(rate),
                "pass" | "pass_rate" => requirement.pass_rate = Some(rate),
                other => return Err(format!("{other:?}: expected `trigger` or `pass`")),
            }
        }
        Ok(requirement)
    }

    pub fn is_empty(&self) -> bool {
        self.trigger_rate.is_none() && self.pass_rate.is_none()
    }

    /// Whether `report` (the version's latest completed run) meets this requirement, and why not.
    pub fn check(&self, report: Option<&EvalReport>) -> Result<(), String> {
        if self.is_empty() {
            return Ok(());
        }
        let Some(report) = report else {
            return Err("the version has no completed eval run: run its evals first".to_owned());
        };
        let mut missed = Vec::new();
        let mut against = |name: &str, wanted: Option<f64>, got: Option<f64>| {
            let Some(wanted) = wanted else { return };
            match got {
                None => missed.push(format!(
                    "{name} rate {:.0}% is required, but the evals have no {name} cases",
                    wanted * 100.0
                )),
                Some(got) if got + 1e-9 < wanted => {
                    missed.push(format!("{name} rate {:.0}% is below the required {:.0}%", got * 100.0, wanted * 100.0))
                }
                Some(_) => {}
            }
        };
        against("trigger", self.trigger_rate, report.summary.trigger_rate);
        against("pass", self.pass_rate, report.summary.pass_rate);
        match missed.is_empty() {
            true => Ok(()),
            false => Err(format!("eval run {} of version {}: {}", report.run_id, report.version, missed.join("; "))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(loaded: bool, passed: &[bool]) -> CaseRun {
        let expectations = passed
            .iter()
            .map(|passed| GradedExpectation { text: "x".into(), passed: *passed, evidence: "seen".into() })
            .collect();
        CaseRun { loaded, expectations, ..CaseRun::default() }
    }

    fn case(should_trigger: Option<bool>, runs: Vec<CaseRun>) -> CaseReport {
        let kind = if should_trigger.is_some() { "trigger" } else { "eval" };
        CaseReport { kind: kind.into(), id: "1".into(), prompt: "p".into(), should_trigger, runs }
    }

    #[test]
    fn rates_and_requirements() {
        let mut report = EvalReport::running("r1", "pdf", 2, 2, "m", 0);
        report.cases = vec![
            case(Some(true), vec![run(true, &[]), run(false, &[])]),
            case(Some(false), vec![run(false, &[]), run(false, &[])]),
            case(None, vec![run(true, &[true, false]), run(true, &[true, true])]),
        ];
        report.summarise();
        assert_eq!(report.summary.trigger_rate, Some(0.75));
        assert_eq!(report.summary.pass_rate, Some(0.75));
        assert!(report.table().contains("trigger rate 75% · pass rate 75%"));
        let strict = Requirement::parse("trigger=0.8, pass=70%").unwrap();
        let refused = strict.check(Some(&report)).unwrap_err();
        assert!(refused.contains("trigger rate 75% is below the required 80%") && !refused.contains("pass rate"));
        assert!(Requirement::parse("pass=0.7").unwrap().check(Some(&report)).is_ok());
        assert!(strict.check(None).unwrap_err().contains("no completed eval run"));
        assert!(Requirement::parse("speed=1").is_err() && Requirement::parse("pass=2").is_err());
    }

    #[test]
    fn a_runs_spend_is_flat_in_its_json_and_a_report_without_the_split_still_reads() {
        let mut run = CaseRun::default();
        let usage = crate::message::Usage { cache_read_tokens: 60, ..crate::message::Usage::new(100, 10) };
        run.spent.add(&usage, Some(0.5));
        run.spent.add(&usage, None);
        let json = serde_json::to_value(&run).unwrap();
        assert_eq!((json["input_tokens"].as_u64(), json["cache_read_tokens"].as_u64()), (Some(200), Some(120)));
        assert_eq!((json["uncached_input_tokens"].as_u64(), json["cost_usd"].as_f64()), (Some(80), Some(0.5)));
        let older = serde_json::json!({"run": 1, "loaded": true, "forced": false, "steps": 2, "tools": {}, "commands": [],
            "files": [], "input_tokens": 7, "output_tokens": 3, "reply": "ok"});
        let read: CaseRun = serde_json::from_value(older).unwrap();
        assert_eq!((read.spent.tokens(), read.spent.cost_usd), (10, None));
    }
}
