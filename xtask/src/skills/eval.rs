//! `cargo xtask skills eval`: a published version's evals run as real turns through the turn
//! service the functions build (`agent_app::app_from_env`: the deployment's model, stores and
//! sandbox), the report stored with the version as the API's background run stores it, its rates
//! checked against a requirement, and the version promoted when asked and the requirement holds.

use agent_core::skills::versions::{self, VersionError, VersionRecord};
use agent_core::turn::evals::{self, EvalOptions, EvalReport, Requirement, MAX_RUNS};
use time::OffsetDateTime;

use super::*;

/// `cargo xtask skills eval --help`.
pub(crate) const EVAL_HELP: &str = "\
usage: cargo xtask skills eval <skill-path> --user <id> [--version <n>] [--runs <n>] [--require trigger=0.8,pass=0.9] [--promote] [--json] [--bucket <name> | --console]

Runs the evals of a published version of the tenant's skill (the newest version unless --version
says which) as real turns, as POST /skills/{path}/versions/{n}/evals runs them in the background:
each case of the version's evals/evals.json and of its trigger set (evals/trigger_evals.json,
evals/triggers.json or evals/eval_set.json) is a turn with the version pinned, in a session of its
own whose id starts with _eval. (never listed, never a client's), each expectation graded by the
model. The turns and the grading are metered in the tenant's usage like any turn. The report is
stored with the version (GET /skills/{path}/versions/{n}/evals lists it) and printed as a table:
each case's loads, expectations passed and tokens, then the trigger rate (trigger runs where the
skill loaded exactly when it should have, over all trigger runs) and the pass rate (expectations
passed over expectations graded). docs/skills.md says more.
The turn service is built as the functions build theirs: from the local stack's environment file
(`cargo xtask local`'s, or with --console `cargo xtask console`'s: its bucket, table, endpoint and
model, but when this process sets LLM_PROVIDER other than replay, its own LLM_* settings apply), or
with --bucket from this process's environment (SESSIONS_TABLE, LLM_PROVIDER, LLM_MODEL, LLM_API_KEY
or LLM_API_KEY_SECRET, SANDBOX, ... as docs/configuration.md lists them) and the usual AWS
credentials.
  --user <id>         the tenant
  --version <n>       the version to evaluate; default: the newest
  --runs <n>          runs of each case, 1 to 10; default 3
  --require <rates>   trigger=<rate>,pass=<rate> (either; 0 to 1, or a percentage): exits 1 with
                      the reason when this run falls below it
  --promote           makes the version the skill's default when the requirement holds (or none
                      was given) and some turn ran; says whether it did
  --json              the whole report as JSON instead of the table
  --bucket <name>     a real bucket (AWS credentials and region as usual); default: the local stack
  --console           the stack of `cargo xtask console` instead of `cargo xtask local`";

/// Runs of each case when `--runs` is not given, as the API's default.
const DEFAULT_RUNS: u32 = 3;
/// Who a promote by this command is recorded as.
const PROMOTER: &str = "cargo xtask skills eval";
/// Endpoints of one service that would win over the local stack's `AWS_ENDPOINT_URL`.
const SERVICE_ENDPOINTS: [&str; 2] = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_DYNAMODB"];
/// Distinct turn errors shown when runs failed.
const ERRORS_SHOWN: usize = 3;

