//! `GET /skills`: the tenant's skills as the operator needs to see them, one page of the catalog
//! (`?limit=&cursor=`) or the best matches of a search (`?q=&limit=`), with what each skill declares,
//! what was repaired, and every skipped SKILL.md and agent file with the reason.

use agent_core::skills::{Catalog, CatalogView, SkillEntry};
use serde_json::{json, Value};

use super::message::Query;
use crate::api::ApiError;

/// Skills per page of `GET /skills`, by default and at most: a page stays far below Lambda's
/// 6 MB response limit even with 1,024-character descriptions.
const DEFAULT_SKILLS_PAGE: usize = 200;
const MAX_SKILLS_PAGE: usize = 1000;
/// Matches a search (`GET /skills?q=`) answers by default.
const DEFAULT_SKILLS_FOUND: usize = 20;
/// Longest search accepted, in characters (the search itself reads at most
/// [`agent_core::skills::search::MAX_QUERY_CHARS`]).
pub const MAX_SKILLS_QUERY_CHARS: usize = 256;

/// `GET /skills?limit=&cursor=`: the cursor is the last path of the previous page.
/// `GET /skills?q=&limit=`: the best matches for `q`, in one page.
pub(super) struct SkillsPage {
    pub(super) limit: usize,
    pub(super) after: Option<String>,
    pub(super) query: Option<String>,
}

impl SkillsPage {
    pub(super) fn from_query(query: &Query) -> Result<Self, ApiError> {
        let search = match query.first("q") {
            None => None,
            Some(raw) => {
                let text = raw.trim();
                if text.is_empty() {
                    return Err(ApiError::bad_request("`q` must not be empty: send a few words about the task"));
                }
                if text.chars().count() > MAX_SKILLS_QUERY_CHARS {
                    return Err(ApiError::bad_request(format!(
                        "`q` must be at most {MAX_SKILLS_QUERY_CHARS} characters"
                    )));
                }
                Some(text.to_owned())
            }
        };
        let limit = match query.first("limit") {
            None if search.is_some() => DEFAULT_SKILLS_FOUND,
            None => DEFAULT_SKILLS_PAGE,
            Some(raw) => match raw.parse::<usize>() {
                Ok(limit) if (1..=MAX_SKILLS_PAGE).contains(&limit) => limit,
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "`limit` must be a whole number from 1 to {MAX_SKILLS_PAGE}"
                    )))
                }
            },
        };
        let after = query.first("cursor").map(str::to_owned).filter(|cursor| !cursor.is_empty());
        if after.as_ref().is_some_and(|cursor| cursor.len() > 256) {
            return Err(ApiError::bad_request("`cursor` is too long"));
        }
        if search.is_some() && after.is_some() {
            return Err(ApiError::bad_request("a search (`q`) answers in one page: send it without `cursor`"));
        }
        Ok(Self { limit, after, query: search })
    }
}

/// `GET /skills`: the best matches of the page's search (`q`), or else one page of the catalog.
pub(super) fn skills_answer(catalog: &Catalog, view: &CatalogView, page: &SkillsPage, has_sandbox: bool) -> Value {
    match &page.query {
        Some(query) => skills_search_view(catalog, view, query, page.limit, has_sandbox),
        None => skills_view(catalog, view, page, has_sandbox),
    }
}

/// The tenant's skills as the operator needs to see them: every usable skill with what it
/// declares and what was repaired, and every skipped SKILL.md with the reason.
/// One page of the catalog, in path order, as its owner reads it (see [`skill_entry_view`]).
fn skills_view(catalog: &Catalog, view: &CatalogView, page: &SkillsPage, has_sandbox: bool) -> Value {
    let entries = &view.entries;
    let start = match &page.after {
        Some(after) => entries.partition_point(|entry| entry.path.to_string().as_str() <= after.as_str()),
        None => 0,
    };
    let shown = &entries[start..(start + page.limit).min(entries.len())];
    let skills: Vec<Value> = shown.iter().map(|entry| skill_entry_view(entry, has_sandbox)).collect();
    let next_cursor = (start + shown.len() < entries.len()).then(|| shown.last().map(|e| e.path.to_string())).flatten();
    catalog_answer(catalog, view, skills, next_cursor)
}

