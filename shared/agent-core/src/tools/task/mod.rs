//! `task` (deepagents' name and arguments): a subagent runs its own bounded loop in a fresh context
//! (its instructions and the task, not the parent's history) with the tools its type allows, and its
//! final message becomes the call's result. The reply's `task` calls run at the same time; each
//! subagent shares the turn's filesystem, sandbox, deadline and token budget. `prompt` holds what a
//! subagent is told; `pause` how a subagent stopped for approval is kept and taken back.

mod pause;
mod prompt;

pub use crate::skills::agents::BUILT_IN_AGENT as GENERAL_PURPOSE;
pub use pause::MAX_PAUSED_SUBAGENTS_BYTES;
pub use prompt::{agent_prompt, SUBAGENT_NOTE};

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use tracing::Instrument;

use super::{CommandRules, SkillsEnv};
use crate::agent::{self, Decisions, Ending, Limits, ToolOutput};
use crate::events::{self, TurnEvent, TurnObserver};
use crate::message::{Message, ToolCall, ToolSpec};
use crate::model::ChatModel;
use crate::skills::{AgentDoc, AgentEntry};
use crate::store::PausedSubagent;
use crate::telemetry;
use crate::tool_names::TASK;

/// Longest task description accepted, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 32 * 1024;

/// The bounds of subagents (`SUBAGENT_MAX_DEPTH`, `SUBAGENTS_PER_TURN`, `SUBAGENT_MAX_STEPS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubagentConfig {
    /// How many levels of subagents a turn may have: the turn's own agent's subagents are level 1,
    /// theirs level 2, and an agent at this level is not offered `task`. 0 offers no `task` at all.
    pub max_depth: u32,
    /// Subagents one turn may start, at every level together.
    pub per_turn: u32,
    /// Model calls one subagent may make.
    pub max_steps: u32,
}

impl Default for SubagentConfig {
    fn default() -> Self {
        Self { max_depth: 2, per_turn: 8, max_steps: 15 }
    }
}

/// How a turn runs its subagents: the turn's model (metered, so subagents spend the tenant's budget),
/// the turn's bounds (its deadline, which subagents share), and the subagents' own.
pub struct Delegation<'a> {
    pub model: &'a dyn ChatModel,
    pub limits: Limits,
    pub config: SubagentConfig,
    /// Subagents started so far this turn; also numbers their ids.
    started: AtomicU32,
    /// What a paused turn resumes: its subagents that wait, and the decisions on every level.
    resume: pause::Resume,
}

impl<'a> Delegation<'a> {
    pub fn new(model: &'a dyn ChatModel, limits: Limits, config: SubagentConfig) -> Self {
        Self { model, limits, config, started: AtomicU32::new(0), resume: pause::Resume::default() }
    }

    /// A paused turn's delegation: `subagents` go on from where they stopped when the `task`
    /// calls they answer run again, with `decisions`; `started` subagents count against the bound.
    pub fn resuming(mut self, subagents: Vec<PausedSubagent>, started: u32, decisions: Decisions) -> Self {
        self.started = AtomicU32::new(started);
        self.resume = pause::Resume::new(subagents, decisions);
        self
    }

    /// Subagents the turn has started, resumed ones included, up to its bound.
    pub fn started(&self) -> u32 {
        self.started.load(Ordering::Relaxed).min(self.config.per_turn)
    }

    /// Paused subagents no `task` call took back this time; they keep waiting.
    pub fn unresumed(&self) -> Vec<PausedSubagent> {
        self.resume.rest()
    }

    /// Whether the `task` call `call_id` of agent `parent` has a paused subagent to go on with.
    pub(crate) fn holds_paused(&self, parent: Option<&str>, call_id: &str) -> bool {
        self.resume.holds(parent, call_id)
    }

    /// The next subagent's number, or `None` once the turn has started as many as it may.
    fn start(&self) -> Option<u32> {
        let number = self.started.fetch_add(1, Ordering::Relaxed) + 1;
        (number <= self.config.per_turn).then_some(number)
    }
}

/// Which agent of the turn an environment runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Role {
    /// 0 for the turn's own agent; a subagent is one level deeper than the agent that started it.
    pub depth: u32,
    /// The subagent's id within the turn (`sa-1`...); `None` for the turn's own agent.
    pub id: Option<String>,
    /// A tenant agent's file; `None` for the turn's own agent and general-purpose ones.
    pub agent: Option<Arc<AgentDoc>>,
    /// The tools this agent may have, when its type names them (always within its parent's).
    pub allowed: Option<BTreeSet<String>>,
    /// A forced skill's command rules and its name, kept by a subagent that does not run the
    /// forced skill's prompt itself.
    pub commands: Option<(CommandRules, String)>,
}

