//! A scripted model server speaking the OpenAI Chat Completions HTTP API on loopback. Tests queue
//! the replies it gives and read back every request it received.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
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
    calls: u64,
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
        let app = Router::new().route("/v1/chat/completions", post(complete)).with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind model server");
        let address = listener.local_addr().expect("model server address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        ModelServer { base_url: format!("http://{address}/v1"), script }
    }

    /// Queues replies, served in order.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.script.lock().unwrap().replies.extend(replies);
    }

    /// Every request body received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.script.lock().unwrap().requests.clone()
    }

    /// Replies not yet served.
    pub fn remaining(&self) -> usize {
        self.script.lock().unwrap().replies.len()
    }
}

async fn complete(State(script): State<Arc<Mutex<Script>>>, Json(request): Json<Value>) -> Response {
    let (reply, call) = {
        let mut script = script.lock().unwrap();
        script.requests.push(request);
        script.calls += 1;
        (script.replies.pop_front(), script.calls)
    };
    let Some(mut reply) = reply else {
        return (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": {"message": "script exhausted"}})))
            .into_response();
    };
    while let Reply::Delayed(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
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
        Reply::Delayed(..) => unreachable!("unwrapped above"),
    }
}
