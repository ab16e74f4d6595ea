//! `cargo xtask skills validate`: what the catalog makes of a folder and of the tenant's agents,
//! read by its own index code, and what each loaded skill's scripts need that the sandbox image lacks.

use super::*;

/// The index the catalog builds from `folder`: the folder's keys in an in-memory store under
/// [`VALIDATE_USER`]'s prefix, then [`build_index`]. Only SKILL.md, BASE_PROMPT.md and settings.json are
/// read (the catalog reads nothing else), within the index's size limits; any other file is an
/// empty object, since only its key counts. A file over its limit is skipped by size, before it
/// is read, as the catalog does from a listing. The agents' Markdown files go under the user's
/// `agents/` in the same way.
async fn index_folder(folder: &Folder, agents: Option<&Folder>) -> Result<CatalogIndex, String> {
    let user = UserId::parse(VALIDATE_USER).map_err(|err| err.to_string())?;
    let prefix = keys::skills_prefix(&user);
    let store = local_store::MemoryObjectStore::new();
    let mut agents_too_large = Vec::new();
    for file in agents.map(|agents| agents.files.as_slice()).unwrap_or_default() {
        if matches!(classify_agent(&file.rel), AgentFile::Other) {
            continue;
        }
        let limit = MAX_AGENT_FILE_BYTES;
        match (file.size <= limit).then(|| read_bounded(&file.path, limit)).transpose()?.flatten() {
            Some(bytes) => {
                store.insert(&format!("{}{}", keys::agents_prefix(&user), file.rel), bytes);
            }
            None => agents_too_large.push(file),
        }
    }
    let mut too_large = Vec::new();
    for file in &folder.files {
        let key = format!("{prefix}{}", file.rel);
        let limit = match classify(&file.rel) {
            SkillFile::Skill(_) => MAX_SKILL_MD_BYTES,
            SkillFile::BasePrompt => MAX_BASE_PROMPT_BYTES,
            SkillFile::Settings => MAX_SETTINGS_BYTES,
            SkillFile::Unusable(_) | SkillFile::Other => {
                store.insert(&key, Vec::new());
                continue;
            }
        };
        match (file.size <= limit).then(|| read_bounded(&file.path, limit)).transpose()?.flatten() {
            Some(bytes) => {
                store.insert(&key, bytes);
            }
            None => too_large.push((file, limit)),
        }
    }
    let mut index = build_index(&store, &user).await.map_err(|err| format!("building the index: {err}"))?;
    for (file, limit) in too_large {
        let size = file.size.max(limit + 1);
        if file.rel == BASE_PROMPT_FILE {
            let problem = Some(format!("it is larger than {limit} bytes"));
            index.base_prompt = Some(BasePromptEntry { etag: String::new(), size, text: None, problem });
        } else if file.rel == SETTINGS_FILE {
            let problems = vec![format!("it is larger than {limit} bytes")];
            index.settings = Some(SettingsEntry { size, problems, ..SettingsEntry::default() });
        } else {
            let reason = SkipReason::TooLarge(size).to_string();
            index.skipped.insert(file.rel.clone(), SkippedEntry { file: file.rel.clone(), reason });
        }
    }
    for file in agents_too_large {
        let (name, reason) = (agent_file(&file.rel), AgentSkip::TooLarge(file.size.max(MAX_AGENT_FILE_BYTES + 1)));
        index.skipped_agents.insert(name.clone(), SkippedEntry { file: name, reason: reason.to_string() });
    }
    Ok(index)
}

/// The agents part of the report: each agent loaded (with its tools and model) or skipped, and why.
fn agents_report(dir: &Path, index: &CatalogIndex) -> Value {
    let loaded: Vec<Value> = index
        .agents
        .values()
        .map(|agent| {
            json!({
                "file": agent_file(&format!("{}.md", agent.name)),
                "name": agent.name,
                "description": agent.description,
                "tools": agent.tools,
                "model": agent.model,
                "warnings": agent.warnings,
            })
        })
        .collect();
    let skipped: Vec<Value> =
        index.skipped_agents.values().map(|entry| json!({ "file": entry.file, "reason": entry.reason })).collect();
    json!({ "dir": dir.display().to_string(), "loaded": loaded, "skipped": skipped })
}

