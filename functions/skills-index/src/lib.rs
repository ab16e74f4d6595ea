//! The skills-index contract: S3 events for files created or removed under a tenant's `skills/`
//! prefix update only what they change in the tenant's catalog index (a SKILL.md's or
//! BASE_PROMPT.md's entry; for any other file, the file list of the skill it belongs to), those
//! for a Markdown file under its `agents/` read its agents again, and those under its
//! `skill-versions/` bring the published skills up to its `defaults.json` or read a published
//! version's file list again (its bundle is written after it). They come as EventBridge
//! events (`Object Created` / `Object Deleted`, what the template deploys, since only EventBridge
//! can match every file under `*/skills/`) or as S3 event notifications;
//! `{"rebuild": {"user_id": "..."}}` rebuilds one tenant's index from a listing. Where the function
//! runs in the sandbox image, a changed `requirements.txt` also remakes that skill's (or that
//! published version's) bundle first ([`bundles`]).

pub mod bundles;

use std::collections::{BTreeMap, BTreeSet};

use agent_core::skills::index::{tenant_file, update_index, TenantFile};
use agent_core::{ObjectStore, StoreError, UserId};
use aws_lambda_events::s3::S3Event;
use serde::Deserialize;
use serde_json::{json, Value};
use thiserror::Error;
use tracing::Instrument;

/// Why an invocation failed. S3 invokes asynchronously and retries a failed invocation; every
/// update re-reads the files it names, so a retry is safe.
#[derive(Debug, Error)]
pub enum IndexError {
    #[error("the event is neither an S3 event (notification or EventBridge) nor a rebuild request: {0}")]
    BadEvent(String),
    #[error("invalid user id in the rebuild request: {0}")]
    BadUser(String),
    #[error("updating the index of {failed} tenant(s) failed; first error: {first}")]
    Storage { failed: usize, first: StoreError },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RebuildRequest {
    rebuild: RebuildTarget,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RebuildTarget {
    user_id: String,
}

/// An S3 event as EventBridge delivers it; only what the index needs is read.
#[derive(Debug, Deserialize)]
struct BridgeEvent {
    source: String,
    #[serde(rename = "detail-type")]
    detail_type: String,
    detail: BridgeDetail,
}

#[derive(Debug, Deserialize)]
struct BridgeDetail {
    object: BridgeObject,
}

#[derive(Debug, Deserialize)]
struct BridgeObject {
    key: String,
}

/// S3 writes object keys in events URL-encoded, with `+` for a space.
pub fn decode_event_key(raw: &str) -> String {
    let spaced = raw.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced).decode_utf8_lossy().into_owned()
}

/// One tenant's changed files: what its index re-reads, and their keys relative to the tenant's
/// prefix (`skills/…`, `skill-versions/…`), from which the bundler picks the declarations.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TenantChanges {
    pub files: BTreeSet<TenantFile>,
    pub keys: BTreeSet<String>,
}

/// The changed files of each tenant named by `event`; keys other than a tenant's files under
/// `skills/`, its Markdown files under `agents/`, its `skill-versions/defaults.json` and its
/// published versions' files are ignored. Returns them and how many records were ignored.
pub fn changes_by_tenant(event: &S3Event) -> (BTreeMap<UserId, TenantChanges>, usize) {
    tenant_changes(event.records.iter().map(|record| {
        let name = record.event_name.as_deref().unwrap_or_default();
        let relevant = name.starts_with("ObjectCreated") || name.starts_with("ObjectRemoved");
        (name, record.s3.object.key.as_deref().filter(|_| relevant))
    }))
}

/// [`changes_by_tenant`] for one EventBridge event: `Object Created` or `Object Deleted` from S3.
/// Its key is decoded as a notification's is: a valid skill path has neither `+` nor `%`, so the
/// decoding changes nothing in any key the index would keep.
fn bridge_changes(event: &BridgeEvent) -> (BTreeMap<UserId, TenantChanges>, usize) {
    let relevant =
        event.source == "aws.s3" && matches!(event.detail_type.as_str(), "Object Created" | "Object Deleted");
    tenant_changes(std::iter::once((
        event.detail_type.as_str(),
        Some(event.detail.object.key.as_str()).filter(|_| relevant),
    )))
}

/// Groups `(event name, key if the event is a create or a delete)` by tenant.
fn tenant_changes<'a>(
    events: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> (BTreeMap<UserId, TenantChanges>, usize) {
    let mut changes: BTreeMap<UserId, TenantChanges> = BTreeMap::new();
    let mut ignored = 0;
    for (name, key) in events {
        let key = key.map(decode_event_key);
        let found = key.as_deref().and_then(|key| Some((tenant_file(key)?, key.split_once('/')?.1)));
        match found {
            Some(((user, file), rel)) => {
                let tenant = changes.entry(user).or_default();
                tenant.files.insert(file);
                tenant.keys.insert(rel.to_owned());
            }
            None => {
                tracing::info!(event = name, key = ?key, "ignoring an event that is not about a tenant's skill or agent");
                ignored += 1;
            }
        }
    }
    (changes, ignored)
}

