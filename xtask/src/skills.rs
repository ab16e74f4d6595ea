//! `cargo xtask skills validate|sync`: what the catalog will make of a folder of skills (read by the
//! catalog's own index code), and the upload of such a folder to a tenant's `skills/` prefix with
//! the rebuild of that tenant's index.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_core::ids::SkillPath;
use agent_core::keys;
use agent_core::prompt::PromptTemplate;
use agent_core::skills::frontmatter::{SkipReason, MAX_SKILL_MD_BYTES};
use agent_core::skills::index::stored::{hidden_skills, inside_a_skill};
use agent_core::skills::index::{
    build_index, classify, decode_index, update_index, BasePromptEntry, CatalogIndex, IndexRead, SkillFile,
    SkippedEntry, BASE_PROMPT_FILE, MAX_BASE_PROMPT_BYTES,
};
use agent_core::store::{ObjectMeta, ObjectStore};
use agent_core::UserId;
use aws_store::S3ObjectStore;
use futures::stream::{self, StreamExt};
use md5::{Digest, Md5};
use serde_json::{json, Value};

const USAGE: &str = "\
usage: cargo xtask skills validate <dir> [--json]
       cargo xtask skills sync <dir> --user <id> [--bucket <name>]";
/// The tenant a folder is validated as; any valid id gives the same result.
const VALIDATE_USER: &str = "validate";
/// The environment file `cargo xtask local` writes (moto's endpoint, the bucket, test credentials).
const LOCAL_ENV_FILE: &str = "target/local.env";
/// Overrides [`LOCAL_ENV_FILE`], so the tests can point a sync at a moto of their own.
const LOCAL_ENV_VARIABLE: &str = "XTASK_LOCAL_ENV";
/// Uploads and deletions in flight at once.
const CONCURRENCY: usize = 16;
/// A progress line every this many files.
const PROGRESS_EVERY: usize = 100;
/// S3's largest single PUT; the sync never uses multipart uploads, so ETags stay MD5s.
const MAX_UPLOAD_BYTES: u64 = 5 * 1024 * 1024 * 1024;

pub fn run(root: &Path, args: &[String]) -> Result<(), String> {
    let runtime = || tokio::runtime::Runtime::new().map_err(|err| format!("tokio runtime: {err}"));
    match args.split_first() {
        Some((command, rest)) if command == "validate" => {
            let (dir, flags) = positional(rest)?;
            let json = match flags.as_slice() {
                [] => false,
                [flag] if flag == "--json" => true,
                _ => return Err(format!("unexpected arguments {flags:?}\n{USAGE}")),
            };
            runtime()?.block_on(validate(&dir, json))
        }
        Some((command, rest)) if command == "sync" => {
            let (dir, flags) = positional(rest)?;
            let (mut user, mut bucket) = (None, None);
            let mut flags = flags.into_iter();
            while let Some(flag) = flags.next() {
                let slot = match flag.as_str() {
                    "--user" => &mut user,
                    "--bucket" => &mut bucket,
                    _ => return Err(format!("unexpected argument {flag:?}\n{USAGE}")),
                };
                *slot = Some(flags.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?);
            }
            let user = user.ok_or_else(|| format!("sync needs --user <id>\n{USAGE}"))?;
            let user =
                UserId::parse(user.as_str()).map_err(|err| format!("--user {user:?} is not a usable id: {err}"))?;
            runtime()?.block_on(sync(root, &dir, &user, bucket))
        }
        _ => Err(USAGE.to_owned()),
    }
}

/// The first argument that is not a flag (the folder), and the rest in order.
fn positional(args: &[String]) -> Result<(PathBuf, Vec<String>), String> {
    let mut dir = None;
    let mut rest = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg.starts_with("--") {
            rest.push(arg.clone());
            // Flags with a value keep it next to them.
            if arg == "--user" || arg == "--bucket" {
                rest.extend(args.next().cloned());
            }
        } else if dir.is_none() {
            dir = Some(PathBuf::from(arg));
        } else {
            return Err(format!("one folder only, got {arg:?} as well\n{USAGE}"));
        }
    }
    Ok((dir.ok_or_else(|| format!("which folder?\n{USAGE}"))?, rest))
}

