//! A Lambda Function URL in front of a compiled function, on loopback, for a client that speaks
//! HTTP (a protocol's own client library): each HTTP/1.1 request becomes the Function URL event
//! Lambda would send (method, path, query, headers, body, domain, request id), and the function's
//! streamed response is written back as it arrives (the prelude's status and headers, then the body
//! chunk by chunk), the connection closed at its end. One request per connection.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::lambda::Function;
use crate::stack::sample_event;

/// Longest a request's head and body may be, as Lambda's 6 MB request limit with room for the head.
const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;
/// How long one request may take the function.
const BUDGET: Duration = Duration::from_secs(120);

/// A listening Function URL; it stops with the test's runtime.
pub struct FunctionUrl {
    pub address: SocketAddr,
}

impl FunctionUrl {
    /// Reserves a loopback port, so that the URL is known (for the function's environment) before
    /// the function starts; [`FunctionUrl::serve`] then answers on it.
    pub async fn reserve() -> (FunctionUrl, TcpListener) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        let address = listener.local_addr().expect("the listener's address");
        (FunctionUrl { address }, listener)
    }

    /// Answers every request on `listener` with `function`, until the test ends.
    pub fn serve(listener: TcpListener, function: Arc<Function>) {
        tokio::spawn(async move {
            while let Ok((connection, _)) = listener.accept().await {
                let function = function.clone();
                tokio::spawn(async move {
                    if let Err(err) = answer(connection, &function).await {
                        eprintln!("the Function URL failed a request: {err}");
                    }
                });
            }
        });
    }

    /// Serves `function` on a new loopback port.
    pub async fn start(function: Arc<Function>) -> FunctionUrl {
        let (url, listener) = Self::reserve().await;
        Self::serve(listener, function);
        url
    }

    /// The URL of `path` (which starts with `/`) on this front.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }
}

async fn answer(mut connection: TcpStream, function: &Function) -> std::io::Result<()> {
    let mut received = Vec::new();
    let head_end = loop {
        if let Some(end) = received.windows(4).position(|window| window == b"\r\n\r\n") {
            break end;
        }
        let mut chunk = [0u8; 8192];
        let read = connection.read(&mut chunk).await?;
        if read == 0 || received.len() > MAX_REQUEST_BYTES {
            return Ok(());
        }
        received.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&received[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or("").split(' ');
    let (method, target) = (request_line.next().unwrap_or("GET").to_owned(), request_line.next().unwrap_or("/"));
    let mut headers = Map::new();
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), json!(value.trim()));
        }
    }
    let length: usize = headers.get("content-length").and_then(Value::as_str).and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = received[head_end + 4..].to_vec();
    while body.len() < length.min(MAX_REQUEST_BYTES) {
        let mut chunk = vec![0u8; 65536];
        let read = connection.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..read]);
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut event = sample_event("stream-turn.json");
    event["rawPath"] = json!(path);
    event["rawQueryString"] = json!(query);
    event["requestContext"]["http"]["method"] = json!(method);
    event["requestContext"]["http"]["path"] = json!(path);
    event["requestContext"]["domainName"] = headers.get("host").cloned().unwrap_or(json!("127.0.0.1"));
    event["requestContext"]["requestId"] = json!(format!("req-{}", next_request_number()));
    event["headers"] = Value::Object(headers);
    match String::from_utf8(body) {
        Ok(text) => {
            event["body"] = json!(text);
            event["isBase64Encoded"] = json!(false);
        }
        Err(bytes) => {
            event["body"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes.into_bytes()));
            event["isBase64Encoded"] = json!(true);
        }
    }
    // Lambda sends no body for a request without one.
    if length == 0 {
        event.as_object_mut().expect("an event").remove("body");
    }
    let mut response = function.invoke_streaming(event, BUDGET).await;
    let prelude = response.prelude().await;
    let status = prelude["statusCode"].as_u64().unwrap_or(500);
    let mut out = format!("HTTP/1.1 {status} Status\r\n");
    for (name, value) in prelude["headers"].as_object().into_iter().flatten() {
        out.push_str(&format!("{name}: {}\r\n", value.as_str().unwrap_or("")));
    }
    out.push_str("connection: close\r\n\r\n");
    connection.write_all(out.as_bytes()).await?;
    while let Some(chunk) = response.next_body_chunk().await {
        connection.write_all(&chunk).await?;
        connection.flush().await?;
    }
    connection.shutdown().await
}

/// A request id unique within the process.
fn next_request_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
