//! Evals of a published skill version: each case of its suite run as real turns through this
//! service (the tenant's whole catalog, the configured model, the sandbox), with the version
//! pinned, in sessions of their own that no user's list shows; each expectation graded by the
//! model; the report stored with the version. Eval turns are metered like any turn, and so is the
//! grading.
//!
//! - `cases`: the suite in skill-creator's formats (`evals/evals.json`, a trigger set).
//! - `report`: what a run found, its rates, the requirement a promote may set.
//! - `grade`: the grader's model call.

mod cases;
mod grade;
mod report;

use std::collections::BTreeMap;
use std::sync::Mutex;

use futures::stream::{self, StreamExt};
use time::OffsetDateTime;
use tokio::time::Instant;

pub use cases::{parse_evals, parse_triggers, EvalCase, EvalSuite, TriggerCase, EVALS_FILE, TRIGGER_FILES};
pub use report::{CaseReport, CaseRun, EvalReport, GradedExpectation, Requirement, Spend, Summary};

use super::{TurnError, TurnRequest, TurnService, UserProfile};
use crate::events::{TurnEvent, TurnObserver};
use crate::ids::{SessionId, SkillPath, UserId};
use crate::keys;
use crate::skills::versions::{self, VersionRecord};
use crate::store::{IdempotencyKey, ObjectStore, StoreError};
use crate::turn::uploads::Attachment;

/// The prefix of every eval turn's session id: the API refuses it from clients and lists no such
/// session, so evals never touch a user's sessions.
pub const EVAL_SESSION_PREFIX: &str = "_eval.";
/// Most runs of each case.
pub const MAX_RUNS: u32 = 10;
/// Most turns (cases × runs) one eval run makes.
pub const MAX_EVAL_TURNS: usize = 200;
/// Eval turns run at once.
const CONCURRENCY: usize = 4;
/// Characters of a reply kept in the report.
const REPLY_CHARS: usize = 2000;
/// Most commands kept per run.
const MAX_COMMANDS: usize = 50;

/// Whether a client-named session id is one the evals reserve.
pub fn is_eval_session(session: &str) -> bool {
    session.starts_with(EVAL_SESSION_PREFIX)
}

/// A new eval run's id: the time in nanoseconds and some randomness, so runs sort by when they
/// started, also two started within the same second.
pub fn new_run_id(now: OffsetDateTime) -> String {
    format!("{:019}-{}", now.unix_timestamp_nanos().max(0), hex::encode(rand::random::<[u8; 4]>()))
}

/// Reads the suite of `record` from its own files: an error when it has none or it does not read.
pub async fn read_suite(
    objects: &dyn ObjectStore,
    user: &UserId,
    record: &VersionRecord,
) -> Result<EvalSuite, TurnError> {
    let has = |path: &str| record.files.iter().any(|file| file.path == path);
    let read = |path: &'static str| async move {
        versions::read_version_file(objects, user, record, path).await.map_err(|err| match err {
            versions::VersionError::Storage(err) => TurnError::from(err),
            other => TurnError::InvalidInput(other.to_string()),
        })
    };
    let mut suite = EvalSuite::default();
    if has(EVALS_FILE) {
        suite.evals = parse_evals(&read(EVALS_FILE).await?, &record.entry.name).map_err(TurnError::InvalidInput)?;
    }
    if let Some(file) = TRIGGER_FILES.into_iter().find(|file| has(file)) {
        suite.triggers = parse_triggers(&read(file).await?, file).map_err(TurnError::InvalidInput)?;
        suite.trigger_file = Some(file.to_owned());
    }
    if suite.is_empty() {
        return Err(TurnError::InvalidInput(format!(
            "version {} of {} has no evals: add {EVALS_FILE} or {} to the skill",
            record.version, record.skill, TRIGGER_FILES[0]
        )));
    }
    Ok(suite)
}

/// Where an eval run is kept with its version.
fn report_key(user: &UserId, skill: &SkillPath, version: u32, run_id: &str) -> String {
    format!("{}{run_id}.json", keys::skill_version_evals_prefix(user, skill, version))
}