impl Role {
    pub fn main() -> Self {
        Self::default()
    }
}

/// `task`'s spec: the types the model may start (the built-in one and the tenant's `agents`), with
/// what each is for.
pub fn task_spec(agents: &[AgentEntry]) -> ToolSpec {
    let mut types = String::new();
    for agent in agents {
        types.push_str(&format!("\n- {}: {}", agent.name, agent.description.replace('\n', " ")));
    }
    ToolSpec {
        name: TASK.to_owned(),
        description: format!(
            "Hand a self-contained piece of work to a subagent that works in a fresh context: it sees only \
             `description`, not this conversation, and its final message comes back as this call's result. Use it \
             for independent work of many steps (researching, reading many files, drafting a document), so this \
             conversation keeps only the answer; several task calls in one reply run at the same time. Write \
             `description` as a complete brief: the goal, the files to use, and what the answer must contain. \
             Files under /workspace are shared with subagents.\n\nAgent types (subagent_type):\n- {GENERAL_PURPOSE}: \
             has the same tools as you, skills included.{types}"
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "The task, as a complete brief for the subagent."},
                "subagent_type": {"type": "string", "description": format!("The agent type to use, e.g. \"{GENERAL_PURPOSE}\".")}
            },
            "required": ["description", "subagent_type"],
            "additionalProperties": false
        }),
    }
}

/// A `task` call's arguments, checked.
struct TaskArguments {
    description: String,
    agent_type: String,
}

fn parse_arguments(arguments: &Value) -> Result<TaskArguments, String> {
    let description = arguments
        .get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .ok_or("Error: task needs `description`, the task for the subagent, as text")?;
    if description.len() > MAX_DESCRIPTION_BYTES {
        return Err(format!(
            "Error: `description` is longer than {MAX_DESCRIPTION_BYTES} bytes; brief the subagent in fewer words"
        ));
    }
    let agent_type = match arguments.get("subagent_type") {
        None | Some(Value::Null) => GENERAL_PURPOSE,
        Some(Value::String(name)) => name.trim(),
        Some(_) => return Err("Error: `subagent_type` must be the name of an agent type, as text".to_owned()),
    };
    Ok(TaskArguments { description: description.to_owned(), agent_type: agent_type.to_owned() })
}

/// Runs `calls` (all `task`) at the same time and returns their results in order; a call that is
/// not offered, malformed, of an unknown type, or past the turn's number of subagents gets an error
/// result and starts nothing.
pub(crate) async fn run_tasks(
    parent: &mut SkillsEnv<'_>,
    calls: &[&ToolCall],
    events: &dyn TurnObserver,
) -> Vec<ToolOutput> {
    let mut outputs: Vec<Option<ToolOutput>> = calls.iter().map(|_| None).collect();
    let mut children = Vec::new();
    for (index, call) in calls.iter().enumerate() {
        if let Some(refused) = parent.refuse_unoffered(call) {
            outputs[index] = Some(refused);
            continue;
        }
        match prepare_child(parent, call).await {
            Ok(child) => children.push((index, child)),
            Err(message) => outputs[index] = Some(ToolOutput::from(message)),
        }
    }
    let shared = parent.shared.clone();
    let Some(delegation) = shared.delegation.as_ref() else {
        return outputs.into_iter().map(Option::unwrap_or_default).collect();
    };
    let runs = children.into_iter().map(|(index, child)| async move {
        let ran = run_child(delegation, child, events).await;
        (index, ran)
    });
    for (index, (output, refused)) in futures::future::join_all(runs).await {
        outputs[index] = Some(output);
        parent.refused_by_subagents += refused;
    }
    outputs.into_iter().map(Option::unwrap_or_default).collect()
}

/// A subagent ready to run: its environment, its task, and what its events say of it.
struct Child<'a> {
    env: SkillsEnv<'a>,
    id: String,
    /// The id of the subagent that started it; `None` for the turn's own agent.
    parent: Option<String>,
    call_id: String,
    agent_type: String,
    description: String,
    /// Where it stopped for approval in the turn's earlier request, when it goes on from there.
    resumed: Option<PausedSubagent>,
}

