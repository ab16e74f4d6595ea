//! One model reply's tool calls: each is refused, run on its own in order, or run at once with the
//! reply's other concurrent calls (subagents). Every call gets a result, so the stored history stays
//! well-formed whatever was refused. A call that needs a person's approval stops the reply
//! before it (and before the reply's concurrent batch): the calls from there on wait.

use tracing::Instrument;

use super::approval::{rejection_result, Decision, Decisions, EDITED_NOTE};
use super::{results, Pause, ToolOutput, TurnEnv, WaitingCall, MAX_TOOL_ARGUMENT_BYTES, MAX_TOOL_CALLS_PER_REPLY};
use super::{MAX_TURN_ARGUMENT_BYTES, MAX_TURN_TOOL_RESULT_BYTES};
use crate::events::{self, TurnEvent, TurnObserver};
use crate::message::{Message, ToolCall, Usage};
use crate::telemetry;

/// The calls of one reply and what the loop already knows of them.
pub(super) struct Reply<'r> {
    /// The calls to run: the reply's, or those still without a result when a paused turn resumes.
    pub calls: &'r [ToolCall],
    /// For each call, its index in the reply.
    pub indices: &'r [usize],
    /// A person's decisions on calls that waited for approval, when a paused turn resumes.
    pub decisions: Option<&'r Decisions>,
    /// For each call, its arguments' size when they were over the bounds (and replaced).
    pub oversized: &'r [Option<usize>],
    /// The model call (from 1) that made the reply.
    pub step: u32,
    /// Results longer than this are saved to a file ([`results::offload_bound`]).
    pub offload_bound: usize,
}

/// What the turn's tool calls have spent so far.
#[derive(Default)]
pub(super) struct Spent {
    /// Bytes of tool results kept.
    pub result_bytes: usize,
    /// The reason an `abort` gave, once one was called.
    pub aborted: Option<String>,
    /// Model tokens the calls spent themselves (subagents), not yet added to the turn's usage.
    pub usage: Usage,
}

impl Spent {
    /// Why call `index` of the reply is not run, if it is not: after an abort, past the per-reply
    /// cap, with oversized arguments, or once the turn's tool-result budget is spent.
    fn refusal(&self, index: usize, oversized: Option<usize>) -> Option<String> {
        if self.aborted.is_some() {
            Some("Not run: the turn was aborted.".to_owned())
        } else if index >= MAX_TOOL_CALLS_PER_REPLY {
            Some(format!(
                "Error: at most {MAX_TOOL_CALLS_PER_REPLY} tool calls are run per reply; this call was not run. \
                 Call it again in your next reply if you still need it."
            ))
        } else if let Some(size) = oversized {
            Some(format!(
                "Error: the arguments of this call are {size} bytes, over the limit of {MAX_TOOL_ARGUMENT_BYTES} \
                 bytes a call and {MAX_TURN_ARGUMENT_BYTES} bytes a turn; it was not run. Split the work into \
                 smaller calls, or continue in the next turn."
            ))
        } else if self.result_bytes >= MAX_TURN_TOOL_RESULT_BYTES {
            Some(format!(
                "Error: this turn's tool results reached {} KiB, the limit of one turn; this call was \
                 not run. Answer with what you have; the user can ask you to continue.",
                MAX_TURN_TOOL_RESULT_BYTES / 1024
            ))
        } else {
            None
        }
    }
}

/// How far a reply's calls got.
pub(super) enum Ran {
    /// Every call has its result.
    All,
    /// Some calls wait for a person's decision: the calls from the first one that needs approval
    /// on, or a `task` whose subagent stopped for one (and the reply's calls after it that run on
    /// their own). These have no result yet.
    Paused(Pause),
}