/// Stores `report` with its version (a later write of the same run replaces it).
pub async fn store_report(objects: &dyn ObjectStore, user: &UserId, report: &EvalReport) -> Result<(), StoreError> {
    let skill = SkillPath::parse(&report.skill).map_err(|err| StoreError::Corrupt(err.to_string()))?;
    let bytes = serde_json::to_vec(report).map_err(|err| StoreError::Corrupt(err.to_string()))?;
    objects.put(&report_key(user, &skill, report.version, &report.run_id), bytes).await
}

/// The eval runs of a version, newest first.
pub async fn list_reports(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    version: u32,
) -> Result<Vec<EvalReport>, StoreError> {
    let mut listed = objects.list(&keys::skill_version_evals_prefix(user, skill, version)).await?;
    listed.sort_by(|a, b| b.key.cmp(&a.key));
    let mut reports = Vec::with_capacity(listed.len());
    for meta in listed.iter().take(50) {
        if let Some(object) = objects.get(&meta.key).await? {
            match serde_json::from_slice::<EvalReport>(&object.bytes) {
                Ok(report) => reports.push(report),
                Err(err) => tracing::warn!(key = %meta.key, error = %err, "an eval report that does not decode"),
            }
        }
    }
    Ok(reports)
}

/// One eval run of a version, by its id.
pub async fn get_report(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    version: u32,
    run_id: &str,
) -> Result<Option<EvalReport>, StoreError> {
    let valid =
        !run_id.is_empty() && run_id.len() <= 64 && run_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !valid {
        return Ok(None);
    }
    let Some(object) = objects.get(&report_key(user, skill, version, run_id)).await? else { return Ok(None) };
    serde_json::from_slice(&object.bytes)
        .map(Some)
        .map_err(|err| StoreError::Corrupt(format!("eval run {run_id}: {err}")))
}

/// The newest completed run of a version, what a promote's requirement is checked against.
pub async fn latest_completed(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    version: u32,
) -> Result<Option<EvalReport>, StoreError> {
    Ok(list_reports(objects, user, skill, version).await?.into_iter().find(|report| report.status == "completed"))
}

/// How one eval run is made.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    pub run_id: String,
    /// Runs of each case, 1 to [`MAX_RUNS`].
    pub runs: u32,
    pub now: OffsetDateTime,
    /// Each eval turn stops before this, as a turn stops before its Lambda deadline.
    pub deadline: Option<Instant>,
}

/// What one eval turn's events showed.
#[derive(Default)]
struct Watched {
    loaded: Option<(bool, Option<u32>)>,
    tools: BTreeMap<String, u32>,
    commands: Vec<String>,
}

/// Collects, from one eval turn's events, the skill loads and the tool calls.
struct Watcher<'a> {
    skill: &'a str,
    seen: Mutex<Watched>,
}

impl TurnObserver for Watcher<'_> {
    fn event(&self, event: TurnEvent) {
        let mut seen = self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match event {
            TurnEvent::SkillLoaded { skill, forced, version } if skill == self.skill => {
                seen.loaded = Some((forced, version));
            }
            TurnEvent::ToolCall { name, arguments, .. } => {
                if name == crate::tool_names::EXECUTE && seen.commands.len() < MAX_COMMANDS {
                    if let Some(command) = arguments.get("command").and_then(|command| command.as_str()) {
                        seen.commands.push(command.chars().take(500).collect());
                    }
                }
                *seen.tools.entry(name).or_default() += 1;
            }
            _ => {}
        }
    }

    fn wants_deltas(&self) -> bool {
        false
    }
}

/// One turn to run: which case, which run.
struct Planned<'a> {
    case: usize,
    run: u32,
    prompt: &'a str,
    files: &'a [String],
    expectations: &'a [String],
    expected_output: Option<&'a str>,
}