/// Where the deployment is.
#[derive(Debug, PartialEq)]
enum Place {
    /// A local stack, by the environment file it wrote.
    Local(&'static str),
    /// A real bucket; the rest of the deployment's settings from this process's environment.
    Bucket(String),
}

/// What the command was asked.
#[derive(Debug, PartialEq)]
struct Args {
    skill: SkillPath,
    user: UserId,
    version: Option<u32>,
    runs: u32,
    require: Option<Requirement>,
    promote: bool,
    json: bool,
    place: Place,
}

/// `cargo xtask skills eval <args>`: the environment is set before any thread starts.
pub(super) fn run(root: &Path, args: &[String]) -> Result<(), String> {
    if args.iter().any(|arg| arg == "--help" || arg == "-h") {
        return emit(&format!("{EVAL_HELP}\n"));
    }
    let args = parse(args)?;
    let place = point_at(root, &args.place)?;
    let runtime = tokio::runtime::Runtime::new().map_err(|err| format!("tokio runtime: {err}"))?;
    runtime.block_on(eval(&args, &place))
}

/// Reads the arguments; nothing is touched yet.
fn parse(args: &[String]) -> Result<Args, String> {
    let usage = || format!("usage: {}", EVAL_HELP.lines().next().unwrap_or_default().trim_start_matches("usage: "));
    let (mut skill, mut user, mut version, mut runs, mut require, mut bucket) = (None, None, None, None, None, None);
    let (mut promote, mut json, mut console) = (false, false, false);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let slot = match arg.as_str() {
            "--promote" => {
                promote = true;
                continue;
            }
            "--json" => {
                json = true;
                continue;
            }
            "--console" => {
                console = true;
                continue;
            }
            "--user" => &mut user,
            "--version" => &mut version,
            "--runs" => &mut runs,
            "--require" => &mut require,
            "--bucket" => &mut bucket,
            flag if flag.starts_with('-') => return Err(format!("unexpected argument {flag:?}\n{}", usage())),
            path => {
                if skill.is_some() {
                    return Err(format!("one skill only, got {path:?} as well\n{}", usage()));
                }
                skill = Some(path.to_owned());
                continue;
            }
        };
        if slot.is_some() {
            return Err(format!("{arg} is given twice\n{}", usage()));
        }
        *slot = Some(args.next().ok_or_else(|| format!("{arg} needs a value\n{}", usage()))?.clone());
    }
    let skill = skill.ok_or_else(|| format!("which skill? (its path, e.g. pdf or docs/pdf)\n{}", usage()))?;
    let skill = SkillPath::parse(&skill).map_err(|err| format!("{skill:?} is not a skill's path: {err}"))?;
    let user = user.ok_or_else(|| format!("eval needs --user <id>\n{}", usage()))?;
    let user = UserId::parse(user.as_str()).map_err(|err| format!("--user {user:?} is not a usable id: {err}"))?;
    let version = match version {
        None => None,
        Some(text) => match text.trim().parse::<u32>() {
            Ok(number) if number >= 1 => Some(number),
            _ => return Err(format!("--version {text:?}: a version is a whole number from 1")),
        },
    };
    let runs = match runs {
        None => DEFAULT_RUNS,
        Some(text) => match text.trim().parse::<u32>() {
            Ok(number) if (1..=MAX_RUNS).contains(&number) => number,
            _ => return Err(format!("--runs {text:?}: a whole number from 1 to {MAX_RUNS}")),
        },
    };
    let require = match require {
        None => None,
        Some(text) => {
            let requirement = Requirement::parse(&text).map_err(|err| format!("--require {text:?}: {err}"))?;
            if requirement.is_empty() {
                return Err(format!("--require {text:?}: name a rate, e.g. trigger=0.8,pass=0.9"));
            }
            Some(requirement)
        }
    };
    let place = match (bucket, console) {
        (Some(_), true) => return Err(format!("--bucket and --console name two places\n{}", usage())),
        (Some(bucket), false) if bucket.trim().is_empty() => return Err("--bucket names no bucket".to_owned()),
        (Some(bucket), false) => Place::Bucket(bucket.trim().to_owned()),
        (None, true) => Place::Local(CONSOLE_ENV_FILE),
        (None, false) => Place::Local(LOCAL_ENV_FILE),
    };
    Ok(Args { skill, user, version, runs, require, promote, json, place })
}

