//! The console's gateway on loopback: the page's files, its settings (`/console/config`), and
//! `/api/*`, which it hands to the compiled functions as AWS would. A streamed turn (`POST
//! /api/sessions/{id}/turns` with `Accept: text/event-stream`) becomes a Function URL event for
//! `stream-turn`, which verifies the bearer token itself and whose streamed body is forwarded
//! chunk by chunk; every other request is checked like the HTTP API's JWT authorizer does and
//! becomes an HTTP API (payload 2.0) event for `http-turn`, carrying the verified claims.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_app::jwt::{JwtConfig, JwtVerifier, VerifiedClaims};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use base64::Engine as _;
use local_stack::lambda::{Function, Invocation};
use serde_json::{json, Map, Value};
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use super::page::Page;
use crate::local::LocalStack;

/// The largest request body a Function URL takes (the HTTP API's own limit is higher).
const MAX_BODY_BYTES: usize = 6 * 1024 * 1024;
/// How long each function may run an invocation: the template's timeouts.
const HTTP_TURN_TIMEOUT: Duration = Duration::from_secs(29);
const STREAM_TURN_TIMEOUT: Duration = Duration::from_secs(900);
/// The page may talk only to the console; styles in attributes are the page's own.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; connect-src 'self'; img-src 'self' data: blob:; \
     style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// The authorizer's check: the local issuer's keys, its audience.
pub fn verifier(stack: &LocalStack) -> Result<JwtVerifier, String> {
    let config = JwtConfig::from_lookup(|name| match name {
        "JWT_ISSUER" => Some(stack.issuer.clone()),
        "JWT_AUDIENCE" => Some(stack.audience.clone()),
        _ => None,
    })
    .map_err(|err| format!("the local issuer: {err}"))?;
    Ok(JwtVerifier::new(config, reqwest::Client::new()))
}

/// A few running instances of one function; a request takes an idle one (or waits its turn) and
/// holds it until its response has been sent, streamed body included, as Lambda does.
struct Pool {
    name: &'static str,
    instances: Vec<Arc<AsyncMutex<Function>>>,
    next: AtomicUsize,
}

impl Pool {
    async fn start(name: &'static str, env: &[(String, String)], count: usize) -> Self {
        let mut instances = Vec::new();
        for _ in 0..count.max(1) {
            instances.push(Arc::new(AsyncMutex::new(Function::start(name, env).await)));
        }
        Self { name, instances, next: AtomicUsize::new(0) }
    }

    async fn acquire(&self) -> OwnedMutexGuard<Function> {
        for instance in &self.instances {
            if let Ok(guard) = instance.clone().try_lock_owned() {
                return guard;
            }
        }
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.instances.len();
        self.instances[index].clone().lock_owned().await
    }
}

pub struct Gateway {
    http: Pool,
    stream: Pool,
    verifier: JwtVerifier,
    config: Value,
    page: Page,
}

struct Shared {
    gateway: Gateway,
    /// The `Host` values the console answers to: its own address, by IP or as localhost. Anything
    /// else is a page of another site reaching loopback through DNS rebinding.
    hosts: Vec<String>,
    requests: AtomicU64,
}

impl Gateway {
    /// `http_env` is `env` with the turn queue, which only http-turn sends to (as in `template.yaml`).
    pub async fn start(
        env: &[(String, String)],
        http_env: &[(String, String)],
        verifier: JwtVerifier,
        config: Value,
        page: Page,
        instances: usize,
    ) -> Self {
        let http = Pool::start("http-turn", http_env, instances).await;
        let stream = Pool::start("stream-turn", env, instances).await;
        Self { http, stream, verifier, config, page }
    }

