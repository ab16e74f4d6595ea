//! A Claude Code plugin marketplace's `.claude-plugin/marketplace.json`, read by `skills validate`:
//! the plugins a repository publishes, the folder of each, and how many of the loaded skills it holds.
//!
//! The catalog needs no such file: it recognises a plugin's skills by their layout,
//! `[{group}/]{plugin}/skills/{name}/SKILL.md`. The file only lets validate say which published
//! plugins hold no skill here, and which skills no plugin publishes.

use std::path::Path;

use serde_json::{json, Value};

/// Where a marketplace keeps its list of plugins.
pub const MARKETPLACE_FILE: &str = ".claude-plugin/marketplace.json";
/// A marketplace file larger than this is not read.
const MAX_MARKETPLACE_BYTES: u64 = 1024 * 1024;
/// Plugins read from one marketplace file.
const MAX_PLUGINS: usize = 1000;

/// The marketplace of `dir` against the loaded skills (the report's `loaded`), or `None` when the
/// folder has no marketplace file.
pub fn report(dir: &Path, loaded: &[Value]) -> Option<Value> {
    let path = dir.join(MARKETPLACE_FILE);
    let size = std::fs::metadata(&path).ok()?.len();
    let unreadable = |problem: String| Some(json!({ "file": MARKETPLACE_FILE, "problem": problem }));
    if size > MAX_MARKETPLACE_BYTES {
        return unreadable(format!("{size} bytes, over the {MAX_MARKETPLACE_BYTES} read"));
    }
    let text = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) => return unreadable(format!("could not be read: {err}")),
    };
    let file: Value = match serde_json::from_slice(&text) {
        Ok(value) => value,
        Err(err) => return unreadable(format!("is not JSON: {err}")),
    };
    let Some(listed) = file["plugins"].as_array() else {
        return unreadable("has no `plugins` list".to_owned());
    };
    let paths: Vec<&str> = loaded.iter().filter_map(|skill| skill["path"].as_str()).collect();
    let sources: Vec<(&str, Result<String, String>)> = listed
        .iter()
        .take(MAX_PLUGINS)
        .map(|plugin| (plugin["name"].as_str().unwrap_or("(no name)"), source_folder(&plugin["source"])))
        .collect();
    let folders: Vec<&str> = sources.iter().filter_map(|(_, folder)| folder.as_deref().ok()).collect();
    // A skill belongs to the innermost plugin folder that holds it (plugins may nest).
    let owner = |path: &str| folders.iter().copied().filter(|folder| within(path, folder)).max_by_key(|f| f.len());
    let mut plugins = Vec::new();
    for (name, folder) in &sources {
        let (folder, warning) = match folder {
            Ok(folder) if !dir.join(folder).is_dir() => (Some(folder), Some("its folder is not here".to_owned())),
            Ok(folder) => (Some(folder), None),
            Err(problem) => (None, Some(problem.clone())),
        };
        let skills = folder.map_or(0, |folder| paths.iter().filter(|path| owner(path) == Some(folder)).count());
        let warning = warning.or_else(|| (skills == 0).then(|| "it holds no skill".to_owned()));
        plugins.push(json!({ "name": name, "source": folder, "skills": skills, "warning": warning }));
    }
    let outside: Vec<&str> = paths.iter().copied().filter(|path| owner(path).is_none()).collect();
    Some(json!({
        "file": MARKETPLACE_FILE,
        "name": file["name"].as_str(),
        "plugins": plugins,
        "not_in_a_plugin": outside,
    }))
}

/// The folder a plugin's `source` names inside the repository (`./engineering-team` →
/// `engineering-team`), or why it names none here.
fn source_folder(source: &Value) -> Result<String, String> {
    let Some(source) = source.as_str() else {
        return Err("its source is not a folder of this repository".to_owned());
    };
    let folder = source.trim_start_matches("./").trim_end_matches('/');
    let clean = !folder.is_empty()
        && !folder.starts_with('/')
        && folder.split('/').all(|part| !part.is_empty() && part != "." && part != "..");
    match clean {
        true => Ok(folder.to_owned()),
        false => Err(format!("its source {source:?} is not a folder inside this repository")),
    }
}

/// Whether the skill at `path` lies in `folder` (or is it).
fn within(path: &str, folder: &str) -> bool {
    path == folder || path.strip_prefix(folder).is_some_and(|rest| rest.starts_with('/'))
}

/// The marketplace part of validate's text report.
pub fn render(marketplace: &Value) -> String {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    if let Some(problem) = marketplace["problem"].as_str() {
        return format!("\nmarketplace: {MARKETPLACE_FILE} {problem}\n");
    }
    let plugins = marketplace["plugins"].as_array().cloned().unwrap_or_default();
    let mut out = format!(
        "\nmarketplace {} ({MARKETPLACE_FILE}): {}\n",
        text(&marketplace["name"]),
        crate::counted(plugins.len() as u64, "plugin", "plugins")
    );
    for plugin in &plugins {
        let skills = crate::counted(plugin["skills"].as_u64().unwrap_or(0), "skill", "skills");
        let source = plugin["source"].as_str().map(|source| format!(" ({source})")).unwrap_or_default();
        out += &format!("  {}{source}: {skills}", text(&plugin["name"]));
        if let Some(warning) = plugin["warning"].as_str() {
            out += &format!(", warning: {warning}");
        }
        out += "\n";
    }
    let outside = marketplace["not_in_a_plugin"].as_array().cloned().unwrap_or_default();
    if !outside.is_empty() {
        out += &format!("  loaded but in no plugin's folder ({}):\n", outside.len());
        for path in &outside {
            out += &format!("    {}\n", text(path));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_a_folder_inside_the_repository() {
        assert_eq!(source_folder(&json!("./engineering-team/")).unwrap(), "engineering-team");
        assert_eq!(source_folder(&json!("./a/b")).unwrap(), "a/b");
        for bad in
            [json!("../x"), json!("/etc"), json!("./"), json!({"source": "github", "repo": "o/r"}), json!("a//b")]
        {
            assert!(source_folder(&bad).is_err(), "{bad}");
        }
        assert!(within("eng/skills/a", "eng"));
        assert!(!within("engineering/skills/a", "eng"));
    }
}
