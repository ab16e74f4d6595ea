//! Evals of a published version over the embedded store and a scripted model: real turns with the
//! version pinned in sessions of their own, the trigger rate from which queries loaded the skill,
//! expectations graded by the model, the report stored with the version, the grading metered, and
//! a requirement that refuses a version below it.

use std::sync::Arc;

use agent_core::skills::versions::{publish, SkillFileBytes};
use agent_core::turn::evals::{self, EvalOptions, Requirement, EVAL_SESSION_PREFIX};
use agent_core::turn::{AgentConfig, OffsetDateTime, TurnRequest, TurnService};
use agent_core::{ChatResponse, Message, SessionId, SessionStore, SkillPath, ToolCall, Usage, UserId};
use agent_ports::testing::FnModel;
use local_store::{MemoryObjectStore, MemorySessionStore};
use serde_json::json;

fn version_files(description: &str) -> Vec<SkillFileBytes> {
    let file = |path: &str, text: String| SkillFileBytes { path: path.into(), bytes: text.into_bytes() };
    vec![
        file("SKILL.md", format!("---\nname: pdf\ndescription: {description}\n---\n# PDF\nAnswer with a PDF.\n")),
        file(
            "evals/evals.json",
            json!({"skill_name": "pdf", "evals": [{"id": 1, "prompt": "Make a pdf of the report",
                "expectations": ["The reply mentions a PDF", "The reply includes a table"]}]})
            .to_string(),
        ),
        file(
            "evals/trigger_evals.json",
            json!([
                {"query": "convert this pdf to text", "should_trigger": true},
                {"query": "merge two pdf files", "should_trigger": true},
                {"query": "what's the weather in Lisbon", "should_trigger": false},
                {"query": "tell me the history of the pdf format", "should_trigger": false}
            ])
            .to_string(),
        ),
    ]
}

/// Loads `pdf` for any request whose user message says "pdf", answers after the load, and grades
/// the first expectation passed and the second failed.
fn model() -> FnModel {
    FnModel::new(|request| {
        // Each call reads 60 of its 100 input tokens from the cache and writes 20.
        let usage = Usage { cache_read_tokens: 60, cache_write_tokens: 20, ..Usage::new(100, 10) };
        if request.response_format.is_some() {
            let grading = json!({"expectations": [
                {"passed": true, "evidence": "The reply says: Here is your PDF."},
                {"passed": false, "evidence": "No table appears in the reply."}
            ]});
            return Ok(ChatResponse::text(grading.to_string()).with_usage(usage));
        }
        match request.messages.last() {
            Some(Message::Tool { .. }) => Ok(ChatResponse::text("Here is your PDF.").with_usage(usage)),
            Some(Message::User { content, .. }) if content.contains("pdf") => {
                let call =
                    ToolCall { id: "c1".into(), name: "load_skill".into(), arguments: json!({"skill_path": "pdf"}) };
                Ok(ChatResponse::calling(vec![call]).with_usage(usage))
            }
            _ => Ok(ChatResponse::text("No skill needed.").with_usage(usage)),
        }
    })
}

