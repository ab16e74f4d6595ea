//! Raw replies: a whole body with its status and headers, or a body sent piece by piece (bytes,
//! pauses, a gate on the client's first delta, a drop, a stall), and the one sender every reply,
//! high-level ones once written out, goes through.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::Notify;

use super::{ModelServer, Reply};

/// One piece of a body sent piece by piece.
#[derive(Debug, Clone)]
pub enum Piece {
    /// Send these bytes as they are: text or not, a whole event or frame or part of one.
    Bytes(Vec<u8>),
    /// Send these bytes after the server's chunk delay and note when (a streamed text chunk).
    Token(Vec<u8>),
    /// Wait this long before the next piece, as a model producing tokens does.
    Pause(Duration),
    /// Wait until the client has handed its first delta over (see [`ModelServer::first_delta`]).
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

/// A 200 with this JSON body.
pub fn ok(body: Value) -> Reply {
    status(200, body)
}

/// `status` with this JSON body.
pub fn status(status: u16, body: Value) -> Reply {
    Reply::json_text(status, body.to_string())
}

impl Reply {
    /// `status` with this body, labelled JSON whether it is or not.
    pub fn json_text(status: u16, body: impl Into<String>) -> Reply {
        Reply::Whole { status, headers: vec![("content-type", "application/json".to_owned())], body: body.into() }
    }

    /// A 200 whose body of `content_type` is sent piece by piece.
    pub fn stream(content_type: &'static str, pieces: Vec<Piece>) -> Reply {
        Reply::Stream { content_type, pieces }
    }

    /// The reply with one more header; a whole body's only.
    pub fn header(mut self, name: &'static str, value: &str) -> Reply {
        match &mut self {
            Reply::Whole { headers, .. } => headers.push((name, value.to_owned())),
            _ => panic!("only a whole body takes scripted headers"),
        }
        self
    }

    /// The same reply after `wait`.
    pub fn delayed(self, wait: Duration) -> Reply {
        Reply::Delayed(wait, Box::new(self))
    }
}

/// The response for a raw reply.
pub(super) fn respond(reply: Reply, server: &ModelServer) -> Response {
    match reply {
        Reply::Whole { status, headers, body } => {
            let mut response = (StatusCode::from_u16(status).unwrap(), body).into_response();
            for (name, value) in headers {
                response.headers_mut().insert(name, value.parse().unwrap());
            }
            response
        }
        Reply::Stream { content_type, pieces } => {
            let mut response = Body::from_stream(send(pieces, server.clone())).into_response();
            response.headers_mut().insert("content-type", content_type.parse().unwrap());
            response
        }
        other => unreachable!("a high-level reply is written out before it is sent: {other:?}"),
    }
}

/// The body of a streamed reply: its pieces in order, with their pauses, gates and failures.
fn send(pieces: Vec<Piece>, server: ModelServer) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    let gate: Arc<Notify> = server.first_delta();
    futures::stream::unfold(pieces.into_iter(), move |mut pieces| {
        let gate = gate.clone();
        let server = server.clone();
        async move {
            loop {
                match pieces.next()? {
                    Piece::Bytes(bytes) => return Some((Ok(Bytes::from(bytes)), pieces)),
                    Piece::Token(bytes) => {
                        let delay = server.script.lock().unwrap().chunk_delay;
                        tokio::time::sleep(delay).await;
                        server.script.lock().unwrap().sent_chunks.push(Instant::now());
                        return Some((Ok(Bytes::from(bytes)), pieces));
                    }
                    Piece::Pause(wait) => tokio::time::sleep(wait).await,
                    Piece::AwaitFirstDelta => gate.notified().await,
                    Piece::Drop => return Some((Err(std::io::Error::other("scripted connection drop")), pieces)),
                    Piece::Stall => futures::future::pending::<()>().await,
                }
            }
        }
    })
}
