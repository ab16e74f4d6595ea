//! The eval calls on a skill's versions, made against the object store and the turn queue through
//! agent-core's `turn::evals`: a run checked, stored as running and queued for queue-turn, the runs
//! of a version read back, and the requirement a promote sets checked against the newest run.

use agent_core::skills::versions::{self, VersionError};
use agent_core::store::{ObjectStore, StoreError};
use agent_core::turn::evals::{self, EvalReport, Requirement, MAX_EVAL_TURNS};
use agent_core::{SkillPath, UserId};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::outcome::{version_error, Context, VersionOutcome};
use crate::api::ApiError;

/// The record's `kind` queue-turn runs as an eval run rather than a turn.
const EVAL_RECORD_KIND: &str = "skill_eval";

/// A store failure as the versions routes answer it.
fn storage(err: StoreError) -> ApiError {
    version_error(VersionError::Storage(err))
}

/// Queues an eval run of `version` of `skill`, `runs` times per case: the version and its suite
/// checked, the run stored as running (so a poll finds it at once), then the record sent.
pub(super) async fn run_evals(
    context: &Context<'_>,
    user: &UserId,
    skill: SkillPath,
    version: u32,
    runs: u32,
) -> Result<VersionOutcome, ApiError> {
    // Before any read: without a queue no run could ever finish.
    let Some(queue) = context.queue else {
        return Err(ApiError::new(
            501,
            "evals_need_a_queue",
            "evals run in the background on the turn queue, and this deployment has none (TURN_QUEUE_URL)",
        ));
    };
    let objects = context.objects;
    let record = versions::get_version(objects, user, &skill, version).await.map_err(version_error)?;
    let suite = evals::read_suite(objects, user, &record).await.map_err(ApiError::from)?;
    // Refused here rather than stored as a failed run a moment later.
    let turns = (suite.evals.len() + suite.triggers.len()) * runs as usize;
    if turns > MAX_EVAL_TURNS {
        return Err(ApiError::bad_request(format!(
            "{turns} eval turns ({runs} runs of each case); a run makes at most {MAX_EVAL_TURNS}: ask for fewer runs"
        )));
    }
    let now = time::OffsetDateTime::now_utc();
    let run_id = evals::new_run_id(now);
    let name = skill.to_string();
    let mut report = EvalReport::running(&run_id, &name, version, runs, context.model_id, now.unix_timestamp());
    evals::store_report(objects, user, &report).await.map_err(storage)?;
    let body = json!({
        "kind": EVAL_RECORD_KIND,
        "user_id": user,
        "skill": name,
        "version": version,
        "runs": runs,
        "run_id": run_id,
    });
    // One group per skill of a tenant: its runs go one after another, other skills' beside them.
    let digest = hex::encode(Sha256::digest(format!("{user}/{name}").as_bytes()));
    let group = format!("eval-{}", &digest[..32]);
    if let Err(error) = queue.enqueue(body, &group, &run_id).await {
        tracing::error!(skill = %skill, version, %error, "could not enqueue an eval run");
        // The run will never start: its report says so rather than staying `running`.
        report.status = "failed".to_owned();
        report.error = Some("the run could not be queued".to_owned());
        report.finished_at = Some(now.unix_timestamp());
        if let Err(error) = evals::store_report(objects, user, &report).await {
            tracing::warn!(%error, "could not mark an unqueued eval run failed");
        }
        return Err(ApiError::new(503, "queue_unavailable", "the eval run could not be queued; send it again"));
    }
    tracing::info!(skill = %skill, version, runs, run_id, "eval run queued");
    Ok(VersionOutcome::EvalsQueued { skill, version, run_id })
}

/// The eval runs of `version` of `skill`, newest first; 404 for a version that does not exist.
pub(super) async fn list_evals(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: SkillPath,
    version: u32,
) -> Result<VersionOutcome, ApiError> {
    versions::get_version(objects, user, &skill, version).await.map_err(version_error)?;
    let reports = evals::list_reports(objects, user, &skill, version).await.map_err(storage)?;
    Ok(VersionOutcome::EvalsListed { skill, version, reports })
}

/// One eval run of `version` of `skill`; 404 when there is none by that id.
pub(super) async fn get_eval(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    version: u32,
    run_id: &str,
) -> Result<VersionOutcome, ApiError> {
    match evals::get_report(objects, user, skill, version, run_id).await.map_err(storage)? {
        Some(report) => Ok(VersionOutcome::EvalReport(Box::new(report))),
        None => Err(ApiError::not_found(format!("no eval run `{run_id}` of version {version} of {skill}"))),
    }
}

/// Refuses to make `version` the default unless its newest completed eval run meets `require`:
/// 404 for a version that does not exist, 409 with the reason for one that falls short.
pub(super) async fn check_requirement(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    version: u32,
    require: &Requirement,
) -> Result<(), ApiError> {
    versions::get_version(objects, user, skill, version).await.map_err(version_error)?;
    let latest = evals::latest_completed(objects, user, skill, version).await.map_err(storage)?;
    require.check(latest.as_ref()).map_err(|reason| {
        tracing::info!(skill = %skill, version, reason, "promote refused by its eval requirement");
        ApiError::new(409, "eval_requirement_not_met", reason)
    })
}