/// A file of the folder, by its path relative to the folder (`/`-separated, as a key's tail).
struct LocalFile {
    rel: String,
    path: PathBuf,
    size: u64,
}

/// What a folder holds: the files a sync uploads, and what it leaves out and why.
struct Folder {
    files: Vec<LocalFile>,
    ignored: Vec<(String, &'static str)>,
}

/// Walks `dir` without following a link out of it. Hidden entries (a name starting with `.`,
/// such as `.git`) are left out, as are links to folders (which could loop) and anything that is
/// not a regular file.
fn read_folder(dir: &Path) -> Result<Folder, String> {
    let root = match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {
            dir.canonicalize().map_err(|err| format!("could not resolve {}: {err}", dir.display()))?
        }
        Ok(_) => return Err(format!("{} is not a folder", dir.display())),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("there is no folder {}", dir.display()))
        }
        Err(err) => return Err(format!("could not read {}: {err}", dir.display())),
    };
    let mut folder = Folder { files: Vec::new(), ignored: Vec::new() };
    let mut pending = vec![(root.clone(), String::new())];
    while let Some((current, prefix)) = pending.pop() {
        let entries =
            std::fs::read_dir(&current).map_err(|err| format!("could not read {}: {err}", current.display()))?;
        for entry in entries {
            let entry = entry.map_err(|err| format!("could not read {}: {err}", current.display()))?;
            let path = entry.path();
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                folder
                    .ignored
                    .push((format!("{prefix}{}", entry.file_name().to_string_lossy()), "its name is not UTF-8"));
                continue;
            };
            let rel = format!("{prefix}{name}");
            if name.starts_with('.') {
                folder.ignored.push((rel, "hidden (its name starts with a dot)"));
                continue;
            }
            let kind = entry.file_type().map_err(|err| format!("could not read {}: {err}", path.display()))?;
            if kind.is_dir() {
                pending.push((path, format!("{rel}/")));
            } else if kind.is_file() {
                let size = entry.metadata().map_err(|err| format!("could not read {}: {err}", path.display()))?.len();
                folder.files.push(LocalFile { rel, path, size });
            } else if kind.is_symlink() {
                // A link is followed only to a file inside the folder.
                match path.canonicalize() {
                    Ok(target) if target.starts_with(&root) => match std::fs::metadata(&target) {
                        Ok(meta) if meta.is_file() => {
                            folder.files.push(LocalFile { rel, path: target, size: meta.len() })
                        }
                        _ => folder.ignored.push((rel, "a link to something other than a file")),
                    },
                    Ok(_) => folder.ignored.push((rel, "a link out of the folder")),
                    Err(_) => folder.ignored.push((rel, "a broken link")),
                }
            } else {
                folder.ignored.push((rel, "not a regular file"));
            }
        }
    }
    folder.files.sort_by(|a, b| a.rel.cmp(&b.rel));
    folder.ignored.sort();
    Ok(folder)
}