/// Runs the calls of `reply` and appends their results to `conversation`, in the reply's order.
/// Every call that runs is announced first (the model asked for them together); the calls that
/// run concurrently run as one batch where the first of them stands. When a call needs approval,
/// the calls before it (and before the batch) run and the rest wait.
pub(super) async fn run_reply(
    env: &mut dyn TurnEnv,
    reply: Reply<'_>,
    spent: &mut Spent,
    events: &dyn TurnObserver,
    conversation: &mut Vec<Message>,
) -> Ran {
    let decision = |call: &ToolCall| reply.decisions.and_then(|decisions| decisions.get(&call.id));
    // A resumed reply's calls already carry a person's edited arguments (see `resume_calls`).
    let calls = reply.calls;
    let concurrent: Vec<bool> = calls
        .iter()
        .enumerate()
        .map(|(index, call)| {
            reply.indices[index] < MAX_TOOL_CALLS_PER_REPLY
                && reply.oversized[index].is_none()
                && env.runs_concurrently(call)
        })
        .collect();
    let gated: Vec<usize> = calls
        .iter()
        .enumerate()
        .filter(|(index, call)| {
            decision(call).is_none()
                && spent.refusal(reply.indices[*index], reply.oversized[*index]).is_none()
                && env.needs_approval(call)
        })
        .map(|(index, _)| index)
        .collect();
    // Nothing from the first call that waits runs, nor the concurrent batch when it stands later.
    let end = match gated.first() {
        Some(&first) => first.min(concurrent.iter().position(|c| *c).unwrap_or(first)),
        None => calls.len(),
    };
    for call in &calls[..end] {
        tracing::info!(tool = %call.name, step = reply.step, "tool call");
        events.event(TurnEvent::ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            summary: events::summarise_arguments(&call.arguments),
        });
    }
    // The batch's outputs by call index, once it has run.
    let mut batch: Option<Vec<Option<(ToolOutput, &'static str)>>> = None;
    let mut pause = Pause::default();

    for (index, call) in calls[..end].iter().enumerate() {
        // Once a subagent has paused, a call after it that runs on its own waits with it (the
        // model asked for it after the task's answer); the batch's later calls have run, and
        // keep their results.
        if !pause.waiting.is_empty() && !concurrent[index] {
            continue;
        }
        // Each call is measured in an `execute_tool` span, refused or run.
        let span = telemetry::tool_span(&call.name, &call.id);
        let (mut output, outcome) = if let Some(Decision::Reject { message }) = decision(call) {
            (ToolOutput::from(rejection_result(message.as_deref())), telemetry::outcome::REFUSED)
        } else if concurrent[index] {
            if batch.is_none() {
                batch = Some(run_batch(env, &reply, &concurrent, spent, events).await);
            }
            match batch.as_mut().and_then(|outputs| outputs[index].take()) {
                Some(ran) => ran,
                None => (ToolOutput::from("Error: this call was not run.".to_owned()), telemetry::outcome::ERROR),
            }
        } else {
            match spent.refusal(reply.indices[index], reply.oversized[index]) {
                Some(text) => (ToolOutput::from(text), telemetry::outcome::REFUSED),
                None => {
                    let output = env.call_tool(call).instrument(span.clone()).await;
                    let outcome = outcome_of(&output);
                    (output, outcome)
                }
            }
        };
        if let Some(paused) = output.paused.take() {
            // Its subagent waits for a decision; the call gets its result when it is done.
            span.record(telemetry::field::OUTCOME, telemetry::outcome::PAUSED);
            spent.usage.add(output.usage);
            pause.waiting.extend(paused.waiting);
            pause.subagents.extend(paused.subagents);
            continue;
        }
        if matches!(decision(call), Some(Decision::Edit { .. })) {
            output.content.insert_str(0, EDITED_NOTE);
        }
        span.record(telemetry::field::OUTCOME, outcome);
        drop(span);
        record(env, call, output, spent, reply.offload_bound, events, conversation).await;
    }
    if end == calls.len() && pause.waiting.is_empty() {
        return Ran::All;
    }
    let own: Vec<WaitingCall> = gated
        .iter()
        .filter(|index| **index >= end)
        .map(|index| WaitingCall { call: calls[*index].clone(), subagent: None })
        .collect();
    // The turn's own calls first, then its subagents', as the reply ordered their tasks.
    pause.waiting.splice(0..0, own);
    for waiting in &pause.waiting {
        tracing::info!(tool = %waiting.call.name, subagent = ?waiting.subagent, step = reply.step, "tool call waits for approval");
    }
    events.event(TurnEvent::ApprovalRequested { calls: pause.waiting.iter().map(WaitingCall::shown).collect() });
    Ran::Paused(pause)
}

