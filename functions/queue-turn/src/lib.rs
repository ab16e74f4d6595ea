//! The queue contract: each SQS record is one turn; the response names exactly the records that
//! failed or were malformed, so SQS retries them and finally moves them to the dead-letter queue.
//! A background turn refused by the tenant's daily token budget is recorded as failed
//! (`quota_exceeded`) and deleted, not retried: its poller sees the refusal at once. A record
//! with a `kind` is an eval run of a skill version (`evals`) or a webhook's later attempt
//! (`webhooks`), which also delivers a background turn's end to the webhook it named.

mod evals;
mod webhooks;

use std::collections::HashSet;
use std::time::Duration;

use agent_app::api::{ApiError, AttachmentBody};
use agent_app::webhooks::{TurnEvent, WebhookBody, WebhookError, Webhooks};
use agent_core::agent::Ending;
use agent_core::turn::{TurnError, TurnRequest, TurnService, UserProfile};
use agent_core::{IdempotencyKey, SessionId, TicketId, UserId};
use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use futures::FutureExt;
use serde::Deserialize;
use tokio::time::Instant;
use tracing::Instrument;

/// A record is not started with less time than this left: it is reported failed and retried instead.
const MIN_TIME_FOR_A_TURN: Duration = Duration::from_secs(10);

/// The body of a queue record. The producer is trusted, so the user id comes from the body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordBody {
    user_id: String,
    session_id: String,
    #[serde(default)]
    message: String,
    /// Decisions on the calls a paused turn waits on, instead of a message.
    #[serde(default)]
    decisions: Option<Vec<agent_core::agent::CallDecision>>,
    #[serde(default)]
    ticket_id: Option<String>,
    /// The turn's idempotency key when the producer sets one (continuations do); otherwise the
    /// record's message id, so a redelivered record replays instead of running again.
    #[serde(default)]
    idempotency_key: Option<String>,
    /// Uploads of the session attached to the message (`{"upload", "name"}` each).
    #[serde(default)]
    attachments: Vec<AttachmentBody>,
    /// Published versions the turn uses instead of the defaults (`{"<skill path>": <version>}`).
    #[serde(default)]
    skill_versions: std::collections::BTreeMap<String, u32>,
    /// Where the turn's end is POSTed (`{"url"}`), checked when it was queued and again at delivery.
    #[serde(default)]
    webhook: Option<WebhookBody>,
}

/// The message that asks a saved plan to go on.
pub const CONTINUE_MESSAGE: &str = "continue";

/// Where a turn that saved an unfinished plan enqueues its own continuation: the turn queue.
pub use agent_app::queue::{SqsTurnQueue, TurnQueue};

/// Why a record was not processed; logged, never returned to SQS (which only takes ids).
#[derive(Debug, thiserror::Error)]
enum RecordError {
    #[error("malformed record: {0}")]
    Malformed(String),
    #[error("turn failed: {} ({})", .0.message, .0.code)]
    Turn(ApiError),
    /// An earlier record of the same message group failed: this one waits to keep the order.
    #[error("held back behind an earlier failed record of the same session")]
    BlockedByEarlierFailure,
    #[error("too little time left in this invocation to run a turn")]
    OutOfTime,
    #[error(transparent)]
    Webhook(WebhookError),
}

impl RecordError {
    /// The error code of the record's turn summary and metrics.
    fn code(&self) -> &'static str {
        match self {
            RecordError::Malformed(_) => "malformed_record",
            RecordError::Turn(error) => error.code,
            RecordError::BlockedByEarlierFailure => "blocked",
            RecordError::OutOfTime => "out_of_time",
            RecordError::Webhook(WebhookError::Malformed(_)) => "malformed_record",
            RecordError::Webhook(WebhookError::Handoff(_)) => "webhook_handoff_failed",
        }
    }
}

/// Failures that the same request would meet again: retrying them cannot help.
fn is_permanent(err: &TurnError) -> bool {
    matches!(
        err,
        TurnError::InvalidInput(_)
            | TurnError::TooLarge(_)
            | TurnError::UnknownSkill { .. }
            | TurnError::IdempotencyMismatch
            | TurnError::Config(_)
            | TurnError::Model(agent_core::ModelError::ContextTooLarge { .. })
            // Retrying before the day turns would be refused the same way, and a day is beyond
            // any redelivery: the background turn fails for good; another record goes to the
            // dead-letter queue after its retries, to be redriven once the budget renews.
            | TurnError::QuotaExceeded { .. }
    )
}

