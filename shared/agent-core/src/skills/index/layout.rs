//! The layouts of a tenant's `skills/` folder: which keys are skills' SKILL.md files (plain,
//! categorised, or a plugin marketplace's `[group/]plugin/skills/name`), the base prompt, the
//! settings, or files of a skill, and which tenant a key belongs to (its skills' files, or its agents').

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::SkillEntry;
use crate::ids::{SkillPath, UserId};
use crate::skills::agents::{classify_agent, AgentFile};
use crate::skills::frontmatter::SkipReason;
use crate::skills::settings::SETTINGS_FILE;

/// The tenant's base prompt override, relative to `{user}/skills/`.
pub const BASE_PROMPT_FILE: &str = "BASE_PROMPT.md";

/// Where a file under `{user}/skills/` sits in the layouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillFile {
    /// `BASE_PROMPT.md` at the top.
    BasePrompt,
    /// `settings.json` at the top.
    Settings,
    /// `{name}/SKILL.md` or `{category}/{name}/SKILL.md`.
    Skill(SkillPath),
    /// A SKILL.md that cannot be a skill (too deep, or a folder name that is not usable).
    Unusable(SkipReason),
    /// Any other file: not the index's business.
    Other,
}

/// Classifies `rel`, a key relative to `{user}/skills/`.
pub fn classify(rel: &str) -> SkillFile {
    if rel == BASE_PROMPT_FILE {
        return SkillFile::BasePrompt;
    }
    if rel == SETTINGS_FILE {
        return SkillFile::Settings;
    }
    let parts: Vec<&str> = rel.split('/').collect();
    // A hidden folder (`.git/`, `.claude-plugin/`, another tool's copy such as `.gemini/`) holds no
    // skill of the tenant's, as `skills sync` never uploads one.
    if parts.iter().any(|part| part.starts_with('.')) {
        return SkillFile::Other;
    }
    let path = match parts.as_slice() {
        [name, "SKILL.md"] => SkillPath::plain(name),
        [category, name, "SKILL.md"] => SkillPath::new(category, name),
        [plugin, "skills", name, "SKILL.md"] => SkillPath::in_plugin(None, plugin, name),
        [group, plugin, "skills", name, "SKILL.md"] => SkillPath::in_plugin(Some(group), plugin, name),
        ["SKILL.md"] => {
            return SkillFile::Unusable(SkipReason::BadFolder("a SKILL.md needs a folder of its own".to_owned()))
        }
        [.., "SKILL.md"] => return SkillFile::Unusable(SkipReason::TooDeep),
        _ => return SkillFile::Other,
    };
    match path {
        Ok(path) => SkillFile::Skill(path),
        Err(err) => SkillFile::Unusable(SkipReason::BadFolder(err.to_string())),
    }
}

/// A tenant's file the index keeps something of.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TenantFile {
    /// A file relative to `{user}/skills/`: a SKILL.md, BASE_PROMPT.md, or any file of a skill.
    Skill(String),
    /// A Markdown file relative to `{user}/agents/` ([`classify_agent`] says what it is).
    Agent(String),
    /// The tenant's default versions of its published skills (`skill-versions/defaults.json`).
    Defaults,
    /// A file of a published version (the runtime's `.bundle/` files, written after the version),
    /// by skill and content hash.
    Version(SkillPath, String),
}

/// The tenant and the file of an object key, when the key is a file under a valid tenant's
/// `skills/` prefix (a SKILL.md, BASE_PROMPT.md, or any file of a skill, whose skill's file list
/// the index keeps) or a Markdown file under its `agents/`.
pub fn tenant_file(key: &str) -> Option<(UserId, TenantFile)> {
    let (user, rest) = key.split_once('/')?;
    if let Some(rest) = rest.strip_prefix("skill-versions/") {
        return Some((UserId::parse(user).ok()?, version_file(rest)?));
    }
    let file = match (rest.strip_prefix("skills/"), rest.strip_prefix("agents/")) {
        (Some(rel), _) if !rel.is_empty() && !rel.ends_with('/') => TenantFile::Skill(rel.to_owned()),
        (_, Some(rel)) if !matches!(classify_agent(rel), AgentFile::Other) => TenantFile::Agent(rel.to_owned()),
        _ => return None,
    };
    Some((UserId::parse(user).ok()?, file))
}

