//! The skills strategy's tools (`load_skill`, the file tools, and the essentials `abort`,
//! `todowrite`, `todoread`) and the environment that gives the loop its state-dependent prompt,
//! including a forced skill's guarantees: filtered tools, enforced at execution, and reminders.
//! `execute` (a command in the sandbox) has a file of its own; the tools' names are in
//! [`crate::tool_names`].

mod execute;
mod saved;
mod todos;

pub use crate::tool_names::{ABORT, ESSENTIAL_TOOLS, EXECUTE, FIND_SKILLS, LOAD_SKILL, TODO_READ, TODO_WRITE};
pub use execute::{command_rules, execute_spec, CommandPattern, CommandRules, SandboxAccess};
pub use saved::{result_path, RESULTS_FOLDER};

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::agent::{PromptState, ToolOutput, TurnEnv};
use crate::ids::UserId;
use crate::message::{ToolCall, ToolSpec};
use crate::prompt::{self, PromptTemplate, PromptVars, Section, SectionKind, SkillPromptMode, SystemPrompt};
use crate::skills::{found, Catalog, Listing, Resolved, SkillDoc, SkillLibrary};
use crate::store::{ObjectStore, TodoItem};
use crate::vfs::{self, Vfs};

/// `find_skills` answers at most this many matches.
const MAX_FOUND_SKILLS: usize = 20;
const DEFAULT_FOUND_SKILLS: usize = 8;

/// Whether `call` returns skill instructions (`load_skill`, a read under /skills): its result is
/// left out of every summary and never moved to a file.
pub fn reads_skill_text(call: &ToolCall) -> bool {
    let path = call.arguments.get("file_path").or_else(|| call.arguments.get("path"));
    let reads_skill = path.and_then(Value::as_str).is_some_and(|p| p.trim_start().starts_with("/skills"));
    call.name == LOAD_SKILL || reads_skill
}

pub fn load_skill_spec() -> ToolSpec {
    ToolSpec {
        name: LOAD_SKILL.to_owned(),
        description: "Load a skill by the exact argument shown for it in the list of available skills (or \
                      returned by find_skills): \"category/name\" or \"name\". The skill's instructions become your \
                      instructions for the rest of this turn and its files appear under /skills/{name}/."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "skill_path": {"type": "string", "description": "The skill to load, as \"category/name\" or \"name\"."}
            },
            "required": ["skill_path"],
            "additionalProperties": false
        }),
    }
}

pub fn find_skills_spec() -> ToolSpec {
    ToolSpec {
        name: FIND_SKILLS.to_owned(),
        description: "Search all of this account's skills (including those the list does not show in full) by a few \
                      words about the task. Returns the best matches, best first, each with the exact load_skill \
                      argument and its description."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words about the task, e.g. \"fill a PDF form\"."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_FOUND_SKILLS,
                          "description": format!("How many matches to return (default {DEFAULT_FOUND_SKILLS}).")}
            },
            "required": ["query"],
            "additionalProperties": false
        }),
    }
}

/// Where a turn's skills come from: the catalog snapshot, and the library and store that load a
/// skill's SKILL.md when it is loaded or forced.
#[derive(Clone, Copy)]
pub struct SkillSource<'a> {
    pub library: &'a SkillLibrary,
    pub objects: &'a dyn ObjectStore,
    pub user: &'a UserId,
    pub catalog: &'a Catalog,
}

