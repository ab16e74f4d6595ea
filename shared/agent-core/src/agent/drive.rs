//! The loop itself: from where a turn starts (a new message, or a paused turn's decisions), call
//! the model, run the calls of its reply, and repeat until it answers, pauses or meets a bound;
//! then the reply that says how it ended. Each request is prepared by `compact` and the budget.

use std::sync::Arc;

use tokio::time::Instant;

use super::approval::{Decision, Decisions};
use super::{calls, compact, results, Ending, Limits, LoopOutcome, Pause, TurnEnv};
use super::{
    MAX_REPLY_BYTES, MAX_TOOL_ARGUMENT_BYTES, MAX_TOOL_CALL_ID_BYTES, MAX_TOOL_NAME_BYTES, MAX_TURN_ARGUMENT_BYTES,
};
use crate::budget::{self, Trim};
use crate::events::{DeltaEvents, TurnObserver};
use crate::files;
use crate::message::{ChatRequest, Message, StablePrefix, StablePrefixHint, ToolCall, Usage};
use crate::model::{ChatModel, FileInput, ModelError};
use crate::prompt::SystemPrompt;

/// Where a loop starts: the conversation (history and the turn's messages so far), where the turn
/// starts in it, how much of it is stored already, the steps made, and decisions to apply first.
pub(super) struct Start<'d> {
    pub conversation: Vec<Message>,
    pub first_new: usize,
    pub stored: usize,
    pub steps: u32,
    pub decisions: Option<&'d Decisions>,
}

