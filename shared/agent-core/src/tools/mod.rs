//! The skills strategy's tools (`load_skill`, the file tools, `task`, and the essentials `abort`,
//! `todowrite`, `todoread`) and the environment that gives the loop its state-dependent prompt,
//! including a forced skill's guarantees: filtered tools, enforced at execution, and reminders.
//! One environment runs one agent of the turn: the turn's own, or a subagent started by `task`;
//! what they share is in `shared`. `execute` (a command in the sandbox), `task` (subagents), a
//! forced skill's tools and prompt (`forced`), the specs of the other tools and loading a skill
//! (`source`) have files of their own; the tools' names are in [`crate::tool_names`].

mod execute;
mod forced;
mod saved;
mod shared;
mod show;
mod source;
mod specs;
pub mod task;
mod todos;

pub use crate::permissions::{
    command_rules, ApprovalPolicy, ApprovalRule, CommandPattern, CommandRules, MAX_APPROVAL_RULES,
};
pub use crate::tool_names::{ABORT, ESSENTIAL_TOOLS, EXECUTE, FIND_SKILLS, LOAD_SKILL, TASK, TODO_READ, TODO_WRITE};
pub use execute::{execute_spec, SandboxAccess};
pub use saved::{result_path, RESULTS_FOLDER};
pub use shared::TurnShared;
pub use source::{LoadSkillError, LoadedVersions, SkillSource};
pub use specs::{essential_tool_specs, find_skills_spec, load_skill_spec};
pub use task::{Delegation, SubagentConfig};

use std::sync::atomic::Ordering;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::agent::{PromptState, ToolOutput, TurnEnv};
use crate::events::TurnObserver;
use crate::message::{FileBytes, FileRef, ToolCall, ToolSpec};
use crate::prompt::{self, Section, SectionKind, SystemPrompt};
use crate::skills::{found, Listing, SkillDoc};
use crate::store::TodoItem;
use crate::vfs::{self, Vfs};
use forced::Forced;
use specs::{DEFAULT_FOUND_SKILLS, MAX_FOUND_SKILLS};

/// Whether `call` returns skill instructions (`load_skill`, a read under /skills): its result is
/// left out of every summary and never moved to a file.
pub fn reads_skill_text(call: &ToolCall) -> bool {
    let path = call.arguments.get("file_path").or_else(|| call.arguments.get("path"));
    let reads_skill = path.and_then(Value::as_str).is_some_and(|p| p.trim_start().starts_with("/skills"));
    call.name == LOAD_SKILL || reads_skill
}

/// The tools an agent is offered, and the tokens they add to each request.
struct Offered {
    tools: Arc<[ToolSpec]>,
    tokens: usize,
}

/// The state one agent of a turn of the skills strategy works on.
pub struct SkillsEnv<'a> {
    shared: Arc<TurnShared<'a>>,
    role: task::Role,
    current_skill: Option<Arc<SkillDoc>>,
    forced: Option<Forced>,
    todos: Vec<TodoItem>,
    refused_tool_calls: u32,
    /// Calls refused inside the subagents this agent started (and theirs), for the turn's count.
    refused_by_subagents: u32,
    /// Workspace files this agent's calls wrote since the loop last asked.
    written: Vec<(String, u64)>,
    /// The tools this agent is offered, built on first use: they change only when a skill is
    /// forced on it ([`SkillsEnv::set_forced`] forgets them), and every model call and tool call
    /// asks for them.
    offered: std::sync::OnceLock<Offered>,
}

impl<'a> SkillsEnv<'a> {
    /// The turn's own agent over `shared`, with the session's todo list.
    pub fn new(shared: TurnShared<'a>, todos: Vec<TodoItem>) -> Self {
        Self::with_role(Arc::new(shared), task::Role::main(), todos)
    }

    fn with_role(shared: Arc<TurnShared<'a>>, role: task::Role, todos: Vec<TodoItem>) -> Self {
        Self {
            shared,
            role,
            current_skill: None,
            forced: None,
            todos,
            refused_tool_calls: 0,
            refused_by_subagents: 0,
            written: Vec::new(),
            offered: std::sync::OnceLock::new(),
        }
    }

    /// The sandbox backend's session to keep with the agent session.
    pub fn sandbox_session(&self) -> Option<String> {
        self.shared.sandbox_session()
    }

    /// Commands run in the sandbox this turn, by any of its agents.
    pub fn executions(&self) -> u32 {
        self.shared.executions.load(Ordering::Relaxed)
    }

    /// The turn's filesystem, locked for as long as the guard is held.
    pub async fn vfs(&self) -> tokio::sync::MutexGuard<'_, Vfs<'a>> {
        self.shared.vfs.lock().await
    }