/// How many times SQS has handed this record out, this delivery included.
fn receive_count(record: &SqsMessage) -> u32 {
    record.attributes.get("ApproximateReceiveCount").and_then(|count| count.parse().ok()).unwrap_or(1)
}

/// Processes the batch in order. Records of one message group (one session) stay in order: after
/// a failure, the group's later records are reported failed without being run.
///
/// A background turn (one recorded by `Prefer: respond-async`) that fails for good, because the
/// request is wrong or on its last delivery (`max_receives`, the queue's `maxReceiveCount`), is
/// recorded as failed for its poller and not retried.
pub async fn handle(
    service: &TurnService,
    event: SqsEvent,
    deadline: Option<Instant>,
    continuations: Option<&dyn TurnQueue>,
    max_receives: u32,
    webhooks: &Webhooks,
) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    let mut failed_groups: HashSet<String> = HashSet::new();
    for record in event.records {
        let id = record.message_id.clone().unwrap_or_default();
        let group = record.attributes.get("MessageGroupId").cloned();
        // The record's lines name its turn once `process` knows it.
        let span =
            agent_app::turn::record_turn_span(service, record.attributes.get("AWSTraceHeader").map(String::as_str));
        let outcome = if group.as_ref().is_some_and(|g| failed_groups.contains(g)) {
            Err(RecordError::BlockedByEarlierFailure)
        } else if deadline.is_some_and(|at| at.saturating_duration_since(Instant::now()) < MIN_TIME_FOR_A_TURN) {
            Err(RecordError::OutOfTime)
        } else {
            process(service, &record, deadline, continuations, max_receives, webhooks).instrument(span.clone()).await
        };
        if let Err(err) = outcome {
            agent_app::metrics::record_turn(&span, "retried", Some(err.code()), None);
            span.in_scope(|| tracing::warn!(message_id = %id, error = %err, "record failed; SQS will retry it"));
            if let Some(group) = group {
                failed_groups.insert(group);
            }
            response.add_failure(id);
        }
    }
    response
}