pub(super) async fn drive(
    model: &dyn ChatModel,
    env: &mut dyn TurnEnv,
    start: Start<'_>,
    limits: &Limits,
    events: &dyn TurnObserver,
) -> Result<LoopOutcome, ModelError> {
    let Start { mut conversation, first_new, stored, mut steps, decisions } = start;
    let mut usage = Usage::default();
    // What the turn's tool calls have spent, and an abort's reason once one was called.
    let mut spent = calls::Spent::default();
    let mut argument_bytes = 0usize;
    let mut compacted: Option<compact::Compacted> = None;
    let offload_bound = results::offload_bound(limits.input_tokens);
    let mut pause = Pause::default();
    // The history and the user's message: every lent request starts with them unchanged.
    let prefix = Arc::new(StablePrefix::new(first_new + 1));
    // Their tokens, counted at the first lent request and not again.
    let mut prefix_tokens: Option<usize> = None;

    let mut resumed = match decisions {
        Some(decisions) => {
            resume_calls(env, &mut conversation, decisions, steps, offload_bound, &mut spent, events).await
        }
        None => calls::Ran::All,
    };
    usage.add(std::mem::take(&mut spent.usage));

    let ending = loop {
        if let calls::Ran::Paused(waiting) = &mut resumed {
            pause = std::mem::take(waiting);
            break Ending::AwaitingApproval;
        }
        if spent.aborted.is_some() {
            break Ending::Aborted;
        }
        if steps >= limits.max_steps {
            break Ending::StepLimit;
        }
        let call_deadline = limits.deadline.map(|deadline| deadline.checked_sub(limits.reserve).unwrap_or(deadline));
        if call_deadline.is_some_and(|at| at <= Instant::now()) {
            break Ending::Deadline;
        }
        let tools = env.tools();
        let tools_tokens = env.tools_tokens();
        let how = |trim_system| Prepare { step: steps, tools_tokens, limit: limits.input_tokens, trim_system };
        // The system prompt is the prefix a provider caches: it is left whole while the turn's own
        // steps can make room.
        // Most requests are the conversation as it stands: lent to the request, not copied.
        let lent = match compacted {
            None => lend(&*env, &mut conversation, how(false), (prefix.len(), &mut prefix_tokens)),
            Some(_) => None,
        };
        let is_lent = lent.is_some();
        let mut lent_tokens = None;
        let (mut system, mut messages, mut trims, mut transient) = match lent {
            Some(Lent { system, messages, transient, tokens }) => {
                lent_tokens = Some(tokens);
                (system, messages, Vec::new(), transient)
            }
            None => prepare(&*env, model.file_input(), &conversation, first_new, compacted.as_ref(), how(false)),
        };
        // The turn itself would be cut: condense its older steps first, as long as there are some
        // and what is never cut (the prompt, the request, the tools) leaves room for them.
        let floor = || budget::estimate_request(&system, std::slice::from_ref(&conversation[first_new]), tools_tokens);
        if budget::cuts_the_turn(&trims) && floor() < limits.input_tokens {
            // The calls that returned skill instructions, asked of the environment before the call
            // to the model, since the environment is not shared across it.
            let skill_calls: std::collections::HashSet<&str> = conversation[first_new..]
                .iter()
                .flat_map(|message| match message {
                    Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
                    _ => &[],
                })
                .filter(|call| env.reads_skill_text(call))
                .map(|call| call.id.as_str())
                .collect();
            let skill_text = |call: &ToolCall| skill_calls.contains(call.id.as_str());
            let condensed =
                compact::compact(model, &conversation, first_new, compacted.as_ref(), limits, &skill_text, &mut usage)
                    .await;
            if condensed.is_some() {
                compacted = condensed;
                (system, messages, trims, transient) =
                    prepare(&*env, model.file_input(), &conversation, first_new, compacted.as_ref(), how(false));
            }
        }
        // Still too large: the optional parts of the system prompt go before the turn is cut.
        if budget::cuts_the_turn(&trims) {
            (system, messages, trims, transient) =
                prepare(&*env, model.file_input(), &conversation, first_new, compacted.as_ref(), how(true));
        }
        let mut shrunk = 0;
        let mut full = None;
        for trim in trims {
            log_trim(&trim, steps);
            match trim {
                Trim::StillOver { tokens, limit } => full = Some((tokens, limit)),
                Trim::ShrunkListing { .. } => shrunk += 1,
                _ => {}
            }
        }
        // A provider refuses a request over its context, so none is sent: before the first call
        // the request itself is too large; after it, the turn ends with what it did.
        match full {
            Some((tokens, limit)) if steps == 0 => return Err(ModelError::ContextTooLarge { tokens, limit }),
            Some(_) => break Ending::ContextFull,
            None => {}
        }
        let state = env.prompt_state();
        let cache_key = env.cache_scope().map(|scope| cache_key(&scope, state.as_ref()));
        if let Some(state) = state {
            let tokens = lent_tokens.unwrap_or_else(|| budget::estimate_request(&system, &messages, tools_tokens));
            events.event(state.event(steps + 1, shrunk, &tools, tokens));
        }
        let shown: Vec<&crate::message::FileRef> = messages.iter().flat_map(Message::files).collect();
        let files = if shown.is_empty() { Default::default() } else { env.file_bytes(&shown).await };
        let request = ChatRequest {
            system: system.render(),
            system_tail: system.render_tail(),
            cache_key,
            transient_messages: transient,
            messages,
            tools,
            files,
            stable_prefix: StablePrefixHint(is_lent.then(|| prefix.clone())),
            ..ChatRequest::default()
        };
        let deltas = DeltaEvents::new(events, MAX_REPLY_BYTES);
        let call = async {
            if events.wants_deltas() {
                model.complete_streaming(&request, &deltas).await
            } else {
                model.complete(&request).await
            }
        };
        let answered = match call_deadline {
            Some(at) => tokio::time::timeout_at(at, call).await.ok(),
            None => Some(call.await),
        };
        if is_lent {
            let mut messages = request.messages;
            messages.truncate(messages.len() - transient);
            conversation = messages;
        }
        let response = match answered {
            Some(response) => response?,
            None => break Ending::Deadline,
        };
        steps += 1;
        usage.add(response.usage);
        let mut content = response.content;
        results::cut_text(&mut content, MAX_REPLY_BYTES, "[reply cut: it was longer than the limit of one reply]");
        let mut calls = response.tool_calls;
        // What the model sent is bounded before it is run or stored.
        let oversized: Vec<Option<usize>> = calls
            .iter_mut()
            .enumerate()
            .map(|(index, call)| {
                if call.id.is_empty() || call.id.len() > MAX_TOOL_CALL_ID_BYTES {
                    call.id = format!("call_{steps}_{index}");
                }
                results::cut_text(&mut call.name, MAX_TOOL_NAME_BYTES, "");
                let size = budget::json_len(&call.arguments);
                let over = size > MAX_TOOL_ARGUMENT_BYTES || argument_bytes + size > MAX_TURN_ARGUMENT_BYTES;
                if over {
                    call.arguments = serde_json::json!({ "_omitted_bytes": size });
                } else {
                    argument_bytes += size;
                }
                over.then_some(size)
            })
            .collect();
        conversation.push(Message::Assistant { content, tool_calls: calls.clone() });
        if calls.is_empty() {
            break Ending::Answered;
        }
        let indices: Vec<usize> = (0..calls.len()).collect();
        let reply = calls::Reply {
            calls: &calls,
            indices: &indices,
            decisions: None,
            oversized: &oversized,
            step: steps,
            offload_bound,
        };
        let ran = calls::run_reply(env, reply, &mut spent, events, &mut conversation).await;
        usage.add(std::mem::take(&mut spent.usage));
        if let calls::Ran::Paused(waiting) = ran {
            pause = waiting;
            break Ending::AwaitingApproval;
        }
        if spent.aborted.is_some() {
            break Ending::Aborted;
        }
    };

    let reply = match ending {
        // The loop itself only ends answered, at a bound, or aborted; the planner's endings are its own.
        Ending::Answered
        | Ending::PlanContinues
        | Ending::AwaitingChoice
        | Ending::AwaitingClarification
        | Ending::PlanFailed => match conversation.last() {
            Some(Message::Assistant { content, .. }) => content.clone(),
            _ => String::new(),
        },
        // What the model said with the calls that wait.
        Ending::AwaitingApproval => conversation
            .iter()
            .rev()
            .find_map(|message| match message {
                Message::Assistant { content, .. } => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_default(),
        Ending::StepLimit => {
            let notice = format!(
                "I stopped after {steps} steps, the limit for one turn, before finishing. \
                 Send another message and I will continue."
            );
            conversation.push(Message::assistant(notice.clone()));
            notice
        }
        Ending::Aborted => {
            let reason = spent.aborted.take().unwrap_or_default();
            conversation.push(Message::assistant(reason.clone()));
            reason
        }
        Ending::Deadline => {
            let notice = "I ran out of time for this turn before finishing. \
                          Send another message and I will continue."
                .to_owned();
            conversation.push(Message::assistant(notice.clone()));
            notice
        }
        Ending::ContextFull => {
            let notice = format!(
                "I stopped after {steps} steps, before finishing: this turn's work no longer fits in the model's \
                 context, even with its earlier steps condensed. What I did is saved, files included. Send another \
                 message and I will continue from there."
            );
            conversation.push(Message::assistant(notice.clone()));
            notice
        }
    };
    let messages = conversation.split_off(stored.max(first_new));
    Ok(LoopOutcome { reply, messages, steps, usage, ending, pause })
}

/// Runs the calls of a paused turn's last reply that have no result yet, as `decisions` say (a
/// `task` whose subagent paused goes on with it). The reply's message in `conversation` takes the
/// edited arguments, so the model sees what ran.
async fn resume_calls(
    env: &mut dyn TurnEnv,
    conversation: &mut Vec<Message>,
    decisions: &Decisions,
    step: u32,
    offload_bound: usize,
    spent: &mut calls::Spent,
    events: &dyn TurnObserver,
) -> calls::Ran {
    let Some(at) = conversation.iter().rposition(|message| matches!(message, Message::Assistant { .. })) else {
        return calls::Ran::All;
    };
    let answered: std::collections::HashSet<String> = conversation[at + 1..]
        .iter()
        .filter_map(|message| match message {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.clone()),
            _ => None,
        })
        .collect();
    let Message::Assistant { tool_calls, .. } = &mut conversation[at] else { return calls::Ran::All };
    for call in tool_calls.iter_mut() {
        if let Some(Decision::Edit { arguments }) = decisions.get(&call.id) {
            call.arguments = arguments.clone();
        }
    }
    // A batch of subagents can leave a call without a result between two that have one.
    let (indices, remaining): (Vec<usize>, Vec<ToolCall>) = tool_calls
        .iter()
        .enumerate()
        .filter(|(_, call)| !answered.contains(&call.id))
        .map(|(index, call)| (index, call.clone()))
        .unzip();
    if remaining.is_empty() {
        return calls::Ran::All;
    }
    let oversized = vec![None; remaining.len()];
    let reply = calls::Reply {
        calls: &remaining,
        indices: &indices,
        decisions: Some(decisions),
        oversized: &oversized,
        step,
        offload_bound,
    };
    calls::run_reply(env, reply, spent, events, conversation).await
}

/// A request lent the conversation: its system prompt, its messages, how many of the last are for
/// this request only (the reminder), and its estimated tokens.
struct Lent {
    system: SystemPrompt,
    messages: Vec<Message>,
    transient: usize,
    tokens: usize,
}

/// The request's system prompt and messages when they are the conversation as it stands (nothing
/// condensed, no file shown, within the budget with the reminder): the conversation is moved into
/// the request, with the reminder after it, and the caller takes it back after the call, so that no
/// model call copies the history. `None` leaves the conversation as it was, for [`prepare`].
/// `prefix` is the turn's stable prefix's length and its tokens once counted: the history's
/// messages are estimated at the turn's first lent request only.
fn lend(
    env: &dyn TurnEnv,
    conversation: &mut Vec<Message>,
    how: Prepare,
    (prefix_len, prefix_tokens): (usize, &mut Option<usize>),
) -> Option<Lent> {
    if conversation.iter().any(|message| !message.files().is_empty()) {
        return None;
    }
    let system = env.system_prompt();
    let reminder = env.reminder(how.step);
    let transient = usize::from(reminder.is_some());
    let prefix_len = prefix_len.min(conversation.len());
    let stable = *prefix_tokens
        .get_or_insert_with(|| conversation[..prefix_len].iter().map(budget::estimate_message).sum::<usize>());
    let mut messages = std::mem::take(conversation);
    messages.extend(reminder.map(Message::user));
    // What `budget::estimate_request` would count, and what `budget::fit` would find first: within
    // the limit, it trims nothing.
    let tokens = budget::estimate_system(&system)
        + stable
        + messages[prefix_len..].iter().map(budget::estimate_message).sum::<usize>()
        + how.tools_tokens;
    if tokens <= how.limit {
        return Some(Lent { system, messages, transient, tokens });
    }
    messages.truncate(messages.len() - transient);
    *conversation = messages;
    None
}

/// How [`prepare`] fits a request: for model call `step` (from 0), with tools of `tools_tokens`,
/// under `limit`, trimming the system prompt's optional parts or not.
struct Prepare {
    step: u32,
    tools_tokens: usize,
    limit: usize,
    trim_system: bool,
}

/// The system prompt, the messages and the trims of the request for one model call: the
/// conversation as [`compact::view`] gives it, the reminder, and [`budget::fit`]; and how many of
/// the last messages are for this request only (the reminder).
fn prepare(
    env: &dyn TurnEnv,
    input: FileInput,
    conversation: &[Message],
    first_new: usize,
    compacted: Option<&compact::Compacted>,
    how: Prepare,
) -> (SystemPrompt, Vec<Message>, Vec<Trim>, usize) {
    let Prepare { step, tools_tokens, limit, trim_system } = how;
    let mut system = env.system_prompt();
    let mut messages = compact::view(conversation, first_new, compacted);
    // What the request shows is decided first, by the model's own rule: the budget then counts
    // the files it keeps and the notes of those it leaves out.
    if messages.iter().any(|message| !message.files().is_empty()) {
        let fitted = files::fit(&mut messages, input, limit / files::FILE_SHARE_OF_CONTEXT);
        if fitted.left_out + fitted.unseeable > 0 {
            tracing::info!(step, ?fitted, "files: older or unseeable files sent as notes");
        }
    }
    let reminder = env.reminder(step);
    let transient = usize::from(reminder.is_some());
    if let Some(reminder) = reminder {
        messages.push(Message::user(reminder));
    }
    let trims = budget::fit(&mut system, &mut messages, first_new, tools_tokens, limit, trim_system);
    (system, messages, trims, transient)
}

/// The prompt-cache key of a request: its tenant's scope and its prompt state, hashed, so requests
/// that share a prefix are routed together and a tenant's never share another's key.
fn cache_key(scope: &str, state: Option<&super::PromptState>) -> String {
    use sha2::Digest;
    let state = match state {
        Some(super::PromptState::Skill { path, forced }) => format!("skill:{path}:{forced}"),
        Some(super::PromptState::Listing { .. }) | None => "listing".to_owned(),
    };
    let digest = sha2::Sha256::digest(format!("{scope}\n{state}").as_bytes());
    hex::encode(&digest[..16])
}

fn log_trim(trim: &Trim, step: u32) {
    match trim {
        Trim::CutArguments { calls, tokens } => {
            tracing::info!(step, calls, tokens, "context budget: cut the large arguments of tool calls")
        }
        Trim::DroppedMessages { count, tokens } => {
            tracing::info!(step, count, tokens, "context budget: dropped the oldest messages of earlier turns")
        }
        Trim::DroppedSection { tokens } => {
            tracing::info!(step, tokens, "context budget: dropped a non-skill section of the system prompt")
        }
        Trim::ShrunkListing { tokens } => {
            tracing::warn!(step, tokens, "context budget: shrank the skill listing to its next smaller tier")
        }
        Trim::CutNewestArguments { tokens } => {
            tracing::info!(step, tokens, "context budget: cut the large arguments of a call of the newest reply")
        }
        Trim::TruncatedMessage { index, tokens } => {
            tracing::info!(step, index, tokens, "context budget: truncated the largest message")
        }
        Trim::StillOver { tokens, limit } => {
            tracing::warn!(step, tokens, limit, "context budget: still over the limit with nothing left to trim")
        }
    }
}