/// Points this process's environment at the deployment, before any thread starts: a local stack's
/// settings from the file it wrote (its model's only when this process names no model of its own, the replay aside),
/// or the bucket over this process's own settings. Returns the place's description.
fn point_at(root: &Path, place: &Place) -> Result<String, String> {
    let env_file = match place {
        Place::Bucket(bucket) => {
            std::env::set_var("SKILLS_BUCKET", bucket);
            return Ok(format!("s3://{bucket}"));
        }
        Place::Local(env_file) => *env_file,
    };
    let file = std::env::var_os(LOCAL_ENV_VARIABLE).map_or_else(|| root.join(env_file), PathBuf::from);
    let command = if env_file == CONSOLE_ENV_FILE { "cargo xtask console" } else { "cargo xtask local" };
    let text = std::fs::read_to_string(&file).map_err(|err| {
        format!(
            "no local stack ({}: {err}): start `{command}` in another terminal, or pass --bucket <name>",
            file.display()
        )
    })?;
    // As the console decides it: a provider of this process's own (not the replay) brings its model.
    let own_model = std::env::var("LLM_PROVIDER").is_ok_and(|provider| !matches!(provider.trim(), "" | "replay"));
    let settings = crate::local::parse_environment(&text);
    for (name, value) in &settings {
        let valid = !name.is_empty() && !name.contains(['=', '\0']) && !value.contains('\0');
        if valid && !(own_model && name.starts_with("LLM_")) {
            std::env::set_var(name, value.trim());
        }
    }
    for name in SERVICE_ENDPOINTS {
        std::env::remove_var(name);
    }
    let endpoint = settings
        .iter()
        .find(|(name, _)| name == "AWS_ENDPOINT_URL")
        .map(|(_, value)| value.trim().to_owned())
        .ok_or_else(|| format!("{} has no AWS_ENDPOINT_URL", file.display()))?;
    local_stack_answers(&endpoint, command)?;
    let bucket = settings.iter().find(|(name, _)| name == "SKILLS_BUCKET").map_or("", |(_, value)| value.trim());
    Ok(format!("s3://{bucket} on {endpoint}"))
}

/// The version to evaluate: the one named, else the newest.
async fn resolve(objects: &dyn ObjectStore, args: &Args) -> Result<VersionRecord, String> {
    let (user, skill) = (&args.user, &args.skill);
    if let Some(number) = args.version {
        return versions::get_version(objects, user, skill, number).await.map_err(|err| match err {
            VersionError::NotFound(_) => format!("{skill} has no version {number} for {user}"),
            other => format!("reading version {number} of {skill}: {other}"),
        });
    }
    let listed = versions::list_versions(objects, user, skill).await.map_err(|err| err.to_string())?;
    listed.into_iter().max_by_key(|record| record.version).ok_or_else(|| {
        format!(
            "{skill} has no published version for {user}: publish one first (`cargo xtask skills sync`, \
             or PUT /skills/{skill}/versions)"
        )
    })
}

/// What a run allows: `Ok` when the requirement holds (or there is none), else the reason.
fn verdict(require: Option<&Requirement>, report: &EvalReport) -> Result<(), String> {
    match require {
        None => Ok(()),
        Some(requirement) => requirement.check(Some(report)),
    }
}

/// Whether a promote may follow this run: the requirement holds, and some turn of it ran (a run
/// whose every turn failed, a model that does not answer, says nothing of the version).
fn may_promote(require: Option<&Requirement>, report: &EvalReport) -> Result<(), String> {
    verdict(require, report)?;
    let turns: usize = report.cases.iter().map(|case| case.runs.len()).sum();
    if turns > 0 && report.summary.failed_runs as usize >= turns {
        return Err(format!("every one of the {turns} eval turns failed"));
    }
    Ok(())
}

/// The run's first distinct turn errors, for the messages.
fn run_errors(report: &EvalReport) -> Vec<String> {
    let mut errors: Vec<String> = Vec::new();
    for error in report.cases.iter().flat_map(|case| &case.runs).filter_map(|run| run.error.as_ref()) {
        if !errors.contains(error) && errors.len() < ERRORS_SHOWN {
            errors.push(error.clone());
        }
    }
    errors
}

