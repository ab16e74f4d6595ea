//! The transport under the real S3 client, against a scripted HTTP/1.1 peer on loopback: what goes
//! out, what comes back, and how failures reach the SDK's retries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::primitives::ByteStream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the peer does with each request it has read.
#[derive(Clone, Copy)]
enum Script {
    /// Answers with this raw response.
    Answer(&'static str),
    /// Closes the connection without an answer.
    Hang,
    /// Keeps the connection open and never answers.
    Silent,
}

/// One request as the peer read it: the head (request line and headers, lower-cased names) and the body.
#[derive(Debug, Clone)]
struct Seen {
    head: String,
    body: Vec<u8>,
}

struct Peer {
    endpoint: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn peer(script: Script) -> Peer {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("address"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, script, log.clone()));
        }
    });
    Peer { endpoint, seen }
}

async fn serve(mut stream: TcpStream, script: Script, seen: Arc<Mutex<Vec<Seen>>>) {
    loop {
        let Some(request) = read_request(&mut stream).await else { return };
        seen.lock().unwrap().push(request);
        match script {
            Script::Answer(response) => {
                if stream.write_all(response.as_bytes()).await.is_err() {
                    return;
                }
            }
            Script::Hang => return,
            Script::Silent => {
                tokio::time::sleep(Duration::from_secs(30)).await;
                return;
            }
        }
    }
}

async fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Seen { head, body })
}

fn s3(endpoint: &str, attempts: u32, read_timeout: Option<Duration>) -> aws_sdk_s3::Client {
    let mut timeouts = TimeoutConfig::builder();
    if let Some(timeout) = read_timeout {
        timeouts = timeouts.read_timeout(timeout);
    }
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .http_client(super::http_client())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("AKIDEXAMPLE", "secret", None, None, "test"))
        .force_path_style(true)
        .retry_config(
            RetryConfig::standard().with_max_attempts(attempts).with_initial_backoff(Duration::from_millis(1)),
        )
        .timeout_config(timeouts.build())
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

#[tokio::test]
async fn a_get_goes_out_signed_and_its_body_comes_back() {
    let peer = peer(Script::Answer(
        "HTTP/1.1 200 OK\r\ncontent-length: 11\r\netag: \"abc\"\r\ncontent-type: text/plain\r\n\r\nhello world",
    ))
    .await;
    let object = s3(&peer.endpoint, 1, None).get_object().bucket("skills").key("a/b.md").send().await.expect("get");
    assert_eq!(object.e_tag(), Some("\"abc\""));
    let body = object.body.collect().await.expect("body").into_bytes();
    assert_eq!(&body[..], b"hello world");
    let seen = peer.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].head.starts_with("get /skills/a/b.md"), "{}", seen[0].head);
    assert!(seen[0].head.contains("authorization: aws4-hmac-sha256 credential=akidexample/"), "{}", seen[0].head);
    assert!(!seen[0].head.contains("accept-encoding"), "the SDK reads the body as sent: {}", seen[0].head);
}

#[tokio::test]
async fn a_put_sends_its_whole_body() {
    let peer = peer(Script::Answer("HTTP/1.1 200 OK\r\ncontent-length: 0\r\netag: \"e\"\r\n\r\n")).await;
    let bytes = vec![7u8; 100_000];
    s3(&peer.endpoint, 1, None)
        .put_object()
        .bucket("skills")
        .key("blob")
        .body(ByteStream::from(bytes.clone()))
        .send()
        .await
        .expect("put");
    let seen = peer.seen.lock().unwrap().clone();
    assert!(seen[0].head.starts_with("put /skills/blob"), "{}", seen[0].head);
    assert_eq!(seen[0].body, bytes);
}

#[tokio::test]
async fn a_dropped_connection_is_retried_as_transient() {
    let peer = peer(Script::Hang).await;
    let error = s3(&peer.endpoint, 3, None).get_object().bucket("b").key("k").send().await.expect_err("no answer");
    let SdkError::DispatchFailure(failure) = error else { panic!("a dispatch failure: {error:?}") };
    assert!(failure.is_io(), "{failure:?}");
    assert_eq!(peer.seen.lock().unwrap().len(), 3, "the SDK tried each of its 3 attempts");
}

#[tokio::test]
async fn a_silent_server_is_a_timeout() {
    let peer = peer(Script::Silent).await;
    let client = s3(&peer.endpoint, 1, Some(Duration::from_millis(200)));
    let error = client.get_object().bucket("b").key("k").send().await.expect_err("no answer");
    let SdkError::DispatchFailure(failure) = error else { panic!("a dispatch failure: {error:?}") };
    assert!(failure.is_timeout(), "{failure:?}");
}

#[tokio::test]
async fn a_redirect_reaches_the_sdk_unfollowed() {
    let peer = peer(Script::Answer(
        "HTTP/1.1 301 Moved Permanently\r\nlocation: /elsewhere\r\ncontent-type: application/xml\r\ncontent-length: 94\r\n\r\n\
<Error><Code>PermanentRedirect</Code><Message>Use the bucket's own endpoint.</Message></Error>",
    ))
    .await;
    let error = s3(&peer.endpoint, 1, None).get_object().bucket("b").key("k").send().await.expect_err("a redirect");
    assert_eq!(error.raw_response().map(|r| r.status().as_u16()), Some(301));
    let seen = peer.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "the Location was not followed");
    assert!(seen[0].head.starts_with("get /b/k"), "{}", seen[0].head);
}
