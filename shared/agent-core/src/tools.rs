//! The skills strategy's tools (`load_skill`, the file tools, and the essentials `abort`,
//! `todowrite`, `todoread`) and the environment that gives the loop its state-dependent prompt,
//! including a forced skill's guarantees: filtered tools, enforced at execution, and reminders.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::agent::{ToolOutput, TurnEnv};
use crate::ids::SkillPath;
use crate::message::{ToolCall, ToolSpec};
use crate::prompt::{self, PromptTemplate, PromptVars, Section, SectionKind, SkillPromptMode, SystemPrompt};
use crate::skills::{Catalog, SkillDoc};
use crate::store::{TodoItem, TodoStatus};
use crate::vfs::{self, Vfs};

pub const LOAD_SKILL: &str = "load_skill";
pub const ABORT: &str = "abort";
pub const TODO_WRITE: &str = "todowrite";
pub const TODO_READ: &str = "todoread";
/// Tools a forced skill always keeps, whatever it declares.
pub const ESSENTIAL_TOOLS: [&str; 3] = [ABORT, TODO_WRITE, TODO_READ];

const MAX_TODOS: usize = 100;
const MAX_TODO_CHARS: usize = 1000;

pub fn load_skill_spec() -> ToolSpec {
    ToolSpec {
        name: LOAD_SKILL.to_owned(),
        description: "Load a skill by its path \"category/name\" as shown in the list of available skills. \
                      The skill's instructions become your instructions for the rest of this turn and its \
                      files appear under /skills/{name}/."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "skill_path": {"type": "string", "description": "The skill to load, as \"category/name\"."}
            },
            "required": ["skill_path"],
            "additionalProperties": false
        }),
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
}

/// The state one turn of the skills strategy works on.
pub struct SkillsEnv<'a> {
    pub vfs: Vfs<'a>,
    catalog: &'a Catalog,
    template: &'a PromptTemplate,
    vars: &'a PromptVars,
    mode: SkillPromptMode,
    current_skill: Option<Arc<SkillDoc>>,
    forced: Option<Forced>,
    todos: Vec<TodoItem>,
    refused_tool_calls: u32,
}

impl<'a> SkillsEnv<'a> {
    pub fn new(
        vfs: Vfs<'a>,
        catalog: &'a Catalog,
        template: &'a PromptTemplate,
        vars: &'a PromptVars,
        mode: SkillPromptMode,
        todos: Vec<TodoItem>,
    ) -> Self {
        Self { vfs, catalog, template, vars, mode, current_skill: None, forced: None, todos, refused_tool_calls: 0 }
    }

    /// Every tool this strategy has, before any filtering.
    fn all_tools() -> Vec<ToolSpec> {
        let mut tools = vec![load_skill_spec()];
        tools.extend(vfs::file_tool_specs());
        tools.extend(essential_tool_specs());
        tools
    }

    /// Makes `skill` current and visible under `/skills`; an unknown skill is an error text.
    pub fn load_skill(&mut self, skill_path: &str) -> Result<&SkillDoc, String> {
        let not_found = |catalog: &Catalog| {
            let suggestions: Vec<String> = catalog.closest(skill_path, 3).iter().map(|p| p.to_string()).collect();
            if suggestions.is_empty() {
                format!("Error: Skill not found: {skill_path}")
            } else {
                format!("Error: Skill not found: {skill_path}. Closest skills: {}", suggestions.join(", "))
            }
        };
        let path = SkillPath::parse(skill_path).map_err(|_| not_found(self.catalog))?;
        let doc = self.catalog.get(&path).ok_or_else(|| not_found(self.catalog))?.clone();
        tracing::info!(skill = %path, "skill loaded");
        self.vfs.mount_skill_listed(path, self.catalog.objects());
        self.current_skill = Some(doc);
        Ok(self.current_skill.as_deref().expect("just set"))
    }

