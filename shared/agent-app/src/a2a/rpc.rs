//! JSON-RPC 2.0 as A2A uses it: one request object read within bounds, its method named in either
//! protocol version's spelling, and every failure an error object with the specification's code.

use agent_core::turn::MAX_MESSAGE_BYTES;
use serde_json::{json, Map, Value};

use super::Dialect;

/// Bodies larger than this are refused before parsing: a message's text after the worst JSON
/// escaping, and room for the envelope, the ids and a part of decisions.
pub const MAX_RPC_BODY_BYTES: usize = 6 * MAX_MESSAGE_BYTES + 64 * 1024;
/// Longest JSON-RPC id echoed back, in bytes (a string id; numbers are short).
const MAX_ID_BYTES: usize = 256;

/// Why a request was not answered with a result: each variant is one of the specification's
/// error codes, and its text is safe to show the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    #[error("{0}")]
    Parse(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    MethodNotFound(String),
    #[error("{0}")]
    InvalidParams(String),
    #[error("{0}")]
    TaskNotFound(String),
    #[error("{0}")]
    TaskNotCancelable(String),
    #[error("{0}")]
    PushNotificationNotSupported(String),
    #[error("{0}")]
    UnsupportedOperation(String),
    #[error("{0}")]
    ContentTypeNotSupported(String),
    #[error("{0}")]
    VersionNotSupported(String),
    #[error("{0}")]
    Internal(String),
}

impl RpcError {
    /// The error's JSON-RPC code (JSON-RPC's own, then A2A's from -32001).
    pub fn code(&self) -> i64 {
        match self {
            RpcError::Parse(_) => -32700,
            RpcError::InvalidRequest(_) => -32600,
            RpcError::MethodNotFound(_) => -32601,
            RpcError::InvalidParams(_) => -32602,
            RpcError::Internal(_) => -32603,
            RpcError::TaskNotFound(_) => -32001,
            RpcError::TaskNotCancelable(_) => -32002,
            RpcError::PushNotificationNotSupported(_) => -32003,
            RpcError::UnsupportedOperation(_) => -32004,
            RpcError::ContentTypeNotSupported(_) => -32005,
            RpcError::VersionNotSupported(_) => -32009,
        }
    }

    /// The error object of a response.
    pub fn object(&self) -> Value {
        json!({"code": self.code(), "message": self.to_string()})
    }
}

/// The methods served, whatever their spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    CancelTask,
}

/// One request, its envelope checked: the id to answer with, the method and the protocol version
/// its name is spelled in, and its params (an object).
#[derive(Debug, Clone, PartialEq)]
pub struct RpcRequest {
    pub id: Value,
    pub method: Method,
    pub dialect: Dialect,
    pub params: Map<String, Value>,
}

/// A request refused before its method ran: the id to answer with (`null` when it could not be
/// read) and the error.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub id: Value,
    pub error: RpcError,
}

/// Reads one JSON-RPC request from `body`. Batches and notifications are refused: A2A sends
/// neither.
pub fn parse_request(body: &[u8]) -> Result<RpcRequest, Refusal> {
    let refuse = |id: &Value, error: RpcError| Refusal { id: id.clone(), error };
    if body.len() > MAX_RPC_BODY_BYTES {
        let message = format!("the request is larger than {} KiB", MAX_RPC_BODY_BYTES / 1024);
        return Err(refuse(&Value::Null, RpcError::InvalidRequest(message)));
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|err| refuse(&Value::Null, RpcError::Parse(format!("the body is not JSON: {err}"))))?;
    let Value::Object(mut envelope) = value else {
        let message = "send one JSON-RPC request object (batches are not served)";
        return Err(refuse(&Value::Null, RpcError::InvalidRequest(message.to_owned())));
    };
    let id = match envelope.remove("id") {
        Some(id @ Value::Number(_)) => id,
        Some(Value::String(id)) if id.len() <= MAX_ID_BYTES => Value::String(id),
        Some(Value::String(_)) => {
            let message = format!("`id` must be at most {MAX_ID_BYTES} bytes");
            return Err(refuse(&Value::Null, RpcError::InvalidRequest(message)));
        }
        None | Some(Value::Null) => {
            let message = "`id` must be a string or a number: notifications are not served";
            return Err(refuse(&Value::Null, RpcError::InvalidRequest(message.to_owned())));
        }
        Some(_) => {
            return Err(refuse(&Value::Null, RpcError::InvalidRequest("`id` must be a string or a number".into())))
        }
    };
    if envelope.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(refuse(&id, RpcError::InvalidRequest("`jsonrpc` must be \"2.0\"".to_owned())));
    }
    let Some(name) = envelope.get("method").and_then(Value::as_str) else {
        return Err(refuse(&id, RpcError::InvalidRequest("`method` must be a string".to_owned())));
    };
    let (method, dialect) = method(name).map_err(|error| refuse(&id, error))?;
    let params = match envelope.remove("params") {
        Some(Value::Object(params)) => params,
        None => Map::new(),
        Some(_) => return Err(refuse(&id, RpcError::InvalidParams("`params` must be an object".to_owned()))),
    };
    Ok(RpcRequest { id, method, dialect, params })
}

