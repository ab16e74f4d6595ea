//! The routes of skills' versions without storage: the route read from the path's right end, the
//! skill and version checked, the bodies bounded, and the answers' shapes.

use agent_core::skills::versions::Problem;
use base64::Engine;
use http::{HeaderMap, Method};
use serde_json::{json, Value};

use super::answer::{invalid_answer, queued_answer, run_summary};
use super::outcome::version_error;
use super::parse::{eval_run_id, promote, skill_path, version_number, Action, SkillRoute, VersionAction, VersionCall};
use crate::api::ApiError;
use crate::routes::message::{Payload, Query, Request};
use crate::routes::DIRECT_UPLOAD_MAX_BYTES;

fn resolve<'a>(method: Method, rest: &'a [&'a str]) -> Result<SkillRoute<'a>, ApiError> {
    SkillRoute::resolve(&method, rest)
}

fn route<'a>(skill: &'a [&'a str], action: Action<'a>) -> SkillRoute<'a> {
    SkillRoute { skill, action }
}

#[test]
fn each_route_is_read_from_the_right_whatever_the_skill_path() {
    for skill in
        [&["pdf"][..], &["escrituras", "compraventa"], &["plugin", "skills", "pdf"], &["g", "p", "skills", "pdf"]]
    {
        let with = |tail: &[&'static str]| -> Vec<&str> { skill.iter().copied().chain(tail.iter().copied()).collect() };
        let cases: Vec<(Method, Vec<&str>, Action)> = vec![
            (Method::PUT, with(&["versions"]), Action::Publish),
            (Method::POST, with(&["versions"]), Action::PublishStaged),
            (Method::GET, with(&["versions"]), Action::List),
            (Method::POST, with(&["versions", "uploads"]), Action::Presign),
            (Method::GET, with(&["versions", "3"]), Action::Get("3")),
            (Method::DELETE, with(&["versions", "3"]), Action::DeleteVersion("3")),
            (Method::GET, with(&["versions", "3", "zip"]), Action::Zip("3")),
            (Method::PUT, with(&["default"]), Action::SetDefault),
            (Method::DELETE, with(&[]), Action::DeleteSkill),
            (Method::POST, with(&["versions", "3", "evals"]), Action::RunEvals("3")),
            (Method::GET, with(&["versions", "3", "evals"]), Action::ListEvals("3")),
            (Method::GET, with(&["versions", "3", "evals", "r-1"]), Action::GetEval("3", "r-1")),
        ];
        for (method, rest, action) in cases {
            assert_eq!(resolve(method.clone(), &rest).unwrap(), route(skill, action), "{method} {rest:?}");
        }
        let rest = with(&["versions", "3", "files", "scripts", "run.py"]);
        assert_eq!(resolve(Method::GET, &rest).unwrap(), route(skill, Action::File("3", &["scripts", "run.py"])));
    }
}

#[test]
fn a_skill_named_like_a_route_segment_is_still_a_skill() {
    // `a/skills/versions` is the plugin `a`'s skill `versions`: its listing, not version `versions` of `a/skills`.
    let rest = ["a", "skills", "versions", "versions"];
    assert_eq!(resolve(Method::GET, &rest).unwrap(), route(&["a", "skills", "versions"], Action::List));
    // Deleting version 3 of `a/skills`, as no skill path is `a/skills/versions/3`.
    let rest = ["a", "skills", "versions", "3"];
    assert_eq!(resolve(Method::DELETE, &rest).unwrap(), route(&["a", "skills"], Action::DeleteVersion("3")));
    // Setting the default of the skill `versions`, deleting it, and publishing `pdf/versions`.
    assert_eq!(resolve(Method::PUT, &["versions", "default"]).unwrap(), route(&["versions"], Action::SetDefault));
    assert_eq!(resolve(Method::DELETE, &["versions"]).unwrap(), route(&["versions"], Action::DeleteSkill));
    let rest = ["pdf", "versions", "versions"];
    assert_eq!(resolve(Method::PUT, &rest).unwrap(), route(&["pdf", "versions"], Action::Publish));
    // A file's path may hold route words.
    let rest = ["pdf", "versions", "1", "files", "versions", "2", "zip"];
    assert_eq!(resolve(Method::GET, &rest).unwrap(), route(&["pdf"], Action::File("1", &["versions", "2", "zip"])));
}

#[test]
fn other_methods_are_405_and_other_paths_404() {
    for (method, rest) in [
        (Method::GET, &["pdf"][..]),
        // The route's own segments come first: these are not the skills `pdf/versions`, `pdf/default`.
        (Method::DELETE, &["pdf", "versions"]),
        (Method::DELETE, &["pdf", "default"]),
        (Method::PATCH, &["pdf", "versions"]),
        (Method::GET, &["pdf", "default"]),
        (Method::GET, &["pdf", "versions", "uploads"]),
        (Method::PUT, &["pdf", "versions", "3"]),
        (Method::POST, &["pdf", "versions", "3", "zip"]),
        (Method::DELETE, &["pdf", "versions", "3", "files", "a.txt"]),
        (Method::PUT, &["pdf", "versions", "3", "evals"]),
        (Method::DELETE, &["pdf", "versions", "3", "evals"]),
        (Method::POST, &["pdf", "versions", "3", "evals", "r1"]),
        (Method::DELETE, &["pdf", "versions", "3", "evals", "r1"]),
    ] {
        let err = resolve(method.clone(), rest).unwrap_err();
        assert_eq!((err.status, err.code), (405, "method_not_allowed"), "{method} {rest:?}");
    }
    for (method, rest) in [
        (Method::GET, &["pdf", "versions", "3", "files"][..]),
        (Method::GET, &["pdf", "versions", "3", "tar"]),
        (Method::GET, &["pdf", "nothing", "here"]),
        (Method::DELETE, &["a", "b", "c"]),
        (Method::DELETE, &["a", "b", "c", "d", "e"]),
        (Method::GET, &["a", "b", "c", "d", "e", "versions"]),
        (Method::GET, &["pdf", "versions", "3", "evals", "r1", "cases"]),
    ] {
        let err = resolve(method.clone(), rest).unwrap_err();
        assert_eq!((err.status, err.code), (404, "not_found"), "{method} {rest:?}");
    }
}

#[test]
fn skill_paths_and_version_numbers_are_checked() {
    assert_eq!(skill_path(&["escrituras", "compraventa"]).unwrap().to_string(), "escrituras/compraventa");
    assert_eq!(skill_path(&["g", "p", "skills", "pdf"]).unwrap().to_string(), "g/p/skills/pdf");
    for bad in [&[".hidden"][..], &["a%2Fb"], &["..", "x"], &["a b"], &["p", "skills", ".a"]] {
        let err = skill_path(bad).unwrap_err();
        assert_eq!(err.status, 400, "{bad:?}");
    }
    assert_eq!(version_number("12").unwrap(), 12);
    for bad in ["0", "-1", "+1", "abc", "1.0", "", "99999999999", "uploads"] {
        assert_eq!(version_number(bad).unwrap_err().status, 400, "{bad:?}");
    }
    assert_eq!(promote(None).unwrap(), None);
    assert_eq!(promote(Some("true")).unwrap(), Some(true));
    assert_eq!(promote(Some("false")).unwrap(), Some(false));
    assert_eq!(promote(Some("yes")).unwrap_err().status, 400);
}

fn call(
    method: Method,
    path: &[&str],
    body: Option<&str>,
    base64: bool,
    query: &[(&str, &str)],
) -> Result<VersionCall, ApiError> {
    let headers = HeaderMap::new();
    let request = Request {
        method: method.clone(),
        path: "/skills/unused",
        headers: &headers,
        query: query.iter().copied().collect::<Query>(),
        body,
        base64,
        request_id: "r",
        caller: Err(ApiError::new(401, "unauthorized", "none")),
    };
    let route = SkillRoute::resolve(&method, path)?;
    VersionCall::from_route(route, &request)
}

#[test]
fn bodies_are_bounded_and_validated() {
    let encoded = base64::engine::general_purpose::STANDARD.encode(vec![7u8; DIRECT_UPLOAD_MAX_BYTES + 1]);
    let err = call(Method::PUT, &["pdf", "versions"], Some(&encoded), true, &[]).err().unwrap();
    assert_eq!((err.status, err.code), (413, "payload_too_large"));
    assert!(err.message.contains("POST /skills/{path}/versions/uploads"), "{}", err.message);
    let made = call(Method::PUT, &["pdf", "versions"], Some("UEsFBg=="), true, &[("promote", "true")]).unwrap();
    assert!(matches!(made.action, VersionAction::Publish { ref zip, promote: Some(true) } if zip == b"PK\x05\x06"));
    assert_eq!(call(Method::PUT, &["pdf", "versions"], Some("not base64!"), true, &[]).err().unwrap().status, 400);
    assert_eq!(
        call(Method::PUT, &["pdf", "versions"], Some("x"), false, &[("promote", "1")]).err().unwrap().status,
        400
    );

    let sha = "AB".repeat(32);
    let staged = json!({"upload": sha, "promote": false}).to_string();
    let made = call(Method::POST, &["pdf", "versions"], Some(&staged), false, &[]).unwrap();
    assert!(
        matches!(made.action, VersionAction::PublishStaged { ref upload, promote: Some(false) } if *upload == "ab".repeat(32))
    );
    let presign = json!({"sha256": sha, "size": 1024}).to_string();
    let made = call(Method::POST, &["pdf", "versions", "uploads"], Some(&presign), false, &[]).unwrap();
    assert!(matches!(made.action, VersionAction::Presign { size: 1024, .. }));
    let huge = json!({"sha256": sha, "size": 50 * 1024 * 1024 + 1}).to_string();
    assert_eq!(call(Method::POST, &["pdf", "versions", "uploads"], Some(&huge), false, &[]).err().unwrap().status, 413);
    let default = json!({"version": 2}).to_string();
    let made = call(Method::PUT, &["pdf", "default"], Some(&default), false, &[]).unwrap();
    assert!(matches!(made.action, VersionAction::SetDefault { version: 2, require: None }));
    for (method, path, bad) in [
        (Method::POST, &["pdf", "versions"][..], json!({"upload": "abc"})),
        (Method::POST, &["pdf", "versions"], json!({"upload": sha, "user_id": "x"})),
        (Method::POST, &["pdf", "versions", "uploads"], json!({"sha256": sha, "size": 0})),
        (Method::POST, &["pdf", "versions", "uploads"], json!({"sha256": sha, "size": -1})),
        (Method::PUT, &["pdf", "default"], json!({"version": 0})),
        (Method::PUT, &["pdf", "default"], json!({"version": "2"})),
    ] {
        let err = call(method.clone(), path, Some(&bad.to_string()), false, &[]).err().unwrap();
        assert_eq!(err.status, 400, "{method} {path:?} {bad}");
    }
    assert_eq!(call(Method::PUT, &["pdf", "default"], None, false, &[]).err().unwrap().status, 400);
    let err = call(Method::GET, &["pdf", "versions", "1", "files", "..", "x"], None, false, &[]).err().unwrap();
    assert_eq!(err.status, 400);
    assert_eq!(call(Method::GET, &["a%2Fb", "versions"], None, false, &[]).err().unwrap().status, 400);
}

#[test]
fn an_invalid_skill_lists_its_problems_beside_the_error() {
    let problems = vec![Problem::file("SKILL.md", "has no frontmatter"), Problem::archive("too many files")];
    let answer = invalid_answer(&problems);
    assert_eq!(answer.status, 400);
    let Payload::Json(body) = answer.body else { panic!("a JSON body") };
    assert_eq!(body["error"]["code"], "invalid_skill");
    assert_eq!(
        body["problems"],
        json!([{"file": "SKILL.md", "message": "has no frontmatter"}, {"message": "too many files"}])
    );
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("SKILL.md")), "{body}");
    assert_eq!(body["problems"][1].get("file"), None::<&Value>);
}

