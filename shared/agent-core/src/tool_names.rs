//! The names of the tools the model is offered. A leaf: the skills, the budget, the file tools and
//! the tools' environment all read these names, and it reads nothing of the crate.

pub const LOAD_SKILL: &str = "load_skill";
pub const FIND_SKILLS: &str = "find_skills";
pub const EXECUTE: &str = "execute";
pub const ABORT: &str = "abort";
pub const TODO_WRITE: &str = "todowrite";
pub const TODO_READ: &str = "todoread";
/// Starts a subagent (deepagents' name).
pub const TASK: &str = "task";
/// Tools a forced skill always keeps, whatever it declares.
pub const ESSENTIAL_TOOLS: [&str; 3] = [ABORT, TODO_WRITE, TODO_READ];

/// The file tools' names, as offered to the model.
pub const FILE_TOOL_NAMES: [&str; 7] = ["ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep"];
