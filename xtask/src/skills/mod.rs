//! `cargo xtask skills validate|sync`: what the catalog will make of a folder of skills and of the
//! tenant's agents beside it (read by the catalog's own index code) and what the skills' scripts
//! need that the sandbox image lacks (`needs`), and the upload of such folders for a tenant: each
//! skill published as a version (`publish`), the rest to its `skills/` and `agents/` prefixes, with
//! the rebuild of that tenant's index.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_core::ids::SkillPath;
use agent_core::keys;
use agent_core::prompt::PromptTemplate;
use agent_core::skills::agents::{classify_agent, AgentFile, AgentSkip, MAX_AGENT_FILE_BYTES};
use agent_core::skills::frontmatter::{SkipReason, MAX_SKILL_MD_BYTES};
use agent_core::skills::index::stored::{enclosing_skill, hidden_skills, inside_a_skill};
use agent_core::skills::index::{
    agent_file, build_index, classify, decode_index, update_index, BasePromptEntry, CatalogIndex, IndexRead, SkillFile,
    SkippedEntry, BASE_PROMPT_FILE, MAX_BASE_PROMPT_BYTES,
};
use agent_core::skills::settings::{SettingsEntry, MAX_SETTINGS_BYTES, SETTINGS_FILE};
use agent_core::store::{ObjectMeta, ObjectStore};
use agent_core::UserId;
use aws_store::S3ObjectStore;
use futures::stream::{self, StreamExt};
use md5::{Digest, Md5};
use serde_json::{json, Value};

mod bundle;
mod eval;
mod marketplace;
mod needs;
mod publish;
mod sync;
mod validate;

pub(crate) const USAGE: &str = "\
usage: cargo xtask skills validate <dir> [--agents <dir>] [--json] [--resolve]
       cargo xtask skills sync <dir> --user <id> [--agents <dir>] [--bucket <name> | --console] [--no-bundles] [--find-links <dir>] [--bundle-key-secret <name>]
       cargo xtask skills eval <skill-path> --user <id> [--version <n>] [--runs <n>] [--require trigger=0.8,pass=0.9] [--promote] [--json] [--bucket <name> | --console]
(cargo xtask skills validate --help, cargo xtask skills sync --help and cargo xtask skills eval --help say more)";
pub(crate) use eval::EVAL_HELP;
/// `cargo xtask skills sync --help`.
pub(crate) const SYNC_HELP: &str = "\
usage: cargo xtask skills sync <dir> --user <id> [--agents <dir>] [--bucket <name> | --console] [--no-bundles] [--find-links <dir>] [--bundle-key-secret <name>]

Makes the folder the tenant's skills. Each skill's folder is published as a version of that skill,
as PUT /skills/{path}/versions publishes an upload, and made its default: the same files as a
version already has make no new version. Each skill's line says its version, new or unchanged, and
whether it is the default. A skill whose files are not a valid skill is not published (its current
default stays) and the sync exits 1 once the rest is done. Skills that an earlier sync published
and the folder no longer has are deleted; skills published through the API are left alone. The
folder's other files (BASE_PROMPT.md, settings.json) are written to the tenant's skills/: new and
changed ones uploaded, unchanged ones left alone, anything else there deleted. Then the tenant's
catalog index is rebuilt. The tenant's agents/ is made the agents folder the same way (the agents/
beside a folder named skills, or --agents <dir>); without one, the tenant's agents/ is left as it
is. Before that, each skill's Python needs that the sandbox image lacks (as `skills validate` finds
them) are resolved by pip into a bundle of wheels for the image's Python and platform, hashes
pinned, stored with the version's files under .bundle/; a need that cannot be resolved leaves a
marker that GET /skills shows as a warning. Resolving needs the sandbox image
(`cargo xtask sandbox image`) and pip's index. Each bundle's name is signed for the tenant with the
deployment's bundle key, without which the sandbox does not install it: --bundle-key-secret, else
BUNDLE_SIGNING_KEY, else (a local stack) the key of its environment file; a sync that makes bundles
refuses to run without one.
  --user <id>         the tenant
  --agents <dir>      the tenant's agents ({name}.md files); default: the agents/ beside <dir>
                      when <dir> is named skills
  --bucket <name>     a real bucket (AWS credentials and region as usual); default: the local stack
  --console           the stack of `cargo xtask console` instead of `cargo xtask local`
  --no-bundles        resolve nothing; the bundles already stored with the versions stay
  --find-links <dir>  a folder of wheels pip looks in as well (with PIP_NO_INDEX=1: only there)
  --bundle-key-secret <name>
                      the Secrets Manager secret holding the bundle key (the stack's
                      BundleSigningKeySecret), read with the usual AWS credentials";
