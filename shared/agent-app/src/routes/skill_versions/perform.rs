//! The calls on skills' versions made against the object store, through agent-core's `versions`:
//! each gives back what its answer needs, and shapes nothing.

use agent_core::files::{read_checked, Checked};
use agent_core::skills::versions::{self, Problem, Published, VersionError, VersionRecord};
use agent_core::store::{LinkHeaders, ObjectStore, StoreError};
use agent_core::turn::{PresignedUpload, DOWNLOAD_LINK_LIFETIME, UPLOAD_LINK_LIFETIME};
use agent_core::{keys, SkillPath, UserId};

use super::evals;
use super::outcome::{version_error, Context, VersionFileBody, VersionOutcome};
use super::parse::{VersionAction, VersionCall};
use super::MAX_STAGED_ZIP_BYTES;
use crate::api::ApiError;
use crate::routes::files::content_disposition;
use crate::routes::INLINE_MAX_BYTES;

/// The most a version's files may hold, inflated, for its zip to be made in the answer: beyond,
/// the zip would not fit an answer anyway, so nothing is read.
const MAX_ZIPPED_BYTES: u64 = 8 * INLINE_MAX_BYTES;

/// Why a call failed: an error answer, or a skill that is not valid (its answer lists problems).
enum Failed {
    Refused(ApiError),
    Invalid(Vec<Problem>),
}

impl From<VersionError> for Failed {
    fn from(err: VersionError) -> Self {
        match err {
            VersionError::Invalid(problems) => Failed::Invalid(problems),
            other => Failed::Refused(version_error(other)),
        }
    }
}

impl From<StoreError> for Failed {
    fn from(err: StoreError) -> Self {
        VersionError::Storage(err).into()
    }
}

impl From<ApiError> for Failed {
    fn from(err: ApiError) -> Self {
        Failed::Refused(err)
    }
}

/// Makes `call` for `user` with what `context` holds.
pub(in crate::routes) async fn perform(
    context: &Context<'_>,
    user: &UserId,
    call: VersionCall,
) -> Result<VersionOutcome, ApiError> {
    let skill = call.skill.to_string();
    match run(context, user, call).await {
        Ok(outcome) => Ok(outcome),
        Err(Failed::Invalid(problems)) => {
            tracing::info!(skill, problems = problems.len(), "skill upload refused");
            Ok(VersionOutcome::Invalid(problems))
        }
        Err(Failed::Refused(err)) => Err(err),
    }
}

/// The call itself; a skill that is not valid comes back as [`Failed::Invalid`].
async fn run(context: &Context<'_>, user: &UserId, call: VersionCall) -> Result<VersionOutcome, Failed> {
    let (objects, budget) = (context.objects, context.listing_budget);
    let VersionCall { skill, action } = call;
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    Ok(match action {
        VersionAction::Publish { zip, promote } => {
            VersionOutcome::Published(publish_zip(objects, user, &skill, &zip, promote, budget, now).await?)
        }
        VersionAction::PublishStaged { upload, promote } => {
            let key = keys::skill_upload_key(user, &upload);
            let zip = staged_zip(objects, &key, &upload).await?;
            let published = publish_zip(objects, user, &skill, &zip, promote, budget, now).await;
            // A staged zip is published once, or refused for good (its bytes are its name): either
            // way it goes. A failed delete leaves it to the bucket's lifecycle rule.
            if matches!(published, Ok(_) | Err(Failed::Invalid(_))) {
                if let Err(error) = objects.delete(&key).await {
                    tracing::warn!(%error, "could not delete a published skill upload");
                }
            }
            VersionOutcome::Published(published?)
        }
        VersionAction::Presign { size, sha256 } => {
            let key = keys::skill_upload_key(user, &sha256);
            let link = objects.presign_put(&key, size, &sha256, UPLOAD_LINK_LIFETIME).await?;
            tracing::info!(skill = %skill, size, linked = link.is_some(), "skill upload link asked for");
            VersionOutcome::Presigned(link.map(|link| PresignedUpload {
                upload: sha256,
                link,
                expires_in: UPLOAD_LINK_LIFETIME,
            }))
        }
        VersionAction::List => {
            let mut records = versions::list_versions(objects, user, &skill).await?;
            if records.is_empty() {
                return Err(VersionError::NotFound(format!("{skill} has no versions")).into());
            }
            records.reverse();
            let default = default_of(objects, user, &skill).await?;
            VersionOutcome::Listed { skill, default, records }
        }
        VersionAction::Get { version } => {
            let record = versions::get_version(objects, user, &skill, version).await?;
            let skill_md = versions::read_version_file(objects, user, &record, "SKILL.md").await?;
            let is_default = default_of(objects, user, &skill).await? == Some(version);
            VersionOutcome::Version { record, is_default, skill_md: String::from_utf8_lossy(&skill_md).into_owned() }
        }
        VersionAction::File { version, path } => {
            let record = versions::get_version(objects, user, &skill, version).await?;
            let file = version_file(objects, user, &record, &path).await?;
            VersionOutcome::File { path, file }
        }
        VersionAction::Zip { version } => {
            let record = versions::get_version(objects, user, &skill, version).await?;
            let zip = if record.size > MAX_ZIPPED_BYTES {
                None
            } else {
                Some(versions::version_zip(objects, user, &record).await?)
            };
            VersionOutcome::Zip { skill, version, zip }
        }
        VersionAction::SetDefault { version, require } => {
            if let Some(require) = require {
                evals::check_requirement(objects, user, &skill, version, &require).await?;
            }
            let previous = default_of(objects, user, &skill).await?;
            let chosen =
                versions::set_default(objects, user, &skill, version, user.as_str(), now, Some(budget)).await?;
            tracing::info!(skill = %skill, version, previous, "default version set");
            VersionOutcome::DefaultSet { skill, chosen, previous }
        }
        VersionAction::DeleteVersion { version } => {
            versions::delete_version(objects, user, &skill, version, Some(budget)).await?;
            tracing::info!(skill = %skill, version, "version deleted");
            VersionOutcome::Deleted
        }
        VersionAction::DeleteSkill => {
            versions::delete_skill(objects, user, &skill, Some(budget)).await?;
            tracing::info!(skill = %skill, "published skill deleted");
            VersionOutcome::Deleted
        }
        VersionAction::RunEvals { version, runs } => evals::run_evals(context, user, skill, version, runs).await?,
        VersionAction::ListEvals { version } => evals::list_evals(objects, user, skill, version).await?,
        VersionAction::GetEval { version, run_id } => evals::get_eval(objects, user, &skill, version, &run_id).await?,
    })
}