/// The settings part of the text report: the approval rules the tenant adds, and what is left out.
fn render_settings(settings: &Value) -> String {
    let rules = |list: &Value| {
        let rules: Vec<&str> = list.as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        if rules.is_empty() {
            "none".to_owned()
        } else {
            rules.join(", ")
        }
    };
    if settings["status"] == "absent" {
        return format!("\nsettings: no {SETTINGS_FILE}, the deployment's approval rules alone apply\n");
    }
    let mut out = format!(
        "\nsettings: {SETTINGS_FILE} ({} bytes)\n  asks approval for: {}\n  except: {}\n",
        settings["size"],
        rules(&settings["ask"]),
        rules(&settings["allow"])
    );
    for problem in settings["problems"].as_array().into_iter().flatten().filter_map(Value::as_str) {
        out += &format!("  left out: {problem}\n");
    }
    out
}

/// The agents part of the text report.
fn render_agents(agents: &Value) -> String {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let list = |value: &Value| value.as_array().cloned().unwrap_or_default();
    let loaded = list(&agents["loaded"]);
    let mut out = format!("\nagents in {} ({} loaded):\n", text(&agents["dir"]), loaded.len());
    for agent in &loaded {
        let tools = match agent["tools"].as_array() {
            Some(tools) if tools.is_empty() => "none that this runtime has".to_owned(),
            Some(tools) => tools.iter().map(text).collect::<Vec<_>>().join(", "),
            None => "none declared (every tool of the agent that hands it a task)".to_owned(),
        };
        out += &format!("  {}\n    tools: {tools}\n", text(&agent["file"]));
        if let Some(model) = agent["model"].as_str() {
            out += &format!("    model: {model}\n");
        }
        for warning in list(&agent["warnings"]) {
            out += &format!("    warning: {}\n", text(&warning));
        }
    }
    let skipped = list(&agents["skipped"]);
    out += &format!("\nskipped agents ({}):\n", skipped.len());
    for file in &skipped {
        out += &format!("  {}: {}\n", text(&file["file"]), text(&file["reason"]));
    }
    out
}

/// The report of `validate`, as JSON; the text output is rendered from it. `agents` is the agents
/// folder, when there is one.
fn report(dir: &Path, folder: &Folder, agents: Option<&Path>, index: &CatalogIndex) -> Value {
    let hidden = hidden_skills(&index.skills);
    let usable_paths: BTreeSet<&SkillPath> =
        index.skills.iter().filter(|(path, _)| !hidden.contains(*path)).map(|(_, entry)| &entry.path).collect();
    let usable = |path: &SkillPath| usable_paths.contains(path);
    let loaded: Vec<Value> = index
        .skills
        .iter()
        .filter(|(path, _)| !hidden.contains(*path))
        .map(|(path, entry)| {
            json!({
                "file": format!("{path}/SKILL.md"),
                "path": path,
                "name": entry.name,
                "description": entry.description,
                "category": entry.category,
                "tools": entry.tools,
                "declared_tools": entry.declared_tools,
                "files": index.files.get(path).map(Vec::len),
                "warnings": entry.warnings,
            })
        })
        .collect();
    let mut inside = Vec::new();
    for path in &hidden {
        let skill = enclosing_skill(&format!("{path}/SKILL.md"), usable).map(|path| path.to_string());
        inside.push(json!({ "file": format!("{path}/SKILL.md"), "skill": skill, "reason": Value::Null }));
    }
    let mut skipped = Vec::new();
    for (file, entry) in &index.skipped {
        if inside_a_skill(file, usable) {
            let skill = enclosing_skill(file, usable).map(|path| path.to_string());
            inside.push(json!({ "file": file, "skill": skill, "reason": entry.reason }));
        } else {
            skipped.push(json!({ "file": file, "reason": entry.reason }));
        }
    }
    inside.sort_by(|a, b| a["file"].as_str().cmp(&b["file"].as_str()));
    let base_prompt = match &index.base_prompt {
        None => json!({ "status": "absent" }),
        Some(BasePromptEntry { text: Some(text), size, .. }) => match PromptTemplate::parse(text) {
            Ok(_) => json!({ "status": "used", "size": size }),
            Err(err) => json!({ "status": "invalid", "size": size, "problem": err.to_string() }),
        },
        Some(BasePromptEntry { problem, size, .. }) => json!({ "status": "ignored", "size": size, "problem": problem }),
    };
    // The approval rules the tenant's settings.json adds to the deployment's, and what is left out.
    let settings = match &index.settings {
        None => json!({ "status": "absent" }),
        Some(settings) => json!({
            "status": if settings.ask.is_empty() { "no approval rules" } else { "used" },
            "size": settings.size,
            "ask": settings.ask,
            "allow": settings.allow,
            "problems": settings.problems,
        }),
    };
    let warned =
        |list: &[Value]| list.iter().filter(|e| e["warnings"].as_array().is_some_and(|w| !w.is_empty())).count();
    let with_warnings = warned(&loaded);
    let agents = agents.map(|dir| agents_report(dir, index));
    let agent_count = |part: &str| agents.as_ref().and_then(|a| a[part].as_array().map(Vec::len)).unwrap_or(0);
    let agents_with_warnings = agents.as_ref().and_then(|a| a["loaded"].as_array().map(|l| warned(l))).unwrap_or(0);
    json!({
        "dir": dir.display().to_string(),
        "loaded": loaded,
        "inside_a_skill": inside,
        "skipped": skipped,
        "base_prompt": base_prompt,
        "settings": settings,
        "agents": agents,
        "ignored": folder.ignored.iter().map(|(path, reason)| json!({ "path": path, "reason": reason })).collect::<Vec<_>>(),
        "totals": {
            "files": folder.files.len(),
            "loaded": loaded.len(),
            "with_warnings": with_warnings,
            "inside_a_skill": inside.len(),
            "skipped": skipped.len(),
            "ignored": folder.ignored.len(),
            "agents": agent_count("loaded"),
            "agents_with_warnings": agents_with_warnings,
            "skipped_agents": agent_count("skipped"),
        },
    })
}