/// The span one tenant's update runs in: its lines carry the tenant's tag (as turns' lines do), not
/// the user id.
fn tenant_span(user: &UserId) -> tracing::Span {
    tracing::info_span!("tenant", tenant = %agent_app::tenant_tag(user.as_str()))
}

/// Handles one invocation: an S3 event or a rebuild request. `listing_budget` is the listing budget
/// of the deployment's turns, whose listing the index keeps rendered.
pub async fn handle(
    objects: &dyn ObjectStore,
    event: Value,
    listing_budget: Option<usize>,
    bundler: Option<&bundles::Bundler>,
) -> Result<Value, IndexError> {
    if event.get("rebuild").is_some() {
        let request: RebuildRequest =
            serde_json::from_value(event).map_err(|err| IndexError::BadEvent(err.to_string()))?;
        let user = UserId::parse(request.rebuild.user_id).map_err(|err| IndexError::BadUser(err.to_string()))?;
        let outcome = update_index(objects, &user, &[], true, listing_budget)
            .instrument(tenant_span(&user))
            .await
            .map_err(|first| IndexError::Storage { failed: 1, first })?;
        return Ok(json!({
            "tenants": 1, "rebuilt": 1, "skills": outcome.skills, "agents": outcome.agents, "retries": outcome.retries
        }));
    }
    let (changes, ignored) = if event.get("detail-type").is_some() {
        let event: BridgeEvent = serde_json::from_value(event).map_err(|err| IndexError::BadEvent(err.to_string()))?;
        bridge_changes(&event)
    } else {
        let event: S3Event = serde_json::from_value(event).map_err(|err| IndexError::BadEvent(err.to_string()))?;
        changes_by_tenant(&event)
    };
    let (mut updated, mut rebuilt, mut retries) = (0, 0, 0);
    let mut failures = Vec::new();
    // Tenants are independent: one tenant's failure does not stop the others' updates.
    for (user, tenant) in &changes {
        let span = tenant_span(user);
        let mut files: Vec<TenantFile> = tenant.files.iter().cloned().collect();
        if let Some(bundler) = bundler {
            match bundler.refresh(objects, user, &tenant.keys).instrument(span.clone()).await {
                Ok(touched) => files.extend(touched.into_iter().filter(|file| !tenant.files.contains(file))),
                Err(err) => {
                    span.in_scope(|| tracing::error!(error = %err, "could not bring a skill's bundle up to date"));
                    failures.push(err);
                }
            }
            // Deployed beside the index function, this one only makes bundles: their own events
            // reach the index function.
            if bundler.bundles_only() {
                continue;
            }
        }
        match update_index(objects, user, &files, false, listing_budget).instrument(span.clone()).await {
            Ok(outcome) => {
                updated += outcome.examined;
                rebuilt += usize::from(outcome.rebuilt);
                retries += outcome.retries;
            }
            Err(err) => {
                span.in_scope(|| tracing::error!(error = %err, "could not update the catalog index"));
                failures.push(err);
            }
        }
    }
    let failed = failures.len();
    if let Some(first) = failures.into_iter().next() {
        return Err(IndexError::Storage { failed, first });
    }
    Ok(
        json!({"tenants": changes.len(), "updated": updated, "rebuilt": rebuilt, "ignored": ignored, "retries": retries}),
    )
}

#[cfg(test)]
mod tests {
    use agent_core::ids::SkillPath;

    use super::*;

    #[test]
    fn event_keys_are_url_decoded() {
        assert_eq!(decode_event_key("u1/skills/my+skill/SKILL.md"), "u1/skills/my skill/SKILL.md");
        assert_eq!(decode_event_key("auth0%7C42/skills/pdf/SKILL.md"), "auth0|42/skills/pdf/SKILL.md");
    }

