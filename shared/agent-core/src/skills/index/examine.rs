//! Reading one tenant file for the index: what it is (a skill's SKILL.md, the base prompt, the
//! settings), whether its size and encoding let it be read, and what it contributes: a usable
//! skill, a skipped file with its reason, or a base prompt or settings entry naming its problem.

use super::layout::{classify, SkillFile};
use super::{files_of, BasePromptEntry, IndexedFile, SkillEntry, SkippedEntry, MAX_BASE_PROMPT_BYTES};
use crate::ids::{SkillPath, UserId};
use crate::keys;
use crate::skills::frontmatter::{parse_skill_md, SkipReason, MAX_SKILL_MD_BYTES};
use crate::skills::settings::{SettingsEntry, MAX_SETTINGS_BYTES, SETTINGS_FILE};
use crate::store::{ObjectStore, StoreError};

/// What one file contributes to the index.
pub(super) enum Outcome {
    /// A usable skill, with its files when its folder was listed (and they are within the bound).
    Skill(Box<SkillEntry>, Option<Option<Vec<IndexedFile>>>),
    Skipped(SkippedEntry),
    BasePrompt(BasePromptEntry),
    Settings(SettingsEntry),
    Absent,
}

/// Why a tenant file the index reads is not usable, before its text is looked at.
enum Unreadable {
    TooLarge,
    NotText,
}

/// The kinds of file `examine` reads.
enum Readable {
    Skill(SkillPath),
    BasePrompt,
    Settings,
}

/// What `examine` makes of a file of `size` bytes that cannot be read as text: a skipped skill, or
/// a base prompt or settings entry that names the problem.
fn unreadable(rel: &str, kind: &Readable, etag: String, size: u64, limit: u64, why: Unreadable) -> Outcome {
    let skipped =
        |reason: SkipReason| Outcome::Skipped(SkippedEntry { file: rel.to_owned(), reason: reason.to_string() });
    let problem = match why {
        Unreadable::TooLarge => format!("it is larger than {limit} bytes"),
        Unreadable::NotText => "it is not UTF-8 text".to_owned(),
    };
    match (kind, why) {
        (Readable::Skill(_), Unreadable::TooLarge) => return skipped(SkipReason::TooLarge(size)),
        (Readable::Skill(_), Unreadable::NotText) => return skipped(SkipReason::NotText),
        _ => {}
    }
    tracing::warn!(file = rel, reason = %problem, "ignoring the tenant's file");
    match kind {
        Readable::Settings => {
            Outcome::Settings(SettingsEntry { etag, size, problems: vec![problem], ..SettingsEntry::default() })
        }
        _ => Outcome::BasePrompt(BasePromptEntry { etag, size, text: None, problem: Some(problem) }),
    }
}

/// Reads and parses one file, logging a warning naming the file for anything repaired (what is
/// skipped is logged by [`log_skipped`] once the whole index is known).
pub(super) async fn examine(
    objects: &dyn ObjectStore,
    user: &UserId,
    rel: &str,
    listed_size: Option<u64>,
) -> Result<Outcome, StoreError> {
    let key = format!("{}{rel}", keys::skills_prefix(user));
    let (kind, limit) = match classify(rel) {
        SkillFile::Other => return Ok(Outcome::Absent),
        SkillFile::Unusable(reason) => {
            return Ok(Outcome::Skipped(SkippedEntry { file: rel.to_owned(), reason: reason.to_string() }))
        }
        SkillFile::BasePrompt => (Readable::BasePrompt, MAX_BASE_PROMPT_BYTES),
        SkillFile::Settings => (Readable::Settings, MAX_SETTINGS_BYTES),
        SkillFile::Skill(path) => (Readable::Skill(path), MAX_SKILL_MD_BYTES),
    };
    // The size decides before any download: from the caller's listing, or a listing of the skill's
    // folder (which also gives its files), or of the key.
    let mut files = None;
    let listed_size = match (listed_size, &kind) {
        (Some(size), _) => size,
        (None, Readable::Skill(skill)) => {
            let prefix = keys::skills_prefix(user);
            let listed = objects.list(&keys::skill_prefix(user, skill)).await?;
            let Some(size) = listed.iter().find(|meta| meta.key == key).map(|meta| meta.size) else {
                return Ok(Outcome::Absent);
            };
            let rels = listed.iter().filter_map(|meta| Some((meta.key.strip_prefix(&prefix)?, meta)));
            files = Some(files_of(|owner| owner == skill, rels).remove(&skill.to_string()).unwrap_or(Some(Vec::new())));
            size
        }
        (None, _) => match objects.list(&key).await?.into_iter().find(|meta| meta.key == key) {
            Some(meta) => meta.size,
            None => return Ok(Outcome::Absent),
        },
    };
    if listed_size > limit {
        return Ok(unreadable(rel, &kind, String::new(), listed_size, limit, Unreadable::TooLarge));
    }
    let Some(object) = objects.get(&key).await? else { return Ok(Outcome::Absent) };
    let size = object.bytes.len() as u64;
    if size > limit {
        return Ok(unreadable(rel, &kind, object.etag, size, limit, Unreadable::TooLarge));
    }
    let Ok(text) = String::from_utf8(object.bytes) else {
        return Ok(unreadable(rel, &kind, object.etag, size, limit, Unreadable::NotText));
    };
    let path = match kind {
        Readable::Settings => {
            let entry = SettingsEntry::parse(object.etag, size, &text);
            for problem in &entry.problems {
                tracing::warn!(file = SETTINGS_FILE, reason = %problem, "left out of the tenant's settings");
            }
            return Ok(Outcome::Settings(entry));
        }
        Readable::BasePrompt => {
            return Ok(Outcome::BasePrompt(BasePromptEntry {
                etag: object.etag,
                size,
                text: Some(text),
                problem: None,
            }))
        }
        Readable::Skill(path) => path,
    };
    match parse_skill_md(&text, path.name()) {
        Err(reason) => Ok(Outcome::Skipped(SkippedEntry { file: rel.to_owned(), reason: reason.to_string() })),
        Ok(parsed) => {
            for warning in &parsed.warnings {
                tracing::warn!(file = %rel, reason = %warning, "skill loaded with a warning");
            }
            let fm = parsed.frontmatter;
            let entry = SkillEntry {
                path,
                etag: object.etag,
                size,
                name: fm.name,
                description: fm.description,
                category: fm.category,
                tools: fm.tools,
                declared_tools: fm.declared_tools,
                warnings: parsed.warnings,
                unmet_needs: Vec::new(),
                version: None,
            };
            Ok(Outcome::Skill(Box::new(entry), files))
        }
    }
}
