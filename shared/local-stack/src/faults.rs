//! A fault-injecting HTTP/1.1 proxy for the tests, in front of moto_server (S3, DynamoDB, SQS)
//! or the scripted model server, with programmable rules and a log of every request it saw.
//!
//! It is hand-rolled on a raw `TcpListener` rather than axum because one of its faults,
//! [`Action::DropAfterApplied`], must close the client's socket after the upstream has applied
//! the request, which a framework that always answers cannot do.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};

/// The service a request was addressed to, recognised from the request itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    DynamoDb,
    S3,
    Sqs,
    Model,
}

/// Which requests a rule applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    /// Every request.
    Any,
    /// A DynamoDB operation, from `X-Amz-Target: DynamoDB_20120810.{operation}`.
    DynamoDb(String),
    /// An S3 request with this method whose path contains this text.
    S3 { method: String, path_contains: String },
    /// An SQS operation, from `X-Amz-Target: AmazonSQS.{operation}` or `Action={operation}`.
    Sqs(String),
    /// A model call: a path ending in `/chat/completions`.
    Model,
}

impl Match {
    pub fn dynamodb(operation: &str) -> Match {
        Match::DynamoDb(operation.to_owned())
    }

    pub fn s3(method: &str, path_contains: &str) -> Match {
        Match::S3 { method: method.to_owned(), path_contains: path_contains.to_owned() }
    }

    pub fn sqs(operation: &str) -> Match {
        Match::Sqs(operation.to_owned())
    }

    pub fn model() -> Match {
        Match::Model
    }

    pub fn matches(&self, seen: &Seen) -> bool {
        match self {
            Match::Any => true,
            Match::DynamoDb(operation) => seen.service == Service::DynamoDb && seen.operation == *operation,
            Match::Sqs(operation) => seen.service == Service::Sqs && seen.operation == *operation,
            Match::S3 { method, path_contains } => {
                seen.service == Service::S3
                    && seen.method.eq_ignore_ascii_case(method)
                    && seen.path.contains(path_contains)
            }
            Match::Model => seen.service == Service::Model,
        }
    }
}

/// What a firing rule does to the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Close the connection without forwarding or answering.
    Refuse,
    /// Answer this status with the service's own error body, without forwarding.
    Status(u16),
    /// Answer the service's throttling error (DynamoDB 400, S3 503 `SlowDown`, model 429).
    Throttle,
    /// Wait, then forward.
    Delay(Duration),
    /// Forward, so the upstream applies the request, then close the connection unanswered.
    DropAfterApplied,
}

/// A rule: requests matching `matcher` are counted, and the `first..=last` of them (1-based) get `action`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub matcher: Match,
    pub action: Action,
    pub first: u64,
    pub last: u64,
    seen: u64,
}

impl Rule {
    /// Every matching request.
    pub fn always(matcher: Match, action: Action) -> Rule {
        Rule::between(matcher, 1, u64::MAX, action)
    }

    /// Only the `n`th matching request (1-based).
    pub fn nth(matcher: Match, n: u64, action: Action) -> Rule {
        Rule::between(matcher, n, n, action)
    }

    /// The `first`th to the `last`th matching requests, both included (1-based).
    pub fn between(matcher: Match, first: u64, last: u64, action: Action) -> Rule {
        Rule { matcher, action, first, last, seen: 0 }
    }
}

/// One request the proxy received, and the fault it got, if any.
#[derive(Debug, Clone)]
pub struct Seen {
    pub service: Service,
    /// The DynamoDB or SQS operation, the model path, or the S3 method.
    pub operation: String,
    pub method: String,
    /// The path and query.
    pub path: String,
    pub fault: Option<Action>,
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    log: Vec<Seen>,
}

/// A running proxy. It lives on the calling test's runtime.
#[derive(Clone)]
pub struct FaultProxy {
    /// `http://127.0.0.1:PORT`, to use in place of the upstream's origin.
    pub endpoint: String,
    state: Arc<Mutex<State>>,
}

