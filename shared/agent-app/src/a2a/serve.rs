//! The methods over the turn service, for the caller the token names: what a send runs (its
//! session, its key, its request), a background send queued, a task read by walking its chain of
//! approval pauses, and a queued task canceled so that it never runs.

use agent_core::turn::{TurnRequest, TurnService, UserProfile};
use agent_core::{IdempotencyKey, SessionId, TurnStatus, UserId};
use http::{HeaderMap, HeaderValue};
use serde_json::Value;
use time::OffsetDateTime;
use tokio::time::Instant;

use super::params::SendParams;
use super::rpc::RpcError;
use super::task::{awaits_approval, pending_task, task_of_status, TaskId, TurnEnd, CANCELED_CODE};
use super::wire::TaskState;
use super::Dialect;
use crate::api::{turn_request, ApiError, TurnBody, IDEMPOTENCY_KEY_HEADER};
use crate::queue::TurnQueue;
use crate::routes::background::{Acceptance, Queued, Refusal};

/// Most links of a task's chain (its turn, then each turn that answered a pause) followed.
pub const MAX_CHAIN: usize = 8;

impl From<ApiError> for RpcError {
    /// A refusal before the turn runs: the caller's mistake is invalid params, ours is internal.
    fn from(err: ApiError) -> Self {
        match err.status {
            500.. => RpcError::Internal(err.message),
            _ => RpcError::InvalidParams(err.message),
        }
    }
}

/// A send, resolved: the task the caller knows, the link of it this message runs, and the turn.
pub struct PlannedSend {
    /// The task id the answer carries: the one the message continues, or the new turn's.
    pub task: TaskId,
    pub session: SessionId,
    /// The turn's idempotency key: the message's id, or for decisions the key derived from the
    /// pause they answer.
    pub key: String,
    pub body: TurnBody,
    pub return_immediately: bool,
}

impl PlannedSend {
    /// The turn request a blocking or streamed send runs.
    pub fn turn_request(
        self,
        user: UserId,
        profile: UserProfile,
        deadline: Option<Instant>,
    ) -> Result<TurnRequest, RpcError> {
        let mut headers = HeaderMap::new();
        let key =
            HeaderValue::from_str(&self.key).map_err(|_| RpcError::InvalidParams("invalid `messageId`".into()))?;
        headers.insert(IDEMPOTENCY_KEY_HEADER, key);
        Ok(turn_request(user, self.session, self.body, &headers, profile, deadline)?)
    }
}

/// Resolves a send: a new message goes to its context (or a new session) under its message id; a
/// message of decisions goes on with the pause of the task it names.
pub async fn plan_send(service: &TurnService, user: &UserId, params: SendParams) -> Result<PlannedSend, RpcError> {
    let (task, session, key) = match &params.task {
        None => {
            let session = match params.context {
                Some(session) => session,
                None => SessionId::parse(hex::encode(rand::random::<[u8; 16]>())).expect("hex is a session id"),
            };
            let key = IdempotencyKey::new(&params.message_id, &[]).map_err(RpcError::InvalidParams)?;
            (TaskId::of_key(session.clone(), &key), session, params.message_id)
        }
        Some(task) => {
            let key = decisions_key(service, user, task).await?;
            (task.clone(), task.session.clone(), key)
        }
    };
    let body = TurnBody {
        message: params.text,
        ticket_id: None,
        decisions: params.decisions,
        attachments: Vec::new(),
        skill_versions: Default::default(),
        // A2A has no callback of ours: a caller that does not wait polls the task.
        webhook: None,
    };
    Ok(PlannedSend { task, session, key, body, return_immediately: params.return_immediately })
}

/// The key of the turn that answers `task`'s pause: the one derived from the link that waits. A
/// link that no longer waits because an answer ran is answered again under that answer's key, so
/// the same message replays it (other decisions are refused as a reused key).
async fn decisions_key(service: &TurnService, user: &UserId, task: &TaskId) -> Result<String, RpcError> {
    let chain = chain(service, user, task).await?;
    let Some((last, status)) = chain.last() else { return Err(not_found(task)) };
    if awaits_approval(status) {
        return Ok(last.resume_key());
    }
    match chain.len() {
        1 => Err(RpcError::InvalidParams(format!("task `{task}` does not wait for input"))),
        links => Ok(chain[links - 2].0.resume_key()),
    }
}