async fn prepare_child<'a>(parent: &SkillsEnv<'a>, call: &ToolCall) -> Result<Child<'a>, String> {
    let arguments = parse_arguments(&call.arguments)?;
    let delegation = parent.shared.delegation.as_ref().ok_or("Error: this turn cannot start subagents")?;
    // What a subagent may use is what its parent was offered, less what its type leaves out.
    let offered: BTreeSet<String> = parent.offered_names().into_iter().collect();
    let (agent, allowed) = match arguments.agent_type.as_str() {
        GENERAL_PURPOSE => (None, offered),
        name => {
            let doc = tenant_agent(parent, name).await?;
            let allowed = match &doc.entry.tools {
                Some(tools) => tools.iter().filter(|tool| offered.contains(*tool)).cloned().collect(),
                None => offered,
            };
            (Some(doc), allowed)
        }
    };
    // A subagent that paused goes on as itself: same id, no new start counted.
    let resumed = delegation.resume.take(parent.role.id.as_deref(), &call.id);
    let id = match &resumed {
        Some(paused) => paused.id.clone(),
        None => match delegation.start() {
            Some(number) => format!("sa-{number}"),
            None => {
                return Err(format!(
                    "Error: this turn has started {} subagents, the most one turn may; this task was not started. \
                     Do the work yourself, or tell the user what is left.",
                    delegation.config.per_turn
                ))
            }
        },
    };
    let role = Role {
        depth: parent.role.depth + 1,
        id: Some(id.clone()),
        agent,
        allowed: Some(allowed),
        commands: parent.command_rules().map(|(rules, skill)| (rules.clone(), skill.to_owned())),
    };
    let mut env = SkillsEnv::with_role(parent.shared.clone(), role, Vec::new());
    // A general-purpose subagent of a forced skill works inside that skill, as its parent does.
    if env.role.agent.is_none() {
        env.set_forced(parent.forced.clone());
        env.current_skill = parent.current_skill.clone();
    }
    for skill in resumed.iter().flat_map(|paused| &paused.loaded_skills) {
        if let Err(err) = env.load_skill(&skill.to_string()).await {
            tracing::warn!(subagent = %id, skill = %skill, error = %err, "a paused subagent's skill could not be loaded again");
        }
    }
    Ok(Child {
        id,
        parent: parent.role.id.clone(),
        env,
        call_id: call.id.clone(),
        agent_type: arguments.agent_type,
        description: arguments.description,
        resumed,
    })
}

/// The tenant's agent `name`, read from its file (cached by ETag), or the error the model is told.
async fn tenant_agent(parent: &SkillsEnv<'_>, name: &str) -> Result<Arc<AgentDoc>, String> {
    let skills = &parent.shared.skills;
    let unknown = || {
        let mut types = vec![GENERAL_PURPOSE.to_owned()];
        types.extend(skills.catalog.agents().iter().map(|agent| agent.name.clone()));
        format!(
            "Error: there is no agent type `{}`. Agent types: {}.",
            events::summarise_result(name),
            types.join(", ")
        )
    };
    let entry = skills.catalog.agent(name).ok_or_else(unknown)?;
    match skills.library.agent_doc(skills.objects, skills.user, entry).await {
        Ok(Some(doc)) => {
            if let Some(model) = doc.entry.model.as_deref().filter(|model| *model != "inherit") {
                tracing::info!(
                    agent = name,
                    model,
                    "the agent names a model of its own; subagents use the turn's model"
                );
            }
            Ok(doc)
        }
        Ok(None) => Err(unknown()),
        Err(err) => {
            tracing::warn!(agent = name, error = %err, "could not read an agent's file");
            Err("Error: the agent's file could not be read from storage; try again later".to_owned())
        }
    }
}