impl FaultProxy {
    /// Starts a proxy forwarding to `upstream` (an origin such as `http://127.0.0.1:5000`).
    pub async fn start(upstream: &str) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the fault proxy");
        let endpoint = format!("http://{}", listener.local_addr().expect("fault proxy address"));
        let state: Arc<Mutex<State>> = Arc::default();
        let forwarder = Forwarder {
            upstream: upstream.trim_end_matches('/').to_owned(),
            client: reqwest::Client::builder().no_proxy().build().expect("fault proxy client"),
            state: state.clone(),
        };
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let forwarder = forwarder.clone();
                tokio::spawn(async move { forwarder.serve(stream).await });
            }
        });
        FaultProxy { endpoint, state }
    }

    /// Adds a rule; when several match a request, the first one added that fires wins.
    pub fn add(&self, rule: Rule) {
        lock(&self.state).rules.push(rule);
    }

    /// Removes every rule; the log is kept.
    pub fn clear(&self) {
        lock(&self.state).rules.clear();
    }

    /// Every request received so far, in order of arrival.
    pub fn log(&self) -> Vec<Seen> {
        lock(&self.state).log.clone()
    }

    /// How many requests matching `matcher` were received: the attempts a client made.
    pub fn count(&self, matcher: &Match) -> usize {
        lock(&self.state).log.iter().filter(|seen| matcher.matches(seen)).count()
    }

    /// How many requests matching `matcher` got a fault.
    pub fn faulted(&self, matcher: &Match) -> usize {
        lock(&self.state).log.iter().filter(|seen| seen.fault.is_some() && matcher.matches(seen)).count()
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One parsed HTTP/1.1 request.
struct Request {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The service and operation, the way the SDKs and the model client address them.
    fn classify(&self) -> (Service, String) {
        if let Some(target) = self.header("x-amz-target") {
            let operation = target.rsplit('.').next().unwrap_or_default().to_owned();
            let service = if target.starts_with("AmazonSQS") { Service::Sqs } else { Service::DynamoDb };
            return (service, operation);
        }
        let is_form = self.header("content-type").is_some_and(|v| v.contains("x-www-form-urlencoded"));
        let body = if is_form { String::from_utf8_lossy(&self.body).into_owned() } else { String::new() };
        let form = format!("{}&{body}", self.target);
        if let Some(action) = form.split(['&', '?']).find_map(|pair| pair.strip_prefix("Action=")) {
            return (Service::Sqs, action.to_owned());
        }
        if self.target.split('?').next().unwrap_or_default().ends_with("/chat/completions") {
            return (Service::Model, "/chat/completions".to_owned());
        }
        (Service::S3, self.method.clone())
    }
}

#[derive(Clone)]
struct Forwarder {
    upstream: String,
    client: reqwest::Client,
    state: Arc<Mutex<State>>,
}

/// Headers that belong to one connection, or that the forwarding client sets itself.
const HOP_BY_HOP: [&str; 7] =
    ["host", "content-length", "transfer-encoding", "connection", "keep-alive", "expect", "te"];

impl Forwarder {
    /// Serves one client connection: requests one after another while it stays open.
    async fn serve(self, stream: TcpStream) {
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        loop {
            let request = match read_request(&mut read, &mut write).await {
                Ok(Some(request)) => request,
                _ => return,
            };
            let (service, operation) = request.classify();
            let mut seen =
                Seen { service, operation, method: request.method.clone(), path: request.target.clone(), fault: None };
            seen.fault = self.decide(&seen);
            let fault = seen.fault.clone();
            lock(&self.state).log.push(seen);
            let close = request.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
            let answer = match fault {
                None => self.forward(&request).await,
                Some(Action::Delay(delay)) => {
                    tokio::time::sleep(delay).await;
                    self.forward(&request).await
                }
                // Dropping the halves closes the socket with nothing written.
                Some(Action::Refuse) => return,
                Some(Action::DropAfterApplied) => {
                    let _ = self.forward(&request).await;
                    return;
                }
                Some(Action::Status(status)) => error_response(service, status, &request),
                Some(Action::Throttle) => throttle_response(service, &request),
            };
            let Some(answer) = answer else { return };
            if write.write_all(&answer).await.is_err() || close {
                return;
            }
        }
    }

    /// Counts the request against every matching rule; the first whose window it falls in fires.
    fn decide(&self, seen: &Seen) -> Option<Action> {
        let mut state = lock(&self.state);
        let mut fired = None;
        for rule in state.rules.iter_mut().filter(|rule| rule.matcher.matches(seen)) {
            rule.seen += 1;
            if fired.is_none() && (rule.first..=rule.last).contains(&rule.seen) {
                fired = Some(rule.action.clone());
            }
        }
        fired
    }

    /// The upstream's answer, serialised for the client; `None` when the upstream failed.
    async fn forward(&self, request: &Request) -> Option<Vec<u8>> {
        let method = reqwest::Method::from_bytes(request.method.as_bytes()).ok()?;
        let mut builder = self.client.request(method, format!("{}{}", self.upstream, request.target));
        for (name, value) in &request.headers {
            if !HOP_BY_HOP.contains(&name.to_ascii_lowercase().as_str()) {
                builder = builder.header(name, value);
            }
        }
        let response = builder.body(request.body.clone()).send().await.ok()?;
        let status = response.status().as_u16();
        let headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .filter(|(name, _)| {
                // A HEAD answer keeps the length of the body it does not carry.
                let head_length = request.method == "HEAD" && name.as_str() == "content-length";
                head_length || !HOP_BY_HOP.contains(&name.as_str())
            })
            .map(|(name, value)| (name.to_string(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
            .collect();
        let body = response.bytes().await.ok()?.to_vec();
        Some(serialize(status, &headers, &body, request.method == "HEAD"))
    }
}

/// The service's error for `status`, shaped as its SDK expects, so the SDK classifies it as it would a real one.
fn error_response(service: Service, status: u16, request: &Request) -> Option<Vec<u8>> {
    let (code, message) = match service {
        Service::DynamoDb => ("InternalServerError", "Internal server error (injected)"),
        Service::S3 => ("InternalError", "We encountered an internal error. Please try again. (injected)"),
        Service::Sqs => ("InternalError", "Internal error (injected)"),
        Service::Model => ("server_error", "The server had an error (injected)"),
    };
    Some(service_error(service, status, code, message, request))
}

fn throttle_response(service: Service, request: &Request) -> Option<Vec<u8>> {
    let (status, code, message) = match service {
        Service::DynamoDb => (
            400,
            "ProvisionedThroughputExceededException",
            "The level of configured provisioned throughput for the table was exceeded (injected)",
        ),
        Service::S3 => (503, "SlowDown", "Please reduce your request rate. (injected)"),
        Service::Sqs => (400, "ThrottlingException", "Rate exceeded (injected)"),
        Service::Model => (429, "rate_limit_exceeded", "Rate limit reached (injected)"),
    };
    Some(service_error(service, status, code, message, request))
}

fn service_error(service: Service, status: u16, code: &str, message: &str, request: &Request) -> Vec<u8> {
    let json = |body: serde_json::Value| body.to_string().into_bytes();
    let (content_type, extra, body) = match service {
        Service::DynamoDb => (
            "application/x-amz-json-1.0",
            vec![],
            json(serde_json::json!({"__type": format!("com.amazonaws.dynamodb.v20120810#{code}"), "message": message})),
        ),
        Service::Sqs if request.header("x-amz-target").is_some() => (
            "application/x-amz-json-1.0",
            vec![("x-amzn-query-error".to_owned(), format!("{code};Receiver"))],
            json(serde_json::json!({"__type": format!("com.amazonaws.sqs#{code}"), "message": message})),
        ),
        Service::Sqs => (
            "text/xml",
            vec![],
            format!(
                "<ErrorResponse><Error><Type>Receiver</Type><Code>{code}</Code><Message>{message}</Message></Error>\
                 <RequestId>injected</RequestId></ErrorResponse>"
            )
            .into_bytes(),
        ),
        Service::S3 => (
            "application/xml",
            vec![],
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message>\
                 <RequestId>injected</RequestId><HostId>injected</HostId></Error>"
            )
            .into_bytes(),
        ),
        Service::Model => (
            "application/json",
            vec![],
            json(serde_json::json!({"error": {"message": message, "type": code, "code": code}})),
        ),
    };
    let mut headers = vec![
        ("content-type".to_owned(), content_type.to_owned()),
        ("x-amzn-requestid".to_owned(), "injected".to_owned()),
        ("x-amz-request-id".to_owned(), "injected".to_owned()),
    ];
    headers.extend(extra);
    serialize(status, &headers, &body, request.method == "HEAD")
}

fn serialize(status: u16, headers: &[(String, String)], body: &[u8], head: bool) -> Vec<u8> {
    let reason = reqwest::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("Status");
    let mut out = format!("HTTP/1.1 {status} {reason}\r\n");
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    if !head {
        out.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    if !head {
        bytes.extend_from_slice(body);
    }
    bytes
}

/// Reads one request; `None` at a clean end of the connection. Answers `Expect: 100-continue`
/// itself, since the upstream is sent the whole body at once.
async fn read_request(
    read: &mut BufReader<OwnedReadHalf>,
    write: &mut tokio::net::tcp::OwnedWriteHalf,
) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    if read.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Err(std::io::Error::other(format!("bad request line {line:?}")));
    };
    let (method, target) = (method.to_owned(), target.to_owned());
    let mut headers = Vec::new();
    loop {
        line.clear();
        if read.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    let mut request = Request { method, target, headers, body: Vec::new() };
    if request.header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        write.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
    }
    if request.header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        request.body = read_chunked(read).await?;
    } else if let Some(length) = request.header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        let mut body = vec![0; length];
        read.read_exact(&mut body).await?;
        request.body = body;
    }
    Ok(Some(request))
}

async fn read_chunked(read: &mut BufReader<OwnedReadHalf>) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        read.read_line(&mut line).await?;
        let size = line.trim().split(';').next().unwrap_or_default();
        let size = usize::from_str_radix(size, 16).map_err(std::io::Error::other)?;
        if size == 0 {
            // Trailers, if any, up to the empty line.
            loop {
                line.clear();
                if read.read_line(&mut line).await? == 0 || line.trim_end().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        read.read_exact(&mut body[start..]).await?;
        line.clear();
        read.read_line(&mut line).await?;
    }
}
