//! The queue's webhooks: when a background turn that named one ends (committed, failed for good,
//! or replayed by a redelivered record), its event is delivered under the turn's one `webhook-id`;
//! and each record of the webhook queue (`kind: webhook_delivery`) makes one later attempt. A
//! turn's own outcome never depends on its webhook: only a delivery that could not be queued for
//! its next attempt fails its record, which SQS then redelivers (the turn replays, never reruns).

use agent_app::webhooks::{DeliveryRecord, TurnEvent, WebhookBody, Webhooks};
use agent_core::UserId;
use tokio::time::Instant;

use super::RecordError;

/// Delivers `event` of `user`'s turn to its webhook, if it named one.
pub async fn turn_ended(
    webhooks: &Webhooks,
    user: &UserId,
    webhook: Option<&WebhookBody>,
    event: impl FnOnce() -> TurnEvent,
    deadline: Option<Instant>,
) -> Result<(), RecordError> {
    let Some(webhook) = webhook else { return Ok(()) };
    // Boxed: the delivery's future would otherwise nest inside the turn's, deeper than the compiler lays out.
    let event = event();
    Box::pin(webhooks.deliver(user, &webhook.url, &event, deadline)).await.map_err(RecordError::Webhook)
}

/// Makes the attempt a webhook queue record asks for.
pub async fn run(webhooks: &Webhooks, body: serde_json::Value) -> Result<(), RecordError> {
    let record: DeliveryRecord =
        serde_json::from_value(body).map_err(|err| RecordError::Malformed(format!("invalid body: {err}")))?;
    Box::pin(webhooks.redeliver(&record)).await.map_err(RecordError::Webhook)
}