/// Runs the reply's concurrent calls as one batch: those refused at its start get their refusal,
/// the others run together. Outputs by call index.
async fn run_batch(
    env: &mut dyn TurnEnv,
    reply: &Reply<'_>,
    concurrent: &[bool],
    spent: &Spent,
    events: &dyn TurnObserver,
) -> Vec<Option<(ToolOutput, &'static str)>> {
    let mut outputs: Vec<Option<(ToolOutput, &'static str)>> = reply.calls.iter().map(|_| None).collect();
    let mut run = Vec::new();
    for (index, call) in reply.calls.iter().enumerate().filter(|(index, _)| concurrent[*index]) {
        let rejected = reply.decisions.and_then(|decisions| decisions.get(&call.id));
        if let Some(Decision::Reject { .. }) = rejected {
            // Its rejection is given where it stands in the reply.
            continue;
        }
        match spent.refusal(reply.indices[index], reply.oversized[index]) {
            Some(text) => outputs[index] = Some((ToolOutput::from(text), telemetry::outcome::REFUSED)),
            None => run.push((index, call)),
        }
    }
    let calls: Vec<&ToolCall> = run.iter().map(|(_, call)| *call).collect();
    let results = env.call_concurrently(&calls, events).await;
    for ((index, _), output) in run.into_iter().zip(results) {
        let outcome = outcome_of(&output);
        outputs[index] = Some((output, outcome));
    }
    outputs
}

/// The telemetry outcome of a call that was run or refused by its environment.
fn outcome_of(output: &ToolOutput) -> &'static str {
    if output.refused {
        telemetry::outcome::REFUSED
    } else if events::is_error_result(&output.content) {
        telemetry::outcome::ERROR
    } else {
        telemetry::outcome::OK
    }
}

/// Places a call's output in the conversation (saved to a file when large), reports it, and
/// counts what it spent.
async fn record(
    env: &mut dyn TurnEnv,
    call: &ToolCall,
    output: ToolOutput,
    spent: &mut Spent,
    offload_bound: usize,
    events: &dyn TurnObserver,
    conversation: &mut Vec<Message>,
) {
    let ok = !events::is_error_result(&output.content);
    let content = if env.reads_skill_text(call) {
        let mut content = output.content;
        results::truncate(&mut content);
        content
    } else {
        results::place(env, call, output.content, offload_bound).await
    };
    spent.result_bytes += content.len();
    spent.usage.add(output.usage);
    let (shown, truncated) = events::event_content(&content);
    events.event(TurnEvent::ToolResult {
        id: call.id.clone(),
        name: call.name.clone(),
        ok,
        bytes: content.len(),
        summary: events::summarise_result(&content),
        content: shown,
        truncated,
    });
    if let Some(skill) = output.loaded_skill {
        events.event(TurnEvent::SkillLoaded { skill, forced: false, version: output.loaded_version });
    }
    for (path, size) in env.take_written_files() {
        events.event(TurnEvent::FileWritten { path, size });
    }
    for file in &output.files {
        events.event(TurnEvent::FileShown {
            path: file.path.clone(),
            media_type: file.media_type.mime().to_owned(),
            size: file.size,
            sha256: file.sha256.clone(),
            attached: false,
        });
    }
    conversation.push(Message::Tool {
        tool_call_id: call.id.clone(),
        name: call.name.clone(),
        content,
        files: output.files,
    });
    if spent.aborted.is_none() {
        spent.aborted = output.abort;
    }
}