/// Runs one subagent's loop and makes its result the `task` call's: its final message, or what it
/// has with a note when it stopped at a bound. Also the calls it (and its subagents) refused.
async fn run_child(delegation: &Delegation<'_>, mut child: Child<'_>, events: &dyn TurnObserver) -> (ToolOutput, u32) {
    events.event(TurnEvent::SubagentStarted {
        subagent: child.id.clone(),
        parent: child.parent.clone(),
        call_id: child.call_id.clone(),
        agent_type: child.agent_type.clone(),
        description: events::summarise_result(&child.description),
        depth: child.env.role.depth,
    });
    let observer = SubagentEvents { parent: events, id: &child.id };
    let limits = Limits { max_steps: delegation.config.max_steps, ..delegation.limits.clone() };
    let resumed = child.resumed.take();
    let span = telemetry::subagent_span(&child.id, &child.agent_type);
    let outcome = match &resumed {
        Some(paused) => {
            let decisions = delegation.resume.decisions_of(&child.id);
            let paused = agent::Paused {
                conversation: &paused.conversation,
                turn_start: 0,
                steps: paused.steps,
                decisions: &decisions,
            };
            Box::pin(agent::resume(delegation.model, &mut child.env, paused, &limits, &observer))
                .instrument(span.clone())
                .await
        }
        None => {
            let user = Message::user(std::mem::take(&mut child.description));
            Box::pin(agent::run(delegation.model, &mut child.env, Vec::new(), user, &limits, &observer))
                .instrument(span.clone())
                .await
        }
    };
    // A failed loop's calls are in the turn's totals (the meter counted them) but not here.
    let usage = outcome.as_ref().map(|outcome| outcome.usage).unwrap_or_default();
    telemetry::record_usage(&span, &usage);
    let (output, ending, steps) = match outcome {
        Ok(outcome) if outcome.ending == Ending::AwaitingApproval => {
            let steps = outcome.steps;
            let output = pause::paused_output(delegation, &child, resumed, outcome);
            let ending = if output.paused.is_some() { "awaiting_approval" } else { "failed" };
            (output, ending.to_owned(), steps)
        }
        Ok(outcome) => {
            let content = result_text(&outcome.reply, &outcome.messages, outcome.ending, outcome.steps);
            let ending = serde_json::to_value(outcome.ending)
                .ok()
                .and_then(|value| value.as_str().map(str::to_owned))
                .unwrap_or_default();
            (ToolOutput { content, usage: outcome.usage, ..ToolOutput::default() }, ending, outcome.steps)
        }
        Err(err) => {
            tracing::warn!(subagent = %child.id, error = %err, "a subagent's model call failed");
            let content =
                format!("Error: the subagent stopped: its model call failed ({err}). Its task was not finished.");
            (ToolOutput::from(content), "failed".to_owned(), 0)
        }
    };
    let summary = match &output.paused {
        Some(_) => "waits for a person's approval".to_owned(),
        None => events::summarise_result(&output.content),
    };
    events.event(TurnEvent::SubagentCompleted {
        subagent: child.id.clone(),
        ending,
        steps,
        ok: !events::is_error_result(&output.content),
        summary,
        usage,
    });
    (output, child.env.refused_tool_calls())
}

/// What a subagent's `task` call returns: its answer, or, when it stopped at a bound, what it said
/// last with a note saying why it stopped.
fn result_text(reply: &str, messages: &[Message], ending: Ending, steps: u32) -> String {
    let stopped = match ending {
        Ending::StepLimit => format!("it reached its limit of {steps} steps"),
        Ending::Deadline => "the turn ran out of time".to_owned(),
        Ending::ContextFull => "its work no longer fit in the model's context".to_owned(),
        Ending::Aborted => return format!("The subagent gave up: {reply}"),
        _ => return reply.to_owned(),
    };
    // The notice the loop appended is the last message; what the subagent said before it is its work.
    let said = messages
        .iter()
        .rev()
        .skip(1)
        .find_map(|message| match message {
            Message::Assistant { content, .. } if !content.trim().is_empty() => Some(content.as_str()),
            _ => None,
        })
        .unwrap_or("(nothing yet)");
    format!("[The subagent stopped before finishing: {stopped}. What it had said last follows.]\n{said}")
}

/// Passes a subagent's events to the turn's observer tagged with its id. A deeper subagent's events
/// arrive tagged already and pass as they are (its `subagent.started` names its parent).
struct SubagentEvents<'p> {
    parent: &'p dyn TurnObserver,
    id: &'p str,
}

impl TurnObserver for SubagentEvents<'_> {
    fn event(&self, event: TurnEvent) {
        match event {
            TurnEvent::Nested { .. } | TurnEvent::SubagentStarted { .. } | TurnEvent::SubagentCompleted { .. } => {
                self.parent.event(event)
            }
            // The turn's own loop asks for every call that waits, its subagents' included, at once.
            TurnEvent::ApprovalRequested { .. } => {}
            // A subagent's text is not the reply; its model calls are buffered.
            TurnEvent::MessageDelta { .. } => {}
            event => self.parent.event(TurnEvent::Nested { subagent: self.id.to_owned(), event: Box::new(event) }),
        }
    }

    fn wants_deltas(&self) -> bool {
        false
    }
}
