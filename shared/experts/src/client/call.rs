//! `tools/call` in both eras. The server may answer with the result at once; at 2026-07-28 it may
//! also answer that it needs input first (an input-required result: elicitations to put to the user
//! and an opaque `requestState`, after which the call is sent again with the answers), or with a
//! task (the `io.modelcontextprotocol/tasks` extension, SEP-2663), which is polled with `tasks/get`
//! at the server's interval until it ends, and cancelled with `tasks/cancel` when the caller's
//! deadline comes first.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CreateTaskResult, GetTaskParams, TaskPayload,
};
use serde_json::Value;

use super::content::{content_text, content_value_text};
use super::{McpClient, McpError, ToolOutcome};

/// Poll a task no more often than this, whatever the server suggests, nor less often than
/// [`MAX_POLL_INTERVAL`], so a deadline is noticed in time.
const MIN_POLL_INTERVAL: Duration = Duration::from_millis(50);
const MAX_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// When the server suggests no interval.
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);
/// A cancel sent at the deadline waits no longer than this for its acknowledgement.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);

/// One `tools/call`, possibly a retry carrying the answers to an input-required result.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Value,
    /// How long a call the server runs as a task may take; without one, the request timeout.
    pub deadline: Option<Instant>,
    /// The answers (`inputResponses`, by the server's keys) and the echoed `requestState`.
    pub input_responses: Option<BTreeMap<String, Value>>,
    pub request_state: Option<String>,
}

impl ToolCall {
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        Self { name: name.into(), arguments, deadline: None, input_responses: None, request_state: None }
    }
}

/// What a call came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Called {
    Done(ToolOutcome),
    /// The server needs input before it can answer.
    InputRequired(InputRequired),
}

/// An input-required result: the server's requests (each an `elicitation/create`,
/// `sampling/createMessage` or `roots/list` request, as JSON, by the server's key) and its state.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequired {
    pub requests: BTreeMap<String, Value>,
    pub request_state: Option<String>,
}

impl McpClient {
    /// Calls a tool. Arguments that are not a JSON object (a model's unparsable output) come back as
    /// a tool error for the model to fix, without a round trip.
    pub async fn call(&self, call: ToolCall) -> Result<Called, McpError> {
        let arguments = match call.arguments {
            Value::Null => None,
            Value::Object(map) => Some(map),
            other => {
                return Ok(Called::Done(ToolOutcome {
                    is_error: true,
                    text: format!("the arguments must be a JSON object, not {other}"),
                }))
            }
        };
        let mut params = CallToolRequestParams::new(call.name.clone());
        params.arguments = arguments;
        params.input_responses = call.input_responses;
        params.request_state = call.request_state;
        match self.request(self.service.call_tool_once(params)).await? {
            CallToolResponse::Complete(result) => {
                let mut text = result.content.iter().map(content_text).collect::<Vec<_>>().join("\n");
                // A server may put the whole answer in structured content only.
                if text.is_empty() {
                    if let Some(structured) = &result.structured_content {
                        text = structured.to_string();
                    }
                }
                Ok(Called::Done(ToolOutcome { is_error: result.is_error.unwrap_or(false), text }))
            }
            CallToolResponse::InputRequired(input) => {
                let requests = input
                    .input_requests
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(key, request)| (key, serde_json::to_value(request).unwrap_or(Value::Null)))
                    .collect();
                Ok(Called::InputRequired(InputRequired { requests, request_state: input.request_state }))
            }
            CallToolResponse::Task(task) => self.wait_for_task(&call.name, task, call.deadline).await.map(Called::Done),
            _ => Err(McpError::Protocol("an unknown kind of tools/call result".into())),
        }
    }

    /// Polls a task until it ends, or cancels it when `deadline` (or, without one, the request
    /// timeout) comes first.
    async fn wait_for_task(
        &self,
        tool: &str,
        created: CreateTaskResult,
        deadline: Option<Instant>,
    ) -> Result<ToolOutcome, McpError> {
        let until = deadline.unwrap_or_else(|| Instant::now() + self.timeout);
        let task_id = created.task.task_id.clone();
        let mut interval = poll_interval(created.task.poll_interval_ms);
        tracing::debug!(expert = %self.expert, %tool, task = %task_id, "the expert runs the call as a task");
        let started = Instant::now();
        loop {
            let now = Instant::now();
            if now + interval >= until {
                // No poll fits before the deadline: wait for it, then stop the task.
                tokio::time::sleep_until(until.into()).await;
                self.cancel_task(&task_id).await;
                return Err(McpError::Timeout(started.elapsed()));
            }
            tokio::time::sleep(interval).await;
            let left = until.saturating_duration_since(Instant::now());
            let poll = self.service.get_task(GetTaskParams::new(task_id.clone()));
            let polled = match tokio::time::timeout(self.timeout.min(left), poll).await {
                Err(_) => continue,
                Ok(result) => result.map_err(McpError::from)?,
            };
            interval = poll_interval(polled.task.task.poll_interval_ms);
            match polled.task.payload {
                TaskPayload::Working => continue,
                TaskPayload::Completed { result } => return task_outcome(&Value::Object(result)),
                TaskPayload::Failed { error } => {
                    let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
                    let message = error.get("message").and_then(Value::as_str).unwrap_or("the task failed");
                    return Err(McpError::Rpc { code: i32::try_from(code).unwrap_or(-32603), message: message.into() });
                }
                TaskPayload::Cancelled => return Err(McpError::Protocol("the expert cancelled the task".into())),
                TaskPayload::InputRequired { .. } => {
                    // Input inside a task would have to wait across turns while the task holds its
                    // place on the server; the planner asks for input only the input-required way.
                    self.cancel_task(&task_id).await;
                    return Err(McpError::Protocol("the task asked for input mid-run".into()));
                }
                _ => return Err(McpError::Protocol("a task in an unknown state".into())),
            }
        }
    }

    /// `tasks/cancel`, best effort.
    async fn cancel_task(&self, task_id: &str) {
        let cancel = self.service.cancel_task(CancelTaskParams::new(task_id.to_owned()));
        match tokio::time::timeout(CANCEL_TIMEOUT.min(self.timeout), cancel).await {
            Ok(Ok(())) => tracing::info!(expert = %self.expert, task = %task_id, "cancelled the expert's task"),
            Ok(Err(error)) => {
                tracing::warn!(expert = %self.expert, task = %task_id, %error, "cancelling the task failed")
            }
            Err(_) => tracing::warn!(expert = %self.expert, task = %task_id, "cancelling the task timed out"),
        }
    }
}