/// The method a name means: A2A 1.0's names and 0.3's. Methods of the protocol this runtime does
/// not serve are told apart from names that mean nothing.
fn method(name: &str) -> Result<(Method, Dialect), RpcError> {
    Ok(match name {
        "SendMessage" => (Method::SendMessage, Dialect::V1),
        "SendStreamingMessage" => (Method::SendStreamingMessage, Dialect::V1),
        "GetTask" => (Method::GetTask, Dialect::V1),
        "CancelTask" => (Method::CancelTask, Dialect::V1),
        "message/send" => (Method::SendMessage, Dialect::V03),
        "message/stream" => (Method::SendStreamingMessage, Dialect::V03),
        "tasks/get" => (Method::GetTask, Dialect::V03),
        "tasks/cancel" => (Method::CancelTask, Dialect::V03),
        push if push.contains("PushNotificationConfig") || push.starts_with("tasks/pushNotificationConfig/") => {
            return Err(RpcError::PushNotificationNotSupported("push notifications are not supported".to_owned()))
        }
        "ListTasks"
        | "SubscribeToTask"
        | "GetExtendedAgentCard"
        | "tasks/resubscribe"
        | "tasks/list"
        | "agent/getAuthenticatedExtendedCard" => {
            return Err(RpcError::UnsupportedOperation(format!("`{name}` is not supported by this agent")))
        }
        _ => return Err(RpcError::MethodNotFound(format!("no method `{}`", cut(name, 64)))),
    })
}

/// Checks the `A2A-Version` header: absent, or a version this agent speaks (1.0 or 0.3, any patch).
pub fn check_version(header: Option<&str>) -> Result<(), RpcError> {
    let Some(version) = header.map(str::trim).filter(|version| !version.is_empty()) else { return Ok(()) };
    let mut numbers = version.split('.');
    let major_minor = (numbers.next(), numbers.next());
    match major_minor {
        (Some("1"), Some("0") | None) | (Some("0"), Some("3")) => Ok(()),
        _ => Err(RpcError::VersionNotSupported(format!(
            "A2A version `{}` is not supported: this agent speaks 1.0 and 0.3",
            cut(version, 32)
        ))),
    }
}

/// A success response.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn failure(id: &Value, error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.object()})
}

/// The longest prefix of `text` of at most `max` bytes that ends at a character boundary.
pub(super) fn cut(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(body: &str) -> (Value, i64) {
        let refusal = parse_request(body.as_bytes()).expect_err(body);
        (refusal.id, refusal.error.code())
    }

    #[test]
    fn requests_are_read_in_both_spellings() {
        let request =
            parse_request(br#"{"jsonrpc":"2.0","id":"r1","method":"SendMessage","params":{"message":{}}}"#).unwrap();
        assert_eq!((request.id, request.method, request.dialect), (json!("r1"), Method::SendMessage, Dialect::V1));
        let request =
            parse_request(br#"{"jsonrpc":"2.0","id":7,"method":"tasks/cancel","params":{"id":"x"}}"#).unwrap();
        assert_eq!((request.id, request.method, request.dialect), (json!(7), Method::CancelTask, Dialect::V03));
        assert_eq!(request.params["id"], "x");
    }

    #[test]
    fn every_malformed_envelope_has_its_code() {
        assert_eq!(refused("{not json"), (Value::Null, -32700));
        assert_eq!(refused("[]"), (Value::Null, -32600));
        assert_eq!(refused(r#"{"jsonrpc":"2.0","method":"GetTask"}"#), (Value::Null, -32600));
        assert_eq!(refused(r#"{"jsonrpc":"2.0","id":{},"method":"GetTask"}"#), (Value::Null, -32600));
        assert_eq!(refused(r#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#), (json!(1), -32600));
        assert_eq!(refused(r#"{"jsonrpc":"2.0","id":1,"method":5}"#), (json!(1), -32600));
        assert_eq!(refused(r#"{"jsonrpc":"2.0","id":1,"method":"Nope"}"#), (json!(1), -32601));
        assert_eq!(refused(r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks"}"#), (json!(1), -32004));
        let push = r#"{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig"}"#;
        assert_eq!(refused(push), (json!(1), -32003));
        assert_eq!(refused(r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}"#), (json!(1), -32602));
        let long_id = format!(r#"{{"jsonrpc":"2.0","id":"{}","method":"GetTask"}}"#, "x".repeat(300));
        assert_eq!(refused(&long_id), (Value::Null, -32600));
        let huge = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"GetTask","x":"{}"}}"#, "x".repeat(MAX_RPC_BODY_BYTES));
        assert_eq!(refused(&huge), (Value::Null, -32600));
    }

    #[test]
    fn versions_are_checked_by_major_and_minor() {
        assert!(check_version(None).is_ok());
        assert!(check_version(Some("1.0")).is_ok());
        assert!(check_version(Some("1.0.2")).is_ok());
        assert!(check_version(Some("0.3")).is_ok());
        assert_eq!(check_version(Some("2.0")).unwrap_err().code(), -32009);
        assert_eq!(check_version(Some("0.2.5")).unwrap_err().code(), -32009);
    }

    #[test]
    fn responses_carry_the_id() {
        assert_eq!(result(&json!(3), json!({})), json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
        let error = RpcError::TaskNotFound("no task `x`".into());
        assert_eq!(failure(&json!("a"), &error)["error"], json!({"code": -32001, "message": "no task `x`"}));
    }
}
