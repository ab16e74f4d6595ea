//! The turn queue: where background turns and a plan's continuations are sent (the FIFO queue
//! named by `TURN_QUEUE_URL`; message group = session, so a session's turns keep their order).

use async_trait::async_trait;

/// Sends turn records to the queue.
#[async_trait]
pub trait TurnQueue: Send + Sync {
    /// Sends `body` in message group `group`, deduplicated by `dedup_id` (FIFO: five minutes).
    async fn enqueue(&self, body: serde_json::Value, group: &str, dedup_id: &str) -> Result<(), String>;
}

/// The SQS FIFO queue at `queue_url`.
pub struct SqsTurnQueue {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsTurnQueue {
    pub fn new(client: aws_sdk_sqs::Client, queue_url: String) -> Self {
        Self { client, queue_url }
    }

    /// The queue named by `TURN_QUEUE_URL`, or `None` when it is unset or empty.
    pub async fn from_env() -> Option<Self> {
        let url = std::env::var("TURN_QUEUE_URL").ok().filter(|url| !url.is_empty())?;
        let config = aws_http::load_config().await;
        Some(Self::new(aws_sdk_sqs::Client::new(&config), url))
    }
}

#[async_trait]
impl TurnQueue for SqsTurnQueue {
    async fn enqueue(&self, body: serde_json::Value, group: &str, dedup_id: &str) -> Result<(), String> {
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body.to_string())
            .message_group_id(group)
            .message_deduplication_id(dedup_id)
            .send()
            .await
            .map(|_| ())
            .map_err(|err| format!("SQS SendMessage: {}", aws_sdk_sqs::error::DisplayErrorContext(err)))
    }
}
