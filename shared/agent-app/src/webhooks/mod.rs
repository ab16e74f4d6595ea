//! Webhooks: a background turn's end POSTed, signed the Standard Webhooks way, to a callback URL the
//! deployment allows for its tenant. The URL is checked when the turn is queued (`allow`), the
//! payload is the turn as its poll shows it (`event`), each tenant's key is derived from one
//! deployment secret (`sign`), and each attempt resolves, checks and pins the receiver's addresses
//! (`deliver`). Delivery is at least once under one `webhook-id` per turn: a few attempts inline in
//! queue-turn, then records of the webhook queue (standard SQS, delayed up to 900 s each), then given up.

mod allow;
pub mod body;
mod deliver;
mod event;
mod sign;

use std::sync::OnceLock;

use agent_core::UserId;
use tokio::time::Instant;
use url::Url;

pub use allow::{Policy, Refused, ALLOWED_URLS_ENV, PRIVATE_CIDRS_ENV};
pub use body::{WebhookBody, MAX_URL_BYTES};
pub use deliver::{classify, inline_pause, queue_delay, Attempt, INLINE_ATTEMPTS, MAX_ATTEMPTS, MAX_QUEUE_DELAY_SECS};
pub use event::{webhook_id, DeliveryRecord, TurnEvent, DELIVERY_KIND, MAX_PAYLOAD_BYTES};
pub use sign::{deployment_key, DeploymentKey, TenantKey, SECRET_PREFIX, SIGNING_KEY_ENV, SIGNING_KEY_SECRET_ENV};

use crate::api::ApiError;
use crate::config::{env_lookup, ConfigError};

/// The webhook queue (standard SQS) that carries deliveries to their later attempts.
pub const QUEUE_URL_ENV: &str = "WEBHOOK_QUEUE_URL";
/// The delay before the first queued attempt, in seconds (0 to 900); later ones double it.
pub const RETRY_DELAY_ENV: &str = "WEBHOOK_RETRY_DELAY_SECONDS";
/// The first queued attempt's delay when `WEBHOOK_RETRY_DELAY_SECONDS` is unset.
const DEFAULT_RETRY_DELAY_SECS: u32 = 30;
/// An inline attempt is made only with this much time left besides its own.
const INLINE_RESERVE: std::time::Duration = std::time::Duration::from_secs(15);

/// Why a delivery could not be carried on; the turn itself is unaffected.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("malformed webhook record: {0}")]
    Malformed(String),
    /// The next attempt could not be queued: the record that asked for it is retried instead.
    #[error("could not queue the webhook's next attempt: {0}")]
    Handoff(String),
}

/// Where the deliveries' later attempts wait.
struct RetryQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

/// Everything a delivery needs, built once per process.
pub struct Webhooks {
    policy: Policy,
    key: Option<DeploymentKey>,
    queue: Option<RetryQueue>,
    first_delay: u32,
}

impl Webhooks {
    /// The settings from the environment: the policy, the deployment secret (through Secrets
    /// Manager when `WEBHOOK_SIGNING_KEY_SECRET` names it), the webhook queue and its first delay.
    pub async fn from_env() -> Result<Webhooks, ConfigError> {
        let policy = Policy::from_lookup(env_lookup)?;
        let key = deployment_key(env_lookup, &experts::AwsSecretResolver::from_env()).await?;
        let first_delay = match env_lookup(RETRY_DELAY_ENV).map(|value| value.trim().to_owned()) {
            None => DEFAULT_RETRY_DELAY_SECS,
            Some(value) if value.is_empty() => DEFAULT_RETRY_DELAY_SECS,
            Some(value) => value.parse().ok().filter(|delay| *delay <= MAX_QUEUE_DELAY_SECS).ok_or_else(|| {
                ConfigError::Invalid {
                    name: RETRY_DELAY_ENV,
                    reason: format!("expected 0 to 900 seconds, got `{value}`"),
                }
            })?,
        };
        let queue = match env_lookup(QUEUE_URL_ENV).filter(|url| !url.trim().is_empty()) {
            None => None,
            Some(url) => {
                let config = aws_http::load_config().await;
                Some(RetryQueue { client: aws_sdk_sqs::Client::new(&config), url })
            }
        };
        if key.is_none() {
            tracing::info!("no webhook signing key is configured: background turns' webhooks are not sent");
        }
        Ok(Webhooks { policy, key, queue, first_delay })
    }

