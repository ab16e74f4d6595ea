//! Skills: SKILL.md frontmatter parsing, the tenant's catalog (cached by ETag), and its listing.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::stream::{self, StreamExt, TryStreamExt};
use serde::Deserialize;
use thiserror::Error;

use crate::ids::{SkillPath, UserId};
use crate::keys;
use crate::store::{ObjectMeta, ObjectStore, StoreError};

/// Longest name and description accepted, as in the Agent Skills specification.
const MAX_NAME_LEN: usize = 64;
const MAX_DESCRIPTION_LEN: usize = 1024;
/// SKILL.md files larger than this are skipped: they would not fit a prompt anyway.
const MAX_SKILL_MD_BYTES: usize = 512 * 1024;
/// How many SKILL.md files a cold catalog load fetches at once.
const FETCH_CONCURRENCY: usize = 16;
/// Entries kept by the process-wide cache before it starts over; bounds memory on a warm Lambda.
const CACHE_CAPACITY: usize = 8192;

/// Why a SKILL.md was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrontmatterError {
    #[error("the file does not start with a `---` frontmatter line")]
    MissingOpening,
    #[error("the frontmatter has no closing `---` line")]
    MissingClosing,
    #[error("the frontmatter is not valid YAML: {0}")]
    Yaml(String),
    #[error("the frontmatter field `{field}` {problem}")]
    Field { field: &'static str, problem: &'static str },
    #[error("the file is not UTF-8 text")]
    NotText,
    #[error("the file is larger than {MAX_SKILL_MD_BYTES} bytes")]
    TooLarge,
}

/// A list of tool names, written as a YAML list or as one space- or comma-separated string.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ToolList {
    List(Vec<String>),
    Text(String),
}

impl ToolList {
    fn into_names(self) -> Vec<String> {
        match self {
            ToolList::List(names) => names.into_iter().map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()).collect(),
            ToolList::Text(text) => text
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }
}

#[derive(Debug, Deserialize)]
struct RawFrontmatter {
    name: Option<serde_norway::Value>,
    description: Option<serde_norway::Value>,
    category: Option<String>,
    tools: Option<ToolList>,
    #[serde(rename = "allowed-tools")]
    allowed_tools: Option<ToolList>,
    #[serde(flatten)]
    extra: BTreeMap<String, serde_json::Value>,
}

/// The parsed frontmatter of a SKILL.md.
#[derive(Debug, Clone, PartialEq)]
pub struct Frontmatter {
    pub name: String,
    pub description: String,
    pub category: Option<String>,
    /// Declared tools (`tools`, or `allowed-tools` from the Agent Skills spec); `None` when neither is present.
    pub tools: Option<Vec<String>>,
    /// Every other key, kept for later features.
    pub extra: BTreeMap<String, serde_json::Value>,
}

fn required_text(
    value: Option<serde_norway::Value>,
    field: &'static str,
    max: usize,
) -> Result<String, FrontmatterError> {
    let text = match value {
        None | Some(serde_norway::Value::Null) => return Err(FrontmatterError::Field { field, problem: "is missing" }),
        Some(serde_norway::Value::String(text)) => text.trim().to_owned(),
        Some(_) => return Err(FrontmatterError::Field { field, problem: "must be a string" }),
    };
    if text.is_empty() {
        return Err(FrontmatterError::Field { field, problem: "is empty" });
    }
    if text.chars().count() > max {
        return Err(FrontmatterError::Field { field, problem: "is too long" });
    }
    Ok(text)
}

/// Splits a SKILL.md into its frontmatter and validates the fields the runtime relies on.
pub fn parse_frontmatter(text: &str) -> Result<Frontmatter, FrontmatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Err(FrontmatterError::MissingOpening);
    }
    let mut yaml = String::new();
    let mut closed = false;
    for line in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err(FrontmatterError::MissingClosing);
    }
    let raw: RawFrontmatter = match serde_norway::from_str(&yaml) {
        Ok(raw) => raw,
        Err(err) => return Err(FrontmatterError::Yaml(err.to_string())),
    };
    let name = required_text(raw.name, "name", MAX_NAME_LEN)?;
    let description = required_text(raw.description, "description", MAX_DESCRIPTION_LEN)?;
    let tools = raw.tools.or(raw.allowed_tools).map(ToolList::into_names);
    Ok(Frontmatter { name, description, category: raw.category, tools, extra: raw.extra })
}

/// A skill of the tenant's catalog: where it lives, its frontmatter and its whole SKILL.md.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillDoc {
    pub path: SkillPath,
    pub frontmatter: Frontmatter,
    pub content: String,
}

/// All valid skills of one tenant, plus its base prompt override if it has one.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    skills: BTreeMap<SkillPath, Arc<SkillDoc>>,
    base_prompt: Option<Arc<str>>,
    /// Every object under the tenant's `skills/` prefix, as listed for this turn, so the virtual
    /// filesystem can show a loaded skill's files without listing them again.
    objects: Vec<ObjectMeta>,
}