    pub async fn serve(self, listener: std::net::TcpListener) -> Result<(), String> {
        let port = listener.local_addr().map_err(|err| err.to_string())?.port();
        listener.set_nonblocking(true).map_err(|err| err.to_string())?;
        let listener = tokio::net::TcpListener::from_std(listener).map_err(|err| err.to_string())?;
        let hosts = vec![format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}")];
        let shared = Arc::new(Shared { gateway: self, hosts, requests: AtomicU64::new(0) });
        let app = axum::Router::new().fallback(handle).with_state(shared);
        axum::serve(listener, app).await.map_err(|err| format!("the console's server: {err}"))
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let host = request.headers().get(header::HOST).and_then(|value| value.to_str().ok()).unwrap_or_default();
    let (response, function) = if !shared.hosts.iter().any(|allowed| allowed.eq_ignore_ascii_case(host)) {
        (text(StatusCode::MISDIRECTED_REQUEST, "the console answers only at 127.0.0.1 or localhost"), "")
    } else if let Some(api_path) = path.strip_prefix("/api").filter(|rest| rest.starts_with('/')) {
        let id = shared.requests.fetch_add(1, Ordering::Relaxed);
        let api_path = api_path.to_owned();
        shared.gateway.api(request, &api_path, id).await
    } else if method != Method::GET && method != Method::HEAD {
        (text(StatusCode::METHOD_NOT_ALLOWED, "the console's page is read-only"), "")
    } else if path == "/console/config" {
        (json_response(StatusCode::OK, &shared.gateway.config), "")
    } else {
        match shared.gateway.page.get(&path) {
            Some(asset) => (page_response(asset.content_type, asset.bytes.clone()), ""),
            None => (text(StatusCode::NOT_FOUND, "no such page"), ""),
        }
    };
    let via = if function.is_empty() { String::new() } else { format!(" via {function}") };
    eprintln!("{method} {path} -> {}{via} in {} ms", response.status().as_u16(), started.elapsed().as_millis());
    response
}

impl Gateway {
    /// One API request, answered by the function that answers it once deployed.
    async fn api(&self, request: Request, api_path: &str, id: u64) -> (Response, &'static str) {
        let (parts, body) = request.into_parts();
        let body = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
            Ok(body) => body,
            Err(_) => return (message(StatusCode::PAYLOAD_TOO_LARGE, "Request Entity Too Large"), ""),
        };
        let incoming = Incoming {
            method: parts.method.as_str(),
            path: api_path,
            query: parts.uri.query().unwrap_or_default(),
            headers: &parts.headers,
            body: &body,
            request_id: format!("console-{}-{id}", std::process::id()),
        };
        if parts.method == Method::POST && is_turn_path(api_path) && wants_events(&parts.headers) {
            return (self.streamed(&incoming).await, self.stream.name);
        }
        // The HTTP API's JWT authorizer answers 401 itself; the function never sees the request.
        let token = parts.headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok());
        let claims = match token.and_then(agent_app::jwt::bearer_token) {
            Some(token) => self.verifier.verify(token).await.ok(),
            None => None,
        };
        let Some(claims) = claims else {
            return (message(StatusCode::UNAUTHORIZED, "Unauthorized"), "");
        };
        let event = http_api_event(&incoming, &claims);
        let function = self.http.acquire().await;
        let response = match function.invoke_with_budget(event, HTTP_TURN_TIMEOUT).await {
            Invocation::Response(value) => integration_response(&value),
            Invocation::Error(error) => function_failed(self.http.name, &error),
            Invocation::Stream(_) => function_failed(self.http.name, &json!("streamed a response it must buffer")),
        };
        (response, self.http.name)
    }

    async fn streamed(&self, incoming: &Incoming<'_>) -> Response {
        let function = self.stream.acquire().await;
        match function.invoke_with_budget(function_url_event(incoming), STREAM_TURN_TIMEOUT).await {
            Invocation::Stream(mut stream) => {
                let prelude = stream.prelude().await;
                let mut response = head(&prelude);
                // The instance stays taken until the function has sent its last byte.
                let chunks = futures::stream::unfold((stream, function), |(mut stream, function)| async move {
                    let chunk = stream.next_body_chunk().await?;
                    Some((Ok::<Bytes, Infallible>(chunk), (stream, function)))
                });
                *response.body_mut() = Body::from_stream(chunks);
                response
            }
            Invocation::Response(value) => integration_response(&value),
            Invocation::Error(error) => function_failed(self.stream.name, &error),
        }
    }
}

/// What the gateway knows of one request.
struct Incoming<'a> {
    method: &'a str,
    path: &'a str,
    query: &'a str,
    headers: &'a HeaderMap,
    body: &'a [u8],
    request_id: String,
}

/// `/sessions/{id}/turns`, the one route the Function URL serves.
fn is_turn_path(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    matches!(segments.as_slice(), ["sessions", id, "turns"] if !id.is_empty())
}

fn wants_events(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|accept| accept.to_ascii_lowercase().contains("text/event-stream"))
}