/// Why a skill could not be loaded; `Display` is the text the model is told.
#[derive(Debug, thiserror::Error)]
pub enum LoadSkillError {
    /// No such skill, or a name several skills share; the text suggests what exists.
    #[error("{0}")]
    NotFound(String),
    /// The SKILL.md could not be read; the backend's message stays out of the model's sight.
    #[error("Error: The skill could not be read from storage; try again later")]
    Storage(#[source] crate::store::StoreError),
}

impl SkillSource<'_> {
    /// Resolves and loads a skill, with the closest names when there is no such skill.
    pub async fn load(&self, wanted: &str) -> Result<Arc<SkillDoc>, LoadSkillError> {
        let storage = |err: crate::store::StoreError| {
            tracing::warn!(skill = wanted, error = %err, "could not read the skill catalog");
            LoadSkillError::Storage(err)
        };
        let not_found = || async {
            let suggestions = self.catalog.closest(self.objects, wanted, 3).await.map_err(storage)?;
            let suggestions: Vec<String> = suggestions.iter().map(|p| p.to_string()).collect();
            Ok::<_, LoadSkillError>(LoadSkillError::NotFound(if suggestions.is_empty() {
                format!("Error: Skill not found: {wanted}")
            } else {
                format!("Error: Skill not found: {wanted}. Closest skills: {}", suggestions.join(", "))
            }))
        };
        let entry = match self.catalog.resolve(self.objects, wanted).await.map_err(storage)? {
            Resolved::Found(entry) => entry,
            Resolved::NotFound => return Err(not_found().await?),
            Resolved::Ambiguous(many) => {
                let paths: Vec<String> = many.iter().map(|e| e.path.to_string()).collect();
                return Err(LoadSkillError::NotFound(format!(
                    "Error: Several skills are named {wanted}: {}. Load one by its full path.",
                    paths.join(", ")
                )));
            }
        };
        match self.library.skill_doc(self.objects, self.user, &entry).await {
            Ok(Some(doc)) => Ok(doc),
            Ok(None) => Err(not_found().await?),
            Err(err) => {
                tracing::warn!(skill = %entry.path, error = %err, "could not read a SKILL.md");
                Err(LoadSkillError::Storage(err))
            }
        }
    }
}

/// `abort`, `todowrite` and `todoread`.
pub fn essential_tool_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: ABORT.to_owned(),
            description: "End this turn at once, with `reason` as your answer to the user. Use it when the task \
                          cannot or must not be done."
                .to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"reason": {"type": "string", "description": "What to tell the user."}},
                "required": ["reason"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: TODO_WRITE.to_owned(),
            description: "Replace your todo list for this conversation; it is kept across turns.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"todos": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string"},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                    },
                    "required": ["content", "status"],
                    "additionalProperties": false
                }}},
                "required": ["todos"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: TODO_READ.to_owned(),
            description: "Read your todo list for this conversation.".to_owned(),
            parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        },
    ]
}

/// A skill forced by a slash command, and the tools it is allowed.
#[derive(Debug, Clone)]
struct Forced {
    doc: Arc<SkillDoc>,
    offered: Vec<ToolSpec>,
    /// The commands `execute` may run, from the skill's `Bash(...)` declarations.
    commands: CommandRules,
}

/// The state one turn of the skills strategy works on.
pub struct SkillsEnv<'a> {
    pub vfs: Vfs<'a>,
    skills: SkillSource<'a>,
    listing: Arc<Listing>,
    template: &'a PromptTemplate,
    vars: &'a PromptVars,
    mode: SkillPromptMode,
    current_skill: Option<Arc<SkillDoc>>,
    forced: Option<Forced>,
    todos: Vec<TodoItem>,
    refused_tool_calls: u32,
    sandbox: Option<SandboxAccess<'a>>,
    executions: u32,
    /// The sandbox backend's own session, carried across turns (see `SessionState::sandbox_session`).
    sandbox_session: Option<String>,
}

impl<'a> SkillsEnv<'a> {
    /// `listing` is the state-1 listing, rendered for `SKILL_LISTING_TOKENS` ([`Catalog::listing`]).
    pub fn new(
        vfs: Vfs<'a>,
        skills: SkillSource<'a>,
        listing: Arc<Listing>,
        template: &'a PromptTemplate,
        vars: &'a PromptVars,
        mode: SkillPromptMode,
        todos: Vec<TodoItem>,
    ) -> Self {
        Self {
            vfs,
            skills,
            listing,
            template,
            vars,
            mode,
            current_skill: None,
            forced: None,
            todos,
            refused_tool_calls: 0,
            sandbox: None,
            executions: 0,
            sandbox_session: None,
        }
    }

    /// Offers `execute`, running commands in `access`'s sandbox; `session` is the backend's own
    /// session kept from earlier turns, if any.
    pub fn with_sandbox(mut self, access: SandboxAccess<'a>, session: Option<String>) -> Self {
        self.sandbox = Some(access);
        self.sandbox_session = session;
        self
    }

    /// The sandbox backend's session to keep with the agent session.
    pub fn sandbox_session(&self) -> Option<&str> {
        self.sandbox_session.as_deref()
    }

    /// Commands run in the sandbox this turn.
    pub fn executions(&self) -> u32 {
        self.executions
    }

    /// Every tool this strategy has, before any filtering; `find_skills` only when the listing
    /// does not show every skill in full.
    fn all_tools(&self) -> Vec<ToolSpec> {
        let mut tools = vec![load_skill_spec()];
        if self.listing.search {
            tools.push(find_skills_spec());
        }
        tools.extend(vfs::file_tool_specs());
        if let Some(access) = &self.sandbox {
            tools.push(execute_spec(&access.sandbox.layout()));
        }
        tools.extend(essential_tool_specs());
        tools
    }