/// `GET /skills?q=`: the best matches for `query`, best first, found by the same search and ranking
/// as the model's `find_skills`, in the shape of a listing page (no `next_cursor`) with the query.
fn skills_search_view(catalog: &Catalog, view: &CatalogView, query: &str, limit: usize, has_sandbox: bool) -> Value {
    let found = view.find(query, limit);
    let skills: Vec<Value> = found.iter().map(|entry| skill_entry_view(entry, has_sandbox)).collect();
    let mut answer = catalog_answer(catalog, view, skills, None);
    answer["query"] = Value::from(query);
    answer
}

/// The fields every `GET /skills` answer has around its `skills`: the catalog's count, its skipped
/// files (SKILL.md files and agent files), its base prompt and its settings.
fn catalog_answer(catalog: &Catalog, view: &CatalogView, skills: Vec<Value>, next_cursor: Option<String>) -> Value {
    // Skipped files are few in practice; a page of them keeps the answer bounded all the same.
    let skipped: Vec<Value> = view
        .skipped
        .iter()
        .take(MAX_SKILLS_PAGE)
        .map(|skipped| json!({"file": skipped.file, "reason": skipped.reason}))
        .collect();
    // The index keeps a bounded list of them (the rest counted in one last entry).
    let skipped_agents: Vec<Value> = catalog
        .skipped_agents()
        .iter()
        .take(MAX_SKILLS_PAGE)
        .map(|skipped| json!({"file": skipped.file, "reason": skipped.reason}))
        .collect();
    let base_prompt = catalog.base_prompt_entry().map(|base| {
        json!({"file": "BASE_PROMPT.md", "size": base.size, "usable": base.text.is_some(), "problem": base.problem})
    });
    // The approval rules the tenant added, and what of its settings.json is left out and why.
    let settings = catalog.settings_entry().map(|settings| {
        json!({
            "file": agent_core::skills::settings::SETTINGS_FILE,
            "size": settings.size,
            "ask": settings.ask,
            "allow": settings.allow,
            "problems": settings.problems,
        })
    });
    json!({
        "count": view.entries.len(),
        "skills": skills,
        "next_cursor": next_cursor,
        "skipped": skipped,
        "skipped_count": view.skipped.len(),
        "skipped_agents": skipped_agents,
        "base_prompt": base_prompt,
        "settings": settings,
    })
}

/// One usable skill as its owner reads it. Without a sandbox, `execute` is not among its tools and
/// its `Bash` declarations get the warning any tool this deployment lacks gets.
fn skill_entry_view(entry: &SkillEntry, has_sandbox: bool) -> Value {
    let mut tools = entry.tools.clone();
    let mut warnings = entry.warnings.clone();
    warnings.extend(agent_core::skills::bundle::unmet_warning(&entry.unmet_needs));
    if !has_sandbox {
        let bash: Vec<&str> = entry
            .declared_tools
            .iter()
            .flatten()
            .map(|name| name.trim())
            .filter(|name| *name == "Bash" || name.starts_with("Bash("))
            .collect();
        if let Some(tools) = tools.as_mut() {
            tools.retain(|tool| tool != agent_core::tools::EXECUTE);
        }
        if !bash.is_empty() {
            warnings.push(format!(
                "`allowed-tools` names {}, which runs commands, and this deployment has no sandbox (SANDBOX)",
                bash.join(", ")
            ));
        }
    }
    json!({
        "path": entry.path.to_string(),
        "name": entry.name,
        "description": entry.description,
        // The category the listing groups it under: its folder's, else its frontmatter's.
        "category": entry.path.category().or(entry.category.as_deref()),
        "tools": tools,
        "declared_tools": entry.declared_tools,
        "warnings": warnings,
        "unmet_needs": entry.unmet_needs,
    })
}