    /// Delivers `event` to `url` for `user`: attempts inline while `deadline` leaves time, then hands
    /// the delivery to the webhook queue. Only a failed hand-off is an error.
    pub async fn deliver(
        &self,
        user: &UserId,
        url: &str,
        event: &TurnEvent,
        deadline: Option<Instant>,
    ) -> Result<(), WebhookError> {
        let Some((key, url)) = self.ready(user, url, &event.webhook_id, 0) else { return Ok(()) };
        for attempt in 1..=INLINE_ATTEMPTS {
            if !time_for_an_attempt(deadline) {
                return self.hand_off(user, &url, event, attempt, "too little time left to try inline").await;
            }
            match deliver::attempt(&self.policy, &key, &url, event).await {
                deliver::Attempt::Retry(reason) if attempt < INLINE_ATTEMPTS => {
                    tracing::info!(webhook_id = %event.webhook_id, attempt, %reason, "webhook attempt failed; trying again");
                    tokio::time::sleep(inline_pause(attempt, rand::random())).await;
                }
                deliver::Attempt::Retry(reason) => return self.hand_off(user, &url, event, attempt + 1, &reason).await,
                ended => {
                    finish(&url, &event.webhook_id, attempt, ended);
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Makes the attempt a webhook queue record asks for, and queues the next one if it fails.
    pub async fn redeliver(&self, record: &DeliveryRecord) -> Result<(), WebhookError> {
        let event = record.event().map_err(WebhookError::Malformed)?;
        let user = UserId::parse(record.user_id.as_str())
            .map_err(|err| WebhookError::Malformed(format!("`user_id`: {err}")))?;
        if !(1..=MAX_ATTEMPTS).contains(&record.attempt) {
            return Err(WebhookError::Malformed(format!("`attempt` {} is out of range", record.attempt)));
        }
        let Some((key, url)) = self.ready(&user, &record.url, &event.webhook_id, record.attempt) else { return Ok(()) };
        match deliver::attempt(&self.policy, &key, &url, &event).await {
            deliver::Attempt::Retry(reason) => self.hand_off(&user, &url, &event, record.attempt + 1, &reason).await,
            ended => {
                finish(&url, &event.webhook_id, record.attempt, ended);
                Ok(())
            }
        }
    }

    /// The tenant's key and the URL, checked again (the settings may have changed since the turn
    /// was queued); `None`, the delivery given up, when either is missing.
    fn ready(&self, user: &UserId, url: &str, webhook_id: &str, attempt: u32) -> Option<(TenantKey, Url)> {
        let checked = match (&self.key, self.policy.check(user, url)) {
            (Some(key), Ok(url)) => return Some((key.tenant(user), url)),
            (None, _) => "this deployment has no webhook signing key".to_owned(),
            (_, Err(refused)) => refused.to_string(),
        };
        give_up(webhook_id, host_of(url), attempt, &checked);
        None
    }

    /// Queues attempt `next` with its delay, or gives the delivery up after the last attempt or
    /// without a webhook queue.
    async fn hand_off(
        &self,
        user: &UserId,
        url: &Url,
        event: &TurnEvent,
        next: u32,
        reason: &str,
    ) -> Result<(), WebhookError> {
        let queue = match &self.queue {
            Some(queue) if next <= MAX_ATTEMPTS => queue,
            _ => {
                give_up(&event.webhook_id, url.host_str().unwrap_or_default(), next - 1, reason);
                return Ok(());
            }
        };
        let record = DeliveryRecord {
            kind: DELIVERY_KIND.to_owned(),
            user_id: user.as_str().to_owned(),
            url: url.as_str().to_owned(),
            webhook_id: event.webhook_id.clone(),
            payload: event.payload.clone(),
            attempt: next,
        };
        let body = serde_json::to_string(&record).map_err(|err| WebhookError::Handoff(err.to_string()))?;
        let delay = queue_delay(next, self.first_delay, rand::random());
        queue
            .client
            .send_message()
            .queue_url(&queue.url)
            .message_body(body)
            .delay_seconds(delay as i32)
            .send()
            .await
            .map_err(|err| WebhookError::Handoff(aws_sdk_sqs::error::DisplayErrorContext(err).to_string()))?;
        crate::metrics::put_count("WebhookRetriesQueued", 1);
        tracing::info!(
            webhook_id = %event.webhook_id,
            host = url.host_str().unwrap_or_default(),
            next_attempt = next,
            delay_seconds = delay,
            %reason,
            "webhook attempt failed; the next one is queued"
        );
        Ok(())
    }
}

/// Whether an inline attempt still fits before `deadline`, with time left for the batch's other records.
fn time_for_an_attempt(deadline: Option<Instant>) -> bool {
    deadline.is_none_or(|at| at.saturating_duration_since(Instant::now()) > deliver::ATTEMPT_TIMEOUT + INLINE_RESERVE)
}

/// Logs and counts a delivery that ended, delivered or stopped.
fn finish(url: &Url, webhook_id: &str, attempt: u32, ended: deliver::Attempt) {
    let host = url.host_str().unwrap_or_default();
    match ended {
        deliver::Attempt::Delivered(status) => {
            crate::metrics::put_count("WebhooksDelivered", 1);
            tracing::info!(webhook_id, host, attempt, status, "webhook delivered");
        }
        deliver::Attempt::Stop(reason) | deliver::Attempt::Retry(reason) => give_up(webhook_id, host, attempt, &reason),
    }
}

/// The error line and count of a delivery given up. Neither names the URL's path or query, which
/// may carry a receiver's token.
fn give_up(webhook_id: &str, host: &str, attempts: u32, reason: &str) {
    crate::metrics::put_count("WebhooksFailed", 1);
    tracing::error!(webhook_id, host, attempts, reason, "webhook given up");
}

/// The host (and port) of `url`, without any credentials before it.
fn host_of(url: &str) -> &str {
    let authority =
        url.split_once("://").map_or("", |(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or_default());
    authority.rsplit('@').next().unwrap_or_default()
}

/// The process's policy for the HTTP API, read from the environment on first use.
static POLICY: OnceLock<Result<Policy, String>> = OnceLock::new();

/// The deployment's webhook policy; a misconfigured one refuses every webhook with a 500.
pub fn policy() -> Result<&'static Policy, ApiError> {
    POLICY.get_or_init(|| Policy::from_lookup(env_lookup).map_err(|err| err.to_string())).as_ref().map_err(|reason| {
        tracing::error!(%reason, "the webhook settings are invalid");
        ApiError::new(500, "configuration_error", "this deployment's webhook settings are invalid")
    })
}

/// The process's deployment secret for the HTTP API, read once (on first use).
static KEY: tokio::sync::OnceCell<Option<DeploymentKey>> = tokio::sync::OnceCell::const_new();

/// The deployment's webhook secret, `None` when it has none. A failed read is not kept, so the
/// next request reads again.
pub async fn signing_key() -> Result<Option<&'static DeploymentKey>, ApiError> {
    let key = KEY
        .get_or_try_init(|| async { deployment_key(env_lookup, &experts::AwsSecretResolver::from_env()).await })
        .await
        .map_err(|err| {
            tracing::error!(error = %err, "could not read the webhook signing key");
            crate::api::internal_error()
        })?;
    Ok(key.as_ref())
}

/// Refuses a webhook when this deployment cannot sign one.
pub async fn require_signing_key() -> Result<(), ApiError> {
    match signing_key().await? {
        Some(_) => Ok(()),
        None => {
            Err(ApiError::new(400, "webhook_not_allowed", "this deployment sends no webhooks (it has no signing key)"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_urls_host_is_named_without_its_path_or_query() {
        assert_eq!(host_of("https://hooks.example.com:8443/agent/x?token=1"), "hooks.example.com:8443");
        assert_eq!(host_of("https://hooks.example.com?token=1"), "hooks.example.com");
        assert_eq!(host_of("https://user:secret@hooks.example.com/x"), "hooks.example.com");
        assert_eq!(host_of("not a url"), "");
    }
}
