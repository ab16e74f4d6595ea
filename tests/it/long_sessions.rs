//! Long sessions through the compiled functions: a turn reads only what it sends to the model, the
//! summary is recomputed once per threshold crossing, and `GET /sessions/{id}` pages the history.

use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, status_and_body, system_of, turn_event, Stack};
use serde_json::{json, Value};

const USER: &str = "user-long";

fn is_summary_request(request: &Value) -> bool {
    system_of(request).starts_with("You condense conversations")
}

async fn get_page(http: &Function, session: &str, query: &[(&str, &str)]) -> Value {
    let mut event = get_event(Some(USER), session);
    event["queryStringParameters"] = query.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let (status, body) = status_and_body(&http.call(event).await);
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test]
async fn a_long_session_costs_the_same_per_turn_and_summarises_once_per_crossing() {
    let stack = Stack::new().await;
    let http = stack.http(&[("HISTORY_SUMMARY_TOKENS", "600")]).await;
    let turns = 40;
    let mut summarised_at = Vec::new();
    let mut requests_per_turn = Vec::new();
    for turn in 1..=turns {
        // Every model call (turn or summary) takes the next scripted text; any non-empty text will do.
        while stack.model.remaining() < 2 {
            stack.model.push([Reply::text(&format!("Respuesta {turn}: {}", "detalle ".repeat(20)))]);
        }
        let before = stack.model.requests().len();
        let mark = http.log_mark();
        let message = format!("Pregunta {turn}: {}", "contexto ".repeat(30));
        let (status, body) =
            status_and_body(&http.call(turn_event(Some(USER), "long", json!({ "message": message }))).await);
        assert_eq!(status, 200, "turn {turn}: {body}");
        let requests = stack.model.requests();
        if requests[before..].iter().any(is_summary_request) {
            summarised_at.push(turn);
        }
        requests_per_turn.push(http.storage_requests_since(mark).await.values().sum::<u64>());
    }
    // ~100 tokens a turn against a 600-token threshold that keeps half: a crossing every few turns.
    assert!(summarised_at.len() >= 5, "{summarised_at:?}");
    assert!(
        summarised_at.windows(2).all(|pair| pair[1] - pair[0] >= 2),
        "never on consecutive turns: {summarised_at:?}"
    );
    // The storage requests of a turn do not grow with the session: the same at turn 10 and turn 40.
    assert_eq!(requests_per_turn[9], requests_per_turn[turns - 1], "{requests_per_turn:?}");
    // And the model gets the summary and recent turns, not the whole history.
    let last = stack.model.requests().last().unwrap().clone();
    let sent = last["messages"].as_array().unwrap();
    assert!(sent.len() < 20, "{} messages sent", sent.len());
    assert!(sent[1]["content"].as_str().unwrap().starts_with("[Summary of the earlier conversation]"));

    // The owner reads the whole history back, page by page, newest first.
    let first = get_page(&http, "long", &[("limit", "15")]).await;
    assert_eq!(first["version"], turns);
    assert_eq!(first["turns"].as_array().unwrap().len(), 15);
    assert_eq!(first["turns"][0]["turn"], turns - 14, "the page holds the newest turns, in order");
    assert_eq!(first["history"].as_array().unwrap().len(), 30);
    let mut seen = 15;
    let mut cursor = first["next_cursor"].as_str().expect("an older page").to_owned();
    loop {
        let page = get_page(&http, "long", &[("limit", "15"), ("cursor", &cursor)]).await;
        seen += page["turns"].as_array().unwrap().len();
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => break,
        }
    }
    assert_eq!(seen, turns);
    for bad in [("limit", "0"), ("limit", "101"), ("cursor", "x")] {
        let mut event = get_event(Some(USER), "long");
        event["queryStringParameters"] = json!({ bad.0: bad.1 });
        let (status, _) = status_and_body(&http.call(event).await);
        assert_eq!(status, 400, "{bad:?}");
    }
}

#[tokio::test]
async fn a_summariser_that_fails_is_retried_every_few_turns_not_every_turn() {
    let stack = Stack::new().await;
    let http = stack.http(&[("HISTORY_SUMMARY_TOKENS", "300")]).await;
    let mut attempts = 0;
    for turn in 1..=16 {
        let before = stack.model.requests().len();
        // The summary call (if any) comes first and gets an empty answer; the turn gets text.
        stack.model.push([Reply::text(""), Reply::text("ok")]);
        let message = format!("Pregunta {turn}: {}", "contexto ".repeat(40));
        let (status, body) =
            status_and_body(&http.call(turn_event(Some(USER), "fails", json!({ "message": message }))).await);
        let requests = stack.model.requests();
        let summarised = requests[before..].iter().any(is_summary_request);
        attempts += usize::from(summarised);
        if !summarised {
            // The empty text answered the turn itself; drop the extra scripted reply.
            assert_eq!(stack.model.remaining(), 1);
        }
        assert_eq!(status, 200, "turn {turn}: {body}");
        while stack.model.remaining() > 0 {
            let _ = http.call(turn_event(Some(USER), "drain", json!({"message": "x"}))).await;
        }
    }
    assert!((1..=4).contains(&attempts), "{attempts} attempts in 16 turns");
}