impl Catalog {
    pub fn from_skills(skills: impl IntoIterator<Item = SkillDoc>) -> Self {
        Self {
            skills: skills.into_iter().map(|doc| (doc.path.clone(), Arc::new(doc))).collect(),
            base_prompt: None,
            objects: Vec::new(),
        }
    }

    pub fn get(&self, path: &SkillPath) -> Option<&Arc<SkillDoc>> {
        self.skills.get(path)
    }

    pub fn len(&self) -> usize {
        self.skills.len()
    }

    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<SkillDoc>> {
        self.skills.values()
    }

    /// The listing of the tenant's `skills/` prefix this catalog was built from.
    pub fn objects(&self) -> &[ObjectMeta] {
        &self.objects
    }

    /// The tenant's `BASE_PROMPT.md`, when it has one.
    pub fn base_prompt(&self) -> Option<&str> {
        self.base_prompt.as_deref()
    }

    /// Up to `limit` skill paths closest to `wanted` (by name or full path), best first.
    pub fn closest(&self, wanted: &str, limit: usize) -> Vec<&SkillPath> {
        let wanted = wanted.trim_matches('/').to_lowercase();
        let mut scored: Vec<(f64, &SkillPath)> = self
            .skills
            .keys()
            .map(|path| {
                let by_name = strsim::jaro_winkler(&wanted, &path.name().to_lowercase());
                let by_path = strsim::jaro_winkler(&wanted, &path.to_string().to_lowercase());
                (by_name.max(by_path), path)
            })
            .filter(|(score, _)| *score >= 0.6)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        scored.into_iter().take(limit).map(|(_, path)| path).collect()
    }

    /// The listing that fills `{skill}` when no skill is loaded: grouped by category,
    /// with the exact argument `load_skill` takes.
    pub fn listing(&self) -> String {
        if self.skills.is_empty() {
            return "No skills are available for this account.".to_owned();
        }
        let mut by_category: BTreeMap<&str, Vec<&SkillDoc>> = BTreeMap::new();
        for doc in self.skills.values() {
            by_category.entry(doc.path.category()).or_default().push(doc);
        }
        let mut out = String::from(
            "Available skills. Before working on a task a skill covers, load it with \
             load_skill(skill_path=\"category/name\"); its instructions then replace these.\n",
        );
        for (category, docs) in by_category {
            out.push_str(&format!("\n### {category}\n"));
            for doc in docs {
                out.push_str(&format!(
                    "- {} (load_skill(\"{}\")): {}\n",
                    doc.frontmatter.name,
                    doc.path,
                    doc.frontmatter.description.replace('\n', " ")
                ));
            }
        }
        out
    }
}

/// What the cache remembers of one object at one ETag: the parsed skill, or why it was skipped.
#[derive(Debug, Clone)]
enum Cached {
    Skill(Arc<SkillDoc>),
    Skipped,
    Text(Arc<str>),
}

/// A process-wide cache of parsed SKILL.md files keyed by object key and ETag, so a warm
/// invocation only lists the tenant's prefix and fetches what changed.
#[derive(Debug, Default)]
pub struct SkillCache {
    entries: Mutex<HashMap<String, (String, Cached)>>,
}

impl SkillCache {
    pub fn new() -> Self {
        Self::default()
    }

    fn lookup(&self, key: &str, etag: &str) -> Option<Cached> {
        let entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        entries.get(key).filter(|(cached_etag, _)| cached_etag == etag).map(|(_, cached)| cached.clone())
    }

    fn remember(&self, key: String, etag: String, cached: Cached) {
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if entries.len() >= CACHE_CAPACITY && !entries.contains_key(&key) {
            entries.clear();
        }
        entries.insert(key, (etag, cached));
    }