/// Reads at most `limit + 1` bytes of `path`: `None` when it holds more than `limit`.
fn read_bounded(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, String> {
    let file = std::fs::File::open(path).map_err(|err| format!("could not open {}: {err}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(|err| format!("could not read {}: {err}", path.display()))?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// The index the catalog builds from `folder`: the folder's keys in an in-memory store under
/// [`VALIDATE_USER`]'s prefix, then [`build_index`]. Only SKILL.md and BASE_PROMPT.md files are
/// read (the catalog reads nothing else), within the index's size limits; any other file is an
/// empty object, since only its key counts. A file over its limit is skipped by size, before it
/// is read, as the catalog does from a listing.
async fn index_folder(folder: &Folder) -> Result<CatalogIndex, String> {
    let user = UserId::parse(VALIDATE_USER).map_err(|err| err.to_string())?;
    let prefix = keys::skills_prefix(&user);
    let store = local_store::MemoryObjectStore::new();
    let mut too_large = Vec::new();
    for file in &folder.files {
        let key = format!("{prefix}{}", file.rel);
        let limit = match classify(&file.rel) {
            SkillFile::Skill(_) => MAX_SKILL_MD_BYTES,
            SkillFile::BasePrompt => MAX_BASE_PROMPT_BYTES,
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
        } else {
            let reason = SkipReason::TooLarge(size).to_string();
            index.skipped.insert(file.rel.clone(), SkippedEntry { file: file.rel.clone(), reason });
        }
    }
    Ok(index)
}

/// The usable skill whose folder holds `file`, as [`inside_a_skill`] finds it.
fn enclosing_skill(file: &str, usable: &impl Fn(&SkillPath) -> bool) -> Option<String> {
    let parts: Vec<&str> = file.split('/').collect();
    let plain = parts.first().and_then(|name| SkillPath::plain(name).ok()).filter(|path| usable(path));
    let nested = match parts.as_slice() {
        [category, name, ..] => SkillPath::new(category, name).ok().filter(|path| usable(path)),
        _ => None,
    };
    plain.or(nested).map(|path| path.to_string())
}

/// The report of `validate`, as JSON; the text output is rendered from it.
fn report(dir: &Path, folder: &Folder, index: &CatalogIndex) -> Value {
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
        let skill = enclosing_skill(&format!("{path}/SKILL.md"), &usable);
        inside.push(json!({ "file": format!("{path}/SKILL.md"), "skill": skill, "reason": Value::Null }));
    }
    let mut skipped = Vec::new();
    for (file, entry) in &index.skipped {
        if inside_a_skill(file, usable) {
            let skill = enclosing_skill(file, &usable);
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
    let with_warnings =
        loaded.iter().filter(|skill| skill["warnings"].as_array().is_some_and(|w| !w.is_empty())).count();
    json!({
        "dir": dir.display().to_string(),
        "loaded": loaded,
        "inside_a_skill": inside,
        "skipped": skipped,
        "base_prompt": base_prompt,
        "ignored": folder.ignored.iter().map(|(path, reason)| json!({ "path": path, "reason": reason })).collect::<Vec<_>>(),
        "totals": {
            "files": folder.files.len(),
            "loaded": loaded.len(),
            "with_warnings": with_warnings,
            "inside_a_skill": inside.len(),
            "skipped": skipped.len(),
            "ignored": folder.ignored.len(),
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
    let ignored = list(&report["ignored"]);
    if !ignored.is_empty() {
        out += &format!("\nleft out ({}):\n", ignored.len());
        for entry in &ignored {
            out += &format!("  {}: {}\n", text(&entry["path"]), text(&entry["reason"]));
        }
    }
    let totals = &report["totals"];
    out += &format!(
        "\n{} skills loaded ({} with warnings), {} skipped, {} SKILL.md files inside skills, {} files\n",
        totals["loaded"], totals["with_warnings"], totals["skipped"], totals["inside_a_skill"], totals["files"]
    );
    out
}

/// Writes `text` to stdout; a reader that went away (`| head`) is not an error.
fn emit(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing to stdout: {err}")),
        _ => Ok(()),
    }
}

/// `validate`: prints the report; fails when a SKILL.md would be skipped or the base prompt would
/// fail every turn, so a skill repository's CI can run it.
async fn validate(dir: &Path, json: bool) -> Result<(), String> {
    let folder = read_folder(dir)?;
    let index = index_folder(&folder).await?;
    let report = report(dir, &folder, &index);
    match json {
        true => emit(&(serde_json::to_string_pretty(&report).map_err(|err| err.to_string())? + "\n"))?,
        false => emit(&render(&report))?,
    }
    let skipped = report["totals"]["skipped"].as_u64().unwrap_or(0);
    let invalid_prompt = report["base_prompt"]["status"] == "invalid";
    let mut problems = Vec::new();
    if skipped > 0 {
        problems.push(format!("{skipped} SKILL.md file(s) would be skipped"));
    }
    if invalid_prompt {
        problems.push(format!("{BASE_PROMPT_FILE} is not a usable template"));
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(problems.join("; ")),
    }
}

/// Where a sync writes: the store, and a description for the messages.
async fn connect(root: &Path, bucket: Option<String>) -> Result<(S3ObjectStore, String), String> {
    let Some(bucket) = bucket else {
        return connect_local(root).await;
    };
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
    if config.region().is_none() {
        return Err("no AWS region: set AWS_REGION (or a profile's region)".to_owned());
    }
    let set = |name: &str| std::env::var(name).is_ok_and(|value| !value.trim().is_empty());
    // Path-style addressing for a custom endpoint, as the functions decide it.
    let path_style = set("AWS_ENDPOINT_URL")
        || set("AWS_ENDPOINT_URL_S3")
        || std::env::var("S3_FORCE_PATH_STYLE").is_ok_and(|value| value.eq_ignore_ascii_case("true"));
    let s3 = aws_sdk_s3::config::Builder::from(&config).force_path_style(path_style).build();
    Ok((S3ObjectStore::new(aws_sdk_s3::Client::from_conf(s3), &bucket), format!("s3://{bucket}")))
}

/// The local stack's moto and bucket, from the environment file `cargo xtask local` wrote.
async fn connect_local(root: &Path) -> Result<(S3ObjectStore, String), String> {
    let file = std::env::var_os(LOCAL_ENV_VARIABLE).map_or_else(|| root.join(LOCAL_ENV_FILE), PathBuf::from);
    let text = std::fs::read_to_string(&file).map_err(|err| {
        format!(
            "no local stack ({}: {err}): start `cargo xtask local` in another terminal, or pass --bucket <name>",
            file.display()
        )
    })?;
    let vars: BTreeMap<&str, &str> = text.lines().filter_map(|line| line.split_once('=')).collect();
    let get = |name: &str| {
        vars.get(name).map(|value| value.trim().to_owned()).ok_or_else(|| format!("{} has no {name}", file.display()))
    };
    let (endpoint, bucket) = (get("AWS_ENDPOINT_URL")?, get("SKILLS_BUCKET")?);
    let host = endpoint.split_once("://").map_or(endpoint.as_str(), |(_, rest)| rest).trim_end_matches('/');
    let reachable = host
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .is_some_and(|address| TcpStream::connect_timeout(&address, Duration::from_secs(2)).is_ok());
    if !reachable {
        return Err(format!("the local stack does not answer on {endpoint}: is `cargo xtask local` running?"));
    }
    let credentials = aws_sdk_s3::config::Credentials::new(
        get("AWS_ACCESS_KEY_ID")?,
        get("AWS_SECRET_ACCESS_KEY")?,
        None,
        None,
        "xtask-local",
    );
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(get("AWS_REGION")?))
        .credentials_provider(credentials)
        .endpoint_url(&endpoint)
        .load()
        .await;
    let s3 = aws_sdk_s3::config::Builder::from(&config).force_path_style(true).build();
    Ok((S3ObjectStore::new(aws_sdk_s3::Client::from_conf(s3), &bucket), format!("s3://{bucket} on {endpoint}")))
}

/// What happened to one file of the folder.
enum Synced {
    Uploaded,
    Unchanged,
}

/// Uploads `file` to `key` unless the object there has the same size and an ETag equal to the
/// file's MD5 (S3's ETag of a single-part upload without SSE-KMS). Any other ETag (a multipart
/// upload, SSE-KMS) only costs an upload that was not needed.
async fn sync_file(
    objects: &S3ObjectStore,
    file: &LocalFile,
    key: String,
    remote: Option<&ObjectMeta>,
) -> Result<Synced, String> {
    if file.size > MAX_UPLOAD_BYTES {
        return Err(format!("{} is larger than the {MAX_UPLOAD_BYTES} bytes of one S3 upload", file.rel));
    }
    let path = file.path.clone();
    let bytes = tokio::task::spawn_blocking(move || std::fs::read(&path))
        .await
        .map_err(|err| format!("reading {}: {err}", file.rel))?
        .map_err(|err| format!("could not read {}: {err}", file.path.display()))?;
    let md5 = hex::encode(Md5::digest(&bytes));
    if remote.is_some_and(|meta| meta.size == bytes.len() as u64 && meta.etag == md5) {
        return Ok(Synced::Unchanged);
    }
    objects.put(&key, bytes).await.map_err(|err| err.to_string())?;
    Ok(Synced::Uploaded)
}

/// `sync`: the folder becomes the tenant's `skills/` (uploads, unchanged files left alone,
/// deletions), then the tenant's index is rebuilt from a listing.
async fn sync(root: &Path, dir: &Path, user: &UserId, bucket: Option<String>) -> Result<(), String> {
    let folder = read_folder(dir)?;
    let (objects, target) = connect(root, bucket).await?;
    let prefix = keys::skills_prefix(user);
    let remote: BTreeMap<String, ObjectMeta> = objects
        .list(&prefix)
        .await
        .map_err(|err| err.to_string())?
        .into_iter()
        .map(|meta| (meta.key.clone(), meta))
        .collect();
    eprintln!(
        "syncing {} ({} files) to {target}/{prefix} ({} objects there now)",
        dir.display(),
        folder.files.len(),
        remote.len()
    );
    for (path, reason) in &folder.ignored {
        eprintln!("  left out {path}: {reason}");
    }
    let total = folder.files.len();
    let mut results = stream::iter(&folder.files)
        .map(|file| {
            let key = format!("{prefix}{}", file.rel);
            let meta = remote.get(&key);
            sync_file(&objects, file, key, meta)
        })
        .buffer_unordered(CONCURRENCY);
    let (mut uploaded, mut unchanged) = (0, 0);
    while let Some(result) = results.next().await {
        match result? {
            Synced::Uploaded => uploaded += 1,
            Synced::Unchanged => unchanged += 1,
        }
        let done = uploaded + unchanged;
        if done % PROGRESS_EVERY == 0 && done < total {
            eprintln!("  {done}/{total} files checked ({uploaded} uploaded)");
        }
    }
    drop(results);
    let local: BTreeSet<String> = folder.files.iter().map(|file| format!("{prefix}{}", file.rel)).collect();
    let gone: Vec<&String> = remote.keys().filter(|key| !local.contains(*key)).collect();
    let mut deletions = stream::iter(&gone).map(|key| objects.delete(key)).buffer_unordered(CONCURRENCY);
    let mut removed = 0;
    while let Some(result) = deletions.next().await {
        result.map_err(|err| err.to_string())?;
        removed += 1;
        if removed % PROGRESS_EVERY == 0 && removed < gone.len() {
            eprintln!("  {removed}/{} removed", gone.len());
        }
    }
    drop(deletions);
    eprintln!("rebuilding the catalog index of {user}");
    update_index(&objects, user, &[], true, None).await.map_err(|err| format!("rebuilding the index: {err}"))?;
    let head = objects
        .get(&keys::catalog_index_key(user))
        .await
        .map_err(|err| err.to_string())?
        .ok_or("the index is missing after its rebuild")?;
    let IndexRead::Usable(head) = decode_index(&head.bytes).map_err(|err| err.to_string())? else {
        return Err("the index written is not of this build's format".to_owned());
    };
    emit(&format!(
        "{uploaded} uploaded, {unchanged} unchanged, {removed} removed; {} skills indexed, {} skipped\n",
        head.total, head.skipped
    ))?;
    if head.skipped > 0 {
        eprintln!("`cargo xtask skills validate {}` says why each is skipped", dir.display());
    }
    Ok(())
}