/// The parts both event kinds share: headers (lower-case names, repeats joined by commas), the
/// query (decoded, repeats joined by commas), the body (base64 when it is not UTF-8).
fn common_fields(incoming: &Incoming<'_>) -> Map<String, Value> {
    let mut headers = Map::new();
    for name in incoming.headers.keys() {
        let values: Vec<&str> = incoming.headers.get_all(name).iter().filter_map(|value| value.to_str().ok()).collect();
        headers.insert(name.as_str().to_owned(), json!(values.join(",")));
    }
    let mut query = Map::new();
    for (name, value) in url::form_urlencoded::parse(incoming.query.as_bytes()) {
        match query.get_mut(name.as_ref()) {
            Some(Value::String(joined)) => {
                joined.push(',');
                joined.push_str(&value);
            }
            _ => {
                query.insert(name.into_owned(), json!(value));
            }
        }
    }
    let (body, encoded) = match std::str::from_utf8(incoming.body) {
        Ok(text) => (text.to_owned(), false),
        Err(_) => (base64::engine::general_purpose::STANDARD.encode(incoming.body), true),
    };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let user_agent = incoming.headers.get(header::USER_AGENT).and_then(|value| value.to_str().ok()).unwrap_or("");
    let mut fields = Map::new();
    fields.insert("version".into(), json!("2.0"));
    fields.insert("routeKey".into(), json!("$default"));
    fields.insert("rawPath".into(), json!(incoming.path));
    fields.insert("rawQueryString".into(), json!(incoming.query));
    fields.insert("headers".into(), Value::Object(headers));
    if !query.is_empty() {
        fields.insert("queryStringParameters".into(), Value::Object(query));
    }
    fields.insert(
        "requestContext".into(),
        json!({
            "accountId": "anonymous",
            "apiId": "console",
            "domainName": "127.0.0.1",
            "domainPrefix": "console",
            "http": {
                "method": incoming.method,
                "path": incoming.path,
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": user_agent,
            },
            "requestId": incoming.request_id,
            "routeKey": "$default",
            "stage": "$default",
            "time": request_time(now.as_secs()),
            "timeEpoch": now.as_millis() as u64,
        }),
    );
    if !body.is_empty() {
        fields.insert("body".into(), json!(body));
    }
    fields.insert("isBase64Encoded".into(), json!(encoded));
    fields
}

/// `requestContext.time` as AWS writes it: `25/Nov/2026:10:00:00 +0000`.
fn request_time(unix_seconds: u64) -> String {
    let format = time::macros::format_description!("[day]/[month repr:short]/[year]:[hour]:[minute]:[second] +0000");
    time::OffsetDateTime::from_unix_timestamp(unix_seconds as i64)
        .ok()
        .and_then(|at| at.format(&format).ok())
        .unwrap_or_default()
}

/// A Function URL event: the function verifies the `authorization` header itself.
fn function_url_event(incoming: &Incoming<'_>) -> Value {
    Value::Object(common_fields(incoming))
}

/// An HTTP API event after the JWT authorizer: the verified claims, as strings, in
/// `requestContext.authorizer.jwt`.
fn http_api_event(incoming: &Incoming<'_>, claims: &VerifiedClaims) -> Value {
    let mut fields = common_fields(incoming);
    let mut verified = Map::new();
    verified.insert("sub".into(), json!(claims.sub));
    verified.insert("exp".into(), json!(claims.expires_at.to_string()));
    for (name, value) in [("name", &claims.name), ("locale", &claims.locale), ("profile", &claims.profile)] {
        if let Some(value) = value {
            verified.insert(name.into(), json!(value));
        }
    }
    if let Some(Value::Object(context)) = fields.get_mut("requestContext") {
        context.insert("authorizer".into(), json!({"jwt": {"claims": verified, "scopes": null}}));
    }
    Value::Object(fields)
}