/// The run: the version resolved, its report stored running, its turns run, the report stored and
/// shown, then the requirement and the promote.
async fn eval(args: &Args, place: &str) -> Result<(), String> {
    let app = agent_app::app_from_env().await.map_err(|err| format!("the deployment's settings: {err}"))?;
    let (service, objects) = (app.service.as_ref(), app.objects.as_ref());
    let (user, skill) = (&args.user, &args.skill);
    let record = resolve(objects, args).await?;
    let version = record.version;
    let suite = evals::read_suite(objects, user, &record).await.map_err(|err| err.to_string())?;
    let now = OffsetDateTime::now_utc();
    let options = EvalOptions { run_id: evals::new_run_id(now), runs: args.runs, now, deadline: None };
    let model = &service.config().model_id;
    eprintln!(
        "evaluating {skill} version {version} for {user} on {place}: {} and {}, {} each, model {model}",
        crate::counted(suite.evals.len() as u64, "eval case", "eval cases"),
        crate::counted(suite.triggers.len() as u64, "trigger query", "trigger queries"),
        crate::counted(args.runs.into(), "run", "runs"),
    );
    // Stored running first, then completed or failed, as the API's background run is.
    let mut report =
        EvalReport::running(&options.run_id, &skill.to_string(), version, args.runs, model, now.unix_timestamp());
    evals::store_report(objects, user, &report).await.map_err(|err| format!("storing the report: {err}"))?;
    match service.run_skill_evals(user, &record, &options).await {
        Ok(done) => report = done,
        Err(err) => {
            report.status = "failed".into();
            report.error = Some(err.to_string());
            report.finished_at = Some(OffsetDateTime::now_utc().unix_timestamp());
            let stored = evals::store_report(objects, user, &report).await;
            let note = stored.err().map(|err| format!(" (and storing the failed run: {err})")).unwrap_or_default();
            return Err(format!("eval run {} failed: {err}{note}", report.run_id));
        }
    }
    evals::store_report(objects, user, &report).await.map_err(|err| format!("storing the report: {err}"))?;
    let shown = match args.json {
        true => serde_json::to_string_pretty(&report).map_err(|err| err.to_string())? + "\n",
        false => report.table(),
    };
    emit(&shown)?;
    eprintln!("stored as eval run {} (GET /skills/{skill}/versions/{version}/evals/{})", report.run_id, report.run_id);
    let errors = run_errors(&report);
    if !errors.is_empty() {
        eprintln!("{} failed; first errors:", crate::counted(report.summary.failed_runs.into(), "run", "runs"));
        for error in errors {
            eprintln!("  {error}");
        }
    }
    if let Err(reason) = verdict(args.require.as_ref(), &report) {
        let promote = match args.promote {
            true => format!("; {skill} version {version} is not promoted"),
            false => String::new(),
        };
        return Err(format!("the requirement is not met: {reason}{promote}"));
    }
    if args.require.is_some() {
        eprintln!("the requirement holds");
    }
    if !args.promote {
        return Ok(());
    }
    if let Err(reason) = may_promote(args.require.as_ref(), &report) {
        return Err(format!("{skill} version {version} is not promoted: {reason}"));
    }
    let (defaults, _) = versions::defaults(objects, user).await.map_err(|err| err.to_string())?;
    let previous = defaults.skills.get(&skill.to_string()).map(|chosen| chosen.version);
    if previous == Some(version) {
        eprintln!("{skill} version {version} is already the default");
        return Ok(());
    }
    let budget = Some(service.config().listing_tokens());
    versions::set_default(objects, user, skill, version, PROMOTER, OffsetDateTime::now_utc().unix_timestamp(), budget)
        .await
        .map_err(|err| format!("promoting {skill} version {version}: {err}"))?;
    let was = previous.map_or_else(|| "none".to_owned(), |previous| format!("version {previous}"));
    eprintln!("promoted: {skill} now serves version {version} (was {was})");
    Ok(())
}

#[cfg(test)]
mod tests {
    use agent_core::turn::evals::{CaseReport, CaseRun};

    use super::*;

