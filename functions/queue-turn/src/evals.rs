//! The queue's second kind of record: an eval run of a published skill version, queued by
//! `POST /skills/{path}/versions/{n}/evals`. Its turns are keyed by the run's id, so a redelivered
//! record replays what already ran and runs only the rest.

use agent_core::turn::evals::{EvalOptions, MAX_RUNS};
use agent_core::turn::TurnService;
use agent_core::{SkillPath, UserId};
use serde::Deserialize;
use tokio::time::Instant;

use super::RecordError;

/// The record's `kind`.
pub const SKILL_EVAL: &str = "skill_eval";

/// The body of an eval record. The producer is trusted, so the user id comes from the body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalRecord {
    kind: String,
    user_id: String,
    skill: String,
    version: u32,
    runs: u32,
    run_id: String,
}

/// Runs the record's evals and stores the report.
pub async fn run(service: &TurnService, record: EvalRecord, deadline: Option<Instant>) -> Result<(), RecordError> {
    if record.kind != SKILL_EVAL {
        return Err(RecordError::Malformed(format!("`kind` {:?} is not {SKILL_EVAL:?}", record.kind)));
    }
    let user = UserId::parse(record.user_id).map_err(|err| RecordError::Malformed(format!("`user_id`: {err}")))?;
    let skill = SkillPath::parse(&record.skill).map_err(|err| RecordError::Malformed(format!("`skill`: {err}")))?;
    let run_id_ok = !record.run_id.is_empty()
        && record.run_id.len() <= 64
        && record.run_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !run_id_ok || record.version == 0 || !(1..=MAX_RUNS).contains(&record.runs) {
        return Err(RecordError::Malformed("`run_id`, `version` or `runs` is out of range".to_owned()));
    }
    let options =
        EvalOptions { run_id: record.run_id, runs: record.runs, now: time::OffsetDateTime::now_utc(), deadline };
    let report = service
        .run_queued_evals(&user, &skill, record.version, &options)
        .await
        .map_err(|err| RecordError::Turn(agent_app::api::ApiError::from(err)))?;
    tracing::info!(
        skill = %skill,
        version = record.version,
        run_id = %report.run_id,
        status = %report.status,
        trigger_rate = ?report.summary.trigger_rate,
        pass_rate = ?report.summary.pass_rate,
        "eval run stored"
    );
    Ok(())
}
