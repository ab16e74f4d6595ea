//! Streamed provider calls against scripted Server-Sent Events servers on 127.0.0.1: deltas arrive
//! while the reply is still being sent, tool calls and usage are assembled, failures before the
//! first delta are retried and failures after it are not, malformed streams are errors, not panics.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::{ChatModel, ChatRequest, DeltaSink, Message, ModelError, StopReason};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use llm::{AnthropicModel, LlmConfig, OpenAiModel, ProviderKind, RecordingModel, ReplayModel};
use serde_json::{json, Value};
use tokio::sync::Notify;

/// One piece of a scripted streamed answer.
enum Piece {
    /// Send this text as it is.
    Send(String),
    /// Wait until the client has handed its first delta over.
    AwaitFirstDelta,
    /// Drop the connection without ending the response.
    Drop,
}

enum Answer {
    Stream(Vec<Piece>),
    Status(u16),
}

#[derive(Clone)]
struct Server {
    base: String,
    answers: Arc<Mutex<VecDeque<Answer>>>,
    requests: Arc<Mutex<Vec<Value>>>,
    first_delta: Arc<Notify>,
}

async fn answer(State(server): State<Server>, body: axum::body::Bytes) -> Response {
    server.requests.lock().unwrap().push(serde_json::from_slice(&body).unwrap_or(Value::Null));
    let Some(answer) = server.answers.lock().unwrap().pop_front() else {
        return (StatusCode::GONE, "script exhausted").into_response();
    };
    let pieces = match answer {
        Answer::Status(status) => {
            let body = json!({"error": {"message": format!("scripted {status}"), "type": "overloaded_error"}});
            return (StatusCode::from_u16(status).unwrap(), body.to_string()).into_response();
        }
        Answer::Stream(pieces) => pieces,
    };
    let gate = server.first_delta.clone();
    let stream = futures::stream::unfold(pieces.into_iter(), move |mut pieces| {
        let gate = gate.clone();
        async move {
            loop {
                match pieces.next()? {
                    Piece::Send(text) => return Some((Ok::<_, std::io::Error>(axum::body::Bytes::from(text)), pieces)),
                    Piece::AwaitFirstDelta => gate.notified().await,
                    Piece::Drop => return Some((Err(std::io::Error::other("scripted drop")), pieces)),
                }
            }
        }
    });
    let mut response = axum::body::Body::from_stream(stream).into_response();
    response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
    response
}

impl Server {
    async fn start(answers: Vec<Answer>) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = Server {
            base: format!("http://{}", listener.local_addr().unwrap()),
            answers: Arc::new(Mutex::new(answers.into())),
            requests: Arc::default(),
            first_delta: Arc::new(Notify::new()),
        };
        let app = axum::Router::new().fallback(answer).with_state(server.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        server
    }

    fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    fn config(&self, provider: ProviderKind) -> LlmConfig {
        let base = match provider {
            ProviderKind::OpenAi => format!("{}/v1", self.base),
            _ => self.base.clone(),
        };
        let mut config = LlmConfig::new(provider, base, "test-model");
        config.api_key = Some("sk-test".to_owned());
        config.max_attempts = 3;
        config.retry_base_delay = Duration::from_millis(1);
        config.timeout = Duration::from_secs(5);
        config
    }
}

/// Collects deltas, and opens the server's gate at the first one.
struct Collect {
    deltas: Mutex<Vec<String>>,
    first: Arc<Notify>,
}

impl Collect {
    fn new(server: &Server) -> Collect {
        Collect { deltas: Mutex::default(), first: server.first_delta.clone() }
    }

    fn deltas(&self) -> Vec<String> {
        self.deltas.lock().unwrap().clone()
    }
}

impl DeltaSink for Collect {
    fn delta(&self, text: &str) {
        let mut deltas = self.deltas.lock().unwrap();
        if deltas.is_empty() {
            self.first.notify_one();
        }
        deltas.push(text.to_owned());
    }
}

fn request() -> ChatRequest {
    ChatRequest { system: "sys".into(), messages: vec![Message::user("hi")], ..Default::default() }
}

fn sse(data: Value) -> Piece {
    Piece::Send(format!("data: {data}\n\n"))
}

