//! What the HTTP API takes and gives: a request as the serving function hands it over (method,
//! path, headers, query, body and caller) and the answer it gets back, in `http` types only.

use std::collections::BTreeMap;

use agent_core::turn::UserProfile;
use agent_core::UserId;
use http::{HeaderMap, Method};
use serde_json::Value;

use crate::api::ApiError;

/// One request of the HTTP API.
pub struct Request<'a> {
    pub method: Method,
    /// The raw path, after the stage name when the API has a named stage (`/skills`, not `/prod/skills`).
    pub path: &'a str,
    pub headers: &'a HeaderMap,
    pub query: Query,
    pub body: Option<&'a str>,
    /// Whether the integration sent `body` base64-encoded.
    pub base64: bool,
    /// The API Gateway request id: a turn's id without an idempotency key, and named when refused.
    pub request_id: &'a str,
    /// The authenticated caller, or why there is none; a path that is no route is refused first.
    pub caller: Result<Caller, ApiError>,
}

/// The caller the authorizer verified: its id (the token's `sub`) and what the prompt may know of it.
#[derive(Clone)]
pub struct Caller {
    pub user: UserId,
    pub profile: UserProfile,
}

/// A query string's parameters, each name with its first value.
#[derive(Default)]
pub struct Query(BTreeMap<String, String>);

impl Query {
    pub fn first(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

impl<'a> FromIterator<(&'a str, &'a str)> for Query {
    /// Keeps the first value of a name given more than once.
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(pairs: I) -> Self {
        let mut query = BTreeMap::new();
        for (name, value) in pairs {
            query.entry(name.to_owned()).or_insert_with(|| value.to_owned());
        }
        Self(query)
    }
}

/// An answer: its status, its body and the headers it adds.
pub struct Answer {
    pub status: u16,
    pub body: Payload,
    pub headers: Vec<(&'static str, String)>,
}

/// The body of an answer: JSON, or a file's bytes (its headers say what they are).
pub enum Payload {
    Json(Value),
    Bytes(Vec<u8>),
}

impl From<Value> for Answer {
    fn from(body: Value) -> Self {
        Self { status: 200, body: Payload::Json(body), headers: Vec::new() }
    }
}

impl From<ApiError> for Answer {
    fn from(err: ApiError) -> Self {
        let headers = err.retry_after.map(|seconds| ("retry-after", seconds.to_string())).into_iter().collect();
        Self { status: err.status, body: Payload::Json(err.body()), headers }
    }
}
