//! Decoding a stored head, and [`update_index`]: an index brought up to date file by file, with a
//! conditional write that a losing updater retries.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;

use super::*;

/// What a stored head turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexRead {
    Usable(Box<IndexHead>),
    /// Written by an older format: rebuild it from a listing.
    Older,
    /// Written by a newer format this build cannot read: leave it alone.
    NewerUnreadable,
}

/// Decodes a head object. Unknown fields of a newer format are ignored when the rest reads.
pub fn decode_index(bytes: &[u8]) -> Result<IndexRead, StoreError> {
    #[derive(Deserialize)]
    struct Version {
        format: u32,
    }
    // The format is the object's first field as this crate writes it, so the common case needs no
    // second parse of the whole object to learn it.
    let leading = bytes
        .strip_prefix(br#"{"format":"#)
        .map(|rest| rest.iter().take_while(|byte| byte.is_ascii_digit()).map(|&b| char::from(b)).collect::<String>())
        .and_then(|digits| digits.parse::<u32>().ok());
    let version = match leading {
        Some(format) => Version { format },
        None => serde_json::from_slice(bytes).map_err(|err| StoreError::Corrupt(format!("catalog index: {err}")))?,
    };
    if version.format < INDEX_FORMAT {
        return Ok(IndexRead::Older);
    }
    match serde_json::from_slice(bytes) {
        Ok(head) => Ok(IndexRead::Usable(Box::new(head))),
        Err(_) if version.format > INDEX_FORMAT => Ok(IndexRead::NewerUnreadable),
        Err(err) => Err(StoreError::Corrupt(format!("catalog index: {err}"))),
    }
}

/// What [`update_index`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateOutcome {
    /// Skills in the index afterwards.
    pub skills: usize,
    /// Agents in the index afterwards.
    pub agents: usize,
    /// Files whose entries were re-read.
    pub examined: usize,
    /// Whether the index was (re)built from a listing.
    pub rebuilt: bool,
    /// Conditional writes lost to concurrent updaters before this one won.
    pub retries: u32,
}

/// Unix seconds now.
fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Brings the entries of `changed` files up to date: each is read again now, so the order in
/// which events arrive does not matter, and a file that is gone is removed; any changed agent file
/// has every agent read again from a listing of `{user}/agents/` (unchanged ones by ETag only). The write is conditional on the head read; a lost race re-reads and re-applies.
/// With no index (or one of an older format) the whole index is built from a listing instead.
/// `rebuild` forces that. `listing_budget` is the listing budget turns use (the head keeps the
/// listing rendered for it, and for those earlier turns asked for).
pub async fn update_index(
    objects: &dyn ObjectStore,
    user: &UserId,
    changed: &[TenantFile],
    rebuild: bool,
    listing_budget: Option<usize>,
) -> Result<UpdateOutcome, StoreError> {
    let key = keys::catalog_index_key(user);
    let mut retries = 0;
    loop {
        let mut previous = None;
        let (mut index, condition, rebuilt) = match objects.get_if_changed(&key, None).await? {
            Fetched::Changed(object) => match decode_index(&object.bytes) {
                Ok(IndexRead::Usable(head)) => {
                    let index = match rebuild {
                        true => build_index(objects, user).await?,
                        false => stored::join(&head, stored::read_parts(objects, user, &head).await?),
                    };
                    previous = Some(*head);
                    (index, WriteCondition::Matches(object.etag), rebuild)
                }
                Ok(IndexRead::NewerUnreadable) => {
                    return Err(StoreError::Corrupt(
                        "the catalog index was written by a newer format; update this function first".to_owned(),
                    ))
                }
                Ok(IndexRead::Older) => (build_index(objects, user).await?, WriteCondition::Matches(object.etag), true),
                Err(err) => {
                    tracing::warn!(error = %err, "the catalog index does not decode; rebuilding it");
                    (build_index(objects, user).await?, WriteCondition::Matches(object.etag), true)
                }
            },
            Fetched::Missing | Fetched::NotModified => {
                (build_index(objects, user).await?, WriteCondition::Absent, true)
            }
        };
        let mut examined = 0;
        if !rebuilt {
            let mut folders = BTreeSet::new();
            let mut agents_changed = false;
            let mut defaults_changed = false;
            for file in changed {
                examined += 1;
                let rel = match file {
                    TenantFile::Skill(rel) => rel,
                    TenantFile::Agent(_) => {
                        agents_changed = true;
                        continue;
                    }
                    TenantFile::Defaults => {
                        defaults_changed = true;
                        continue;
                    }
                    TenantFile::Version(skill, sha256) => {
                        index.refresh_version_files(objects, user, skill, sha256).await?;
                        continue;
                    }
                };
                if !matches!(classify(rel), SkillFile::Other) {
                    let outcome = examine(objects, user, rel, None).await?;
                    index.apply(rel, outcome);
                }
                folders.extend(owners(rel).into_iter().map(|(skill, _)| skill));
            }
            if agents_changed {
                agents::refresh_agents(objects, user, &mut index).await?;
            }
            if defaults_changed {
                index.reconcile_versions(objects, user).await?;
            }
            // Any other file changed: the file list of the skill it belongs to is read again.
            for skill in folders {
                if index.skills.contains_key(&skill.to_string()) {
                    index.refresh_files(objects, user, &skill).await?;
                }
            }
        }
        if !rebuilt {
            index.refresh_unmet_needs();
            let skills = changed.iter().filter_map(|file| match file {
                TenantFile::Skill(rel) => Some(rel),
                _ => None,
            });
            log_skipped(&index, skills);
        }
        let written =
            stored::write_index(objects, user, &index, condition, previous.as_ref(), listing_budget, unix_now()).await;
        match written {
            Ok((head, _)) => {
                tracing::info!(
                    skills = index.skills.len(),
                    agents = index.agents.len(),
                    parts = head.parts.len(),
                    examined,
                    rebuilt,
                    retries,
                    "catalog index written"
                );
                let (skills, agents) = (index.skills.len(), index.agents.len());
                return Ok(UpdateOutcome { skills, agents, examined, rebuilt, retries });
            }
            Err(StoreError::Conflict) if retries + 1 < MAX_WRITE_ATTEMPTS => {
                retries += 1;
                // Jittered backoff so concurrent updaters of one tenant stop colliding.
                let jitter = u64::from(rand_jitter()) % 50;
                tokio::time::sleep(Duration::from_millis(20 * u64::from(retries) + jitter)).await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// A little randomness without a dependency: the clock's sub-second noise.
fn rand_jitter() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos())
}