/// `cargo xtask skills validate --help`.
pub(crate) const VALIDATE_HELP: &str = "\
usage: cargo xtask skills validate <dir> [--agents <dir>] [--json] [--resolve]

What the catalog makes of the folder (loaded, skipped and why, the base prompt) and of the
tenant's agents (each loaded with its tools and model, or skipped and why), and what each
skill's scripts need that the sandbox image lacks: the packages it declares (requirements.txt,
pyproject.toml, package.json, in its folder or its scripts/), else the third-party imports of its
.py, .js, .mjs and .cjs files, checked against the image named by SANDBOX_ROOT or else the one
`cargo xtask sandbox image` built for the current list (never built here). The modules a skill's
Python imports only inside `try: … except ImportError` are named as its optional needs (as an upload
through the API names them); they are bundled only when a declaration names them. Exits 1 only when a
SKILL.md or an agent file would be skipped or the base prompt is unusable; unmet needs are warnings.
The agents are Claude Code subagent files, {name}.md, in the agents/ beside a folder named skills
(as .claude/agents/ is beside .claude/skills/) or the folder --agents names.
The folder may hold skills as {name}/SKILL.md, {category}/{name}/SKILL.md, or as a Claude Code
plugin marketplace lays them out, [{group}/]{plugin}/skills/{name}/SKILL.md; with a
.claude-plugin/marketplace.json, the report also says how many skills each listed plugin holds.
Hidden folders (.git, .claude-plugin, other tools' copies) are left out.
  --agents <dir>  the tenant's agents; default: the agents/ beside <dir> when <dir> is named skills
  --json      the report as JSON (a `needs` object and `optional_needs` per loaded skill)
  --resolve   also ask pip (on this machine, with the network) whether a wheel exists for the
              image's Python and platform for each Python package the image lacks; without it
              those are reported as \"not checked (--resolve)\"";
/// The tenant a folder is validated as; any valid id gives the same result.
const VALIDATE_USER: &str = "validate";
/// The environment file `cargo xtask local` writes (moto's endpoint, the bucket, test credentials).
const LOCAL_ENV_FILE: &str = "target/local.env";
/// The same file for the stack `cargo xtask console` runs (`--console`).
pub const CONSOLE_ENV_FILE: &str = "target/console.env";
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
            if rest.iter().any(|arg| arg == "--help" || arg == "-h") {
                return emit(&format!("{VALIDATE_HELP}\n"));
            }
            let (dir, flags) = positional(rest)?;
            let (mut json, mut resolve, mut agents) = (false, false, None);
            let mut flags = flags.into_iter();
            while let Some(flag) = flags.next() {
                match flag.as_str() {
                    "--json" => json = true,
                    "--resolve" => resolve = true,
                    "--agents" => {
                        agents = Some(flags.next().ok_or_else(|| format!("--agents needs a value\n{USAGE}"))?)
                    }
                    _ => return Err(format!("unexpected argument {flag:?}\n{USAGE}")),
                }
            }
            let agents = agents_folder(&dir, agents.map(PathBuf::from))?;
            runtime()?.block_on(validate::validate(root, &dir, agents.as_deref(), json, resolve))
        }
        Some((command, rest)) if command == "sync" => {
            if rest.iter().any(|arg| arg == "--help" || arg == "-h") {
                return emit(&format!("{SYNC_HELP}\n"));
            }
            let (dir, flags) = positional(rest)?;
            let (mut user, mut bucket, mut console, mut no_bundles, mut find_links) = (None, None, false, false, None);
            let (mut agents, mut key_secret) = (None, None);
            let mut flags = flags.into_iter();
            while let Some(flag) = flags.next() {
                match flag.as_str() {
                    "--console" => {
                        console = true;
                        continue;
                    }
                    "--no-bundles" => {
                        no_bundles = true;
                        continue;
                    }
                    _ => {}
                }
                let slot = match flag.as_str() {
                    "--user" => &mut user,
                    "--bucket" => &mut bucket,
                    "--find-links" => &mut find_links,
                    "--agents" => &mut agents,
                    "--bundle-key-secret" => &mut key_secret,
                    _ => return Err(format!("unexpected argument {flag:?}\n{USAGE}")),
                };
                *slot = Some(flags.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?);
            }
            let user = user.ok_or_else(|| format!("sync needs --user <id>\n{USAGE}"))?;
            let user =
                UserId::parse(user.as_str()).map_err(|err| format!("--user {user:?} is not a usable id: {err}"))?;
            let target = match (bucket, console) {
                (Some(_), true) => return Err(format!("--bucket and --console name two places\n{USAGE}")),
                (Some(bucket), false) => sync::Target::Bucket(bucket),
                (None, true) => sync::Target::Local(CONSOLE_ENV_FILE),
                (None, false) => sync::Target::Local(LOCAL_ENV_FILE),
            };
            let key = bundle::BundleKeySource { secret: key_secret, stack: None };
            let bundles = (!no_bundles).then(|| bundle::PipSource { find_links: find_links.map(PathBuf::from), key });
            let agents = agents_folder(&dir, agents.map(PathBuf::from))?;
            runtime()?.block_on(sync::sync(root, &dir, agents.as_deref(), &user, target, bundles))
        }
        Some((command, rest)) if command == "eval" => eval::run(root, rest),
        Some((flag, _)) if flag == "--help" || flag == "-h" => emit(&format!("{USAGE}\n")),
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
            if ["--user", "--bucket", "--find-links", "--agents", "--bundle-key-secret"].contains(&arg.as_str()) {
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

/// The tenant's agents folder for the skills folder `dir`: `named` (which must be a folder), else
/// the `agents/` beside `dir` when `dir` is named `skills`, as a tenant's `{user}/agents/` is beside
/// its `{user}/skills/` and Claude Code's `.claude/agents/` beside `.claude/skills/`. Beside a
/// folder of another name an `agents/` may be anything, so it is not taken.
fn agents_folder(dir: &Path, named: Option<PathBuf>) -> Result<Option<PathBuf>, String> {
    if let Some(named) = named {
        return match named.is_dir() {
            true => Ok(Some(named)),
            false => Err(format!("--agents {}: there is no such folder", named.display())),
        };
    }
    let Ok(dir) = dir.canonicalize() else { return Ok(None) };
    let beside = dir.parent().map(|parent| parent.join("agents"));
    Ok(beside.filter(|agents| dir.file_name().is_some_and(|name| name == "skills") && agents.is_dir()))
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

/// Writes `text` to stdout; a reader that went away (`| head`) is not an error.
fn emit(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing to stdout: {err}")),
        _ => Ok(()),
    }
}

/// Whether the local stack's moto at `endpoint` answers; if not, which command to start.
fn local_stack_answers(endpoint: &str, command: &str) -> Result<(), String> {
    let host = endpoint.split_once("://").map_or(endpoint, |(_, rest)| rest).trim_end_matches('/');
    let reachable = host
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .is_some_and(|address| TcpStream::connect_timeout(&address, Duration::from_secs(2)).is_ok());
    match reachable {
        true => Ok(()),
        false => Err(format!("the local stack does not answer on {endpoint}: is `{command}` running?")),
    }
}