    /// The listing state 1 shows.
    pub fn listing(&self) -> &Listing {
        &self.listing
    }

    /// Makes a skill current and visible under `/skills`.
    pub async fn load_skill(&mut self, skill_path: &str) -> Result<Arc<SkillDoc>, LoadSkillError> {
        let doc = self.skills.load(skill_path).await?;
        tracing::info!(skill = %doc.path, "skill loaded");
        self.vfs.mount_skill(doc.path.clone());
        self.current_skill = Some(doc.clone());
        Ok(doc)
    }

    /// Forces `doc` for this turn: its SKILL.md becomes a mandatory block, only its declared tools
    /// (plus the essentials) are offered, and any other tool call is refused.
    pub fn force(&mut self, doc: Arc<SkillDoc>) {
        let all = self.all_tools();
        let declared: BTreeSet<&str> = doc
            .frontmatter
            .tools
            .iter()
            .flatten()
            .map(String::as_str)
            .filter(|name| *name != LOAD_SKILL && *name != FIND_SKILLS)
            .collect();
        let matched: Vec<ToolSpec> = all.iter().filter(|tool| declared.contains(tool.name.as_str())).cloned().collect();
        let offered: Vec<ToolSpec> = if matched.is_empty() {
            tracing::warn!(
                skill = %doc.path,
                declared = ?declared,
                "forced skill declares no existing tools; offering every tool except load_skill"
            );
            all.into_iter().filter(|tool| tool.name != LOAD_SKILL && tool.name != FIND_SKILLS).collect()
        } else {
            let mut offered = matched;
            offered.extend(essential_tool_specs().into_iter().filter(|e| !declared.contains(e.name.as_str())));
            offered
        };
        let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
        tracing::info!(skill = %doc.path, offered_tools = ?names, "forced skill");
        let commands = doc.frontmatter.declared_tools.as_deref().and_then(command_rules).unwrap_or(CommandRules::Any);
        if declared.contains(EXECUTE) && self.sandbox.is_none() {
            tracing::warn!(skill = %doc.path, "forced skill declares Bash, but no sandbox is configured (SANDBOX)");
        }
        self.vfs.mount_skill(doc.path.clone());
        self.current_skill = Some(doc.clone());
        self.forced = Some(Forced { doc, offered, commands });
    }

    pub fn current_skill(&self) -> Option<&SkillDoc> {
        self.current_skill.as_deref()
    }

    pub fn forced_skill(&self) -> Option<&SkillDoc> {
        self.forced.as_ref().map(|forced| forced.doc.as_ref())
    }

    pub fn refused_tool_calls(&self) -> u32 {
        self.refused_tool_calls
    }

    pub fn todos(&self) -> &[TodoItem] {
        &self.todos
    }

    pub fn into_parts(self) -> (Vfs<'a>, Vec<TodoItem>) {
        (self.vfs, self.todos)
    }

    fn offered_names(&self) -> Vec<String> {
        self.tools().into_iter().map(|tool| tool.name).collect()
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
        let found = match self.skills.catalog.find(self.skills.objects, query, limit).await {
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
                self.skills.catalog.len()
            );
        }
        found::render(query, &found)
    }

    fn forced_prompt(&self, forced: &Forced) -> SystemPrompt {
        let block = format!(
            "<mandatory-skill name=\"{}\">\n{}\n</mandatory-skill>",
            forced.doc.path,
            forced.doc.content.trim_end()
        );
        let mut sections = self.template.render_sections(self.vars, &Section::new(SectionKind::MandatorySkill, block));
        let tools: String =
            forced.offered.iter().map(|tool| format!("- {}: {}\n", tool.name, tool.description)).collect();
        sections.push(Section::new(SectionKind::Tools, format!("\n\n## Tools for this skill\n{tools}")));
        sections.push(Section::new(
            SectionKind::Reminder,
            format!(
                "\n<skill-reminder name=\"{}\">You are executing the skill /{} that the user chose. Follow the \
                 <mandatory-skill> instructions above precisely. Use ONLY these tools: {}.</skill-reminder>",
                forced.doc.path,
                forced.doc.path.name(),
                tool_list(&forced.offered)
            ),
        ));
        SystemPrompt { sections }
    }
}