/// Reads `zip` as the files of `skill` and publishes them, by the caller.
async fn publish_zip(
    objects: &dyn ObjectStore,
    user: &UserId,
    skill: &SkillPath,
    zip: &[u8],
    promote: Option<bool>,
    budget: usize,
    now: i64,
) -> Result<Published, Failed> {
    let files = versions::read_zip(zip).map_err(Failed::Invalid)?;
    let published = versions::publish(objects, user, skill, files, user.as_str(), now, promote, Some(budget)).await?;
    let record = &published.record;
    tracing::info!(
        skill = %skill,
        version = record.version,
        created = published.created,
        default = published.is_default,
        size = record.size,
        "skill version published"
    );
    Ok(published)
}

/// The zip a presigned upload staged at `key`, checked again: its length (bound by the link's
/// signature) before a byte is read, then its SHA-256. Bytes that are not the declared zip are
/// deleted, not kept.
async fn staged_zip(objects: &dyn ObjectStore, key: &str, sha256: &str) -> Result<Vec<u8>, Failed> {
    let missing = || {
        ApiError::bad_request(format!(
            "there is no staged upload {sha256}: ask for a link with POST /skills/{{path}}/versions/uploads \
             and PUT the zip there first"
        ))
    };
    let listed = objects.list(key).await?;
    let Some(meta) = listed.iter().find(|meta| meta.key == key) else { return Err(missing().into()) };
    if meta.size > MAX_STAGED_ZIP_BYTES {
        objects.delete(key).await?;
        return Err(ApiError::new(
            413,
            "payload_too_large",
            format!("a skill's zip may have at most {} MiB", MAX_STAGED_ZIP_BYTES / (1024 * 1024)),
        )
        .into());
    }
    match read_checked(objects, key, sha256).await? {
        Checked::Bytes(bytes) => Ok(bytes),
        Checked::Missing => Err(missing().into()),
        Checked::Mismatch => {
            objects.delete(key).await?;
            Err(ApiError::bad_request(format!(
                "the bytes uploaded as {sha256} do not have that SHA-256: upload the zip again"
            ))
            .into())
        }
    }
}

/// The version the skill serves now, if it is published.
async fn default_of(objects: &dyn ObjectStore, user: &UserId, skill: &SkillPath) -> Result<Option<u32>, StoreError> {
    let (defaults, _) = versions::defaults(objects, user).await?;
    Ok(defaults.skills.get(&skill.to_string()).map(|chosen| chosen.version))
}

/// One file of a version (only a path its record lists): its bytes, or a link to a large one.
async fn version_file(
    objects: &dyn ObjectStore,
    user: &UserId,
    record: &VersionRecord,
    path: &str,
) -> Result<VersionFileBody, Failed> {
    let size = record.files.iter().find(|file| file.path == path).map(|file| file.size);
    match size {
        Some(size) if size > INLINE_MAX_BYTES => {
            // The record lists the path, so it names an object under the version's files.
            let key = format!("{}{path}", keys::skill_version_files_prefix(user, &record.skill, &record.sha256));
            let name = path.rsplit('/').next().unwrap_or(path);
            let headers = LinkHeaders {
                content_type: Some("application/octet-stream".to_owned()),
                content_disposition: Some(content_disposition(name)),
            };
            Ok(match objects.presign_get(&key, DOWNLOAD_LINK_LIFETIME, &headers).await? {
                Some(url) => VersionFileBody::Link { url, size },
                None => VersionFileBody::TooLarge { size },
            })
        }
        // A listed file read and checked against its hash; an unlisted one is a 404 from there.
        _ => Ok(VersionFileBody::Bytes(versions::read_version_file(objects, user, record, path).await?)),
    }
}
