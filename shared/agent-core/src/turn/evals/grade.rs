//! The grader: one model call per eval turn that judges each of the case's expectations against
//! what the turn did (its reply, tool calls, commands and files), with its reasoning, as
//! skill-creator's grader does. Its tokens are counted in the tenant's usage like a turn's.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;

use super::report::{CaseRun, GradedExpectation};
use super::{EvalOptions, Planned};
use crate::ids::UserId;
use crate::message::{ChatRequest, JsonSchemaFormat, Message, Usage};
use crate::turn::usage::Meter;
use crate::turn::{TurnError, TurnService};

/// Characters of the reply the grader is shown.
const REPLY_CHARS: usize = 12_000;

const INSTRUCTIONS: &str = "You grade one run of an AI agent against a list of expectations. You are \
given the user's request, what the agent did (tools, commands, files written) and its final reply. For \
each expectation, decide whether the run clearly meets it, and give the evidence: quote or point to the \
part of the run that shows it, or say what is missing. Be strict: an expectation that the run does not \
show is not met. Answer only with JSON that follows the schema, one item per expectation, in order.";

#[derive(Deserialize)]
struct Grading {
    expectations: Vec<Graded>,
}

#[derive(Deserialize)]
struct Graded {
    passed: bool,
    evidence: String,
}

impl TurnService {
    /// Grades `plan`'s expectations for `run`, whose reply was `reply`: each with its evidence,
    /// and what the grading spent, in tokens and money.
    pub(super) async fn grade(
        &self,
        user: &UserId,
        options: &EvalOptions,
        plan: &Planned<'_>,
        run: &CaseRun,
        reply: &str,
    ) -> Result<(Vec<GradedExpectation>, Usage, crate::turn::TurnCost), TurnError> {
        let mut content = format!("## The user's request\n{}\n", plan.prompt);
        if let Some(expected) = plan.expected_output {
            content.push_str(&format!("\n## What a good result looks like\n{expected}\n"));
        }
        content.push_str(&format!(
            "\n## What the agent did\n- steps: {}\n- tools called: {}\n- commands run: {}\n- files written: {}\n",
            run.steps,
            serde_json::to_string(&run.tools).unwrap_or_default(),
            if run.commands.is_empty() { "none".to_owned() } else { run.commands.join(" ; ") },
            if run.files.is_empty() { "none".to_owned() } else { run.files.join(", ") },
        ));
        let shown: String = reply.chars().take(REPLY_CHARS).collect();
        content.push_str(&format!("\n## The agent's final reply\n{shown}\n\n## Expectations\n"));
        for (i, expectation) in plan.expectations.iter().enumerate() {
            content.push_str(&format!("{}. {expectation}\n", i + 1));
        }
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["expectations"],
            "properties": {"expectations": {"type": "array", "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["passed", "evidence"],
                "properties": {"passed": {"type": "boolean"}, "evidence": {"type": "string"}}
            }}}
        });
        let request = ChatRequest {
            system: INSTRUCTIONS.to_owned(),
            messages: vec![Message::user(content)],
            tools: Arc::from(Vec::new()),
            response_format: Some(JsonSchemaFormat { name: "grading".to_owned(), schema }),
            ..ChatRequest::default()
        };
        let meter = Arc::new(Meter::priced(&self.config.model_id, Arc::clone(&self.config.prices)));
        let response = meter.clone().scope(self.model.complete(&request)).await;
        // What the grader spent is the tenant's: each grading is a new spend, counted once (the
        // token makes a retried write of it count nothing more).
        let token = format!(
            "eval-grade-{}-{}-{}-{}",
            options.run_id,
            plan.case,
            plan.run,
            hex::encode(rand::random::<[u8; 8]>())
        );
        let spent = agent_ports_usage(meter.usage(options.now, false));
        if let Err(err) = self.sessions.record_usage(user, &spent, &token).await {
            tracing::warn!(error = %err, "could not count the grader's tokens");
        }
        let response = response?;
        let grading: Grading = serde_json::from_str(response.content.trim())
            .map_err(|err| TurnError::Internal(format!("the grader's answer is not the expected JSON: {err}")))?;
        if grading.expectations.len() != plan.expectations.len() {
            return Err(TurnError::Internal(format!(
                "the grader judged {} expectations of {}",
                grading.expectations.len(),
                plan.expectations.len()
            )));
        }
        let graded = plan
            .expectations
            .iter()
            .zip(grading.expectations)
            .map(|(text, graded)| GradedExpectation {
                text: text.clone(),
                passed: graded.passed,
                evidence: graded.evidence.chars().take(2000).collect(),
            })
            .collect();
        Ok((graded, response.usage, meter.cost()))
    }
}

/// What the grader spent, counted as grading rather than as a turn.
fn agent_ports_usage(spent: crate::store::TurnUsage) -> crate::store::TurnUsage {
    crate::store::TurnUsage { grading: true, ..spent }
}