    fn args(text: &str) -> Result<Args, String> {
        parse(&text.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
    }

    #[test]
    fn arguments_are_read_and_bad_ones_refused_by_name() {
        let parsed = args("docs/pdf --user u1").unwrap();
        assert_eq!(parsed.skill.to_string(), "docs/pdf");
        assert_eq!(
            (parsed.version, parsed.runs, parsed.require, parsed.promote, parsed.json),
            (None, 3, None, false, false)
        );
        assert_eq!(parsed.place, Place::Local(LOCAL_ENV_FILE));
        let parsed =
            args("--user u1 pdf --version 4 --runs 10 --require trigger=0.8,pass=90% --promote --json --bucket b")
                .unwrap();
        assert_eq!((parsed.version, parsed.runs, parsed.promote, parsed.json), (Some(4), 10, true, true));
        assert_eq!(parsed.require, Some(Requirement { trigger_rate: Some(0.8), pass_rate: Some(0.9) }));
        assert_eq!(parsed.place, Place::Bucket("b".into()));
        assert_eq!(args("pdf --user u1 --console").unwrap().place, Place::Local(CONSOLE_ENV_FILE));
        for (bad, says) in [
            ("--user u1", "which skill?"),
            ("pdf", "needs --user"),
            ("pdf other --user u1", "one skill only"),
            ("pdf --user a/b", "not a usable id"),
            ("../x --user u1", "not a skill's path"),
            ("pdf --user u1 --runs 0", "--runs \"0\""),
            ("pdf --user u1 --runs 11", "from 1 to 10"),
            ("pdf --user u1 --runs -1", "--runs \"-1\""),
            ("pdf --user u1 --version 0", "--version \"0\""),
            ("pdf --user u1 --version x", "--version \"x\""),
            ("pdf --user u1 --require speed=1", "--require"),
            ("pdf --user u1 --require pass=2", "from 0 to 1"),
            ("pdf --user u1 --require ,", "name a rate"),
            ("pdf --user u1 --bucket b --console", "two places"),
            ("pdf --user u1 --runs", "--runs needs a value"),
            ("pdf --user u1 --user u2", "given twice"),
            ("pdf --user u1 --force", "unexpected argument \"--force\""),
        ] {
            let err = args(bad).unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }

    fn report(trigger: &[(bool, bool)], failed: usize) -> EvalReport {
        let mut report = EvalReport::running("r1", "pdf", 2, 1, "m", 0);
        for (i, (should, loaded)) in trigger.iter().enumerate() {
            let mut run = CaseRun { run: 1, loaded: *loaded, ..CaseRun::default() };
            if i < failed {
                run.error = Some("the model does not answer".into());
            }
            report.cases.push(CaseReport {
                kind: "trigger".into(),
                id: (i + 1).to_string(),
                prompt: "q".into(),
                should_trigger: Some(*should),
                runs: vec![run],
            });
        }
        report.status = "completed".into();
        report.summarise();
        report
    }

    #[test]
    fn the_gate_checks_this_run_and_never_promotes_a_run_that_ran_nothing() {
        // Three of four right: 75%.
        let run = report(&[(true, true), (true, false), (false, false), (false, false)], 0);
        let strict = Requirement::parse("trigger=0.8").unwrap();
        let reason = verdict(Some(&strict), &run).unwrap_err();
        assert!(reason.contains("trigger rate 75% is below the required 80%"), "{reason}");
        assert!(may_promote(Some(&strict), &run).is_err());
        let loose = Requirement::parse("trigger=75%").unwrap();
        assert!(verdict(Some(&loose), &run).is_ok() && may_promote(Some(&loose), &run).is_ok());
        assert!(verdict(None, &run).is_ok() && may_promote(None, &run).is_ok());
        let pass = Requirement::parse("pass=0.5").unwrap();
        assert!(verdict(Some(&pass), &run).unwrap_err().contains("no pass cases"));
        // Every turn failed: nothing was learnt of the version, whatever the requirement.
        let dead = report(&[(false, false), (false, false)], 2);
        assert_eq!(dead.summary.trigger_rate, Some(1.0));
        assert!(verdict(None, &dead).is_ok());
        assert!(may_promote(None, &dead).unwrap_err().contains("every one of the 2 eval turns failed"));
        assert_eq!(run_errors(&dead), ["the model does not answer"]);
        assert!(may_promote(None, &report(&[(false, false), (false, false)], 1)).is_ok());
    }
}