#[tokio::test]
async fn evals_run_real_turns_with_the_version_pinned_and_grade_them() {
    let objects = Arc::new(MemoryObjectStore::new());
    let sessions = Arc::new(MemorySessionStore::new());
    let user = UserId::parse("u1").unwrap();
    let skill = SkillPath::parse("pdf").unwrap();
    objects.insert("u1/skills/notes/SKILL.md", "---\nname: notes\ndescription: Take notes.\n---\n# Notes\n");
    publish(objects.as_ref(), &user, &skill, version_files("Old PDF work."), "t", 1, None, None).await.unwrap();
    let candidate = publish(objects.as_ref(), &user, &skill, version_files("PDF work, better."), "t", 2, None, None)
        .await
        .unwrap()
        .record;
    assert_eq!(candidate.version, 2);
    let model = Arc::new(model());
    let config = AgentConfig { model_id: "claude-sonnet-4-5".to_owned(), ..AgentConfig::default() };
    let service = TurnService::new(sessions.clone(), objects.clone(), model.clone(), config);

    // A user's own session, which the evals must leave alone.
    let mine = SessionId::parse("mine").unwrap();
    let request = TurnRequest::new(user.clone(), mine.clone(), "hello", OffsetDateTime::now_utc());
    service.run_turn(request).await.unwrap();

    let now = OffsetDateTime::now_utc();
    let options = EvalOptions { run_id: evals::new_run_id(now), runs: 2, now, deadline: None };
    let report = service.run_skill_evals(&user, &candidate, &options).await.unwrap();
    assert_eq!(report.status, "completed");
    assert_eq!(report.cases.len(), 5);
    assert!(report.cases.iter().all(|case| case.runs.len() == 2));
    // Two of the four queries should load the skill; it loads for three (one false trigger).
    assert_eq!(report.summary.trigger_rate, Some(0.75));
    assert_eq!((report.summary.triggered_when_wanted, report.summary.triggered_when_not_wanted), (4, 2));
    let eval_case = &report.cases[0];
    let run = &eval_case.runs[0];
    assert!(run.loaded && !run.forced && run.loaded_version == Some(2), "{run:?}");
    assert_eq!(run.tools.get("load_skill"), Some(&1));
    assert_eq!(run.steps, 2);
    assert_eq!(run.expectations.len(), 2);
    assert!(run.expectations[0].passed && !run.expectations[1].passed);
    assert!(run.expectations[1].evidence.contains("No table"));
    assert_eq!(report.summary.pass_rate, Some(0.5));
    // Turn tokens (two calls of 110) and the grader's (110), with the cache split, priced at
    // claude-sonnet-4-5's $3 input, $3.75 cache write, $0.30 cache read and $15 output a million.
    assert_eq!(run.spent.tokens(), 330);
    assert_eq!((run.spent.usage.cache_read_tokens, run.spent.usage.cache_write_tokens), (180, 60));
    let per_call = (20.0 * 3.0 + 20.0 * 3.75 + 60.0 * 0.30 + 10.0 * 15.0) / 1e6;
    assert!((run.spent.cost_usd.unwrap() - 3.0 * per_call).abs() < 1e-9, "{:?}", run.spent.cost_usd);
    assert!(report.summary.spent.cost_usd.unwrap() > run.spent.cost_usd.unwrap(), "every run is in the summary");

    // The same run again (a delivery after part of it ran): every turn replays, and a replayed
    // turn still counts its skill load, from the versions its reply recorded. Only the grading
    // asks the model again.
    let calls = model.calls();
    let again = service.run_skill_evals(&user, &candidate, &options).await.unwrap();
    assert_eq!(model.calls(), calls + 2);
    assert_eq!((again.summary.trigger_rate, again.summary.pass_rate), (Some(0.75), Some(0.5)));
    assert_eq!(again.cases[0].runs[0].loaded_version, Some(2));

    // The user's session is as it was; the eval turns ran in sessions of their own.
    let session = sessions.load(&user, &mine).await.unwrap().unwrap();
    assert_eq!(session.version, 1);
    let listed = sessions.list_sessions(&user, None, 100).await.unwrap();
    let eval_sessions =
        listed.sessions.iter().filter(|s| s.session_id.as_str().starts_with(EVAL_SESSION_PREFIX)).count();
    assert_eq!(eval_sessions, 10);

    // Metered: the user's turn, ten eval turns and two gradings.
    let day = agent_core::turn::utc_day(now);
    let usage = service.usage(&user, &day, &day).await.unwrap();
    let tokens: u64 = usage.iter().map(|day| day.totals.input_tokens + day.totals.output_tokens).sum();
    assert_eq!(tokens, 110 + 8 * 220 + 2 * 110 + 4 * 110, "{usage:?}");

    // Stored with the version; a promote's requirement is checked against it.
    evals::store_report(objects.as_ref(), &user, &report).await.unwrap();
    let latest = evals::latest_completed(objects.as_ref(), &user, &skill, 2).await.unwrap().unwrap();
    assert_eq!(latest, report);
    let refused = Requirement::parse("trigger=0.8,pass=0.5").unwrap().check(Some(&latest)).unwrap_err();
    assert!(refused.contains("trigger rate 75% is below the required 80%"), "{refused}");
    assert!(Requirement::parse("trigger=0.75,pass=0.5").unwrap().check(Some(&latest)).is_ok());
    assert!(report.table().contains("trigger rate 75% · pass rate 50%"));
}

#[test]
fn run_ids_sort_by_when_they_started_even_within_one_second() {
    let start = OffsetDateTime::from_unix_timestamp(1_795_954_307).unwrap();
    for later in [time::Duration::nanoseconds(1), time::Duration::milliseconds(300), time::Duration::seconds(1)] {
        let (first, second) = (evals::new_run_id(start), evals::new_run_id(start + later));
        assert!(first < second, "{first} then {second}");
    }
}
