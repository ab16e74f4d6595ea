//! The object-store key layout, in one place: every key is `{user_id}/...`, built from validated ids.

use crate::ids::{AgentName, MemoryPath, SessionId, SkillPath, TicketId, UserId};

/// Prefix of all of a tenant's skills: `{user}/skills/`.
pub fn skills_prefix(user: &UserId) -> String {
    format!("{user}/skills/")
}

/// The tenant's override of the base prompt template, found by the same listing as the skills.
pub fn base_prompt_key(user: &UserId) -> String {
    format!("{user}/skills/BASE_PROMPT.md")
}

/// Prefix of one skill's files: `{user}/skills/{category}/{name}/` or `{user}/skills/{name}/`.
pub fn skill_prefix(user: &UserId, skill: &SkillPath) -> String {
    format!("{user}/skills/{skill}/")
}

/// A skill's `SKILL.md`.
pub fn skill_md_key(user: &UserId, skill: &SkillPath) -> String {
    format!("{user}/skills/{skill}/SKILL.md")
}

/// Prefix of the tenant's agents (Claude Code's subagent files): `{user}/agents/`.
pub fn agents_prefix(user: &UserId) -> String {
    format!("{user}/agents/")
}

/// One agent's file: `{user}/agents/{name}.md`.
pub fn agent_key(user: &UserId, name: &AgentName) -> String {
    format!("{user}/agents/{name}.md")
}

/// The tenant's catalog index: what a turn needs to list and load skills, in one object. It lives
/// outside `skills/` so that writing it never looks like a change to a skill.
pub fn catalog_index_key(user: &UserId) -> String {
    format!("{}index.json", catalog_prefix(user))
}

/// Prefix of the tenant's catalog index and its parts: `{user}/catalog/`.
pub fn catalog_prefix(user: &UserId) -> String {
    format!("{user}/catalog/")
}

/// Prefix of a ticket's files: `{user}/tickets/{ticket}/`.
pub fn ticket_prefix(user: &UserId, ticket: &TicketId) -> String {
    format!("{user}/tickets/{ticket}/")
}

/// A workspace file's content, addressed by its SHA-256 so that writes are idempotent
/// and a failed turn leaves only unreferenced blobs behind.
pub fn workspace_blob_key(user: &UserId, session: &SessionId, sha256: &str) -> String {
    format!("{user}/workspaces/{session}/blobs/{sha256}")
}

/// A large tool result of a stored turn, addressed by its SHA-256: the history keeps a preview
/// and this key.
pub fn tool_result_key(user: &UserId, session: &SessionId, sha256: &str) -> String {
    format!("{user}/sessions/{session}/results/{sha256}")
}

/// A file as shown to a model (checked, bounded, downscaled where needed), addressed by the SHA-256
/// of those bytes: the session's messages keep only this hash.
pub fn shown_file_key(user: &UserId, session: &SessionId, sha256: &str) -> String {
    format!("{user}/sessions/{session}/files/{sha256}")
}

/// A file uploaded through a presigned link, held until a turn attaches it, addressed by the
/// SHA-256 the uploader declared (and S3 checked).
pub fn upload_key(user: &UserId, session: &SessionId, sha256: &str) -> String {
    format!("{user}/uploads/{session}/{sha256}")
}

/// Where a session store may spill a turn too large for its database item. The content hash in
/// the key means two racing commits of the same turn never overwrite each other's object.
pub fn turn_spill_key(user: &UserId, session: &SessionId, turn: u64, sha256: &str) -> String {
    format!("{user}/sessions/{session}/turns/{turn:010}-{sha256}.json")
}

/// Prefix of the user's long-term memory, `/memories` in the file tools: `{user}/memories/`. It is
/// the user's alone and outlives every session.
pub fn memories_prefix(user: &UserId) -> String {
    format!("{user}/memories/")
}

/// A memory file: `{user}/memories/{path}`, the path validated by [`MemoryPath`].
pub fn memory_key(user: &UserId, path: &MemoryPath) -> String {
    format!("{user}/memories/{path}")
}

/// Prefix of every published version of the tenant's skills: `{user}/skill-versions/`.
pub fn skill_versions_root(user: &UserId) -> String {
    format!("{user}/skill-versions/")
}

/// Prefix of a skill's published versions: `{user}/skill-versions/{skill}/`. The markers below it
/// start with `@`, which no skill path holds, so one skill's versions never mix with another's.
pub fn skill_versions_prefix(user: &UserId, skill: &SkillPath) -> String {
    format!("{user}/skill-versions/{skill}/")
}

/// Prefix of the records of a skill's versions (`@v/{number:08}.json`), listed in number order.
pub fn skill_version_records_prefix(user: &UserId, skill: &SkillPath) -> String {
    format!("{user}/skill-versions/{skill}/@v/")
}

/// One version's record: its number, content hash, files, uploader and time. Written once.
pub fn skill_version_record_key(user: &UserId, skill: &SkillPath, number: u32) -> String {
    format!("{user}/skill-versions/{skill}/@v/{number:08}.json")
}

/// Prefix of one version's files, named by the content's SHA-256: immutable, so a turn reading a
/// version sees its files and no other's.
pub fn skill_version_files_prefix(user: &UserId, skill: &SkillPath, sha256: &str) -> String {
    format!("{user}/skill-versions/{skill}/@files/{sha256}/")
}

/// Which version holds a content hash: what makes the same bytes uploaded twice one version.
pub fn skill_version_hash_key(user: &UserId, skill: &SkillPath, sha256: &str) -> String {
    format!("{user}/skill-versions/{skill}/@sha/{sha256}")
}

/// A version's eval results, one object per run.
pub fn skill_version_evals_prefix(user: &UserId, skill: &SkillPath, number: u32) -> String {
    format!("{user}/skill-versions/{skill}/@evals/{number:08}/")
}

/// The tenant's default version of each published skill: the one record a rebuilt catalog index
/// reads to know which version each published skill serves.
pub fn skill_defaults_key(user: &UserId) -> String {
    format!("{user}/skill-versions/defaults.json")
}

/// A skill's zip staged by a presigned upload until `POST /skills/{path}/versions` publishes it,
/// named by its SHA-256 (tagged like a session's upload, so one never published expires).
pub fn skill_upload_key(user: &UserId, sha256: &str) -> String {
    format!("{user}/skill-uploads/{sha256}")
}