    /// Whether this agent may start subagents: the turn runs them and this agent is not at the
    /// deepest level.
    fn can_delegate(&self) -> bool {
        self.shared.delegation.as_ref().is_some_and(|delegation| self.role.depth < delegation.config.max_depth)
    }

    /// Every tool this strategy has, before any filtering; `find_skills` only when the listing
    /// does not show every skill in full.
    fn all_tools(&self) -> Vec<ToolSpec> {
        let mut tools = vec![load_skill_spec()];
        if self.shared.listing.search {
            tools.push(find_skills_spec());
        }
        tools.extend(vfs::file_tool_specs());
        if let Some(access) = &self.shared.sandbox {
            tools.push(execute_spec(&access.sandbox.layout()));
        }
        if self.can_delegate() {
            tools.push(task::task_spec(self.shared.skills.catalog.agents()));
        }
        tools.extend(essential_tool_specs());
        tools
    }

    /// The listing state 1 shows.
    pub fn listing(&self) -> &Listing {
        &self.shared.listing
    }

    /// Makes a skill current and visible under `/skills`.
    pub async fn load_skill(&mut self, skill_path: &str) -> Result<Arc<SkillDoc>, LoadSkillError> {
        let doc = self.shared.skills.load(skill_path).await?;
        tracing::info!(skill = %doc.path, "skill loaded");
        self.shared.vfs.lock().await.mount_skill(doc.path.clone());
        self.current_skill = Some(doc.clone());
        Ok(doc)
    }

    pub fn current_skill(&self) -> Option<&SkillDoc> {
        self.current_skill.as_deref()
    }

    /// The skill this agent loaded itself (not one forced on the turn), to load again when a
    /// paused subagent goes on.
    fn own_skill(&self) -> Option<crate::ids::SkillPath> {
        let forced = self.forced.as_ref().map(|forced| &forced.doc.path);
        self.current_skill.as_ref().map(|doc| doc.path.clone()).filter(|path| Some(path) != forced)
    }

    /// Subagents the turn has started so far, resumed ones included.
    pub fn subagents_started(&self) -> u32 {
        self.shared.delegation.as_ref().map_or(0, Delegation::started)
    }

    /// Paused subagents that this request did not take back: they keep waiting.
    pub fn unresumed_subagents(&self) -> Vec<crate::store::PausedSubagent> {
        self.shared.delegation.as_ref().map_or_else(Vec::new, Delegation::unresumed)
    }

    pub fn forced_skill(&self) -> Option<&SkillDoc> {
        self.forced.as_ref().map(|forced| forced.doc.as_ref())
    }

    /// Calls refused this turn, by this agent and by the subagents it started.
    pub fn refused_tool_calls(&self) -> u32 {
        self.refused_tool_calls + self.refused_by_subagents
    }

    pub fn todos(&self) -> &[TodoItem] {
        &self.todos
    }

    /// The turn's filesystem and this agent's todo list, once the turn has run. Subagents' own
    /// environments end with the batch of calls that started them, so the turn's is the last.
    pub fn into_parts(self) -> (Vfs<'a>, Vec<TodoItem>) {
        let shared = Arc::into_inner(self.shared).expect("subagents' environments end with their batch of calls");
        (shared.vfs.into_inner(), self.todos)
    }

    fn set_forced(&mut self, forced: Option<Forced>) {
        self.forced = forced;
        self.offered = std::sync::OnceLock::new();
    }

    /// The tools this agent is offered: every tool, or a forced skill's; a subagent's type may
    /// narrow them, and an agent at the deepest level has no `task`.
    fn offered_tools(&self) -> &[ToolSpec] {
        &self.offered().tools
    }

    fn offered(&self) -> &Offered {
        self.offered.get_or_init(|| {
            let mut tools = match &self.forced {
                Some(forced) => forced.offered.clone(),
                None => self.all_tools(),
            };
            if let Some(allowed) = &self.role.allowed {
                tools.retain(|tool| allowed.contains(&tool.name));
            }
            if !self.can_delegate() {
                tools.retain(|tool| tool.name != TASK);
            }
            let tokens = crate::budget::estimate_tools(&tools);
            Offered { tools: tools.into(), tokens }
        })
    }

    fn offered_names(&self) -> Vec<String> {
        self.offered_tools().iter().map(|tool| tool.name.clone()).collect()
    }

    fn offers(&self, name: &str) -> bool {
        self.offered_tools().iter().any(|tool| tool.name == name)
    }

