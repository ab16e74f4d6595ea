//! Which version a turn serves: the default, seen by the first turn after a promote or a roll
//! back; a version pinned by the turn's request (`skill_versions`), for that turn only; and the
//! version each turn loaded, as `GET /sessions/{id}` shows it, a streamed turn's `skill.loaded` and the
//! load_skill span.

use std::time::Duration;

use local_stack::identity::IdentityProvider;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{system_of, tool_results, Stack};
use serde_json::{json, Value};

use super::{poderes, promote, session, text, turn, upload, versions, zip_of, OWNER, SKILL};

/// Words only version 1 of the skill holds, in its SKILL.md and in its reference file.
const ONE: &str = "MARCA-UNO-7f3a";
const ONE_FILE: &str = "REFERENCIA-UNO-c2";
/// The same for version 2.
const TWO: &str = "MARCA-DOS-91be";
const TWO_FILE: &str = "REFERENCIA-DOS-d4";

/// Publishes version 1 (the default) and version 2 (not promoted) of [`SKILL`].
async fn two_versions(http: &Function) {
    for (marker, file, status) in [(ONE, ONE_FILE, 201), (TWO, TWO_FILE, 201)] {
        let skill_md = poderes(&format!("Sigue estas instrucciones: {marker}."));
        let reference = format!("# Referencia\n\n{file}\n");
        let zip = zip_of(&[("SKILL.md", skill_md.as_bytes()), ("referencia.md", reference.as_bytes())]);
        let answer = upload(http, OWNER, SKILL, &zip, None).await;
        assert_eq!(answer.status, status, "{}", text(&answer));
    }
    assert_eq!(versions(http, OWNER, SKILL).await.json()["default"].as_u64(), Some(1));
}

/// A turn in a session of its own whose model loads [`SKILL`], reads its reference file and
/// answers: the model requests it made (the first is before the load).
async fn loading_turn(stack: &Stack, http: &Function, session: &str, body: Value) -> Vec<Value> {
    let before = stack.model.requests().len();
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": SKILL})),
        // The file tools show a skill's folder under its name, as load_skill's result says.
        Reply::tool("read_file", json!({"file_path": "/skills/poderes/referencia.md"})),
        Reply::text("Poder redactado."),
    ]);
    let (status, answer) = turn(http, OWNER, session, body).await;
    assert_eq!(status, 200, "{answer}");
    let requests = stack.model.requests()[before..].to_vec();
    assert_eq!(requests.len(), 3, "load, read, answer");
    requests
}

/// Asserts the turn whose `requests` these are served version `marker`/`file` and not the other.
fn assert_served(requests: &[Value], (marker, file): (&str, &str), (other, other_file): (&str, &str)) {
    assert!(!system_of(&requests[0]).contains(marker), "the SKILL.md is not in the state-1 prompt");
    let loaded = requests[1].to_string();
    assert!(
        system_of(&requests[1]).contains(marker),
        "state 2 is this version's SKILL.md: {}",
        system_of(&requests[1])
    );
    assert!(!loaded.contains(other), "no trace of the other version's SKILL.md");
    let results = tool_results(&requests[2]);
    assert!(results.iter().any(|result| result.contains(file)), "this version's file: {results:?}");
    assert!(!requests[2].to_string().contains(other_file), "not the other version's file: {results:?}");
}

/// The `skill_versions` `GET /sessions/{id}` shows for the session's one turn.
async fn recorded(http: &Function, id: &str) -> Value {
    let shown = session(http, OWNER, id).await;
    let turns = shown["turns"].as_array().cloned().unwrap_or_default();
    assert_eq!(turns.len(), 1, "{shown}");
    turns[0]["skill_versions"].clone()
}

fn message(text: &str) -> Value {
    json!({"message": text})
}

#[tokio::test]
async fn a_promote_is_served_by_the_next_turn_and_a_roll_back_by_the_one_after() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    two_versions(&http).await;

    let requests = loading_turn(&stack, &http, "antes", message("Necesito un poder")).await;
    assert_served(&requests, (ONE, ONE_FILE), (TWO, TWO_FILE));

    let promoted = promote(&http, OWNER, SKILL, 2).await;
    assert_eq!(promoted.status, 200, "{}", text(&promoted));
    let promoted = promoted.json();
    assert_eq!(
        (promoted["skill"].as_str(), promoted["version"].as_u64(), promoted["previous"].as_u64()),
        (Some(SKILL), Some(2), Some(1)),
        "{promoted}"
    );
    assert_eq!(promoted["set_by"], OWNER);
    assert!(promoted["set_at"].as_str().is_some_and(|at| at.contains('T')), "RFC 3339: {promoted}");
    let requests = loading_turn(&stack, &http, "promovida", message("Necesito otro poder")).await;
    assert_served(&requests, (TWO, TWO_FILE), (ONE, ONE_FILE));

    // Rolled back to 1: the very next turn serves it again.
    let rolled = promote(&http, OWNER, SKILL, 1).await;
    assert_eq!(rolled.status, 200, "{}", text(&rolled));
    assert_eq!((rolled.json()["version"].as_u64(), rolled.json()["previous"].as_u64()), (Some(1), Some(2)));
    assert_eq!(versions(&http, OWNER, SKILL).await.json()["default"].as_u64(), Some(1));
    let requests = loading_turn(&stack, &http, "revertida", message("Y uno más")).await;
    assert_served(&requests, (ONE, ONE_FILE), (TWO, TWO_FILE));

    // Each turn recorded the version it loaded.
    for (id, version) in [("antes", 1), ("promovida", 2), ("revertida", 1)] {
        assert_eq!(recorded(&http, id).await, json!({SKILL: version}), "session {id}");
    }
    // A turn that loaded no skill records none.
    stack.model.push([Reply::text("Hola.")]);
    let (status, answer) = turn(&http, OWNER, "sin-skill", message("Hola")).await;
    assert_eq!(status, 200, "{answer}");
    let none = recorded(&http, "sin-skill").await;
    assert!(none.is_null() || none == json!({}), "{none}");
}