fn tool_list(tools: &[ToolSpec]) -> String {
    tools.iter().map(|tool| tool.name.as_str()).collect::<Vec<_>>().join(", ")
}

#[async_trait]
impl TurnEnv for SkillsEnv<'_> {
    fn system_prompt(&self) -> SystemPrompt {
        let mut prompt = match &self.forced {
            Some(forced) => self.forced_prompt(forced),
            None => {
                prompt::system_prompt(self.template, self.vars, &self.listing, self.current_skill.as_deref(), self.mode)
            }
        };
        // State 2 with a sandbox: say where the skill's own scripts are, so its instructions work.
        let offers_execute = self.tools().iter().any(|tool| tool.name == EXECUTE);
        if let (Some(access), Some(skill), true) = (&self.sandbox, &self.current_skill, offers_execute) {
            let note = execute::skill_folder_note(&access.sandbox.layout(), skill.path.name());
            let at = match self.forced {
                // Before the forced skill's tool list and reminder, which stay last.
                Some(_) => prompt.sections.len().saturating_sub(2),
                None => prompt.sections.len(),
            };
            prompt.sections.insert(at, Section::new(SectionKind::SkillDocument, note));
        }
        prompt
    }

    fn tools(&self) -> Vec<ToolSpec> {
        match &self.forced {
            Some(forced) => forced.offered.clone(),
            None => self.all_tools(),
        }
    }

    fn reminder(&self, step: u32) -> Option<String> {
        let forced = self.forced.as_ref().filter(|_| step >= 1)?;
        Some(format!(
            "[SKILL REMINDER] You are executing the skill /{}. Follow its instructions precisely. \
             Use ONLY these tools: {}.",
            forced.doc.path.name(),
            tool_list(&forced.offered)
        ))
    }

    fn take_written_files(&mut self) -> Vec<(String, u64)> {
        self.vfs.take_written()
    }

    fn refused_calls(&self) -> u32 {
        self.refused_tool_calls
    }

    fn reads_skill_text(&self, call: &ToolCall) -> bool {
        reads_skill_text(call)
    }

    async fn save_result(&mut self, call: &ToolCall, content: &str) -> Option<String> {
        let offered = self.offered_names();
        saved::save(&mut self.vfs, &offered, call, content).await
    }

    fn prompt_state(&self) -> Option<PromptState> {
        Some(match &self.current_skill {
            Some(doc) => PromptState::Skill {
                path: doc.path.to_string(),
                forced: self.forced.as_ref().is_some_and(|forced| forced.doc.path == doc.path),
            },
            None => PromptState::Listing {
                total: self.listing.total,
                shown_in_full: self.listing.shown_in_full,
                search: self.listing.search,
            },
        })
    }

    async fn call_tool(&mut self, call: &ToolCall) -> ToolOutput {
        // Enforced at execution: whatever the model was offered is all it may run.
        let offered = self.offered_names();
        if !offered.contains(&call.name) {
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
                None => {
                    format!("Error: there is no tool named `{}`. Available tools: {}.", call.name, offered.join(", "))
                }
            };
            return ToolOutput::from(content);
        }
        let content = match call.name.as_str() {
            LOAD_SKILL => {
                let content = self.run_load_skill(&call.arguments).await;
                let loaded_skill = (!crate::events::is_error_result(&content))
                    .then(|| self.current_skill.as_ref().map(|doc| doc.path.to_string()))
                    .flatten();
                return ToolOutput { content, abort: None, loaded_skill };
            }
            FIND_SKILLS => self.run_find_skills(&call.arguments).await,
            EXECUTE => self.run_execute(&call.arguments).await,
            TODO_WRITE => self.run_todo_write(&call.arguments),
            TODO_READ => self.run_todo_read(),
            ABORT => {
                let reason = call.arguments.get("reason").and_then(Value::as_str).map(str::trim).unwrap_or_default();
                if reason.is_empty() {
                    "Error: abort needs `reason`, the answer to give the user".to_owned()
                } else {
                    tracing::info!(reason, "the model aborted the turn");
                    return ToolOutput {
                        content: "Turn aborted.".to_owned(),
                        abort: Some(reason.to_owned()),
                        loaded_skill: None,
                    };
                }
            }
            name => vfs::run_file_tool(&mut self.vfs, name, &call.arguments)
                .await
                .unwrap_or_else(|| format!("Error: there is no tool named `{name}`")),
        };
        ToolOutput::from(content)
    }
}

#[cfg(test)]
mod tests;