    /// Enforced at execution: whatever the model was offered is all it may run. The refusal of a
    /// call to any other tool, counted.
    fn refuse_unoffered(&mut self, call: &ToolCall) -> Option<ToolOutput> {
        if self.offers(&call.name) {
            return None;
        }
        // The names are listed only for the refusal's text.
        let offered = self.offered_names();
        self.refused_tool_calls += 1;
        let skill = self.forced.as_ref().map(|forced| forced.doc.path.to_string());
        tracing::warn!(tool = %call.name, forced_skill = ?skill, "refused a call to a tool that was not offered");
        let content = match &self.forced {
            Some(forced) => format!(
                "Error: the tool `{}` is not available while the skill /{} is active. Use only: {}.",
                call.name,
                forced.doc.path.name(),
                offered.join(", ")
            ),
            None => format!("Error: there is no tool named `{}`. Available tools: {}.", call.name, offered.join(", ")),
        };
        Some(ToolOutput { content, refused: true, ..ToolOutput::default() })
    }

    /// Whether the turn's approval policy names `call`, one this agent would run: a call to a tool
    /// it was not offered, or a command its skill does not allow, is refused instead of asked about.
    fn policy_requires(&self, call: &ToolCall) -> bool {
        if self.shared.approvals.is_empty() || !self.offers(&call.name) {
            return false;
        }
        if call.name == EXECUTE {
            let command = call.arguments.get("command").and_then(Value::as_str).unwrap_or_default();
            if self.command_rules().is_some_and(|(rules, skill)| rules.check(command, skill).is_err()) {
                return false;
            }
        }
        self.shared.approvals.iter().any(|policy| policy.requires(call))
    }

    async fn run_load_skill(&mut self, args: &Value) -> String {
        let Some(skill_path) = args.get("skill_path").and_then(|v| v.as_str()) else {
            return "Error: load_skill needs the argument `skill_path` as a string like \"category/name\"".to_owned();
        };
        if skill_path.len() > crate::vfs::MAX_PATH_BYTES {
            return "Error: `skill_path` is too long".to_owned();
        }
        match self.load_skill(skill_path).await {
            Ok(doc) => format!(
                "Skill {} loaded. Follow its instructions, which are now your system prompt. \
                 Its files are under /skills/{}/.",
                doc.path,
                doc.path.name()
            ),
            Err(err) => err.to_string(),
        }
    }

    async fn run_find_skills(&self, args: &Value) -> String {
        let Some(query) = args.get("query").and_then(Value::as_str).map(str::trim).filter(|q| !q.is_empty()) else {
            return "Error: find_skills needs `query`, a few words about the task".to_owned();
        };
        if query.chars().count() > crate::skills::search::MAX_QUERY_CHARS {
            return format!(
                "Error: `query` is longer than {} characters; use a few words",
                crate::skills::search::MAX_QUERY_CHARS
            );
        }
        let limit = match args.get("limit") {
            None | Some(Value::Null) => DEFAULT_FOUND_SKILLS,
            Some(value) => match value.as_u64() {
                Some(limit) if (1..=MAX_FOUND_SKILLS as u64).contains(&limit) => limit as usize,
                _ => return format!("Error: `limit` must be a whole number from 1 to {MAX_FOUND_SKILLS}"),
            },
        };
        let found = match self.shared.skills.catalog.find(self.shared.skills.objects, query, limit).await {
            Ok(found) => found,
            Err(err) => {
                tracing::warn!(error = %err, "could not read the skill catalog for find_skills");
                return "Error: The skill catalog could not be read from storage; try again later".to_owned();
            }
        };
        let found: Vec<&crate::skills::SkillEntry> = found.iter().map(Arc::as_ref).collect();
        tracing::info!(query, found = found.len(), "find_skills");
        if found.is_empty() {
            return format!(
                "No skills match \"{query}\" among the {} skills of this account. Try other words.",
                self.shared.skills.catalog.len()
            );
        }
        found::render(query, &found)
    }
}