#[test]
fn versions_errors_map_to_statuses_with_safe_messages() {
    use agent_core::skills::versions::VersionError;
    use agent_core::store::StoreError;
    let status = |err| {
        let err = version_error(err);
        (err.status, err.code)
    };
    assert_eq!(status(VersionError::NotFound("x".into())), (404, "not_found"));
    assert_eq!(status(VersionError::Conflict("x".into())), (409, "conflict"));
    assert_eq!(status(VersionError::Full("x".into())), (409, "limit_reached"));
    assert_eq!(status(VersionError::Storage(StoreError::Backend("secret".into()))), (503, "storage_unavailable"));
    let corrupt = version_error(VersionError::Storage(StoreError::Corrupt("secret".into())));
    assert_eq!((corrupt.status, corrupt.message.contains("secret")), (500, false));
}

#[test]
fn a_version_of_a_skill_named_like_a_route_segment_has_its_evals() {
    // `a/skills` has no third segment named `skills`, so this is version 3 of `a/skills`.
    let rest = ["a", "skills", "versions", "3", "evals"];
    assert_eq!(resolve(Method::POST, &rest).unwrap(), route(&["a", "skills"], Action::RunEvals("3")));
    // The plugin `p`'s skill `evals`.
    let rest = ["p", "skills", "evals", "versions", "1", "evals"];
    assert_eq!(resolve(Method::GET, &rest).unwrap(), route(&["p", "skills", "evals"], Action::ListEvals("1")));
}

