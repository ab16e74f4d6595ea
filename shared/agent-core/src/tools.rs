//! The skills strategy's tools: `load_skill` plus the virtual filesystem's file tools, and the
//! environment that gives the loop its state-dependent prompt.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;

use crate::agent::TurnEnv;
use crate::ids::SkillPath;
use crate::message::{ToolCall, ToolSpec};
use crate::prompt::{self, PromptTemplate, PromptVars, SkillPromptMode};
use crate::skills::{Catalog, SkillDoc};
use crate::vfs::{self, Vfs};

pub const LOAD_SKILL: &str = "load_skill";

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

/// The state one turn of the skills strategy works on.
pub struct SkillsEnv<'a> {
    pub vfs: Vfs<'a>,
    catalog: &'a Catalog,
    template: &'a PromptTemplate,
    vars: &'a PromptVars,
    mode: SkillPromptMode,
    current_skill: Option<Arc<SkillDoc>>,
}

impl<'a> SkillsEnv<'a> {
    pub fn new(
        vfs: Vfs<'a>,
        catalog: &'a Catalog,
        template: &'a PromptTemplate,
        vars: &'a PromptVars,
        mode: SkillPromptMode,
    ) -> Self {
        Self { vfs, catalog, template, vars, mode, current_skill: None }
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
        self.vfs.mount_skill(path);
        self.current_skill = Some(doc);
        Ok(self.current_skill.as_deref().expect("just set"))
    }

    pub fn current_skill(&self) -> Option<&SkillDoc> {
        self.current_skill.as_deref()
    }

    fn run_load_skill(&mut self, args: &serde_json::Value) -> String {
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
}

#[async_trait]
impl TurnEnv for SkillsEnv<'_> {
    fn system_prompt(&self) -> String {
        prompt::system_prompt(self.template, self.vars, self.catalog, self.current_skill.as_deref(), self.mode)
    }

    fn tools(&self) -> Vec<ToolSpec> {
        let mut tools = vec![load_skill_spec()];
        tools.extend(vfs::file_tool_specs());
        tools
    }

    async fn call_tool(&mut self, call: &ToolCall) -> String {
        if call.name == LOAD_SKILL {
            return self.run_load_skill(&call.arguments);
        }
        match vfs::run_file_tool(&mut self.vfs, &call.name, &call.arguments).await {
            Some(result) => result,
            None => {
                tracing::warn!(tool = %call.name, "model called a tool that does not exist");
                format!("Error: there is no tool named `{}`", call.name)
            }
        }
    }
}