#[async_trait]
impl TurnEnv for SkillsEnv<'_> {
    fn system_prompt(&self) -> SystemPrompt {
        let mut prompt = match (&self.forced, &self.role.agent) {
            (Some(forced), _) => self.forced_prompt(forced),
            (None, Some(agent)) => task::agent_prompt(
                agent,
                self.offers(LOAD_SKILL).then_some(self.shared.listing.as_ref()),
                self.current_skill.as_deref(),
            ),
            (None, None) => prompt::system_prompt(
                self.shared.template,
                self.shared.vars,
                &self.shared.listing,
                self.current_skill.as_deref(),
                self.shared.mode,
            ),
        };
        // State 2 with a sandbox: say where the skill's own scripts are, so its instructions work.
        let offers_execute = self.offers(EXECUTE);
        if let (Some(access), Some(skill), true) = (&self.shared.sandbox, &self.current_skill, offers_execute) {
            let note = execute::skill_folder_note(&access.sandbox.layout(), skill.path.name());
            let at = match self.forced {
                // Before the forced skill's tool list and reminder, which stay last.
                Some(_) => prompt.sections.len().saturating_sub(2),
                None => prompt.sections.len(),
            };
            prompt.sections.insert(at, Section::new(SectionKind::SkillDocument, note));
        }
        if self.role.id.is_some() {
            prompt.sections.push(Section::new(SectionKind::Reminder, task::SUBAGENT_NOTE));
        }
        prompt
    }

    fn tools(&self) -> Arc<[ToolSpec]> {
        self.offered().tools.clone()
    }

    fn tools_tokens(&self) -> usize {
        self.offered().tokens
    }

    fn reminder(&self, step: u32) -> Option<String> {
        self.forced.as_ref().filter(|_| step >= 1).map(Forced::reminder)
    }

    fn take_written_files(&mut self) -> Vec<(String, u64)> {
        std::mem::take(&mut self.written)
    }

    fn reads_skill_text(&self, call: &ToolCall) -> bool {
        reads_skill_text(call)
    }

    async fn save_result(&mut self, call: &ToolCall, content: &str) -> Option<String> {
        let offered = self.offered_names();
        let mut vfs = self.shared.vfs.lock().await;
        let saved = saved::save(&mut vfs, &offered, call, content).await;
        self.written.extend(vfs.take_written());
        saved
    }

    fn cache_scope(&self) -> Option<String> {
        Some(self.shared.skills.user.to_string())
    }

    fn prompt_state(&self) -> Option<PromptState> {
        Some(match &self.current_skill {
            Some(doc) => PromptState::Skill {
                path: doc.path.to_string(),
                forced: self.forced.as_ref().is_some_and(|forced| forced.doc.path == doc.path),
            },
            None => PromptState::Listing {
                total: self.shared.listing.total,
                shown_in_full: self.shared.listing.shown_in_full,
                search: self.shared.listing.search,
            },
        })
    }

    fn runs_concurrently(&self, call: &ToolCall) -> bool {
        call.name == TASK
    }

    fn needs_approval(&self, call: &ToolCall) -> bool {
        // A `task` whose subagent paused was asked about, if at all, before it started.
        let resumes = |delegation: &Delegation<'_>| delegation.holds_paused(self.role.id.as_deref(), &call.id);
        if call.name == TASK && self.shared.delegation.as_ref().is_some_and(resumes) {
            return false;
        }
        self.policy_requires(call)
    }

    async fn file_bytes(&mut self, files: &[&FileRef]) -> Arc<FileBytes> {
        match self.shared.shown {
            Some(shown) => shown.bytes(files).await,
            None => Arc::default(),
        }
    }

    async fn call_concurrently(&mut self, calls: &[&ToolCall], events: &dyn TurnObserver) -> Vec<ToolOutput> {
        task::run_tasks(self, calls, events).await
    }

    async fn call_tool(&mut self, call: &ToolCall) -> ToolOutput {
        if let Some(refused) = self.refuse_unoffered(call) {
            return refused;
        }
        let content = match call.name.as_str() {
            LOAD_SKILL => {
                let content = self.run_load_skill(&call.arguments).await;
                let loaded =
                    (!crate::events::is_error_result(&content)).then_some(self.current_skill.as_ref()).flatten();
                let loaded_skill = loaded.map(|doc| doc.path.to_string());
                let loaded_version = loaded.and_then(|doc| doc.version);
                return ToolOutput { content, loaded_skill, loaded_version, ..ToolOutput::default() };
            }
            FIND_SKILLS => self.run_find_skills(&call.arguments).await,
            EXECUTE => return self.run_execute(&call.arguments).await,
            TODO_WRITE => self.run_todo_write(&call.arguments),
            TODO_READ => self.run_todo_read(),
            // A `task` runs with the reply's other tasks, through `call_concurrently`; one on its own
            // keeps what its subagent spent and whether it paused.
            TASK => return task::run_tasks(self, &[call], &crate::events::NoObserver).await.pop().unwrap_or_default(),
            ABORT => {
                let reason = call.arguments.get("reason").and_then(Value::as_str).map(str::trim).unwrap_or_default();
                if reason.is_empty() {
                    "Error: abort needs `reason`, the answer to give the user".to_owned()
                } else {
                    tracing::info!(reason, "the model aborted the turn");
                    return ToolOutput {
                        content: "Turn aborted.".to_owned(),
                        abort: Some(reason.to_owned()),
                        ..ToolOutput::default()
                    };
                }
            }
            show::READ_FILE if self.shared.shown.is_some() => return self.run_read_file(&call.arguments).await,
            name => {
                let mut vfs = self.shared.vfs.lock().await;
                let content = vfs::run_file_tool(&mut vfs, name, &call.arguments).await;
                self.written.extend(vfs.take_written());
                content.unwrap_or_else(|| format!("Error: there is no tool named `{name}`"))
            }
        };
        ToolOutput::from(content)
    }
}

#[cfg(test)]
mod tests;