/// What a key under `{user}/skill-versions/` is to the index: the defaults, or a version's file.
fn version_file(rest: &str) -> Option<TenantFile> {
    if rest == "defaults.json" {
        return Some(TenantFile::Defaults);
    }
    let (skill, inside) = rest.split_once("/@files/")?;
    let (sha256, rel) = inside.split_once('/')?;
    let valid_hash = sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit());
    (valid_hash && !rel.is_empty()).then_some(())?;
    Some(TenantFile::Version(SkillPath::parse(skill).ok()?, sha256.to_owned()))
}

/// The skills a file (relative to `{user}/skills/`) may belong to, with its path inside each: the
/// plain skill of its first folder, the skill of its first two folders, and the plugin skill of its
/// first three or four (`plugin/skills/name`, `group/plugin/skills/name`), whichever are skills.
/// A skill's own SKILL.md belongs to none.
pub(super) fn owners(rel: &str) -> Vec<(SkillPath, &str)> {
    let mut found = Vec::new();
    let mut rest = rel;
    let mut folders: Vec<&str> = Vec::with_capacity(4);
    while folders.len() < 4 {
        let Some((folder, inside)) = rest.split_once('/') else { break };
        folders.push(folder);
        rest = inside;
        if inside == "SKILL.md" {
            continue;
        }
        let path = match folders.as_slice() {
            [name] => SkillPath::plain(name),
            [category, name] => SkillPath::new(category, name),
            [plugin, "skills", name] => SkillPath::in_plugin(None, plugin, name),
            [group, plugin, "skills", name] => SkillPath::in_plugin(Some(group), plugin, name),
            _ => continue,
        };
        if let Ok(path) = path {
            found.push((path, inside));
        }
    }
    found
}

/// The skills that are files of a plain skill (`category/name` or a plugin's skill whose first
/// folder is a plain skill's folder), by path.
pub fn hidden_skills(skills: &BTreeMap<String, SkillEntry>) -> BTreeSet<String> {
    let plain: HashSet<&str> = skills.values().filter(|e| e.path.category().is_none()).map(|e| e.path.name()).collect();
    skills
        .values()
        .filter(|e| e.path.top_folder().is_some_and(|folder| plain.contains(folder)))
        .map(|e| e.path.to_string())
        .collect()
}

/// Whether `file` (relative to `{user}/skills/`) lies below the folder of one of the usable
/// skills `usable` knows, other than as that skill's own SKILL.md: such a file is one of that
/// skill's files, not a skipped skill.
pub fn inside_a_skill(file: &str, usable: impl Fn(&SkillPath) -> bool) -> bool {
    enclosing_skill(file, usable).is_some()
}

/// The usable skill whose folder holds `file` (relative to `{user}/skills/`) below its own
/// SKILL.md, the outermost first: a plain skill, a category's skill, a plugin's skill.
pub fn enclosing_skill(file: &str, usable: impl Fn(&SkillPath) -> bool) -> Option<SkillPath> {
    let parts: Vec<&str> = file.split('/').collect();
    let candidates = [
        (parts.len() >= 3).then(|| SkillPath::plain(parts[0])),
        (parts.len() >= 4).then(|| SkillPath::new(parts[0], parts[1])),
        (parts.len() >= 5 && parts[1] == "skills").then(|| SkillPath::in_plugin(None, parts[0], parts[2])),
        (parts.len() >= 6 && parts[2] == "skills").then(|| SkillPath::in_plugin(Some(parts[0]), parts[1], parts[3])),
    ];
    candidates.into_iter().flatten().flatten().find(|path| usable(path))
}
