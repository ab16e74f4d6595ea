//! What a model path names: a root, the `/skills` directory or a path inside a root, and whether
//! it is a file, a directory or nothing there.

use super::{path, Entry, Vfs, VfsError};
use crate::ids::{SkillPath, TicketId};

#[derive(Debug, Clone, Copy)]
pub(super) enum RootRef<'v> {
    Workspace,
    Memories,
    Ticket(&'v TicketId),
    Skill(&'v SkillPath),
}

impl RootRef<'_> {
    fn vpath(self) -> String {
        match self {
            RootRef::Workspace => "/workspace".to_owned(),
            RootRef::Memories => "/memories".to_owned(),
            RootRef::Ticket(_) => "/ticket".to_owned(),
            RootRef::Skill(skill) => format!("/skills/{}", skill.name()),
        }
    }

    pub(super) fn join(self, rel: &str) -> String {
        if rel.is_empty() {
            self.vpath()
        } else {
            format!("{}/{rel}", self.vpath())
        }
    }
}

/// A writable root and the path inside it (relative to it, never empty).
pub(super) enum Writable {
    Workspace(String),
    Memories(String),
}

/// What a valid path names.
pub(super) enum Node<'v> {
    /// `/`
    Root,
    /// `/skills` (only when a skill is mounted)
    SkillsDir,
    /// A path inside a root; `rel` is empty for the root itself.
    In { root: RootRef<'v>, rel: String },
}

pub(super) enum Stat {
    File(Entry),
    Dir,
    Missing,
}

pub(super) fn stat(entries: &[Entry], rel: &str) -> Stat {
    if rel.is_empty() {
        return Stat::Dir;
    }
    if let Some(entry) = entries.iter().find(|e| e.rel == rel) {
        return Stat::File(entry.clone());
    }
    let prefix = format!("{rel}/");
    if entries.iter().any(|e| e.rel.starts_with(&prefix)) {
        Stat::Dir
    } else {
        Stat::Missing
    }
}

impl Vfs<'_> {
    /// Validates a model path and says what it names: `None` for a well-formed path that names
    /// nothing visible (an unknown root, an absent ticket, a skill that is not mounted).
    pub(super) fn resolve(&self, raw: &str) -> Result<(Option<Node<'_>>, String), VfsError> {
        let segments = path::parse(raw)?;
        let shown = path::display(&segments);
        let Some((root, rest)) = segments.split_first() else { return Ok((Some(Node::Root), shown)) };
        let node = match (root.as_str(), &self.ticket) {
            ("workspace", _) => Some(Node::In { root: RootRef::Workspace, rel: rest.join("/") }),
            ("memories", _) => Some(Node::In { root: RootRef::Memories, rel: rest.join("/") }),
            ("ticket", Some(ticket)) => Some(Node::In { root: RootRef::Ticket(ticket), rel: rest.join("/") }),
            ("skills", _) => match rest.split_first() {
                None => (!self.mounts.is_empty()).then_some(Node::SkillsDir),
                Some((name, rest)) => {
                    self.skill_by_name(name).map(|skill| Node::In { root: RootRef::Skill(skill), rel: rest.join("/") })
                }
            },
            _ => None,
        };
        Ok((node, shown))
    }

    /// A validated path inside `/workspace` or `/memories` naming a possible file; anything else
    /// is read-only.
    pub(super) fn writable(&self, raw: &str) -> Result<(Writable, String), VfsError> {
        let segments = path::parse(raw)?;
        let shown = path::display(&segments);
        match segments.split_first() {
            Some((root, [])) if root == "workspace" || root == "memories" => Err(VfsError::IsDirectory(shown)),
            Some((root, rest)) if root == "workspace" => Ok((Writable::Workspace(rest.join("/")), shown)),
            Some((root, rest)) if root == "memories" => Ok((Writable::Memories(rest.join("/")), shown)),
            _ => Err(VfsError::ReadOnly(shown)),
        }
    }
}