/// The links of `task`'s chain that exist, with their status: empty when the task does not exist
/// for this caller.
async fn chain(service: &TurnService, user: &UserId, task: &TaskId) -> Result<Vec<(TaskId, TurnStatus)>, RpcError> {
    let now = OffsetDateTime::now_utc();
    let mut links: Vec<(TaskId, TurnStatus)> = Vec::new();
    let mut next = Some(task.clone());
    while let Some(link) = next.take() {
        let Some(status) = service.turn_status(user, &link.session, &link.turn, now).await.map_err(ApiError::from)?
        else {
            break;
        };
        if awaits_approval(&status) && links.len() + 1 < MAX_CHAIN {
            next = Some(link.resumed());
        }
        links.push((link, status));
    }
    Ok(links)
}

fn not_found(task: &TaskId) -> RpcError {
    RpcError::TaskNotFound(format!("no task `{task}`"))
}

/// `GetTask`: the task as its latest link stands.
pub async fn get_task(
    service: &TurnService,
    user: &UserId,
    task: &TaskId,
    dialect: Dialect,
) -> Result<Value, RpcError> {
    let chain = chain(service, user, task).await?;
    let (_, status) = chain.last().ok_or_else(|| not_found(task))?;
    Ok(task_of_status(task, status, dialect))
}

/// `CancelTask`: a task still waiting in the queue is marked canceled, atomically (only while it
/// is queued), so the queue's worker finds it ended and never runs it; a running or finished task
/// is not cancelable. Canceling a canceled task answers it again.
pub async fn cancel_task(
    service: &TurnService,
    user: &UserId,
    task: &TaskId,
    dialect: Dialect,
) -> Result<Value, RpcError> {
    let chain = chain(service, user, task).await?;
    let (link, status) = chain.last().ok_or_else(|| not_found(task))?;
    let canceled = ApiError::new(409, CANCELED_CODE, "the task was canceled before it ran").stored();
    let not_cancelable = || RpcError::TaskNotCancelable(format!("task `{task}` has started or ended"));
    match status {
        TurnStatus::Queued => {
            let key = IdempotencyKey { key_hash: link.turn.clone(), request_hash: String::new() };
            let now = OffsetDateTime::now_utc();
            let marked =
                service.fail_background(user, &link.session, &key, &canceled, now).await.map_err(ApiError::from)?;
            if !marked {
                // It started (or ended) between the read and the write.
                return Err(not_cancelable());
            }
            tracing::info!(session = %link.session, turn = %link.turn, "background turn canceled");
            Ok(TurnEnd::Failed(&canceled).task(task, dialect))
        }
        TurnStatus::Failed { error } if error["code"] == CANCELED_CODE => {
            Ok(TurnEnd::Failed(error).task(task, dialect))
        }
        _ => Err(not_cancelable()),
    }
}

/// A send with `returnImmediately`: the turn recorded as queued and sent to the turn queue, as
/// `Prefer: respond-async` does; answered with the task, submitted (or as far as it got when the
/// same message was sent before).
pub async fn send_in_background(
    service: &TurnService,
    queue: &dyn TurnQueue,
    user: UserId,
    planned: PlannedSend,
    dialect: Dialect,
) -> Result<Value, RpcError> {
    let task = planned.task.clone();
    let turn = Queued::keyed(user, planned.session, planned.body, planned.key)?;
    match turn.accept(service, queue).await {
        Ok(Acceptance::Queued) => Ok(pending_task(&task, TaskState::Submitted, dialect)),
        Ok(Acceptance::Started(status)) => Ok(task_of_status(&task, &status, dialect)),
        Err(Refusal::KeyReused) => {
            Err(RpcError::InvalidParams("this messageId was already sent with another message".to_owned()))
        }
        Err(Refusal::Failed(error)) => Err(error.into()),
        Err(Refusal::QueueUnavailable) => {
            Err(RpcError::Internal("the task could not be queued; send the message again".to_owned()))
        }
    }
}
