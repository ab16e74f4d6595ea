//! A stand-in for Lambda's Invoke API on loopback, for `SANDBOX=lambda` (the SDK goes to it through
//! `AWS_ENDPOINT_URL_LAMBDA`): `POST /2015-03-31/functions/{name}/invocations` answers as Lambda
//! does for a `PER_TENANT` function, and otherwise hands the payload to an execution environment of
//! the invocation's tenant: the compiled `sandbox` function, started on first use for that tenant
//! and reused for its later calls (never for another tenant's), running as Lambda runs the deployed
//! image: the sandbox image's root filesystem as `/`, read-only, a writable `/tmp`, an unprivileged
//! uid with no account, behind a Runtime API ([`Function::start_in_image`]). So its commands run
//! in process isolation over `/tmp/sandbox`, with the image's tools, exactly as deployed. It records
//! every call's tenant id and payload size.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};

use crate::lambda::{Function, Invocation};

/// Lambda's bound on a synchronous invocation's request body.
pub const MAX_PAYLOAD_BYTES: usize = 6_291_456;

/// How the stand-in answers the next invocations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Runs the command (the function's code) and answers 200.
    Run,
    /// 429 `TooManyRequestsException`, as when the function's concurrency is exhausted.
    Throttle,
    /// 200 with `X-Amz-Function-Error: Unhandled`, as when the function crashed.
    FunctionError,
    /// 200 with a body that is not the function's JSON.
    Garbage,
}

/// One invocation as the stand-in received it.
#[derive(Debug, Clone)]
pub struct Call {
    pub function: String,
    /// The `X-Amz-Tenant-Id` header.
    pub tenant: Option<String>,
    /// The `tenant` of the payload, when it is a sandbox request.
    pub payload_tenant: Option<String>,
    pub payload_bytes: usize,
    /// The `X-Amz-Invocation-Type` header (`RequestResponse` when absent, as Lambda reads it).
    pub invocation_type: String,
    /// The status the stand-in answered.
    pub status: u16,
}

struct ApiState {
    root: PathBuf,
    /// Whether each environment's function is the PID 1 of its namespace.
    as_init: bool,
    mode: Mutex<Mode>,
    calls: Mutex<Vec<Call>>,
    /// One execution environment per tenant, as PER_TENANT tenancy keeps them.
    environments: tokio::sync::Mutex<HashMap<String, Arc<Function>>>,
}

/// A running stand-in.
pub struct InvokeApi {
    pub endpoint: String,
    state: Arc<ApiState>,
}

impl InvokeApi {
    /// Starts a stand-in whose environments run the sandbox image (`SANDBOX_ROOT`).
    pub async fn start() -> InvokeApi {
        Self::start_as(false).await
    }

    /// A stand-in whose functions run as the PID 1 of their namespaces (a container's entry point),
    /// so that orphans of their commands come to them rather than to a reaper of bwrap's.
    pub async fn start_as_init() -> InvokeApi {
        Self::start_as(true).await
    }

    async fn start_as(as_init: bool) -> InvokeApi {
        let state = Arc::new(ApiState {
            root: crate::image::root(),
            as_init,
            mode: Mutex::new(Mode::Run),
            calls: Mutex::default(),
            environments: tokio::sync::Mutex::default(),
        });
        let app = Router::new()
            .route("/2015-03-31/functions/{name}/invocations", post(invoke))
            // Lambda reads the whole body before refusing one that is too large; so does this.
            .layer(DefaultBodyLimit::max(4 * MAX_PAYLOAD_BYTES))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the invoke api");
        let address: SocketAddr = listener.local_addr().expect("invoke api address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        InvokeApi { endpoint: format!("http://{address}"), state }
    }

    pub fn set_mode(&self, mode: Mode) {
        *self.state.mode.lock().unwrap() = mode;
    }

    /// Every invocation so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.state.calls.lock().unwrap().clone()
    }

    /// The Runtime API address of `tenant`'s environment, once it has one.
    pub async fn runtime_api(&self, tenant: &str) -> Option<SocketAddr> {
        self.state.environments.lock().await.get(tenant).map(|function| function.runtime_api())
    }
}

/// The tenant's execution environment, started on its first invocation.
async fn environment(state: &ApiState, tenant: &str) -> Arc<Function> {
    let mut environments = state.environments.lock().await;
    if let Some(function) = environments.get(tenant) {
        return function.clone();
    }
    let function = Arc::new(Function::start_in_image_as("sandbox", &state.root, &[], state.as_init).await);
    environments.insert(tenant.to_owned(), function.clone());
    function
}

