//! A scripted model server on loopback for the three providers: OpenAI's Chat Completions
//! (`…/chat/completions`), Anthropic's Messages API (`…/messages`) and Amazon Bedrock's Converse
//! and ConverseStream (`/model/{modelId}/converse[-stream]`), buffered or streamed as each streams.
//! Its replies are either high-level (a text, tool calls, a status), written in the wire format of
//! the provider the request's path names, or raw (a whole body, or bytes sent piece by piece with
//! pauses, drops and stalls) for tests of the providers' own parsing. A test queues the replies, or
//! gives a decider that picks each from its request, and reads back every request it received.
//! Each reply's usage reports the prompt cache as its provider would (see [`cache`]): reads and
//! writes out of a fixed total by default, or real estimates with [`ModelServer::count_tokens`].

mod anthropic;
mod bedrock;
mod cache;
mod openai;
mod raw;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use serde_json::Value;
use tokio::sync::Notify;

pub use cache::CacheUsage;
pub use raw::{ok, status, Piece};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A normal completion with this text.
    Text(String),
    /// A completion asking for these tool calls: (name, arguments).
    Tools(Vec<(String, Value)>),
    /// An HTTP error status with the provider's error body.
    Status(u16),
    /// Wait, then answer.
    Delayed(Duration, Box<Reply>),
    /// A text in these pieces: streamed one per chunk, or joined when the request does not stream.
    Chunks(Vec<String>),
    /// Streams these pieces, then drops the connection without finishing the response.
    BrokenAfter(Vec<String>),
    /// Raw: a whole body with its status and headers, sent as it is whatever the provider.
    Whole { status: u16, headers: Vec<(&'static str, String)>, body: String },
    /// Raw: a 200 whose body of `content_type` is sent piece by piece.
    Stream { content_type: &'static str, pieces: Vec<Piece> },
}

impl Reply {
    pub fn text(text: &str) -> Reply {
        Reply::Text(text.to_owned())
    }

    pub fn tool(name: &str, arguments: Value) -> Reply {
        Reply::Tools(vec![(name.to_owned(), arguments)])
    }

    /// The reply once its delays are waited out.
    fn answer(&self) -> &Reply {
        match self {
            Reply::Delayed(_, inner) => inner.answer(),
            other => other,
        }
    }

    /// Whether it is a model's message, written in the provider's format with its usage.
    fn is_message(&self) -> bool {
        matches!(self, Reply::Text(_) | Reply::Tools(_) | Reply::Chunks(_) | Reply::BrokenAfter(_))
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Received {
    /// The path as sent, percent-encoding included.
    pub path: String,
    pub headers: HeaderMap,
    /// The body as JSON, or null when it was not JSON.
    pub body: Value,
    /// When it arrived.
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

/// Picks the reply to a request from the request alone, as a model would.
pub type Decider = Arc<dyn Fn(&Received) -> Reply + Send + Sync>;

/// The API a request's path names, which says how a high-level reply is written.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Provider {
    OpenAi,
    Anthropic,
    Bedrock {
        stream: bool,
    },
    /// A path no provider uses: only raw replies answer it.
    Unknown,
}

impl Provider {
    /// Suffixes, not whole paths, so a base URL with or without `/v1` reaches the same API.
    fn of(path: &str) -> Provider {
        if path.ends_with("/chat/completions") {
            Provider::OpenAi
        } else if path.ends_with("/messages") {
            Provider::Anthropic
        } else if path.starts_with("/model/") && path.ends_with("/converse-stream") {
            Provider::Bedrock { stream: true }
        } else if path.starts_with("/model/") && path.ends_with("/converse") {
            Provider::Bedrock { stream: false }
        } else {
            Provider::Unknown
        }
    }

    /// The reply in this provider's wire format: always a raw one.
    fn render(self, reply: Reply, call: u64, body: &Value, usage: CacheUsage) -> Reply {
        let streamed = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
        match self {
            Provider::OpenAi => openai::render(reply, call, streamed, usage),
            Provider::Anthropic => anthropic::render(reply, call, streamed, usage),
            Provider::Bedrock { stream } => bedrock::render(reply, call, stream, usage),
            Provider::Unknown => match reply {
                Reply::Whole { .. } | Reply::Stream { .. } => reply,
                _ => Reply::json_text(404, r#"{"error":{"message":"no provider answers this path"}}"#),
            },
        }
    }

    /// The error a request past the script gets: a 500, which the providers retry.
    fn exhausted(self) -> Reply {
        let message = "script exhausted";
        match self {
            Provider::OpenAi | Provider::Unknown => openai::error(500, message),
            Provider::Anthropic => anthropic::error(500, message),
            Provider::Bedrock { .. } => bedrock::error(500, message),
        }
    }

    /// The system prompt and the first user message, for side answers and keyed scripts.
    fn conversation(self, body: &Value) -> (String, String) {
        let messages = body["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
        let first_user = messages.iter().find(|message| message["role"] == "user").map(|m| text_of(&m["content"]));
        let system = match self {
            Provider::OpenAi | Provider::Unknown => {
                messages.first().filter(|message| message["role"] == "system").map(|m| text_of(&m["content"]))
            }
            Provider::Anthropic | Provider::Bedrock { .. } => Some(text_of(&body["system"])),
        };
        (system.unwrap_or_default(), first_user.unwrap_or_default())
    }
}

/// A message's text: a string, or the texts of its content blocks joined (Anthropic, Bedrock).
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|block| block["text"].as_str()).collect(),
        _ => String::new(),
    }
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    /// Replies for the conversations whose first user message contains a key, served in order
    /// before the common queue: each subagent's own script, whatever order they call in.
    keyed: Vec<(String, VecDeque<Reply>)>,
    /// A request whose system prompt starts with the first text is answered with the second,
    /// without taking a reply from the queue.
    side_answer: Option<(String, String)>,
    /// Answers what the queues do not.
    decider: Option<Decider>,
    received: Vec<Received>,
    /// The wait before each streamed text chunk: the model's time per token.
    chunk_delay: Duration,
    /// When each streamed text chunk was sent, in order.
    sent_chunks: Vec<Instant>,
    /// The prefixes the provider would have cached so far.
    cache: cache::PromptCache,
    /// Report estimated totals rather than the fixed ones.
    count_tokens: bool,
    /// The usage each request's reply reported, `None` for a raw reply or an error.
    usages: Vec<Option<CacheUsage>>,
}

impl Script {
    /// The next reply: a side answer, the conversation's own script, the queue, then the decider.
    fn next_reply(&mut self, provider: Provider, request: &Received) -> Option<Reply> {
        let (system, first_user) = provider.conversation(&request.body);
        if let Some((prefix, text)) = &self.side_answer {
            if !system.is_empty() && system.starts_with(prefix.as_str()) {
                return Some(Reply::Text(text.clone()));
            }
        }
        let keyed =
            self.keyed.iter_mut().find(|(key, replies)| first_user.contains(key.as_str()) && !replies.is_empty());
        let queued = match keyed {
            Some((_, replies)) => replies.pop_front(),
            None => self.replies.pop_front(),
        };
        queued.or_else(|| self.decider.as_ref().map(|decide| decide(request)))
    }
}

/// A running scripted model server.
#[derive(Clone)]
pub struct ModelServer {
    /// OpenAI's base URL (`http://127.0.0.1:PORT/v1`).
    pub base_url: String,
    script: Arc<Mutex<Script>>,
    first_delta: Arc<Notify>,
}

impl ModelServer {
    pub async fn start() -> ModelServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind model server");
        ModelServer::start_on(listener).await
    }

    /// Starts a server that gives `replies` in order.
    pub async fn start_with(replies: Vec<Reply>) -> ModelServer {
        let server = ModelServer::start().await;
        server.push(replies);
        server
    }

    /// Serves on a listener bound beforehand, so its port can be told before any runtime starts.
    pub async fn start_on(listener: std::net::TcpListener) -> ModelServer {
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let listener = tokio::net::TcpListener::from_std(listener).expect("model server listener");
        let address = listener.local_addr().expect("model server address");
        let server = ModelServer {
            base_url: format!("http://{address}/v1"),
            script: Arc::default(),
            first_delta: Arc::new(Notify::new()),
        };
        // Requests carry images and PDFs in base64, well past axum's 2 MB default for a body.
        let app = axum::Router::new()
            .fallback(answer)
            .layer(axum::extract::DefaultBodyLimit::max(64 << 20))
            .with_state(server.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        server
    }

    /// The server's root: Anthropic's base URL and `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`.
    pub fn endpoint(&self) -> String {
        self.base_url.trim_end_matches("/v1").to_owned()
    }

    /// Queues replies, served in order.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.script.lock().unwrap().replies.extend(replies);
    }

    /// Queues replies for the conversations whose first user message contains `key` (a subagent's
    /// task), served in order before the common queue.
    pub fn push_for(&self, key: &str, replies: impl IntoIterator<Item = Reply>) {
        let mut script = self.script.lock().unwrap();
        match script.keyed.iter_mut().find(|(known, _)| known == key) {
            Some((_, queue)) => queue.extend(replies),
            None => script.keyed.push((key.to_owned(), replies.into_iter().collect())),
        }
    }

    /// Answers every request whose system prompt starts with `prefix` with `text`, outside the
    /// queue: for calls the runtime makes at moments a test does not fix (a condensing summary).
    pub fn answer_system_prefix(&self, prefix: &str, text: &str) {
        self.script.lock().unwrap().side_answer = Some((prefix.to_owned(), text.to_owned()));
    }

    /// Answers the requests nothing queued answers with what `decide` picks from each.
    pub fn decide(&self, decide: impl Fn(&Received) -> Reply + Send + Sync + 'static) {
        self.script.lock().unwrap().decider = Some(Arc::new(decide));
    }

    /// The wait before each streamed text chunk (the first one included): the model's time per token.
    pub fn set_chunk_delay(&self, delay: Duration) {
        self.script.lock().unwrap().chunk_delay = delay;
    }

    /// Opens [`Piece::AwaitFirstDelta`]: a test's delta sink notifies it at the first delta.
    pub fn first_delta(&self) -> Arc<Notify> {
        self.first_delta.clone()
    }

    /// Every request received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.script.lock().unwrap().received.clone()
    }

    /// Every request body received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.script.lock().unwrap().received.iter().map(|request| request.body.clone()).collect()
    }

    /// Every request body received so far, with when it arrived, in order.
    pub fn requests_with_arrivals(&self) -> Vec<(Value, Instant)> {
        self.script.lock().unwrap().received.iter().map(|request| (request.body.clone(), request.at)).collect()
    }

    /// The path of every request received so far, percent-encoding included.
    pub fn paths(&self) -> Vec<String> {
        self.script.lock().unwrap().received.iter().map(|request| request.path.clone()).collect()
    }

    /// The `Authorization` header of every request received so far.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        let script = self.script.lock().unwrap();
        script.received.iter().map(|request| request.header("authorization").map(str::to_owned)).collect()
    }

    /// When each streamed text chunk was sent so far, in order.
    pub fn sent_chunks(&self) -> Vec<Instant> {
        self.script.lock().unwrap().sent_chunks.clone()
    }

    /// Reports as input tokens the prompt's size (its parts' JSON bytes / 4) and as output tokens the
    /// reply's, instead of the fixed 100 and 10, for measures of real cache shares and costs.
    pub fn count_tokens(&self, on: bool) {
        self.script.lock().unwrap().count_tokens = on;
    }

    /// The usage each request's reply reported, in order: the emulated cache's reads and writes;
    /// `None` for a raw reply, an error, or a request past the script.
    pub fn usages(&self) -> Vec<Option<CacheUsage>> {
        self.script.lock().unwrap().usages.clone()
    }

    /// Replies not yet served, keyed ones included.
    pub fn remaining(&self) -> usize {
        let script = self.script.lock().unwrap();
        script.replies.len() + script.keyed.iter().map(|(_, replies)| replies.len()).sum::<usize>()
    }
}

/// Every request: logged, answered with the next reply after its delays, in its provider's format.
async fn answer(State(server): State<ModelServer>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let provider = Provider::of(uri.path());
    let request = Received {
        path: uri.path().to_owned(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        at: Instant::now(),
    };
    let (reply, call, usage) = {
        let mut script = server.script.lock().unwrap();
        script.received.push(request.clone());
        let reply = script.next_reply(provider, &request);
        // The cache is updated as the request arrives, so that concurrent requests see it in order.
        let usage = reply.as_ref().map(Reply::answer).filter(|answer| answer.is_message()).map(|answer| {
            let count = script.count_tokens;
            script.cache.usage(provider, &request.path, &request.body, answer, count)
        });
        script.usages.push(usage);
        (reply, script.received.len() as u64, usage.unwrap_or_default())
    };
    let Some(mut reply) = reply else {
        return raw::respond(provider.exhausted(), &server);
    };
    while let Reply::Delayed(wait, inner) = reply {
        tokio::time::sleep(wait).await;
        reply = *inner;
    }
    raw::respond(provider.render(reply, call, &request.body, usage), &server)
}
