//! The console's turn queue: a FIFO queue on the stack's moto, as `template.yaml`'s `TurnQueue`,
//! and workers that do what Lambda's event source mapping does with it: receive its messages in
//! batches, invoke the compiled `queue-turn` with them as an SQS event, and delete each message the
//! function did not report failed. A failed one comes back a little later, and after
//! [`MAX_RECEIVES`] deliveries it is dropped, as the queue's redrive policy would move it to the
//! dead-letter queue. So background turns (`Prefer: respond-async`) and skill versions' eval runs
//! run in the console as they run once deployed.

use std::time::{Duration, Instant};

use aws_sdk_sqs::error::DisplayErrorContext;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use local_stack::lambda::{Function, Invocation};
use serde_json::{json, Value};

/// `TurnQueue`'s `maxReceiveCount` in `template.yaml`, also given to `queue-turn`
/// (`TURN_MAX_RECEIVE_COUNT`): on the last delivery a background turn's failure is final.
pub const MAX_RECEIVES: u32 = 5;
/// `QueueTurnFunction`'s timeout in `template.yaml`.
const QUEUE_TURN_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a received message stays hidden from other workers: longer than an invocation.
const VISIBILITY: Duration = Duration::from_secs(330);
/// When a record the function reported failed is delivered again (SQS waits out the visibility
/// timeout; the console retries sooner).
const RETRY_AFTER: Duration = Duration::from_secs(10);
/// How long one receive waits for a message (SQS long polling).
const LONG_POLL_SECONDS: i32 = 2;

/// The queue, as the functions and the workers reach it.
#[derive(Clone)]
pub struct TurnQueue {
    sqs: aws_sdk_sqs::Client,
    pub url: String,
}

impl TurnQueue {
    /// Creates the FIFO queue on the moto at `endpoint`.
    pub async fn create(endpoint: &str) -> Self {
        let sqs = aws_sdk_sqs::Client::new(&local_stack::moto::sdk_config(endpoint).await);
        let url = local_stack::moto::create_fifo_queue(&sqs).await;
        Self { sqs, url }
    }

    /// The lines of the functions' environment that name the queue (http-turn sends to it,
    /// queue-turn reads it and sends continuations to it).
    pub fn environment(&self) -> Vec<(String, String)> {
        vec![
            ("TURN_QUEUE_URL".to_owned(), self.url.clone()),
            ("TURN_MAX_RECEIVE_COUNT".to_owned(), MAX_RECEIVES.to_string()),
        ]
    }

