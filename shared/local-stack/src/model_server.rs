//! A scripted model server speaking the OpenAI Chat Completions HTTP API on loopback, buffered or
//! streamed (`"stream": true`: Server-Sent Events, one chunk per word after a set delay), and
//! Amazon Bedrock's Converse API for `LLM_PROVIDER=bedrock`: `POST /model/{modelId}/converse` (buffered)
//! and `/converse-stream` (`application/vnd.amazon.eventstream` frames, one text delta per chunk).
//! Tests queue the replies it gives and read back every request it received.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A normal completion with this text.
    Text(String),
    /// A completion asking for these tool calls: (name, arguments).
    Tools(Vec<(String, Value)>),
    /// An HTTP error status with an OpenAI-style error body.
    Status(u16),
    /// Wait, then answer.
    Delayed(Duration, Box<Reply>),
    /// A text in these pieces: streamed one per chunk, or joined when the request does not stream.
    Chunks(Vec<String>),
    /// Streams these pieces, then drops the connection without finishing the response.
    BrokenAfter(Vec<String>),
}

impl Reply {
    pub fn text(text: &str) -> Reply {
        Reply::Text(text.to_owned())
    }

    pub fn tool(name: &str, arguments: Value) -> Reply {
        Reply::Tools(vec![(name.to_owned(), arguments)])
    }
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    requests: Vec<Value>,
    /// When each request of the OpenAI API arrived, in order.
    arrivals: Vec<std::time::Instant>,
    /// The `Authorization` header of each request, in order (`None` when absent).
    authorizations: Vec<Option<String>>,
    /// The path of each request as sent (percent-encoding included), in order.
    paths: Vec<String>,
    calls: u64,
    /// The wait before each streamed chunk: the model's time per token.
    chunk_delay: Duration,
    /// When each streamed chunk was sent, in order.
    sent_chunks: Vec<std::time::Instant>,
    /// A request whose system prompt starts with the first text is answered with the second,
    /// without taking a reply from the queue (OpenAI API only).
    side_answer: Option<(String, String)>,
    /// Replies for the conversations whose first user message contains a key, served in order
    /// before the common queue: each subagent's own script, whatever order they call in.
    keyed: Vec<(String, VecDeque<Reply>)>,
}

impl Script {
    /// The next reply for `request`: its conversation's own script when one matches, else the queue.
    fn next_reply(&mut self, request: &Value) -> Option<Reply> {
        let first_user = request["messages"]
            .as_array()
            .and_then(|messages| messages.iter().find(|message| message["role"] == "user"))
            .and_then(|message| message["content"].as_str())
            .unwrap_or_default();
        let keyed =
            self.keyed.iter_mut().find(|(key, replies)| first_user.contains(key.as_str()) && !replies.is_empty());
        match keyed {
            Some((_, replies)) => replies.pop_front(),
            None => self.replies.pop_front(),
        }
    }
}

/// A running scripted model server.
#[derive(Clone)]
pub struct ModelServer {
    pub base_url: String,
    script: Arc<Mutex<Script>>,
}

impl ModelServer {
    pub async fn start() -> ModelServer {
        let script: Arc<Mutex<Script>> = Arc::default();
        let app = Router::new()
            .route("/v1/chat/completions", post(complete))
            .route("/model/{model_id}/converse", post(converse))
            .route("/model/{model_id}/converse-stream", post(converse_stream))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind model server");
        let address = listener.local_addr().expect("model server address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        ModelServer { base_url: format!("http://{address}/v1"), script }
    }

    /// The server's root, for `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` (Converse paths start at the root).
    pub fn endpoint(&self) -> String {
        self.base_url.trim_end_matches("/v1").to_owned()
    }

    /// The path of every request received so far, percent-encoding included.
    pub fn paths(&self) -> Vec<String> {
        self.script.lock().unwrap().paths.clone()
    }

    /// Queues replies, served in order.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.script.lock().unwrap().replies.extend(replies);
    }

