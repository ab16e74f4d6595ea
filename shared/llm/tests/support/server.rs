//! The scripted provider server every llm test binary talks to: on 127.0.0.1 it answers requests in
//! order from a script (a whole body with its status and headers, or a body sent piece by piece) and
//! keeps every request it received. The provider's wire format is the test's business: it builds the
//! bodies, events and frames the script sends.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::Notify;

/// One piece of a body sent piece by piece.
pub enum Piece {
    /// Send these bytes as they are: text or not, a whole event or frame or part of one.
    Bytes(Vec<u8>),
    /// Wait this long before the next piece, as a model producing tokens does.
    Pause(Duration),
    /// Wait until the client has handed its first delta over (see [`Server::first_delta`]).
    AwaitFirstDelta,
    /// Drop the connection without ending the response.
    Drop,
    /// Keep the connection open and send nothing more.
    Stall,
}

impl Piece {
    /// Text sent as it is.
    pub fn text(text: impl Into<String>) -> Piece {
        Piece::Bytes(text.into().into_bytes())
    }
}

/// One scripted answer.
pub enum Answer {
    /// A whole body with its status and headers.
    Whole { status: u16, headers: Vec<(&'static str, String)>, body: String },
    /// A 200 whose body of `content_type` is sent piece by piece.
    Stream { content_type: &'static str, pieces: Vec<Piece> },
    /// This answer, after a wait.
    Delayed(Duration, Box<Answer>),
}

/// A 200 with this JSON body.
pub fn ok(body: Value) -> Answer {
    status(200, body)
}

/// `status` with this JSON body.
pub fn status(status: u16, body: Value) -> Answer {
    Answer::json_text(status, body.to_string())
}

impl Answer {
    /// `status` with this body, labelled JSON whether it is or not.
    pub fn json_text(status: u16, body: impl Into<String>) -> Answer {
        Answer::Whole { status, headers: vec![("content-type", "application/json".to_owned())], body: body.into() }
    }

    /// A 200 whose body of `content_type` is sent piece by piece.
    pub fn stream(content_type: &'static str, pieces: Vec<Piece>) -> Answer {
        Answer::Stream { content_type, pieces }
    }

    /// The answer with one more header; a whole body's only.
    pub fn header(mut self, name: &'static str, value: &str) -> Answer {
        match &mut self {
            Answer::Whole { headers, .. } => headers.push((name, value.to_owned())),
            _ => panic!("only a whole body takes scripted headers"),
        }
        self
    }

    /// The same answer after `wait`.
    pub fn delayed(self, wait: Duration) -> Answer {
        Answer::Delayed(wait, Box::new(self))
    }
}

/// A request as the server received it.
#[derive(Clone)]
pub struct Received {
    /// The path as sent, percent-encoding included.
    pub path: String,
    pub headers: HeaderMap,
    /// The body as JSON, or null when it was not JSON.
    pub body: Value,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|value| value.to_str().unwrap())
    }
}

#[derive(Clone)]
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Notified by the tests' delta sink at the first delta; opens [`Piece::AwaitFirstDelta`].
    pub first_delta: Arc<Notify>,
    answers: Arc<Mutex<VecDeque<Answer>>>,
    requests: Arc<Mutex<Vec<Received>>>,
}

impl Server {
    /// Starts a server that gives `answers` in order; a request past them gets a 410, which no
    /// provider retries.
    pub async fn start(answers: Vec<Answer>) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = Server {
            base: format!("http://{}", listener.local_addr().unwrap()),
            first_delta: Arc::new(Notify::new()),
            answers: Arc::new(Mutex::new(answers.into())),
            requests: Arc::default(),
        };
        let app = axum::Router::new().fallback(answer).with_state(server.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        server
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Received> {
        self.requests.lock().unwrap().clone()
    }

    /// The scripted answers not given yet.
    pub fn answers_left(&self) -> usize {
        self.answers.lock().unwrap().len()
    }
}

async fn answer(State(server): State<Server>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    server.requests.lock().unwrap().push(Received { path: uri.path().to_owned(), headers, body });
    let Some(mut answer) = server.answers.lock().unwrap().pop_front() else {
        return (StatusCode::GONE, "script exhausted").into_response();
    };
    while let Answer::Delayed(wait, inner) = answer {
        tokio::time::sleep(wait).await;
        answer = *inner;
    }
    match answer {
        Answer::Whole { status, headers, body } => {
            let mut response = (StatusCode::from_u16(status).unwrap(), body).into_response();
            for (name, value) in headers {
                response.headers_mut().insert(name, value.parse().unwrap());
            }
            response
        }
        Answer::Stream { content_type, pieces } => {
            let mut response = Body::from_stream(send(pieces, server.first_delta.clone())).into_response();
            response.headers_mut().insert("content-type", content_type.parse().unwrap());
            response
        }
        Answer::Delayed(..) => unreachable!("unwrapped above"),
    }
}

/// The body of a streamed answer: its pieces in order, with their pauses, gates and failures.
fn send(pieces: Vec<Piece>, gate: Arc<Notify>) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    futures::stream::unfold(pieces.into_iter(), move |mut pieces| {
        let gate = gate.clone();
        async move {
            loop {
                match pieces.next()? {
                    Piece::Bytes(bytes) => return Some((Ok(Bytes::from(bytes)), pieces)),
                    Piece::Pause(wait) => tokio::time::sleep(wait).await,
                    Piece::AwaitFirstDelta => gate.notified().await,
                    Piece::Drop => return Some((Err(std::io::Error::other("scripted drop")), pieces)),
                    Piece::Stall => futures::future::pending::<()>().await,
                }
            }
        }
    })
}
