//! What a subagent is told: the note every subagent's prompt ends with, and a tenant agent's prompt
//! (its own instructions in place of the base prompt).

use crate::prompt::{Section, SectionKind, SystemPrompt};
use crate::skills::{AgentDoc, Listing, SkillDoc};

/// The last section of every subagent's system prompt.
pub const SUBAGENT_NOTE: &str = "\n\n<subagent>You are a subagent: another agent handed you the task in the user \
    message. Do it with your tools, then end with one final message that holds the whole answer: that message, and \
    nothing else of your work, goes back to the agent that delegated the task (the user does not see it). Files \
    you write under /workspace are shared with it.</subagent>";

/// A tenant agent's prompt: its instructions, the skill listing when it may load skills, and the
/// loaded skill's SKILL.md once one is loaded.
pub fn agent_prompt(agent: &AgentDoc, listing: Option<&Listing>, skill: Option<&SkillDoc>) -> SystemPrompt {
    let mut sections = vec![Section::new(SectionKind::Base, agent.prompt.trim_end().to_owned())];
    match skill {
        Some(skill) => sections.push(Section::new(
            SectionKind::SkillDocument,
            format!("\n\nLoaded skill: {}\n\n{}", skill.path, skill.content.trim_end()),
        )),
        None => {
            if let Some(listing) = listing {
                sections.push(Section::listing(listing));
            }
        }
    }
    SystemPrompt { sections }
}