#[test]
fn eval_bodies_run_ids_and_requirements_are_validated() {
    let evals = &["pdf", "versions", "2", "evals"][..];
    let runs = |body: Option<&str>, base64: bool| match call(Method::POST, evals, body, base64, &[]) {
        Ok(VersionCall { action: VersionAction::RunEvals { version: 2, runs }, .. }) => Ok(runs),
        Ok(_) => panic!("not an eval run"),
        Err(err) => Err((err.status, err.code)),
    };
    assert_eq!(runs(None, false), Ok(3), "no body is the default number of runs");
    assert_eq!(runs(Some(" "), false), Ok(3));
    assert_eq!(runs(Some("{}"), false), Ok(3));
    assert_eq!(runs(Some(r#"{"runs": 10}"#), false), Ok(10));
    assert_eq!(runs(Some("eyJydW5zIjogMX0="), true), Ok(1), "base64 of {{\"runs\": 1}}");
    for bad in [
        r#"{"runs": 0}"#,
        r#"{"runs": 11}"#,
        r#"{"runs": -1}"#,
        r#"{"runs": "2"}"#,
        r#"{"runs": 2, "user_id": "x"}"#,
        "[",
        "runs=2",
    ] {
        assert_eq!(runs(Some(bad), false), Err((400, "bad_request")), "{bad}");
    }
    assert_eq!(call(Method::POST, &["pdf", "versions", "0", "evals"], None, false, &[]).err().unwrap().status, 400);

    let get = |run_id: &str| {
        let path = ["pdf", "versions", "2", "evals", run_id];
        call(Method::GET, &path, None, false, &[]).map(|made| made.action)
    };
    assert!(
        matches!(get("1764111111-0a1b2c3d"), Ok(VersionAction::GetEval { version: 2, ref run_id }) if run_id == "1764111111-0a1b2c3d")
    );
    let too_long = "a".repeat(65);
    for bad in ["a.b", "a%2Fb", "a_b", too_long.as_str()] {
        let err = get(bad).err().unwrap();
        assert_eq!((err.status, err.code), (404, "not_found"), "{bad}");
    }
    assert_eq!(eval_run_id(&"a".repeat(64)).unwrap().len(), 64);

    let default = |body: Value| call(Method::PUT, &["pdf", "default"], Some(&body.to_string()), false, &[]);
    let made = default(json!({"version": 2, "require": {"trigger_rate": 0.8}})).unwrap();
    let VersionAction::SetDefault { version: 2, require: Some(require) } = made.action else { panic!("a requirement") };
    assert_eq!((require.trigger_rate, require.pass_rate), (Some(0.8), None));
    let made = default(json!({"version": 2, "require": {"trigger_rate": 0, "pass_rate": 1}})).unwrap();
    assert!(matches!(made.action, VersionAction::SetDefault { require: Some(r), .. } if r.pass_rate == Some(1.0)));
    assert!(matches!(default(json!({"version": 2})).unwrap().action, VersionAction::SetDefault { require: None, .. }));
    for bad in [
        json!({"version": 2, "require": {}}),
        json!({"version": 2, "require": {"trigger_rate": 1.5}}),
        json!({"version": 2, "require": {"pass_rate": -0.1}}),
        json!({"version": 2, "require": {"trigger_rate": "0.8"}}),
        json!({"version": 2, "require": {"speed": 1}}),
        json!({"version": 2, "require": 0.8}),
    ] {
        assert_eq!(default(bad.clone()).err().unwrap().status, 400, "{bad}");
    }
}

#[test]
fn an_eval_run_is_answered_with_where_to_poll_it_and_listed_without_its_cases() {
    use agent_core::turn::evals::{CaseReport, EvalReport};
    let skill = agent_core::SkillPath::parse("plugin/skills/pdf").unwrap();
    let answer = queued_answer(&skill, 4, "1764111111-0a1b2c3d");
    let poll = "/skills/plugin/skills/pdf/versions/4/evals/1764111111-0a1b2c3d";
    assert_eq!(answer.status, 202);
    assert_eq!(answer.headers, vec![("location", poll.to_owned())]);
    let Payload::Json(body) = answer.body else { panic!("a JSON body") };
    assert_eq!(body, json!({"run_id": "1764111111-0a1b2c3d", "status": "running", "poll": poll}));

    let mut report = EvalReport::running("r1", "plugin/skills/pdf", 4, 2, "m", 1_764_111_111);
    report.cases.push(CaseReport {
        kind: "eval".into(),
        id: "1".into(),
        prompt: "p".into(),
        should_trigger: None,
        runs: Vec::new(),
    });
    let listed = run_summary(&report).unwrap();
    assert_eq!(listed.get("cases"), None);
    assert_eq!((listed["run_id"].as_str(), listed["status"].as_str()), (Some("r1"), Some("running")));
    assert_eq!(listed["summary"]["trigger_rate"], Value::Null);
}