    /// Forces `doc` for this turn: its SKILL.md becomes a mandatory block, only its declared tools
    /// (plus the essentials) are offered, and any other tool call is refused.
    pub fn force(&mut self, doc: Arc<SkillDoc>) {
        let all = Self::all_tools();
        let declared: BTreeSet<&str> =
            doc.frontmatter.tools.iter().flatten().map(String::as_str).filter(|name| *name != LOAD_SKILL).collect();
        let matched: Vec<ToolSpec> = all.iter().filter(|tool| declared.contains(tool.name.as_str())).cloned().collect();
        let offered: Vec<ToolSpec> = if matched.is_empty() {
            tracing::warn!(
                skill = %doc.path,
                declared = ?declared,
                "forced skill declares no existing tools; offering every tool except load_skill"
            );
            all.into_iter().filter(|tool| tool.name != LOAD_SKILL).collect()
        } else {
            let mut offered = matched;
            offered.extend(essential_tool_specs().into_iter().filter(|e| !declared.contains(e.name.as_str())));
            offered
        };
        let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
        tracing::info!(skill = %doc.path, offered_tools = ?names, "forced skill");
        self.vfs.mount_skill_listed(doc.path.clone(), self.catalog.objects());
        self.current_skill = Some(doc.clone());
        self.forced = Some(Forced { doc, offered });
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

    fn run_load_skill(&mut self, args: &Value) -> String {
        let Some(skill_path) = args.get("skill_path").and_then(|v| v.as_str()) else {
            return "Error: load_skill needs the argument `skill_path` as a string like \"category/name\"".to_owned();
        };
        match self.load_skill(skill_path) {
            Ok(doc) => format!(
                "Skill {} loaded. Follow its instructions, which are now your system prompt. \
                 Its files are under /skills/{}/.",
                doc.path,
                doc.path.name()
            ),
            Err(message) => message,
        }
    }

    fn run_todo_write(&mut self, args: &Value) -> String {
        match parse_todos(args) {
            Ok(todos) => {
                let count = |status| todos.iter().filter(|t| t.status == status).count();
                let summary = format!(
                    "Todo list updated: {} items ({} pending, {} in progress, {} completed).",
                    todos.len(),
                    count(TodoStatus::Pending),
                    count(TodoStatus::InProgress),
                    count(TodoStatus::Completed)
                );
                self.todos = todos;
                summary
            }
            Err(message) => format!("Error: {message}"),
        }
    }

    fn run_todo_read(&self) -> String {
        if self.todos.is_empty() {
            return "The todo list is empty.".to_owned();
        }
        self.todos
            .iter()
            .enumerate()
            .map(|(i, todo)| {
                let status = match todo.status {
                    TodoStatus::Pending => "pending",
                    TodoStatus::InProgress => "in_progress",
                    TodoStatus::Completed => "completed",
                };
                format!("{}. [{status}] {}", i + 1, todo.content)
            })
            .collect::<Vec<_>>()
            .join("\n")
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

fn parse_todos(args: &Value) -> Result<Vec<TodoItem>, String> {
    let items =
        args.get("todos").and_then(Value::as_array).ok_or("todowrite needs `todos`, a list of {content, status}")?;
    if items.len() > MAX_TODOS {
        return Err(format!("at most {MAX_TODOS} todos are kept"));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let content = item
                .get("content")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .ok_or_else(|| format!("todo {} needs a non-empty `content` string", i + 1))?;
            if content.chars().count() > MAX_TODO_CHARS {
                return Err(format!("todo {} is longer than {MAX_TODO_CHARS} characters", i + 1));
            }
            let status = match item.get("status").and_then(Value::as_str) {
                Some("pending") => TodoStatus::Pending,
                Some("in_progress") => TodoStatus::InProgress,
                Some("completed") => TodoStatus::Completed,
                _ => return Err(format!("todo {} needs `status`: pending, in_progress or completed", i + 1)),
            };
            Ok(TodoItem { content: content.to_owned(), status })
        })
        .collect()
}

#[async_trait]
impl TurnEnv for SkillsEnv<'_> {
    fn system_prompt(&self) -> SystemPrompt {
        match &self.forced {
            Some(forced) => self.forced_prompt(forced),
            None => {
                prompt::system_prompt(self.template, self.vars, self.catalog, self.current_skill.as_deref(), self.mode)
            }
        }
    }

    fn tools(&self) -> Vec<ToolSpec> {
        match &self.forced {
            Some(forced) => forced.offered.clone(),
            None => Self::all_tools(),
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
            LOAD_SKILL => self.run_load_skill(&call.arguments),
            TODO_WRITE => self.run_todo_write(&call.arguments),
            TODO_READ => self.run_todo_read(),
            ABORT => {
                let reason = call.arguments.get("reason").and_then(Value::as_str).map(str::trim).unwrap_or_default();
                if reason.is_empty() {
                    "Error: abort needs `reason`, the answer to give the user".to_owned()
                } else {
                    tracing::info!(reason, "the model aborted the turn");
                    return ToolOutput { content: "Turn aborted.".to_owned(), abort: Some(reason.to_owned()) };
                }
            }
            name => vfs::run_file_tool(&mut self.vfs, name, &call.arguments)
                .await
                .unwrap_or_else(|| format!("Error: there is no tool named `{name}`")),
        };
        ToolOutput::from(content)
    }
}