    /// Every request body received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.script.lock().unwrap().requests.clone()
    }

    /// Every request of the OpenAI API received so far, with when it arrived, in order.
    pub fn requests_with_arrivals(&self) -> Vec<(Value, std::time::Instant)> {
        let script = self.script.lock().unwrap();
        script.requests.iter().cloned().zip(script.arrivals.iter().copied()).collect()
    }

    /// The `Authorization` header of every request received so far.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.script.lock().unwrap().authorizations.clone()
    }

    /// The wait before each streamed chunk (the first one included): the model's time per token.
    pub fn set_chunk_delay(&self, delay: Duration) {
        self.script.lock().unwrap().chunk_delay = delay;
    }

    /// When each streamed text chunk was sent so far, in order.
    pub fn sent_chunks(&self) -> Vec<std::time::Instant> {
        self.script.lock().unwrap().sent_chunks.clone()
    }

    /// Answers every request whose system prompt starts with `prefix` with `text`, outside the
    /// queue: for calls the runtime makes at moments a test does not fix (a condensing summary).
    pub fn answer_system_prefix(&self, prefix: &str, text: &str) {
        self.script.lock().unwrap().side_answer = Some((prefix.to_owned(), text.to_owned()));
    }

    /// Queues replies for the conversations whose first user message contains `key` (a subagent's
    /// task), served in order before the common queue (OpenAI API only).
    pub fn push_for(&self, key: &str, replies: impl IntoIterator<Item = Reply>) {
        let mut script = self.script.lock().unwrap();
        match script.keyed.iter_mut().find(|(known, _)| known == key) {
            Some((_, queue)) => queue.extend(replies),
            None => script.keyed.push((key.to_owned(), replies.into_iter().collect())),
        }
    }

    /// Replies not yet served, keyed ones included.
    pub fn remaining(&self) -> usize {
        let script = self.script.lock().unwrap();
        script.replies.len() + script.keyed.iter().map(|(_, replies)| replies.len()).sum::<usize>()
    }
}

