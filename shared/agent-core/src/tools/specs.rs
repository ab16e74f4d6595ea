//! The specs (name, description, JSON schema) of the skills strategy's own tools: `load_skill`,
//! `find_skills` and the essentials.

use serde_json::json;

use super::{ABORT, FIND_SKILLS, LOAD_SKILL, TODO_READ, TODO_WRITE};
use crate::message::ToolSpec;

/// `find_skills` answers at most this many matches.
pub(super) const MAX_FOUND_SKILLS: usize = 20;
pub(super) const DEFAULT_FOUND_SKILLS: usize = 8;

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
