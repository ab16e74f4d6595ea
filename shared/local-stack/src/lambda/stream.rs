//! A response the function streams, read as it arrives: its prelude, its body as chunks or
//! Server-Sent Events, and its error trailer.

use axum::http::HeaderMap;
use bytes::Bytes;
use serde_json::Value;
use tokio::sync::mpsc;

/// One piece of a streamed response, with the moment the Runtime API received it.
#[derive(Debug)]
pub(super) enum StreamFrame {
    Data(Bytes, std::time::Instant),
    Trailers(HeaderMap),
}

/// A response the function is streaming: the HTTP integration prelude (status, headers, cookies),
/// then the body as it arrives. Dropping it is a client that disconnects: the Runtime API keeps
/// reading what the function sends, as Lambda does, and the function is not told.
#[derive(Debug)]
pub struct StreamedResponse {
    /// When the function began to post its response.
    pub started: std::time::Instant,
    frames: mpsc::UnboundedReceiver<StreamFrame>,
    pending: Vec<u8>,
    prelude: Option<Value>,
    trailers: Option<HeaderMap>,
    ended: bool,
    first_byte: Option<std::time::Instant>,
    /// When the last chunk read so far arrived.
    last_arrival: Option<std::time::Instant>,
    /// When the chunk that completed the prelude's delimiter arrived.
    body_start: Option<std::time::Instant>,
}

/// One Server-Sent Event of a streamed body.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub name: String,
    pub data: Value,
    /// When the chunk that completed the event arrived.
    pub at: std::time::Instant,
}

impl StreamedResponse {
    /// A response whose body comes through `frames`, which the Runtime API began to receive now.
    pub(super) fn new(frames: mpsc::UnboundedReceiver<StreamFrame>) -> StreamedResponse {
        StreamedResponse {
            started: std::time::Instant::now(),
            frames,
            pending: Vec::new(),
            prelude: None,
            trailers: None,
            ended: false,
            first_byte: None,
            last_arrival: None,
            body_start: None,
        }
    }

    /// Reads more of the body; false once the function has ended its response.
    async fn fill(&mut self) -> Option<std::time::Instant> {
        if self.ended {
            return None;
        }
        match self.frames.recv().await {
            Some(StreamFrame::Data(bytes, at)) => {
                self.pending.extend_from_slice(&bytes);
                self.first_byte.get_or_insert(at);
                self.last_arrival = Some(at);
                Some(at)
            }
            Some(StreamFrame::Trailers(trailers)) => {
                self.trailers = Some(trailers);
                self.ended = true;
                None
            }
            None => {
                self.ended = true;
                None
            }
        }
    }

    /// The prelude the function sent before its body: `{"statusCode": .., "headers": {..}}`.
    pub async fn prelude(&mut self) -> Value {
        if let Some(prelude) = &self.prelude {
            return prelude.clone();
        }
        loop {
            if let Some(end) = self.pending.windows(8).position(|window| window == [0u8; 8]) {
                let prelude: Value = serde_json::from_slice(&self.pending[..end]).expect("the prelude is JSON");
                self.pending.drain(..end + 8);
                self.prelude = Some(prelude.clone());
                self.body_start = self.last_arrival;
                return prelude;
            }
            if self.fill().await.is_none() {
                panic!("the stream ended before the prelude's delimiter: {:?}", String::from_utf8_lossy(&self.pending));
            }
        }
    }

    /// When the first byte of the response (its prelude) arrived, once read.
    pub fn first_byte(&self) -> Option<std::time::Instant> {
        self.first_byte
    }

    /// When the prelude's 8-byte delimiter arrived, once the prelude is read: the moment a Function
    /// URL's client can be sent the status and headers (Lambda parses the prelude up to it), and
    /// the earliest its first body byte can arrive.
    pub fn body_start(&self) -> Option<std::time::Instant> {
        self.body_start
    }

    /// The prelude's status code.
    pub async fn status(&mut self) -> u16 {
        let prelude = self.prelude().await;
        prelude["statusCode"].as_u64().expect("statusCode") as u16
    }

    /// The next Server-Sent Event of the body, or `None` at its end.
    pub async fn next_event(&mut self) -> Option<SseEvent> {
        self.prelude().await;
        let mut at = std::time::Instant::now();
        loop {
            if let Some(end) = self.pending.windows(2).position(|window| window == b"\n\n") {
                let block: Vec<u8> = self.pending.drain(..end + 2).collect();
                let block = String::from_utf8(block).expect("an SSE event is UTF-8");
                let mut name = "message".to_owned();
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("event:") {
                        name = value.trim().to_owned();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        if !data.is_empty() {
                            data.push('\n');
                        }
                        data.push_str(value.strip_prefix(' ').unwrap_or(value));
                    }
                }
                if data.is_empty() && name == "message" {
                    continue; // A comment or keep-alive.
                }
                let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                return Some(SseEvent { name, data, at });
            }
            match self.fill().await {
                Some(arrived) => at = arrived,
                None => return None,
            }
        }
    }

    /// The next piece of the body after the prelude, as the function sent it; `None` at its end.
    /// What a Function URL forwards to its client, chunk by chunk.
    pub async fn next_body_chunk(&mut self) -> Option<Bytes> {
        self.prelude().await;
        if self.pending.is_empty() && self.fill().await.is_none() {
            return None;
        }
        Some(Bytes::from(std::mem::take(&mut self.pending)))
    }

    /// The rest of the body after the prelude, as text, once the function has ended it.
    pub async fn body_text(&mut self) -> String {
        self.prelude().await;
        while self.fill().await.is_some() {}
        String::from_utf8(std::mem::take(&mut self.pending)).expect("the body is UTF-8")
    }

    /// The error trailer (`Lambda-Runtime-Function-Error-Type`) the function sent, if any, once ended.
    pub async fn error_trailer(&mut self) -> Option<String> {
        while self.fill().await.is_some() {}
        let trailers = self.trailers.as_ref()?;
        trailers.get("lambda-runtime-function-error-type").map(|value| value.to_str().unwrap_or("").to_owned())
    }
}