/// The status, headers and cookies of a function's answer (a buffered response or a stream's prelude).
fn head(answer: &Value) -> Response {
    let status = answer["statusCode"].as_u64().and_then(|code| StatusCode::from_u16(code as u16).ok());
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status.unwrap_or(StatusCode::OK);
    if let Some(headers) = answer["headers"].as_object() {
        for (name, value) in headers {
            let value = value.as_str().map(str::to_owned).unwrap_or_else(|| value.to_string());
            if let (Ok(name), Ok(value)) = (header::HeaderName::try_from(name.as_str()), HeaderValue::try_from(value)) {
                response.headers_mut().append(name, value);
            }
        }
    }
    for cookie in answer["cookies"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        if let Ok(value) = HeaderValue::try_from(cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// A buffered function response, as the HTTP API (payload 2.0) or a Function URL returns it.
fn integration_response(answer: &Value) -> Response {
    let mut response = head(answer);
    let body = answer["body"].as_str().unwrap_or_default();
    let bytes = if answer["isBase64Encoded"].as_bool() == Some(true) {
        match base64::engine::general_purpose::STANDARD.decode(body) {
            Ok(bytes) => bytes,
            Err(_) => return function_failed("the function", &json!("answered a body that is not base64")),
        }
    } else {
        body.as_bytes().to_vec()
    };
    *response.body_mut() = Body::from(bytes);
    response
}

/// What AWS answers when the function fails: 502 with no detail; the detail goes to the terminal,
/// as it would go to the function's logs.
fn function_failed(function: &str, error: &Value) -> Response {
    eprintln!("{function} failed: {error}");
    message(StatusCode::BAD_GATEWAY, "Internal Server Error")
}

/// A body like API Gateway's own answers: `{"message": "..."}`.
fn message(status: StatusCode, text: &str) -> Response {
    json_response(status, &json!({ "message": text }))
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn text(status: StatusCode, text: &'static str) -> Response {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

fn page_response(content_type: &'static str, bytes: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(bytes));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod gateway_tests {
    use super::*;

    fn incoming<'a>(headers: &'a HeaderMap, query: &'a str, body: &'a [u8]) -> Incoming<'a> {
        Incoming { method: "GET", path: "/skills", query, headers, body, request_id: "r-1".into() }
    }

    #[test]
    fn an_http_api_event_is_one_the_function_reads_with_the_verified_user() {
        let mut headers = HeaderMap::new();
        headers.insert("Accept", HeaderValue::from_static("application/json"));
        headers.append("x-many", HeaderValue::from_static("a"));
        headers.append("x-many", HeaderValue::from_static("b"));
        let claims = VerifiedClaims {
            sub: "ana".into(),
            name: Some("Ana".into()),
            locale: None,
            profile: None,
            expires_at: 1_800_000_000,
        };
        let event = http_api_event(&incoming(&headers, "q=escritura%20de&limit=5&limit=6", b""), &claims);
        let parsed: aws_lambda_events::apigw::ApiGatewayV2httpRequest =
            serde_json::from_value(event.clone()).expect("the event parses as the function parses it");
        assert_eq!(parsed.raw_path.as_deref(), Some("/skills"));
        assert_eq!(parsed.query_string_parameters.first("q"), Some("escritura de"));
        assert_eq!(event["queryStringParameters"]["limit"], "5,6");
        assert_eq!(event["headers"]["x-many"], "a,b");
        assert_eq!(event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"], "ana");
        assert_eq!(event["requestContext"]["authorizer"]["jwt"]["claims"]["name"], "Ana");
        assert!(event.get("body").is_none());
        assert!(event["requestContext"]["time"].as_str().unwrap().ends_with(" +0000"));
    }

    #[test]
    fn a_body_that_is_not_text_travels_in_base64_and_a_function_url_event_has_no_authorizer() {
        let headers = HeaderMap::new();
        let event = function_url_event(&incoming(&headers, "", &[0xff, 0x00]));
        assert_eq!(event["isBase64Encoded"], true);
        assert_eq!(event["body"], "/wA=");
        assert!(event["requestContext"].get("authorizer").is_none());
        let _: aws_lambda_events::lambda_function_urls::LambdaFunctionUrlRequest =
            serde_json::from_value(event).expect("the event parses as stream-turn parses it");
    }

    #[test]
    fn only_a_post_of_a_turn_that_asks_for_events_is_streamed() {
        assert!(is_turn_path("/sessions/s-1/turns"));
        assert!(!is_turn_path("/sessions//turns"));
        assert!(!is_turn_path("/sessions/s-1/turns/t-1"));
        let mut headers = HeaderMap::new();
        assert!(!wants_events(&headers));
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json, Text/Event-Stream"));
        assert!(wants_events(&headers));
    }

    #[test]
    fn a_function_answer_becomes_the_http_response_it_describes() {
        let answer = json!({
            "statusCode": 404,
            "headers": {"content-type": "application/json", "x-count": 3},
            "cookies": ["a=b; Path=/"],
            "body": "eyJvayI6ZmFsc2V9",
            "isBase64Encoded": true,
        });
        let response = integration_response(&answer);
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(response.headers()["x-count"], "3");
        assert_eq!(response.headers()[header::SET_COOKIE], "a=b; Path=/");
        let broken = integration_response(&json!({"statusCode": 200, "body": "%%%", "isBase64Encoded": true}));
        assert_eq!(broken.status(), StatusCode::BAD_GATEWAY);
    }
}