/// Lambda's error answer: the status, `x-amzn-ErrorType` and a JSON body with `Type` and `message`.
fn lambda_error(status: StatusCode, error_type: &str, message: &str) -> Response {
    lambda_error_body(status, error_type, json!({"Type": "User", "message": message}))
}

fn lambda_error_body(status: StatusCode, error_type: &str, body: Value) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert("x-amzn-ErrorType", error_type.parse().unwrap());
    headers.insert("x-amzn-RequestId", "00000000-0000-0000-0000-000000000000".parse().unwrap());
    headers.insert("content-type", "application/json".parse().unwrap());
    (status, headers, body.to_string()).into_response()
}

/// Lambda's tenant id alphabet: 1 to 256 of `A-Z a-z 0-9 . _ : / = + - @` and space.
fn valid_tenant_id(tenant: &str) -> bool {
    (1..=256).contains(&tenant.len()) && tenant.chars().all(|c| c.is_ascii_alphanumeric() || "._:/=+-@ ".contains(c))
}

async fn invoke(
    State(state): State<Arc<ApiState>>,
    Path(function): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::to_owned);
    let tenant = header("x-amz-tenant-id");
    let payload: Option<Value> = serde_json::from_slice(&body).ok();
    let mut call = Call {
        function,
        tenant: tenant.clone(),
        payload_tenant: payload.as_ref().and_then(|value| value["tenant"].as_str()).map(str::to_owned),
        payload_bytes: body.len(),
        invocation_type: header("x-amz-invocation-type").unwrap_or_else(|| "RequestResponse".to_owned()),
        status: 200,
    };
    let mode = *state.mode.lock().unwrap();
    let response = answer(&state, mode, tenant.as_deref(), payload, body.len()).await;
    call.status = response.status().as_u16();
    state.calls.lock().unwrap().push(call);
    response
}

async fn answer(state: &ApiState, mode: Mode, tenant: Option<&str>, payload: Option<Value>, size: usize) -> Response {
    if size > MAX_PAYLOAD_BYTES {
        return lambda_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLargeException",
            &format!("Request must be smaller than {MAX_PAYLOAD_BYTES} bytes for the InvokeFunction operation"),
        );
    }
    // The function is PER_TENANT: Lambda refuses an invocation without a tenant id (the status and
    // error type are Lambda's; the wording of this message and the next is the stand-in's).
    let Some(tenant) = tenant else {
        return lambda_error(
            StatusCode::BAD_REQUEST,
            "InvalidParameterValueException",
            "The invoked function is enabled with tenancy configuration. Add a valid tenant ID in your request and \
             try again.",
        );
    };
    if !valid_tenant_id(tenant) {
        return lambda_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "1 validation error detected: Value at 'tenantId' failed to satisfy constraint: Member must satisfy \
             regular expression pattern: [a-zA-Z0-9\\._:\\/=+\\-@ ]+",
        );
    }
    let Some(payload) = payload else {
        return lambda_error(
            StatusCode::BAD_REQUEST,
            "InvalidRequestContentException",
            "Could not parse request body into json",
        );
    };
    let mut headers = HeaderMap::new();
    headers.insert("X-Amz-Executed-Version", "$LATEST".parse().unwrap());
    headers.insert("x-amzn-RequestId", "00000000-0000-0000-0000-000000000001".parse().unwrap());
    headers.insert("content-type", "application/json".parse().unwrap());
    match mode {
        // Lambda names the reason beside the message.
        Mode::Throttle => lambda_error_body(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyRequestsException",
            json!({"Reason": "ReservedFunctionConcurrentInvocationLimitExceeded", "Type": "User", "message": "Rate Exceeded."}),
        ),
        Mode::FunctionError => {
            headers.insert("X-Amz-Function-Error", "Unhandled".parse().unwrap());
            let body = json!({"errorType": "Runtime.ExitError", "errorMessage": "RequestId: 1 Error: Runtime exited with error: signal: killed"});
            (StatusCode::OK, headers, body.to_string()).into_response()
        }
        Mode::Garbage => (StatusCode::OK, headers, "<html>not the function's answer</html>").into_response(),
        Mode::Run => {
            let function = environment(state, tenant).await;
            match function.invoke_for_tenant(payload, tenant, Duration::from_secs(900)).await {
                Invocation::Response(answer) => (StatusCode::OK, headers, answer.to_string()).into_response(),
                other => {
                    headers.insert("X-Amz-Function-Error", "Unhandled".parse().unwrap());
                    let body = json!({"errorType": "Runtime.ExitError", "errorMessage": format!("{other:?}")});
                    (StatusCode::OK, headers, body.to_string()).into_response()
                }
            }
        }
    }
}