    /// Serves the queue with `function` (a running `queue-turn`) until the console stops.
    pub async fn work(self, function: Function) {
        loop {
            match self.receive().await {
                Ok(batch) if batch.is_empty() => {}
                Ok(batch) => self.deliver(&function, batch).await,
                Err(err) => {
                    eprintln!("queue: could not receive: {err}");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
            }
        }
    }

    /// Up to ten messages, each as the SQS event record Lambda would hand the function.
    async fn receive(&self) -> Result<Vec<Received>, String> {
        let received = self
            .sqs
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(10)
            .visibility_timeout(VISIBILITY.as_secs() as i32)
            .wait_time_seconds(LONG_POLL_SECONDS)
            .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(|err| DisplayErrorContext(err).to_string())?;
        let mut batch = Vec::new();
        for message in received.messages() {
            let (Some(id), Some(handle), Some(body)) = (message.message_id(), message.receipt_handle(), message.body())
            else {
                continue;
            };
            let attribute = |name: MessageSystemAttributeName| {
                message.attributes().and_then(|attributes| attributes.get(&name)).cloned().unwrap_or_default()
            };
            let group = attribute(MessageSystemAttributeName::MessageGroupId);
            let deliveries: u32 = attribute(MessageSystemAttributeName::ApproximateReceiveCount).parse().unwrap_or(1);
            let mut record = local_stack::stack::sqs_record(id, &group, body);
            record["attributes"]["ApproximateReceiveCount"] = json!(deliveries.to_string());
            batch.push(Received { id: id.to_owned(), handle: handle.to_owned(), deliveries, record });
        }
        Ok(batch)
    }

    /// One invocation of the batch; then each record is deleted, retried soon, or dropped.
    async fn deliver(&self, function: &Function, batch: Vec<Received>) {
        let started = Instant::now();
        let records: Vec<Value> = batch.iter().map(|received| received.record.clone()).collect();
        let all = || batch.iter().map(|received| received.id.clone()).collect();
        // The whole batch fails on an error, or an answer that is no batch response: all retried.
        let failed = match function.invoke_with_budget(json!({ "Records": records }), QUEUE_TURN_TIMEOUT).await {
            Invocation::Response(answer) => failed_ids(&answer).unwrap_or_else(all),
            Invocation::Error(error) => {
                eprintln!("queue-turn failed: {error}");
                all()
            }
            Invocation::Stream(_) => all(),
        };
        eprintln!(
            "queue: {} -> queue-turn in {} ms ({} failed)",
            crate::counted(batch.len() as u64, "record", "records"),
            started.elapsed().as_millis(),
            failed.len()
        );
        for received in batch {
            let outcome = if !failed.contains(&received.id) {
                self.delete(&received.handle).await
            } else if received.deliveries >= MAX_RECEIVES {
                eprintln!(
                    "queue: record {} failed {MAX_RECEIVES} times: dropped, as the dead-letter queue would take it",
                    received.id
                );
                self.delete(&received.handle).await
            } else {
                self.retry_later(&received.handle).await
            };
            if let Err(problem) = outcome {
                eprintln!("queue: record {}: {problem}", received.id);
            }
        }
    }

    async fn delete(&self, handle: &str) -> Result<(), String> {
        let deleted = self.sqs.delete_message().queue_url(&self.url).receipt_handle(handle).send().await;
        deleted.map(drop).map_err(|err| format!("could not delete it: {}", DisplayErrorContext(err)))
    }

    /// Makes a failed record visible again after [`RETRY_AFTER`].
    async fn retry_later(&self, handle: &str) -> Result<(), String> {
        let seconds = RETRY_AFTER.as_secs() as i32;
        let request = self.sqs.change_message_visibility().queue_url(&self.url).receipt_handle(handle);
        let changed = request.visibility_timeout(seconds).send().await;
        changed.map(drop).map_err(|err| format!("could not retry it: {}", DisplayErrorContext(err)))
    }
}

/// A received message: what deleting or retrying it needs, and its record.
struct Received {
    id: String,
    handle: String,
    deliveries: u32,
    record: Value,
}

/// The message ids a batch response reports failed (`batchItemFailures`); `None` for an answer
/// that is not a batch response, which fails the whole batch, as Lambda treats it.
fn failed_ids(answer: &Value) -> Option<Vec<String>> {
    match answer.get("batchItemFailures") {
        Some(Value::Array(failures)) => {
            failures.iter().map(|failure| failure["itemIdentifier"].as_str().map(str::to_owned)).collect()
        }
        Some(Value::Null) | None if answer.is_null() || answer.is_object() => Some(Vec::new()),
        _ => None,
    }
}

#[cfg(test)]
mod queue_tests {
    use super::*;

    #[test]
    fn a_batch_response_names_the_failed_records() {
        let answer = json!({"batchItemFailures": [{"itemIdentifier": "m-2"}, {"itemIdentifier": "m-3"}]});
        assert_eq!(failed_ids(&answer).unwrap(), ["m-2", "m-3"]);
        assert_eq!(failed_ids(&json!({"batchItemFailures": []})), Some(Vec::new()));
        assert_eq!(failed_ids(&json!({})), Some(Vec::new()));
        assert_eq!(failed_ids(&json!({"batchItemFailures": [{"id": "m-1"}]})), None);
        assert_eq!(failed_ids(&json!("ok")), None);
    }
}