#[tokio::test]
async fn a_pinned_version_is_served_for_that_turn_only_and_an_unknown_one_is_refused_before_the_model() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    two_versions(&http).await;

    let pinned = json!({"message": "Prueba la versión 2", "skill_versions": {SKILL: 2}});
    let requests = loading_turn(&stack, &http, "fijada", pinned).await;
    assert_served(&requests, (TWO, TWO_FILE), (ONE, ONE_FILE));
    assert_eq!(recorded(&http, "fijada").await, json!({SKILL: 2}));
    // The pin changed no default: the next turn, in the same session, serves version 1.
    assert_eq!(versions(&http, OWNER, SKILL).await.json()["default"].as_u64(), Some(1));
    let before = stack.model.requests().len();
    stack.model.push([Reply::tool("load_skill", json!({"skill_path": SKILL})), Reply::text("Listo.")]);
    let (status, answer) = turn(&http, OWNER, "fijada", message("Ahora sin fijar")).await;
    assert_eq!(status, 200, "{answer}");
    let after = &stack.model.requests()[before..];
    assert!(system_of(&after[1]).contains(ONE) && !system_of(&after[1]).contains(TWO), "{}", system_of(&after[1]));

    // A pin to a version that does not exist, of a skill never published, or too many pins: 400,
    // and neither the model nor the session hears of it.
    let calls = stack.model.requests().len();
    let session_before = stack.session_item(OWNER, "fijada").await;
    let many: serde_json::Map<String, Value> = (0..9).map(|i| (format!("notaria/s{i}"), json!(1))).collect();
    for pins in [json!({SKILL: 7}), json!({"notaria/inexistente": 1}), Value::Object(many), json!({SKILL: "dos"})] {
        let body = json!({"message": "Prueba", "skill_versions": pins});
        for id in ["fijada", "nueva"] {
            let (status, answer) = turn(&http, OWNER, id, body.clone()).await;
            assert_eq!(status, 400, "{pins}: {answer}");
            assert!(answer["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{answer}");
        }
    }
    assert_eq!(stack.model.requests().len(), calls, "no refused turn reached the model");
    assert_eq!(stack.session_item(OWNER, "fijada").await, session_before, "the session is untouched");
    assert!(stack.session_item(OWNER, "nueva").await.is_none(), "no session was made");
}

#[tokio::test]
async fn a_streamed_turn_says_which_version_it_loaded() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    two_versions(&http).await;
    let identity = IdentityProvider::start().await;
    let streaming = Function::start("stream-turn", &stack.env(&identity.env())).await;

    for (pins, version, marker) in [(json!({}), 1, ONE), (json!({SKILL: 2}), 2, TWO)] {
        let before = stack.model.requests().len();
        stack.model.push([Reply::tool("load_skill", json!({"skill_path": SKILL})), Reply::text("Listo.")]);
        let body = json!({"message": "Un poder", "skill_versions": pins});
        let session = format!("stream-{version}");
        let event = crate::streaming::stream_event(Some(&identity.token(OWNER)), &session, body, true);
        let mut stream = streaming.invoke_streaming(event, Duration::from_secs(120)).await;
        assert_eq!(stream.status().await, 200);
        let mut events = Vec::new();
        while let Some(event) = stream.next_event().await {
            events.push(event);
        }
        let names: Vec<&str> = events.iter().map(|event| event.name.as_str()).collect();
        let loaded = events.iter().find(|event| event.name == "skill.loaded").unwrap_or_else(|| panic!("{names:?}"));
        assert_eq!(loaded.data["version"].as_u64(), Some(version), "{}", loaded.data);
        assert_eq!(names.last(), Some(&"turn.completed"), "{names:?}");
        assert!(system_of(&stack.model.requests()[before + 1]).contains(marker));
        assert_eq!(recorded(&http, &session).await, json!({SKILL: version}));
    }
}

#[tokio::test]
async fn the_load_skill_span_names_the_version_loaded() {
    let stack = Stack::new().await;
    let collector = local_stack::otlp::Collector::start().await;
    let http = stack.http(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint)]).await;
    two_versions(&http).await;
    loading_turn(&stack, &http, "trazada", json!({"message": "Necesito un poder", "skill_versions": {SKILL: 2}})).await;
    let spans = collector.spans();
    let load = spans.iter().find(|span| span.name == "execute_tool load_skill").expect("a load_skill span");
    assert_eq!(load.attribute("skill.version"), Some(&json!(2)), "{load:#?}");
    assert_eq!(load.attribute("skill.path"), Some(&json!(SKILL)), "{load:#?}");
    // Only the load names a version; the other tools' spans leave it out.
    let read = spans.iter().find(|span| span.name == "execute_tool read_file").expect("a read_file span");
    assert_eq!(read.attribute("skill.version"), None);
}