/// The report as text for a terminal or a CI log.
fn render(report: &Value) -> String {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let list = |value: &Value| value.as_array().cloned().unwrap_or_default();
    let mut out = format!("skills in {} as the catalog reads them\n", text(&report["dir"]));
    let loaded = list(&report["loaded"]);
    out += &format!("\nloaded ({}):\n", loaded.len());
    for skill in &loaded {
        let tools = match skill["tools"].as_array() {
            Some(tools) if tools.is_empty() => "none that this runtime has".to_owned(),
            Some(tools) => tools.iter().map(text).collect::<Vec<_>>().join(", "),
            None => "none declared (every tool offered)".to_owned(),
        };
        let name = match skill["name"] == skill["path"].as_str().and_then(|p| p.rsplit('/').next()).unwrap_or_default()
        {
            true => String::new(),
            false => format!(" (name: {})", text(&skill["name"])),
        };
        out += &format!("  {}{name}\n    tools: {tools}\n", text(&skill["file"]));
        if let Some(files) = skill["files"].as_u64() {
            out += &format!("    other files: {files}\n");
        }
        for warning in list(&skill["warnings"]) {
            out += &format!("    warning: {}\n", text(&warning));
        }
        for line in needs::render_skill(&skill["needs"]) {
            out += &format!("    {line}\n");
        }
        let optional: Vec<String> = list(&skill["optional_needs"]).iter().map(text).collect();
        if !optional.is_empty() {
            out += &format!(
                "    optional needs (imported only inside try: … except ImportError): {}\n",
                optional.join(", ")
            );
        }
    }
    let inside = list(&report["inside_a_skill"]);
    if !inside.is_empty() {
        out += &format!("\ninside a skill's folder, so files of that skill, not skills ({}):\n", inside.len());
        for file in &inside {
            out += &format!("  {} (in {})\n", text(&file["file"]), text(&file["skill"]));
        }
    }
    let skipped = list(&report["skipped"]);
    out += &format!("\nskipped ({}):\n", skipped.len());
    for file in &skipped {
        out += &format!("  {}: {}\n", text(&file["file"]), text(&file["reason"]));
    }
    let base = &report["base_prompt"];
    out += &match text(&base["status"]).as_str() {
        "used" => format!("\nbase prompt: {BASE_PROMPT_FILE} ({} bytes), used\n", base["size"]),
        "invalid" => {
            format!(
                "\nbase prompt: {BASE_PROMPT_FILE} is not a usable template, every turn would fail: {}\n",
                text(&base["problem"])
            )
        }
        "ignored" => {
            format!(
                "\nbase prompt: {BASE_PROMPT_FILE} ignored ({}); the built-in prompt is used\n",
                text(&base["problem"])
            )
        }
        _ => format!("\nbase prompt: no {BASE_PROMPT_FILE}, the built-in prompt is used\n"),
    };
    out += &render_settings(&report["settings"]);
    if !report["agents"].is_null() {
        out += &render_agents(&report["agents"]);
    }
    if !report["marketplace"].is_null() {
        out += &marketplace::render(&report["marketplace"]);
    }
    let ignored = list(&report["ignored"]);
    if !ignored.is_empty() {
        out += &format!("\nleft out ({}):\n", ignored.len());
        for entry in &ignored {
            out += &format!("  {}: {}\n", text(&entry["path"]), text(&entry["reason"]));
        }
    }
    let totals = &report["totals"];
    out += &format!("\n{}", needs::render_summary(&report["needs"], &totals["needs"]));
    let count = |name: &str| totals[name].as_u64().unwrap_or(0);
    out += &format!(
        "\n{} loaded ({} with warnings), {} skipped, {} inside skills, {}\n",
        crate::counted(count("loaded"), "skill", "skills"),
        count("with_warnings"),
        count("skipped"),
        crate::counted(count("inside_a_skill"), "SKILL.md file", "SKILL.md files"),
        crate::counted(count("files"), "file", "files"),
    );
    if !report["agents"].is_null() {
        out += &format!(
            "{} loaded ({} with warnings), {} skipped\n",
            crate::counted(count("agents"), "agent", "agents"),
            count("agents_with_warnings"),
            count("skipped_agents"),
        );
    }
    out
}