fn poll_interval(suggested_ms: Option<u64>) -> Duration {
    suggested_ms.map_or(DEFAULT_POLL_INTERVAL, Duration::from_millis).clamp(MIN_POLL_INTERVAL, MAX_POLL_INTERVAL)
}

/// A completed task's inlined `CallToolResult`, flattened as a direct result is.
fn task_outcome(result: &Value) -> Result<ToolOutcome, McpError> {
    let Some(content) = result.get("content").and_then(Value::as_array) else {
        return Err(McpError::Protocol("the task's result has no content".into()));
    };
    let mut text = content.iter().map(content_value_text).collect::<Vec<_>>().join("\n");
    if text.is_empty() {
        if let Some(structured) = result.get("structuredContent") {
            text = structured.to_string();
        }
    }
    Ok(ToolOutcome { is_error: result.get("isError").and_then(Value::as_bool).unwrap_or(false), text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_poll_interval_is_the_servers_within_bounds() {
        assert_eq!(poll_interval(None), DEFAULT_POLL_INTERVAL);
        assert_eq!(poll_interval(Some(100)), Duration::from_millis(100));
        assert_eq!(poll_interval(Some(0)), MIN_POLL_INTERVAL);
        assert_eq!(poll_interval(Some(3_600_000)), MAX_POLL_INTERVAL);
    }

    #[test]
    fn a_tasks_result_is_flattened_like_a_direct_one() {
        let result = serde_json::json!({"content": [{"type": "text", "text": "ready"}], "isError": false});
        assert_eq!(task_outcome(&result).unwrap(), ToolOutcome { is_error: false, text: "ready".into() });
        let structured = serde_json::json!({"content": [], "structuredContent": {"n": 1}, "isError": true});
        assert_eq!(task_outcome(&structured).unwrap(), ToolOutcome { is_error: true, text: "{\"n\":1}".into() });
        assert!(matches!(task_outcome(&serde_json::json!({})), Err(McpError::Protocol(_))));
    }
}