impl TurnService {
    /// Runs the suite of `record` `options.runs` times per case and grades it. A case whose turn
    /// fails is recorded with its error; the run goes on.
    pub async fn run_skill_evals(
        &self,
        user: &UserId,
        record: &VersionRecord,
        options: &EvalOptions,
    ) -> Result<EvalReport, TurnError> {
        let suite = read_suite(self.objects.as_ref(), user, record).await?;
        let runs = options.runs.clamp(1, MAX_RUNS);
        let turns = (suite.evals.len() + suite.triggers.len()) * runs as usize;
        if turns > MAX_EVAL_TURNS {
            return Err(TurnError::InvalidInput(format!(
                "{turns} eval turns ({runs} runs of each case); at most {MAX_EVAL_TURNS}: run fewer runs"
            )));
        }
        let mut report = EvalReport::running(
            &options.run_id,
            &record.skill.to_string(),
            record.version,
            runs,
            &self.config.model_id,
            options.now.unix_timestamp(),
        );
        let mut planned = Vec::with_capacity(turns);
        for (i, case) in suite.evals.iter().enumerate() {
            report.cases.push(CaseReport {
                kind: "eval".into(),
                id: case.id.clone(),
                prompt: case.prompt.clone(),
                should_trigger: None,
                runs: Vec::new(),
            });
            for run in 1..=runs {
                planned.push(Planned {
                    case: i,
                    run,
                    prompt: &case.prompt,
                    files: &case.files,
                    expectations: &case.expectations,
                    expected_output: case.expected_output.as_deref(),
                });
            }
        }
        for (i, case) in suite.triggers.iter().enumerate() {
            report.cases.push(CaseReport {
                kind: "trigger".into(),
                id: (i + 1).to_string(),
                prompt: case.query.clone(),
                should_trigger: Some(case.should_trigger),
                runs: Vec::new(),
            });
            for run in 1..=runs {
                let prompt = &suite.triggers[i].query;
                let case_index = suite.evals.len() + i;
                planned.push(Planned {
                    case: case_index,
                    run,
                    prompt,
                    files: &[],
                    expectations: &[],
                    expected_output: None,
                });
            }
        }
        let done: Vec<(usize, CaseRun)> = stream::iter(planned)
            .map(|plan| async move {
                let run = self.eval_turn(user, record, options, &plan).await;
                (plan.case, run)
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        for (case, run) in done {
            report.cases[case].runs.push(run);
        }
        for case in &mut report.cases {
            case.runs.sort_by_key(|run| run.run);
        }
        report.status = "completed".into();
        report.finished_at = Some(OffsetDateTime::now_utc().unix_timestamp());
        report.summarise();
        Ok(report)
    }

    /// One eval turn and, for an eval case, its grading.
    async fn eval_turn(
        &self,
        user: &UserId,
        record: &VersionRecord,
        options: &EvalOptions,
        plan: &Planned<'_>,
    ) -> CaseRun {
        let mut run = CaseRun { run: plan.run, ..CaseRun::default() };
        let skill = record.skill.to_string();
        let session = format!("{EVAL_SESSION_PREFIX}{}.c{}.r{}", options.run_id, plan.case + 1, plan.run);
        let session = match SessionId::parse(session) {
            Ok(session) => session,
            Err(err) => {
                run.error = Some(err.to_string());
                return run;
            }
        };
        let attachments = match self.eval_attachments(user, &session, record, plan.files).await {
            Ok(attachments) => attachments,
            Err(err) => {
                run.error = Some(format!("attaching the case's files: {err}"));
                return run;
            }
        };
        // A repeated delivery of the same eval run replays each turn instead of running it again.
        let idempotency = IdempotencyKey::new(&format!("eval-{}", options.run_id), &[plan.prompt]).ok();
        let request = TurnRequest {
            user: user.clone(),
            session,
            message: plan.prompt.to_owned(),
            ticket: None,
            profile: UserProfile::default(),
            deadline: options.deadline,
            now: options.now,
            idempotency,
            decisions: None,
            attachments,
            pins: BTreeMap::from([(record.skill.clone(), record.version)]),
        };
        let watcher = Watcher { skill: &skill, seen: Mutex::new(Watched::default()) };
        let reply = self.run_turn_observed(request, &watcher).await;
        let seen = watcher.seen.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
        run.tools = seen.tools;
        run.commands = seen.commands;
        match seen.loaded {
            Some((forced, version)) => {
                run.loaded = true;
                run.forced = forced;
                run.loaded_version = version;
            }
            None => run.loaded = false,
        }
        let reply = match reply {
            Ok(reply) => reply,
            Err(err) => {
                run.error = Some(err.to_string());
                return run;
            }
        };
        // A replayed turn (an eval run delivered again after part of it ran) sends no events, but
        // its reply keeps the versions it loaded and the skill it was forced into.
        if !run.loaded {
            if let Some(version) = reply.skill_versions.get(&skill) {
                run.loaded = true;
                run.loaded_version = Some(*version);
                run.forced = reply.forced_skill.as_ref().is_some_and(|forced| forced.to_string() == skill);
            }
        }
        run.steps = reply.steps;
        run.files = reply.files.iter().map(|file| file.path.clone()).collect();
        run.spent.add(&reply.usage, reply.cost.usd);
        run.reply = reply.reply.chars().take(REPLY_CHARS).collect();
        if !plan.expectations.is_empty() {
            match self.grade(user, options, plan, &run, &reply.reply).await {
                Ok((graded, usage, cost)) => {
                    run.expectations = graded;
                    run.spent.add(&usage, cost.usd);
                }
                Err(err) => run.error = Some(format!("grading: {err}")),
            }
        }
        run
    }

    /// The case's input files (paths inside the skill's folder), uploaded for the eval session
    /// and attached under their file names.
    async fn eval_attachments(
        &self,
        user: &UserId,
        session: &SessionId,
        record: &VersionRecord,
        files: &[String],
    ) -> Result<Vec<Attachment>, TurnError> {
        let mut attachments = Vec::with_capacity(files.len());
        for path in files {
            let bytes = versions::read_version_file(self.objects.as_ref(), user, record, path)
                .await
                .map_err(|err| TurnError::InvalidInput(err.to_string()))?;
            let name = path.rsplit('/').next().unwrap_or(path);
            let upload = self.upload(user, session, name, bytes).await?;
            attachments.push(Attachment::new(&upload.upload, &upload.name).map_err(TurnError::InvalidInput)?);
        }
        Ok(attachments)
    }
}

impl TurnService {
    /// Runs a queued eval run of version `version` of `skill` and stores its report, completed or
    /// failed. An error is returned only where a retry could help (storage, the model); a run that
    /// cannot succeed (no such version, no suite) is stored as failed. A run already stored
    /// finished is given back as it is: a redelivered record changes nothing and calls no model.
    pub async fn run_queued_evals(
        &self,
        user: &UserId,
        skill: &SkillPath,
        version: u32,
        options: &EvalOptions,
    ) -> Result<EvalReport, TurnError> {
        let objects = self.objects.as_ref();
        // Replayed turns show no skill loads and their grading would be asked again, so a finished
        // run is never run over.
        if let Some(done) = get_report(objects, user, skill, version, &options.run_id).await? {
            if done.status != "running" {
                tracing::info!(run_id = %options.run_id, status = %done.status, "eval run already finished");
                return Ok(done);
            }
        }
        let started = options.now.unix_timestamp();
        let mut report = EvalReport::running(
            &options.run_id,
            &skill.to_string(),
            version,
            options.runs,
            &self.config.model_id,
            started,
        );
        let outcome = match versions::get_version(objects, user, skill, version).await {
            Ok(record) => self.run_skill_evals(user, &record, options).await,
            Err(versions::VersionError::Storage(err)) => Err(TurnError::from(err)),
            Err(other) => Err(TurnError::InvalidInput(other.to_string())),
        };
        match outcome {
            Ok(done) => report = done,
            Err(err @ (TurnError::InvalidInput(_) | TurnError::UnknownSkill { .. })) => {
                report.status = "failed".into();
                report.error = Some(err.to_string());
                report.finished_at = Some(OffsetDateTime::now_utc().unix_timestamp());
            }
            Err(err) => return Err(err),
        }
        store_report(objects, user, &report).await?;
        Ok(report)
    }
}
