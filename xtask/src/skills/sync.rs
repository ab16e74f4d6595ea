//! `cargo xtask skills sync`: each skill of a folder published as a version of it (`publish`), the
//! folder's other files (BASE_PROMPT.md, settings.json) written to the tenant's `skills/` (unchanged
//! files left alone, gone ones deleted), its agents folder to the tenant's `agents/` alike, then that
//! tenant's index rebuilt.

use super::bundle::{self, PipSource};
use super::publish::{self, Published};
use super::*;

/// Where a sync writes.
pub(super) enum Target {
    /// The moto of a local stack, from the environment file it wrote (`cargo xtask local`'s, or
    /// `cargo xtask console`'s).
    Local(&'static str),
    /// A real bucket, with the usual AWS credentials and region.
    Bucket(String),
}

/// Where a sync writes: the store, and a description for the messages.
async fn connect(root: &Path, target: Target) -> Result<(S3ObjectStore, String), String> {
    let bucket = match target {
        Target::Local(env_file) => return connect_local(root, env_file).await,
        Target::Bucket(bucket) => bucket,
    };
    let config = aws_http::load_config().await;
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

/// The environment file a local stack wrote (`XTASK_LOCAL_ENV` overrides it).
fn stack_env_file(root: &Path, env_file: &str) -> PathBuf {
    std::env::var_os(LOCAL_ENV_VARIABLE).map_or_else(|| root.join(env_file), PathBuf::from)
}

/// The bundle signing key the local stack's functions were given, when the sync writes into one.
fn stack_bundle_key(root: &Path, target: &Target) -> Option<String> {
    let Target::Local(env_file) = target else { return None };
    let text = std::fs::read_to_string(stack_env_file(root, env_file)).ok()?;
    let prefix = format!("{}=", agent_app::bundle_key::BUNDLE_KEY_ENV);
    text.lines().find_map(|line| line.strip_prefix(&prefix)).map(|key| key.trim().to_owned())
}

/// The local stack's moto and bucket, from the environment file it wrote.
async fn connect_local(root: &Path, env_file: &str) -> Result<(S3ObjectStore, String), String> {
    let file = stack_env_file(root, env_file);
    let command = if env_file == CONSOLE_ENV_FILE { "cargo xtask console" } else { "cargo xtask local" };
    let text = std::fs::read_to_string(&file).map_err(|err| {
        format!(
            "no local stack ({}: {err}): start `{command}` in another terminal, or pass --bucket <name>",
            file.display()
        )
    })?;
    let vars: BTreeMap<&str, &str> = text.lines().filter_map(|line| line.split_once('=')).collect();
    let get = |name: &str| {
        vars.get(name).map(|value| value.trim().to_owned()).ok_or_else(|| format!("{} has no {name}", file.display()))
    };
    let (endpoint, bucket) = (get("AWS_ENDPOINT_URL")?, get("SKILLS_BUCKET")?);
    local_stack_answers(&endpoint, command)?;
    let credentials = aws_sdk_s3::config::Credentials::new(
        get("AWS_ACCESS_KEY_ID")?,
        get("AWS_SECRET_ACCESS_KEY")?,
        None,
        None,
        "xtask-local",
    );
    let config = aws_http::config_loader()
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

/// Uploads each of `files` to `{prefix}{rel}` unless `remote` has it already; returns how many were
/// uploaded and how many were unchanged, with a progress line every [`PROGRESS_EVERY`] files.
async fn upload_all(
    objects: &S3ObjectStore,
    files: &[LocalFile],
    prefix: &str,
    remote: &BTreeMap<String, ObjectMeta>,
) -> Result<(usize, usize), String> {
    let total = files.len();
    let mut results = stream::iter(files)
        .map(|file| {
            let key = format!("{prefix}{}", file.rel);
            let meta = remote.get(&key);
            sync_file(objects, file, key, meta)
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
    Ok((uploaded, unchanged))
}

/// Deletes `gone`, with a progress line every [`PROGRESS_EVERY`] keys; returns how many.
async fn delete_all(objects: &S3ObjectStore, gone: &[&String]) -> Result<usize, String> {
    let mut deletions = stream::iter(gone).map(|key| objects.delete(key)).buffer_unordered(CONCURRENCY);
    let mut removed = 0;
    while let Some(result) = deletions.next().await {
        result.map_err(|err| err.to_string())?;
        removed += 1;
        if removed % PROGRESS_EVERY == 0 && removed < gone.len() {
            eprintln!("  {removed}/{} removed", gone.len());
        }
    }
    Ok(removed)
}

/// Makes `folder` the tenant's `agents/`: uploads, unchanged files left alone, deletions.
async fn sync_agents(
    objects: &S3ObjectStore,
    user: &UserId,
    dir: &Path,
    folder: &Folder,
) -> Result<(usize, usize, usize), String> {
    let prefix = keys::agents_prefix(user);
    let remote: BTreeMap<String, ObjectMeta> = objects
        .list(&prefix)
        .await
        .map_err(|err| err.to_string())?
        .into_iter()
        .map(|meta| (meta.key.clone(), meta))
        .collect();
    eprintln!("syncing the agents in {} ({} files) to {prefix}", dir.display(), folder.files.len());
    for (path, reason) in &folder.ignored {
        eprintln!("  left out agents/{path}: {reason}");
    }
    let (uploaded, unchanged) = upload_all(objects, &folder.files, &prefix, &remote).await?;
    let local: BTreeSet<String> = folder.files.iter().map(|file| format!("{prefix}{}", file.rel)).collect();
    let gone: Vec<&String> = remote.keys().filter(|key| !local.contains(*key)).collect();
    let removed = delete_all(objects, &gone).await?;
    Ok((uploaded, unchanged, removed))
}

/// `sync`: each skill of the folder is published as a version and made its default (the same
/// files make no new version), and the skills an earlier sync published that the folder no longer
/// has are deleted; the folder's other files become the tenant's `skills/` (uploads, unchanged files
/// left alone, deletions), and `agents`, when there is one, its `agents/`; then the tenant's index is
/// rebuilt from a listing. Without an agents folder the tenant's `agents/` is left as it is. Fails,
/// once all that is done, when a skill could not be published.
pub(super) async fn sync(
    root: &Path,
    dir: &Path,
    agents: Option<&Path>,
    user: &UserId,
    target: Target,
    bundles: Option<PipSource>,
) -> Result<(), String> {
    let folder = read_folder(dir)?;
    let agents_folder = agents.map(read_folder).transpose()?;
    let skills = publish::publishable(&folder);
    let paths: Vec<String> = skills.iter().map(ToString::to_string).collect();
    // Each skill's bundle and markers, by the skill's path, made before anything is sent.
    let built = match bundles {
        Some(mut source) => {
            eprintln!("resolving what the skills' scripts need that the sandbox image lacks");
            let needs = needs::check(root, &folder, &paths, false);
            // The key before pip: without it nothing the sandbox would install can be made.
            let key = match bundle::anything_to_bundle(&needs, &paths) {
                true => {
                    source.key.stack = stack_bundle_key(root, &target);
                    Some(source.key.read().await?)
                }
                false => None,
            };
            let signer = key.as_ref().map(|key| bundle::Signer { key, tenant: user });
            bundle::build_all(root, &needs, &paths, &source, signer.as_ref())?
        }
        None => None,
    };
    let (objects, target) = connect(root, target).await?;
    eprintln!(
        "publishing {} of {} to {target} as {user}",
        crate::counted(skills.len() as u64, "skill", "skills"),
        dir.display()
    );
    let published = publish::publish_all(&objects, user, &folder, &skills, built.as_ref()).await?;
    let deleted = publish::delete_gone(&objects, user, &skills).await?;

    // The rest of the folder (the base prompt, the settings, anything beside the skills) is written
    // straight: it is not versioned.
    let straight: Vec<LocalFile> =
        folder.files.into_iter().filter(|file| !publish::in_a_skill(&file.rel, &skills)).collect();
    let prefix = keys::skills_prefix(user);
    let remote: BTreeMap<String, ObjectMeta> = objects
        .list(&prefix)
        .await
        .map_err(|err| err.to_string())?
        .into_iter()
        .map(|meta| (meta.key.clone(), meta))
        .collect();
    eprintln!("syncing the folder's other files ({}) to {prefix} ({} objects there now)", straight.len(), remote.len());
    for (path, reason) in &folder.ignored {
        eprintln!("  left out {path}: {reason}");
    }
    let (mut uploaded, mut unchanged) = upload_all(&objects, &straight, &prefix, &remote).await?;
    // Skills written straight by an earlier sync (or by hand) go too: a published skill serves.
    let local: BTreeSet<String> = straight.iter().map(|file| format!("{prefix}{}", file.rel)).collect();
    let gone: Vec<&String> = remote.keys().filter(|key| !local.contains(*key)).collect();
    let mut removed = delete_all(&objects, &gone).await?;
    if let (Some(agents), Some(agents_folder)) = (agents, &agents_folder) {
        let (up, same, gone) = sync_agents(&objects, user, agents, agents_folder).await?;
        (uploaded, unchanged, removed) = (uploaded + up, unchanged + same, removed + gone);
    }
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
    let Published { created, unchanged: same, refused, bundle_files } = published;
    let refused_part = match refused.len() {
        0 => String::new(),
        count => format!(", {count} not published"),
    };
    let bundled = match bundle_files {
        0 => String::new(),
        count => format!(", {count} bundle files sent"),
    };
    // The agents' counts only when their folder was synced, so a sync of skills alone says nothing of them.
    let agents_line = match agents {
        Some(_) => format!("; {} agents indexed, {} skipped", head.agents.len(), head.skipped_agents.len()),
        None => String::new(),
    };
    emit(&format!(
        "skills: {}, {same} unchanged, {deleted} deleted{refused_part}; files: {uploaded} uploaded, {unchanged} \
         unchanged, {removed} removed{bundled}; {} skills indexed, {} skipped{agents_line}\n",
        crate::counted(created as u64, "new version", "new versions"),
        head.total,
        head.skipped
    ))?;
    if head.skipped > 0 || (agents.is_some() && !head.skipped_agents.is_empty()) {
        eprintln!("`cargo xtask skills validate {}` says why each is skipped", dir.display());
    }
    match refused.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "{} not published (why is above; each keeps the version it served): {}",
            crate::counted(refused.len() as u64, "skill was", "skills were"),
            refused.join(", ")
        )),
    }
}