async fn process(
    service: &TurnService,
    record: &SqsMessage,
    deadline: Option<Instant>,
    continuations: Option<&dyn TurnQueue>,
    max_receives: u32,
    webhooks: &Webhooks,
) -> Result<(), RecordError> {
    let body = record.body.as_deref().ok_or_else(|| RecordError::Malformed("the record has no body".to_owned()))?;
    let body: serde_json::Value =
        serde_json::from_str(body).map_err(|err| RecordError::Malformed(format!("invalid body: {err}")))?;
    // A webhook's later attempt, or an eval run of a skill version, rather than a turn.
    if body.get("kind").and_then(serde_json::Value::as_str) == Some(agent_app::webhooks::DELIVERY_KIND) {
        return webhooks::run(webhooks, body).await;
    }
    if body.get("kind").is_some() {
        let eval =
            serde_json::from_value(body).map_err(|err| RecordError::Malformed(format!("invalid body: {err}")))?;
        return evals::run(service, eval, deadline).await;
    }
    let body: RecordBody =
        serde_json::from_value(body).map_err(|err| RecordError::Malformed(format!("invalid body: {err}")))?;
    let user = UserId::parse(body.user_id).map_err(|err| RecordError::Malformed(format!("`user_id`: {err}")))?;
    let session =
        SessionId::parse(body.session_id).map_err(|err| RecordError::Malformed(format!("`session_id`: {err}")))?;
    let ticket = body
        .ticket_id
        .map(TicketId::parse)
        .transpose()
        .map_err(|err| RecordError::Malformed(format!("`ticket_id`: {err}")))?;
    let key = body
        .idempotency_key
        .as_deref()
        .or(record.message_id.as_deref())
        .ok_or_else(|| RecordError::Malformed("the record has no message id".to_owned()))?;
    let decisions = body
        .decisions
        .map(agent_core::agent::Decisions::new)
        .transpose()
        .map_err(|err| RecordError::Malformed(format!("`decisions`: {err}")))?;
    if decisions.is_some() && !body.attachments.is_empty() {
        return Err(RecordError::Malformed("`attachments` go with a `message`, not with `decisions`".to_owned()));
    }
    let attachments = agent_app::api::attachments(&body.attachments)
        .map_err(|err| RecordError::Malformed(format!("`attachments`: {err}")))?;
    // The same fingerprint as the HTTP function that queued the record computed.
    let pins = agent_app::api::pins(&body.skill_versions)
        .map_err(|err| RecordError::Malformed(format!("`skill_versions`: {err}")))?;
    let fingerprint = agent_app::api::extra_fingerprint(decisions.as_ref(), &attachments, &pins);
    let idempotency = IdempotencyKey::for_queued_turn(
        key,
        &user,
        &session,
        &body.message,
        ticket.as_ref().map(|t| t.as_str()),
        fingerprint.as_deref(),
    )
    .map_err(RecordError::Malformed)?;
    let request = TurnRequest {
        user: user.clone(),
        session: session.clone(),
        message: body.message,
        ticket: ticket.clone(),
        profile: UserProfile::default(),
        deadline,
        now: time::OffsetDateTime::now_utc(),
        idempotency: Some(idempotency.clone()),
        decisions,
        attachments,
        pins,
    };
    agent_app::turn::name_turn(&tracing::Span::current(), &request, record.message_id.as_deref().unwrap_or(""));
    let (webhook, turn_id) = (body.webhook, idempotency.key_hash.clone());
    // A defect fails this record only; the rest of the batch and the warm process go on.
    let turn = std::panic::AssertUnwindSafe(service.run_turn(request)).catch_unwind().await;
    let reply = match turn.unwrap_or_else(|_| Err(TurnError::Internal("the turn panicked".to_owned()))) {
        Ok(reply) => reply,
        // Recorded for the poller already: the turn is not run again.
        Err(TurnError::AlreadyFailed { error }) => {
            // A task canceled while it was queued (A2A `CancelTask`) is stored as failed this way
            // too: it is skipped, never run.
            let canceled = error["code"] == agent_app::a2a::task::CANCELED_CODE;
            let code = if canceled { "canceled" } else { "turn_failed" };
            agent_app::metrics::record_turn(&tracing::Span::current(), "skipped", Some(code), None);
            // A redelivered record of a failed turn delivers its webhook again, under the same id.
            let event = || TurnEvent::failed(&session, &turn_id, &error);
            return webhooks::turn_ended(webhooks, &user, webhook.as_ref(), event, deadline).await;
        }
        Err(err) => {
            let for_good = is_permanent(&err) || receive_count(record) >= max_receives;
            let error = ApiError::from(err);
            if for_good {
                let now = time::OffsetDateTime::now_utc();
                match service.fail_background(&user, &session, &idempotency, &error.stored(), now).await {
                    Ok(true) => {
                        agent_app::metrics::record_turn(&tracing::Span::current(), "failed", Some(error.code), None);
                        tracing::warn!(session = %session, code = error.code, "background turn failed for good");
                        let event = || TurnEvent::failed(&session, &turn_id, &error.stored());
                        return webhooks::turn_ended(webhooks, &user, webhook.as_ref(), event, deadline).await;
                    }
                    Ok(false) => {}
                    Err(store) => tracing::error!(session = %session, error = %store, "could not record the failure"),
                }
            }
            return Err(RecordError::Turn(error));
        }
    };
    agent_app::metrics::record_turn(&tracing::Span::current(), "completed", None, Some(&reply));
    tracing::info!(
        message_id = record.message_id.as_deref().unwrap_or(""),
        session = %reply.session_id,
        steps = reply.steps,
        replayed = reply.replayed,
        "record processed"
    );
    // The turn is committed: a failed enqueue is logged, never reported, or SQS would run the
    // committed message a second time.
    if let (Ending::PlanContinues, Some(continuations)) = (reply.ending, continuations) {
        // The same id deduplicates the send (FIFO, five minutes) and keys the continuation's turn,
        // so a replayed record that enqueues it again never runs it twice.
        let dedup_id = format!("{}-continue-{}", reply.session_id, reply.version);
        let mut body = serde_json::json!({
            "user_id": user,
            "session_id": reply.session_id,
            "message": CONTINUE_MESSAGE,
            "ticket_id": ticket,
            "idempotency_key": dedup_id,
        });
        // The continuation is a turn of its own: it tells the same webhook when it ends.
        if let Some(webhook) = &webhook {
            body["webhook"] = serde_json::json!(webhook);
        }
        match continuations.enqueue(body, reply.session_id.as_str(), &dedup_id).await {
            Ok(()) => tracing::info!(session = %reply.session_id, "enqueued the plan's continuation"),
            Err(error) => tracing::error!(session = %reply.session_id, %error, "could not enqueue the continuation"),
        }
    }
    // Committed or replayed alike: a redelivered record delivers again, under the same id.
    let event = || TurnEvent::completed(&reply.session_id, &turn_id, &reply);
    webhooks::turn_ended(webhooks, &user, webhook.as_ref(), event, deadline).await
}
