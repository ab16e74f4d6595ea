//! Streamed calls through replay and recording.

use super::openai::openai_reply;
use super::*;

#[tokio::test]
async fn replay_serves_recorded_deltas_and_recording_writes_them() {
    let text = r#"{"content": "Hola mundo", "tool_calls": [], "usage": {"input_tokens": 1, "output_tokens": 2}, "stop_reason": "end_turn", "deltas": ["Hola", " mundo"]}
{"content": "Sin piezas", "tool_calls": [], "usage": {"input_tokens": 1, "output_tokens": 2}, "stop_reason": "end_turn"}
{"content": "", "tool_calls": [{"id": "c1", "name": "ls", "arguments": {}}], "usage": {"input_tokens": 1, "output_tokens": 2}, "stop_reason": "tool_use"}"#;
    let replay = Arc::new(ReplayModel::from_jsonl("inline", text).unwrap());
    let server = ModelServer::start_with(vec![]).await;
    let path = std::env::temp_dir().join(format!("streaming-record-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let recording = RecordingModel::new(replay, &path);

    let (deltas, result) = stream(&recording, &server).await;
    assert_eq!(result.unwrap().content, "Hola mundo");
    assert_eq!(deltas, ["Hola", " mundo"]);
    let (deltas, result) = stream(&recording, &server).await;
    assert_eq!(result.unwrap().content, "Sin piezas");
    assert_eq!(deltas, ["Sin piezas"], "a reply without deltas is handed over whole");
    let (deltas, result) = stream(&recording, &server).await;
    assert_eq!(result.unwrap().tool_calls.len(), 1);
    assert!(deltas.is_empty(), "an empty text makes no delta");

    let lines: Vec<Value> =
        std::fs::read_to_string(&path).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["deltas"], json!(["Hola", " mundo"]));
    assert_eq!(lines[1]["deltas"], json!(["Sin piezas"]));
    assert_eq!(lines[2]["deltas"], json!([]));

    // What was recorded replays the same pieces, streamed or buffered.
    let recorded = ReplayModel::from_file(&path).unwrap();
    let (deltas, _) = stream(&recorded, &server).await;
    assert_eq!(deltas, ["Hola", " mundo"]);
    assert_eq!(recorded.complete(&request_with_system()).await.unwrap().content, "Sin piezas");
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn recording_a_live_stream_keeps_its_pieces() {
    let server = ModelServer::start_with(vec![openai_reply(&["En ", "vivo."])]).await;
    let path = std::env::temp_dir().join(format!("streaming-live-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let recording = RecordingModel::new(Arc::new(openai(&server)), &path);
    let (deltas, result) = stream(&recording, &server).await;
    assert_eq!(result.unwrap().content, "En vivo.");
    assert_eq!(deltas, ["En ", "vivo."]);
    let line: Value = serde_json::from_str(std::fs::read_to_string(&path).unwrap().trim()).unwrap();
    assert_eq!(line["deltas"], json!(["En ", "vivo."]));
    let usage = json!({"input_tokens": 11, "output_tokens": 7, "uncached_input_tokens": 11, "cache_read_tokens": 0,
                       "cache_write_tokens": 0});
    assert_eq!(line["usage"], usage);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn replay_deltas_must_join_up_to_the_content() {
    let text = r#"{"content": "Hola", "tool_calls": [], "usage": {"input_tokens": 0, "output_tokens": 0}, "stop_reason": "end_turn", "deltas": ["Ho", "l"]}"#;
    match ReplayModel::from_jsonl("inline", text) {
        Err(ModelError::Config(message)) => {
            assert!(message.contains("line 1") && message.contains("deltas"), "{message}")
        }
        other => panic!("expected a Config error, got {:?}", other.map(|model| model.remaining())),
    }
    let text = r#"{"content": "Hola", "tool_calls": [], "usage": {"input_tokens": 0, "output_tokens": 0}, "stop_reason": "end_turn", "deltas": "Hola"}"#;
    assert!(matches!(ReplayModel::from_jsonl("inline", text), Err(ModelError::Config(_))));
}