async fn complete(
    State(script): State<Arc<Mutex<Script>>>,
    headers: HeaderMap,
    Json(request): Json<Value>,
) -> Response {
    let streamed = request.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let (reply, call, chunk_delay) = {
        let mut script = script.lock().unwrap();
        script.requests.push(request);
        script.arrivals.push(std::time::Instant::now());
        let authorization = headers.get("authorization").and_then(|value| value.to_str().ok()).map(str::to_owned);
        script.authorizations.push(authorization);
        script.paths.push("/v1/chat/completions".to_owned());
        script.calls += 1;
        let system = script.requests.last().and_then(|request| request["messages"][0]["content"].as_str());
        let side = match (&script.side_answer, system) {
            (Some((prefix, text)), Some(system)) if system.starts_with(prefix.as_str()) => {
                Some(Reply::Text(text.clone()))
            }
            _ => None,
        };
        let request = script.requests.last().cloned().unwrap_or_default();
        let reply = side.or_else(|| script.next_reply(&request));
        (reply, script.calls, script.chunk_delay)
    };
    let Some(mut reply) = reply else {
        return (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": {"message": "script exhausted"}})))
            .into_response();
    };
    while let Reply::Delayed(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    if streamed {
        return stream(script, reply, call, chunk_delay);
    }
    if let Reply::Chunks(pieces) | Reply::BrokenAfter(pieces) = reply {
        reply = Reply::Text(pieces.concat());
    }
    let usage = json!({"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110});
    match reply {
        Reply::Text(text) => Json(json!({
            "id": format!("chatcmpl-{call}"),
            "object": "chat.completion",
            "model": "scripted",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": usage,
        }))
        .into_response(),
        Reply::Tools(calls) => {
            let tool_calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| {
                    json!({"id": format!("call_{call}_{i}"), "type": "function",
                           "function": {"name": name, "arguments": args.to_string()}})
                })
                .collect();
            Json(json!({
                "id": format!("chatcmpl-{call}"),
                "object": "chat.completion",
                "model": "scripted",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": tool_calls},
                             "finish_reason": "tool_calls"}],
                "usage": usage,
            }))
            .into_response()
        }
        Reply::Status(status) => (
            StatusCode::from_u16(status).unwrap(),
            Json(json!({"error": {"message": format!("scripted status {status}"), "type": "server_error"}})),
        )
            .into_response(),
        Reply::Delayed(..) | Reply::Chunks(_) | Reply::BrokenAfter(_) => unreachable!("unwrapped above"),
    }
}

/// One `chat.completion.chunk` event.
fn chunk_event(call: u64, delta: Value, finish_reason: Option<&str>) -> String {
    let chunk = json!({
        "id": format!("chatcmpl-{call}"),
        "object": "chat.completion.chunk",
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    });
    format!("data: {chunk}\n\n")
}

/// The reply as Server-Sent Events, as OpenAI streams it: text pieces after `chunk_delay` each,
/// tool calls in fragments, the finish reason, a usage chunk, and `[DONE]`.
fn stream(script: Arc<Mutex<Script>>, reply: Reply, call: u64, chunk_delay: Duration) -> Response {
    enum Piece {
        Text(String),
        Now(String),
        Break,
    }
    let mut pieces = Vec::new();
    let finish = |pieces: &mut Vec<Piece>, reason: &str| {
        pieces.push(Piece::Now(chunk_event(call, json!({}), Some(reason))));
        let usage = json!({"id": format!("chatcmpl-{call}"), "object": "chat.completion.chunk", "choices": [],
                           "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}});
        pieces.push(Piece::Now(format!("data: {usage}\n\n")));
        pieces.push(Piece::Now("data: [DONE]\n\n".to_owned()));
    };
    match reply {
        Reply::Status(status) => {
            return (
                StatusCode::from_u16(status).unwrap(),
                Json(json!({"error": {"message": format!("scripted status {status}"), "type": "server_error"}})),
            )
                .into_response()
        }
        Reply::Text(text) => {
            pieces.extend(text.split_inclusive(' ').map(|word| Piece::Text(word.to_owned())));
            finish(&mut pieces, "stop");
        }
        Reply::Chunks(texts) => {
            pieces.extend(texts.into_iter().map(Piece::Text));
            finish(&mut pieces, "stop");
        }
        Reply::BrokenAfter(texts) => {
            pieces.extend(texts.into_iter().map(Piece::Text));
            pieces.push(Piece::Break);
        }
        Reply::Tools(calls) => {
            for (i, (name, args)) in calls.iter().enumerate() {
                let opening = json!({"tool_calls": [{"index": i, "id": format!("call_{call}_{i}"), "type": "function",
                                                     "function": {"name": name, "arguments": ""}}]});
                pieces.push(Piece::Now(chunk_event(call, opening, None)));
                let arguments = json!({"tool_calls": [{"index": i, "function": {"arguments": args.to_string()}}]});
                pieces.push(Piece::Now(chunk_event(call, arguments, None)));
            }
            finish(&mut pieces, "tool_calls");
        }
        Reply::Delayed(..) => unreachable!("unwrapped by the caller"),
    }
    let role = Piece::Now(chunk_event(call, json!({"role": "assistant", "content": ""}), None));
    pieces.insert(0, role);
    let events = futures::stream::unfold(pieces.into_iter(), move |mut pieces| {
        let script = script.clone();
        async move {
            let chunk = match pieces.next()? {
                Piece::Now(text) => Ok(bytes::Bytes::from(text)),
                Piece::Text(text) => {
                    tokio::time::sleep(chunk_delay).await;
                    script.lock().unwrap().sent_chunks.push(std::time::Instant::now());
                    Ok(bytes::Bytes::from(chunk_event(call, json!({"content": text}), None)))
                }
                Piece::Break => Err(std::io::Error::other("scripted connection drop")),
            };
            Some((chunk, pieces))
        }
    });
    let mut response = axum::body::Body::from_stream(events).into_response();
    response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
    response
}

/// One Bedrock `Converse` call: the reply as the Converse API sends it (content blocks, `stopReason`,
/// `usage`), an error status as a restJson error with its `x-amzn-ErrorType`. Streamed replies are
/// joined, since this mode answers buffered calls only.
/// Records a Bedrock request and takes the next reply, after its scripted delays: `Err` is the error
/// response to send instead.
async fn next_bedrock_reply(
    script: &Mutex<Script>,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(Reply, u64, Duration), Response> {
    let (reply, call, chunk_delay) = {
        let mut script = script.lock().unwrap();
        script.requests.push(serde_json::from_slice(body).unwrap_or(Value::Null));
        let authorization = headers.get("authorization").and_then(|value| value.to_str().ok()).map(str::to_owned);
        script.authorizations.push(authorization);
        script.paths.push(uri.path().to_owned());
        script.calls += 1;
        (script.replies.pop_front(), script.calls, script.chunk_delay)
    };
    let Some(mut reply) = reply else {
        return Err(bedrock_error(500, "InternalServerException", "script exhausted".to_owned()));
    };
    while let Reply::Delayed(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    if let Reply::Status(status) = reply {
        let kind = match status {
            429 => "ThrottlingException",
            503 => "ServiceUnavailableException",
            500..=599 => "InternalServerException",
            403 => "AccessDeniedException",
            404 => "ResourceNotFoundException",
            _ => "ValidationException",
        };
        return Err(bedrock_error(status, kind, format!("scripted status {status}")));
    }
    Ok((reply, call, chunk_delay))
}

/// An error as Bedrock sends one: a restJson body and its `x-amzn-ErrorType`.
fn bedrock_error(status: u16, kind: &str, message: String) -> Response {
    let mut response = (StatusCode::from_u16(status).unwrap(), Json(json!({ "message": message }))).into_response();
    let kind = format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/");
    response.headers_mut().insert("x-amzn-errortype", kind.parse().unwrap());
    response
}

async fn converse(
    State(script): State<Arc<Mutex<Script>>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Response {
    let (reply, call) = match next_bedrock_reply(&script, &uri, &headers, &body).await {
        Ok((reply, call, _)) => (reply, call),
        Err(response) => return response,
    };
    let (content, stop_reason) = match reply {
        Reply::Text(text) => (json!([{ "text": text }]), "end_turn"),
        Reply::Chunks(pieces) | Reply::BrokenAfter(pieces) => (json!([{ "text": pieces.concat() }]), "end_turn"),
        Reply::Tools(calls) => {
            let blocks: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, input))| json!({"toolUse": {"toolUseId": format!("tooluse_{call}_{i}"), "name": name, "input": input}}))
                .collect();
            (Value::Array(blocks), "tool_use")
        }
        Reply::Status(_) | Reply::Delayed(..) => unreachable!("answered by next_bedrock_reply"),
    };
    Json(json!({
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason,
        "usage": {"inputTokens": 100, "outputTokens": 10, "totalTokens": 110},
        "metrics": {"latencyMs": 1},
    }))
    .into_response()
}

/// One Bedrock `ConverseStream` call: the reply as event-stream frames, as Bedrock sends them
/// (`messageStart`, content block deltas, `messageStop`, `metadata`), each text piece after the chunk
/// delay; `BrokenAfter` drops the connection after its pieces.
async fn converse_stream(
    State(script): State<Arc<Mutex<Script>>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Response {
    enum Piece {
        Now(&'static str, Value),
        Text(String),
        Break,
    }
    let (reply, call, chunk_delay) = match next_bedrock_reply(&script, &uri, &headers, &body).await {
        Ok(next) => next,
        Err(response) => return response,
    };
    let mut pieces = vec![Piece::Now("messageStart", json!({"role": "assistant"}))];
    let stop_reason = match reply {
        Reply::Text(text) => {
            pieces.extend(text.split_inclusive(' ').map(|word| Piece::Text(word.to_owned())));
            Some("end_turn")
        }
        Reply::Chunks(texts) => {
            pieces.extend(texts.into_iter().map(Piece::Text));
            Some("end_turn")
        }
        Reply::BrokenAfter(texts) => {
            pieces.extend(texts.into_iter().map(Piece::Text));
            pieces.push(Piece::Break);
            None
        }
        Reply::Tools(calls) => {
            for (i, (name, input)) in calls.iter().enumerate() {
                let start = json!({"toolUse": {"toolUseId": format!("tooluse_{call}_{i}"), "name": name}});
                pieces.push(Piece::Now("contentBlockStart", json!({"contentBlockIndex": i, "start": start})));
                let delta = json!({"toolUse": {"input": input.to_string()}});
                pieces.push(Piece::Now("contentBlockDelta", json!({"contentBlockIndex": i, "delta": delta})));
                pieces.push(Piece::Now("contentBlockStop", json!({"contentBlockIndex": i})));
            }
            Some("tool_use")
        }
        Reply::Status(_) | Reply::Delayed(..) => unreachable!("answered by next_bedrock_reply"),
    };
    if let Some(stop_reason) = stop_reason {
        pieces.push(Piece::Now("messageStop", json!({ "stopReason": stop_reason })));
        let usage = json!({"inputTokens": 100, "outputTokens": 10, "totalTokens": 110});
        pieces.push(Piece::Now("metadata", json!({"usage": usage, "metrics": {"latencyMs": 1}})));
    }
    let frames = futures::stream::unfold(pieces.into_iter(), move |mut pieces| {
        let script = script.clone();
        async move {
            let frame = match pieces.next()? {
                Piece::Now(kind, payload) => Ok(event_frame(kind, &payload)),
                Piece::Text(text) => {
                    tokio::time::sleep(chunk_delay).await;
                    script.lock().unwrap().sent_chunks.push(std::time::Instant::now());
                    let delta = json!({"contentBlockIndex": 0, "delta": {"text": text}});
                    Ok(event_frame("contentBlockDelta", &delta))
                }
                Piece::Break => Err(std::io::Error::other("scripted connection drop")),
            };
            Some((frame, pieces))
        }
    });
    let mut response = axum::body::Body::from_stream(frames).into_response();
    response.headers_mut().insert("content-type", "application/vnd.amazon.eventstream".parse().unwrap());
    response
}

/// One event frame of `application/vnd.amazon.eventstream`.
fn event_frame(kind: &'static str, payload: &Value) -> bytes::Bytes {
    use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
    let message = Message::new(payload.to_string().into_bytes())
        .add_header(Header::new(":message-type", HeaderValue::String("event".into())))
        .add_header(Header::new(":event-type", HeaderValue::String(kind.into())))
        .add_header(Header::new(":content-type", HeaderValue::String("application/json".into())));
    let mut bytes = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut bytes).expect("encode an event frame");
    bytes::Bytes::from(bytes)
}
