//! A skill forced by a slash command: the tools it is offered (its declared ones and the
//! essentials), the commands `execute` may run for it, and the system prompt that holds the model
//! inside it. The refusals of anything else are in `call_tool`'s path (`refuse_unoffered`).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{essential_tool_specs, SkillsEnv};
use crate::message::ToolSpec;
use crate::permissions::{command_rules, CommandRules};
use crate::prompt::{self, Section, SectionKind, SystemPrompt};
use crate::skills::SkillDoc;
use crate::tool_names::{EXECUTE, FILE_TOOL_NAMES, FIND_SKILLS, LOAD_SKILL};

/// A skill forced by a slash command, and the tools it is allowed.
#[derive(Debug, Clone)]
pub(super) struct Forced {
    pub(super) doc: Arc<SkillDoc>,
    pub(super) offered: Vec<ToolSpec>,
    /// The commands `execute` may run, from the skill's `Bash(...)` declarations.
    pub(super) commands: CommandRules,
}

impl Forced {
    /// The reminder sent with every request after the first, so the model stays in the skill.
    pub(super) fn reminder(&self) -> String {
        format!(
            "[SKILL REMINDER] You are executing the skill /{}. Follow its instructions precisely. \
             Use ONLY these tools: {}.",
            self.doc.path.name(),
            tool_list(&self.offered)
        )
    }
}

impl SkillsEnv<'_> {
    /// Forces `doc` for this turn: its SKILL.md becomes a mandatory block, only its declared tools
    /// (plus the essentials) are offered, and any other tool call is refused.
    pub async fn force(&mut self, doc: Arc<SkillDoc>) {
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
        if declared.contains(EXECUTE) && self.shared.sandbox.is_none() {
            tracing::warn!(skill = %doc.path, "forced skill declares Bash, but no sandbox is configured (SANDBOX)");
        }
        self.shared.vfs.lock().await.mount_skill(doc.path.clone());
        self.current_skill = Some(doc.clone());
        self.set_forced(Some(Forced { doc, offered, commands }));
    }

    /// The commands `execute` may run and the skill that says so: a forced skill's, or the one a
    /// subagent inherited from a forced parent.
    pub(super) fn command_rules(&self) -> Option<(&CommandRules, &str)> {
        match (&self.forced, &self.role.commands) {
            (Some(forced), _) => Some((&forced.commands, forced.doc.path.name())),
            (None, Some((commands, skill))) => Some((commands, skill.as_str())),
            (None, None) => None,
        }
    }

    pub(super) fn forced_prompt(&self, forced: &Forced) -> SystemPrompt {
        let block = format!(
            "<mandatory-skill name=\"{}\">\n{}\n</mandatory-skill>",
            forced.doc.path,
            forced.doc.content.trim_end()
        );
        let mut sections =
            self.shared.template.render_sections(self.shared.vars, &Section::new(SectionKind::MandatorySkill, block));
        // The memory section only helps a skill that can reach /memories, through the file tools.
        if forced.offered.iter().any(|tool| FILE_TOOL_NAMES.contains(&tool.name.as_str())) {
            sections.push(Section::new(SectionKind::Memory, prompt::MEMORY_SECTION));
        }
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