    /// Loads the tenant's catalog: one listing of `{user}/skills/` (one request per 1000 objects)
    /// plus a GET only for SKILL.md files (and the base prompt) not cached at their current ETag.
    /// A skill with broken frontmatter is skipped with a warning naming the file and the reason.
    pub async fn load_catalog(&self, objects: &dyn ObjectStore, user: &UserId) -> Result<Catalog, StoreError> {
        let prefix = keys::skills_prefix(user);
        let base_prompt_key = keys::base_prompt_key(user);
        let listing = objects.list(&prefix).await?;

        let mut wanted = Vec::new();
        for meta in &listing {
            if meta.key == base_prompt_key {
                wanted.push((None, meta.clone()));
                continue;
            }
            let Some(rest) = meta.key.strip_prefix(&prefix) else { continue };
            let parts: Vec<&str> = rest.split('/').collect();
            if let [category, name, "SKILL.md"] = parts.as_slice() {
                match SkillPath::new(category, name) {
                    Ok(path) => wanted.push((Some(path), meta.clone())),
                    Err(err) => {
                        tracing::warn!(key = %meta.key, reason = %err, "skipping skill with an invalid folder name")
                    }
                }
            }
        }

        let resolved: Vec<Cached> = stream::iter(wanted)
            .map(|(path, meta)| async move {
                if let Some(cached) = self.lookup(&meta.key, &meta.etag) {
                    return Ok(cached);
                }
                let cached = match objects.get(&meta.key).await? {
                    // The object vanished between the listing and the GET: treat it as absent this turn.
                    None => return Ok(Cached::Skipped),
                    Some(object) => decode(path, &meta.key, object.bytes),
                };
                self.remember(meta.key.clone(), meta.etag.clone(), cached.clone());
                Ok::<_, StoreError>(cached)
            })
            .buffered(FETCH_CONCURRENCY)
            .try_collect()
            .await?;

        let mut catalog = Catalog { objects: listing, ..Catalog::default() };
        for cached in resolved {
            match cached {
                Cached::Skill(doc) => {
                    catalog.skills.insert(doc.path.clone(), doc);
                }
                Cached::Text(text) => catalog.base_prompt = Some(text),
                Cached::Skipped => {}
            }
        }
        Ok(catalog)
    }
}

fn decode(path: Option<SkillPath>, key: &str, bytes: Vec<u8>) -> Cached {
    if bytes.len() > MAX_SKILL_MD_BYTES {
        tracing::warn!(key, reason = %FrontmatterError::TooLarge, "skipping skill");
        return Cached::Skipped;
    }
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(_) => {
            tracing::warn!(key, reason = %FrontmatterError::NotText, "skipping file");
            return Cached::Skipped;
        }
    };
    let Some(path) = path else {
        return Cached::Text(Arc::from(text));
    };
    match parse_frontmatter(&text) {
        Ok(frontmatter) => Cached::Skill(Arc::new(SkillDoc { path, frontmatter, content: text })),
        Err(reason) => {
            tracing::warn!(key, %reason, "skipping skill with broken frontmatter");
            Cached::Skipped
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_required_and_optional_fields() {
        let fm = parse_frontmatter(
            "---\nname: compraventa\ndescription: Escrituras de compraventa\ncategory: escrituras\ntools: [read_file, ls]\nversion: 2\n---\n# Body\n",
        )
        .unwrap();
        assert_eq!(fm.name, "compraventa");
        assert_eq!(fm.category.as_deref(), Some("escrituras"));
        assert_eq!(fm.tools, Some(vec!["read_file".to_owned(), "ls".to_owned()]));
        assert_eq!(fm.extra.get("version"), Some(&serde_json::json!(2)));
    }

    #[test]
    fn accepts_allowed_tools_as_list_or_string() {
        let fm = parse_frontmatter("---\nname: a\ndescription: b\nallowed-tools: read_file write_file\n---\n").unwrap();
        assert_eq!(fm.tools, Some(vec!["read_file".to_owned(), "write_file".to_owned()]));
        let fm = parse_frontmatter("---\nname: a\ndescription: b\n---\n").unwrap();
        assert_eq!(fm.tools, None);
    }

    #[test]
    fn reports_why_frontmatter_is_broken() {
        assert_eq!(parse_frontmatter("# no frontmatter"), Err(FrontmatterError::MissingOpening));
        assert_eq!(parse_frontmatter("---\nname: a\n"), Err(FrontmatterError::MissingClosing));
        assert!(matches!(parse_frontmatter("---\nname: [a\n---\n"), Err(FrontmatterError::Yaml(_))));
        assert_eq!(
            parse_frontmatter("---\ndescription: b\n---\n"),
            Err(FrontmatterError::Field { field: "name", problem: "is missing" })
        );
        assert_eq!(
            parse_frontmatter("---\nname: a\ndescription: [1]\n---\n"),
            Err(FrontmatterError::Field { field: "description", problem: "must be a string" })
        );
    }

    fn doc(path: &str, name: &str, description: &str) -> SkillDoc {
        SkillDoc {
            path: SkillPath::parse(path).unwrap(),
            frontmatter: Frontmatter {
                name: name.into(),
                description: description.into(),
                category: None,
                tools: None,
                extra: BTreeMap::new(),
            },
            content: String::new(),
        }
    }

    #[test]
    fn listing_groups_by_category_and_says_how_to_load() {
        let catalog = Catalog::from_skills([
            doc("escrituras/compraventa", "compraventa", "Compraventas"),
            doc("contratos/arrendamiento", "arrendamiento", "Alquileres"),
        ]);
        let listing = catalog.listing();
        let contratos = listing.find("### contratos").unwrap();
        let escrituras = listing.find("### escrituras").unwrap();
        assert!(contratos < escrituras);
        assert!(listing.contains("- compraventa (load_skill(\"escrituras/compraventa\")): Compraventas"));
        assert_eq!(catalog.closest("compraventas", 3)[0].to_string(), "escrituras/compraventa");
    }
}