/// Adds what each loaded skill needs that the image lacks to the report (see [`needs`]), and the
/// modules its scripts import only where a failed import is caught (its optional needs).
fn add_needs(report: &mut Value, workspace: &Path, folder: &Folder, resolve: bool) {
    let skills: Vec<String> = report["loaded"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|skill| skill["path"].as_str().map(str::to_owned))
        .collect();
    let needs = needs::check(workspace, folder, &skills, resolve);
    let optional = needs::optional(folder, &skills);
    for skill in report["loaded"].as_array_mut().into_iter().flatten() {
        let path = skill["path"].as_str().unwrap_or_default().to_owned();
        skill["needs"] = needs.skill_json(&path);
        skill["optional_needs"] = json!(optional.get(&path).cloned().unwrap_or_default());
    }
    report["needs"] = needs.summary_json();
    report["totals"]["needs"] = needs.totals_json();
}

/// `validate`: prints the report; fails when a SKILL.md would be skipped, the base prompt would
/// fail every turn, or a part of settings.json is left out, so a skill repository's CI can run it. What a skill needs that the image lacks
/// is a warning: the skill still loads.
pub(super) async fn validate(
    workspace: &Path,
    dir: &Path,
    agents: Option<&Path>,
    json: bool,
    resolve: bool,
) -> Result<(), String> {
    let folder = read_folder(dir)?;
    let agents_folder = agents.map(read_folder).transpose()?;
    let index = index_folder(&folder, agents_folder.as_ref()).await?;
    let mut report = report(dir, &folder, agents, &index);
    let loaded = report["loaded"].as_array().cloned().unwrap_or_default();
    if let Some(marketplace) = marketplace::report(dir, &loaded) {
        report["marketplace"] = marketplace;
    }
    add_needs(&mut report, workspace, &folder, resolve);
    match json {
        true => emit(&(serde_json::to_string_pretty(&report).map_err(|err| err.to_string())? + "\n"))?,
        false => emit(&render(&report))?,
    }
    let skipped = report["totals"]["skipped"].as_u64().unwrap_or(0);
    let invalid_prompt = report["base_prompt"]["status"] == "invalid";
    let mut problems = Vec::new();
    if skipped > 0 {
        problems.push(format!("{} would be skipped", crate::counted(skipped, "SKILL.md file", "SKILL.md files")));
    }
    let skipped_agents = report["totals"]["skipped_agents"].as_u64().unwrap_or(0);
    if skipped_agents > 0 {
        problems.push(format!("{} would be skipped", crate::counted(skipped_agents, "agent file", "agent files")));
    }
    if invalid_prompt {
        problems.push(format!("{BASE_PROMPT_FILE} is not a usable template"));
    }
    // A rule left out is an approval the tenant meant to have and would not get.
    let left_out = report["settings"]["problems"].as_array().map_or(0, Vec::len);
    if left_out > 0 {
        problems.push(format!("{SETTINGS_FILE} has {}", crate::counted(left_out as u64, "problem", "problems")));
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(problems.join("; ")),
    }
}