fn openai_text(text: &str) -> Piece {
    sse(json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}))
}

fn openai_end(reason: &str) -> Vec<Piece> {
    vec![
        sse(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})),
        sse(json!({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7}})),
        Piece::Send("data: [DONE]\n\n".into()),
    ]
}

#[tokio::test]
async fn openai_text_streams_before_the_reply_ends() {
    let mut pieces = vec![openai_text("Hola"), Piece::AwaitFirstDelta, openai_text(", "), openai_text("mundo.")];
    pieces.extend(openai_end("stop"));
    let server = Server::start(vec![Answer::Stream(pieces)]).await;
    let model = OpenAiModel::new(&server.config(ProviderKind::OpenAi)).unwrap();
    let sink = Collect::new(&server);
    let response = model.complete_streaming(&request(), &sink).await.unwrap();
    assert_eq!(sink.deltas(), ["Hola", ", ", "mundo."]);
    assert_eq!(response.content, "Hola, mundo.");
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!((response.usage.input_tokens, response.usage.output_tokens), (11, 7));
    let sent = &server.requests()[0];
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn openai_tool_calls_are_assembled_from_interleaved_fragments() {
    let call = |index: u64, id: Option<&str>, name: Option<&str>, arguments: &str| {
        let mut function = json!({"arguments": arguments});
        if let Some(name) = name {
            function["name"] = json!(name);
        }
        let mut fragment = json!({"index": index, "function": function});
        if let Some(id) = id {
            fragment["id"] = json!(id);
            fragment["type"] = json!("function");
        }
        sse(json!({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]}))
    };
    let mut pieces = vec![
        call(0, Some("call_a"), Some("read_file"), ""),
        call(1, Some("call_b"), Some("ls"), "{\"pa"),
        call(0, None, None, "{\"file_path\": "),
        call(1, None, None, "th\": \"/\"}"),
        call(0, None, None, "\"/workspace/a.md\"}"),
    ];
    pieces.extend(openai_end("tool_calls"));
    let server = Server::start(vec![Answer::Stream(pieces)]).await;
    let model = OpenAiModel::new(&server.config(ProviderKind::OpenAi)).unwrap();
    let sink = Collect::new(&server);
    let response = model.complete_streaming(&request(), &sink).await.unwrap();
    assert!(sink.deltas().is_empty());
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    let calls: Vec<(String, String, Value)> =
        response.tool_calls.into_iter().map(|c| (c.id, c.name, c.arguments)).collect();
    assert_eq!(
        calls,
        [
            ("call_a".into(), "read_file".into(), json!({"file_path": "/workspace/a.md"})),
            ("call_b".into(), "ls".into(), json!({"path": "/"})),
        ]
    );
}

#[tokio::test]
async fn failures_before_the_first_delta_are_retried_and_after_it_are_final() {
    let mut good = vec![openai_text("Otra vez.")];
    good.extend(openai_end("stop"));
    let server =
        Server::start(vec![Answer::Status(503), Answer::Stream(vec![Piece::Drop]), Answer::Stream(good)]).await;
    let model = OpenAiModel::new(&server.config(ProviderKind::OpenAi)).unwrap();
    let sink = Collect::new(&server);
    let response = model.complete_streaming(&request(), &sink).await.unwrap();
    assert_eq!(response.content, "Otra vez.");
    assert_eq!(server.requests().len(), 3, "a 503 and a stream dropped before any delta were retried");

    // A fresh server, so its gate opens only at this call's first delta.
    let server = Server::start(vec![
        Answer::Stream(vec![openai_text("Empiezo"), Piece::AwaitFirstDelta, Piece::Drop]),
        Answer::Stream(vec![openai_text("never")]),
    ])
    .await;
    let model = OpenAiModel::new(&server.config(ProviderKind::OpenAi)).unwrap();
    let sink = Collect::new(&server);
    let error = model.complete_streaming(&request(), &sink).await.unwrap_err();
    assert!(matches!(&error, ModelError::Unavailable { message, .. } if message.contains("after the reply began")));
    assert_eq!(sink.deltas(), ["Empiezo"]);
    assert_eq!(server.requests().len(), 1, "a stream broken after a delta is not retried");
}