    #[test]
    fn the_sample_events_name_one_tenant_file_each() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events");
        for (file, expected) in
            [("s3-skill-created.json", "escrituras/compraventa/SKILL.md"), ("s3-skill-removed.json", "pdf/SKILL.md")]
        {
            let event: S3Event = serde_json::from_str(&std::fs::read_to_string(root.join(file)).unwrap()).unwrap();
            let (changes, ignored) = changes_by_tenant(&event);
            assert_eq!(ignored, 0, "{file}");
            let files = &changes[&UserId::parse("user-demo").unwrap()].files;
            assert_eq!(files.iter().collect::<Vec<_>>(), [&TenantFile::Skill(expected.to_owned())], "{file}");
        }
    }

    #[test]
    fn workspace_blobs_and_other_tenants_prefixes_are_ignored() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events");
        let sample: Value =
            serde_json::from_str(&std::fs::read_to_string(root.join("s3-skill-created.json")).unwrap()).unwrap();
        let record = |name: &str, key: &str| {
            let mut record = sample["Records"][0].clone();
            record["eventName"] = json!(name);
            record["s3"]["object"]["key"] = json!(key);
            record
        };
        let event: S3Event = serde_json::from_value(json!({"Records": [
            record("ObjectCreated:Put", "u1/workspaces/s/blobs/SKILL.md"),
            record("ObjectCreated:Put", "u1/tickets/t/SKILL.md"),
            record("ObjectRemoved:DeleteMarkerCreated", "u1/skills/pdf/SKILL.md"),
            record("ObjectRestore:Completed", "u1/skills/a/SKILL.md"),
            record("ObjectCreated:Put", "u1/agents/reviewer.md"),
            record("ObjectRemoved:Delete", "u1/agents/notes.txt"),
            record("ObjectCreated:Put", "u1/workspaces/s/agents/x.md"),
        ]}))
        .unwrap();
        let (changes, ignored) = changes_by_tenant(&event);
        assert_eq!(ignored, 5);
        let files: Vec<&TenantFile> = changes[&UserId::parse("u1").unwrap()].files.iter().collect();
        assert_eq!(files, [&TenantFile::Skill("pdf/SKILL.md".into()), &TenantFile::Agent("reviewer.md".into())]);
    }

    #[test]
    fn published_versions_files_and_the_defaults_reach_the_index_and_the_bundler() {
        let sha = "ab".repeat(32);
        let key = |rel: &str| json!({"source": "aws.s3", "detail-type": "Object Created", "detail": {"object": {"key": rel}}});
        let mut all: BTreeMap<UserId, TenantChanges> = BTreeMap::new();
        let mut ignored = 0;
        for rel in [
            "u1/skill-versions/defaults.json".to_owned(),
            format!("u1/skill-versions/fechas/@files/{sha}/requirements.txt"),
            format!("u1/skill-versions/fechas/@files/{sha}/.bundle/{sha}.tar"),
            format!("u2/skill-versions/eng/skills/review/@files/{sha}/scripts/requirements.txt"),
            "u1/skill-versions/fechas/@v/00000001.json".to_owned(),
            "u1/skill-versions/fechas/@files/short/requirements.txt".to_owned(),
        ] {
            let (changes, skipped) = bridge_changes(&serde_json::from_value(key(&rel)).unwrap());
            ignored += skipped;
            for (user, tenant) in changes {
                let entry = all.entry(user).or_default();
                entry.files.extend(tenant.files);
                entry.keys.extend(tenant.keys);
            }
        }
        assert_eq!(ignored, 2, "a version's record and a key with no content hash are not the index's");
        let u1 = &all[&UserId::parse("u1").unwrap()];
        let fechas = TenantFile::Version(SkillPath::parse("fechas").unwrap(), sha.clone());
        assert_eq!(u1.files.iter().collect::<Vec<_>>(), [&TenantFile::Defaults, &fechas]);
        assert!(u1.keys.contains(&format!("skill-versions/fechas/@files/{sha}/requirements.txt")), "{u1:?}");
        let u2 = &all[&UserId::parse("u2").unwrap()];
        assert_eq!(
            u2.keys.iter().collect::<Vec<_>>(),
            [&format!("skill-versions/eng/skills/review/@files/{sha}/scripts/requirements.txt")],
            "each tenant's keys are its own, without its id"
        );
    }

    #[test]
    fn an_eventbridge_event_for_an_agent_names_it() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../events");
        let text = std::fs::read_to_string(root.join("eventbridge-agent-created.json")).unwrap();
        let (changes, ignored) = bridge_changes(&serde_json::from_str(&text).unwrap());
        assert_eq!(ignored, 0);
        let files: Vec<&TenantFile> = changes[&UserId::parse("user-demo").unwrap()].files.iter().collect();
        assert_eq!(files, [&TenantFile::Agent("revisor-escrituras.md".into())]);
        let deleted: BridgeEvent = serde_json::from_value(json!({
            "source": "aws.s3", "detail-type": "Object Deleted",
            "detail": {"object": {"key": "auth0%7C42/agents/code-reviewer.md"}}
        }))
        .unwrap();
        let (changes, _) = bridge_changes(&deleted);
        let files: Vec<&TenantFile> = changes[&UserId::parse("auth0|42").unwrap()].files.iter().collect();
        assert_eq!(files, [&TenantFile::Agent("code-reviewer.md".into())]);
    }
}