#[tokio::test]
async fn malformed_streams_are_errors_not_panics() {
    let server = Server::start(vec![
        Answer::Stream(vec![Piece::Send("data: {not json\n\n".into())]),
        Answer::Stream(vec![sse(json!({"choices": [{"delta": {"tool_calls": [{"index": 9999}]}}]}))]),
        Answer::Stream(vec![Piece::Send(format!("data: \"{}\"\n\n", "x".repeat(2 * 1024 * 1024)))]),
    ])
    .await;
    let model = OpenAiModel::new(&server.config(ProviderKind::OpenAi)).unwrap();
    for _ in 0..3 {
        let error = model.complete_streaming(&request(), &Collect::new(&server)).await.unwrap_err();
        assert!(matches!(error, ModelError::InvalidResponse(_)), "{error:?}");
    }
    assert_eq!(server.requests().len(), 3, "malformed streams are not retried");
}

fn event(name: &str, data: Value) -> Piece {
    Piece::Send(format!("event: {name}\ndata: {data}\n\n"))
}

fn anthropic_text(index: u64, text: &str) -> Piece {
    event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}),
    )
}

#[tokio::test]
async fn anthropic_text_and_tool_use_stream() {
    let start = event(
        "message_start",
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 25, "output_tokens": 1}}}),
    );
    let pieces = vec![
        start,
        event("ping", json!({"type": "ping"})),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        anthropic_text(0, "Voy a "),
        Piece::AwaitFirstDelta,
        anthropic_text(0, "leerlo."),
        event("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1,
                   "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "input_json_delta", "partial_json": "{\"file_path\": \"/a"}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ".md\"}"}}),
        ),
        event("content_block_stop", json!({"type": "content_block_stop", "index": 1})),
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}}),
        ),
        event("message_stop", json!({"type": "message_stop"})),
    ];
    let overloaded = event("error", json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}));
    let server = Server::start(vec![Answer::Stream(vec![overloaded]), Answer::Stream(pieces)]).await;
    let model = AnthropicModel::new(&server.config(ProviderKind::Anthropic)).unwrap();
    let sink = Collect::new(&server);
    let response = model.complete_streaming(&request(), &sink).await.unwrap();
    assert_eq!(sink.deltas(), ["Voy a ", "leerlo."]);
    assert_eq!(response.content, "Voy a leerlo.");
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].arguments, json!({"file_path": "/a.md"}));
    assert_eq!((response.usage.input_tokens, response.usage.output_tokens), (25, 30));
    assert_eq!(server.requests().len(), 2, "an overloaded stream before any delta was retried");
    assert_eq!(server.requests()[1]["stream"], true);
}

#[tokio::test]
async fn replay_serves_recorded_deltas_and_recording_writes_them() {
    let text = r#"{"content": "Hola mundo", "tool_calls": [], "usage": {"input_tokens": 1, "output_tokens": 2}, "stop_reason": "end_turn", "deltas": ["Hola", " mundo"]}
{"content": "Sin piezas", "tool_calls": [], "usage": {"input_tokens": 1, "output_tokens": 2}, "stop_reason": "end_turn"}"#;
    let replay = Arc::new(ReplayModel::from_jsonl("inline", text).unwrap());
    let server = Server::start(vec![]).await;
    let path = std::env::temp_dir().join(format!("streaming-record-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let recording = RecordingModel::new(replay, &path);
    let sink = Collect::new(&server);
    assert_eq!(recording.complete_streaming(&request(), &sink).await.unwrap().content, "Hola mundo");
    assert_eq!(sink.deltas(), ["Hola", " mundo"]);
    let sink = Collect::new(&server);
    recording.complete_streaming(&request(), &sink).await.unwrap();
    assert_eq!(sink.deltas(), ["Sin piezas"]);
    // What was recorded replays the same pieces.
    let recorded = ReplayModel::from_file(&path).unwrap();
    let sink = Collect::new(&server);
    recorded.complete_streaming(&request(), &sink).await.unwrap();
    assert_eq!(sink.deltas(), ["Hola", " mundo"]);
    let _ = std::fs::remove_file(&path);
}
