//! The answers of the routes of skills' versions: each outcome's status, headers and body, and
//! each versions error's status with a message safe to show a client.

use agent_core::skills::versions::{Problem, VersionRecord};
use agent_core::turn::evals::EvalReport;
use agent_core::SkillPath;
use serde_json::{json, Value};
use time::format_description::well_known::Rfc3339;

use super::outcome::{VersionFileBody, VersionOutcome};
use crate::api::{internal_error, ApiError};
use crate::routes::message::{Answer, Payload};
use crate::routes::uploads::link_answer;
use crate::routes::INLINE_MAX_BYTES;

/// The answer to what a call on a skill's versions got back.
pub(in crate::routes) fn versions_answer(outcome: VersionOutcome) -> Result<Answer, ApiError> {
    Ok(match outcome {
        VersionOutcome::Published(published) => {
            let mut body = summary(&published.record, published.is_default);
            body["created"] = Value::Bool(published.created);
            // A new version is created; the same content again is the version it already was.
            let status = if published.created { 201 } else { 200 };
            Answer { status, body: Payload::Json(body), headers: Vec::new() }
        }
        VersionOutcome::Presigned(link) => {
            return link_answer(link, "send the zip in the request with PUT /skills/{path}/versions")
        }
        VersionOutcome::Listed { skill, default, records } => {
            let versions: Vec<Value> =
                records.iter().map(|record| summary(record, default == Some(record.version))).collect();
            json!({"skill": skill.to_string(), "default": default, "versions": versions}).into()
        }
        VersionOutcome::Version { record, is_default, skill_md } => {
            let mut body = summary(&record, is_default);
            body["file_list"] = json!(record.files);
            body["skill_md"] = Value::String(skill_md);
            body.into()
        }
        VersionOutcome::File { path, file } => file_answer(&path, file)?,
        VersionOutcome::Zip { skill, version, zip } => match zip {
            Some(zip) if zip.len() as u64 <= INLINE_MAX_BYTES => {
                let headers = vec![
                    ("content-type", "application/zip".to_owned()),
                    ("content-disposition", format!("attachment; filename=\"{}-v{version}.zip\"", skill.name())),
                    ("cache-control", "private, no-store".to_owned()),
                ];
                Answer { status: 200, body: Payload::Bytes(zip), headers }
            }
            _ => return Err(too_large("the version's zip")),
        },
        VersionOutcome::DefaultSet { skill, chosen, previous } => json!({
            "skill": skill.to_string(),
            "version": chosen.version,
            "previous": previous,
            "set_by": chosen.set_by,
            "set_at": rfc3339(chosen.set_at),
        })
        .into(),
        VersionOutcome::Deleted => Answer { status: 204, body: Payload::Bytes(Vec::new()), headers: Vec::new() },
        VersionOutcome::Invalid(problems) => invalid_answer(&problems),
        VersionOutcome::EvalsQueued { skill, version, run_id } => queued_answer(&skill, version, &run_id),
        VersionOutcome::EvalsListed { skill, version, reports } => {
            let runs = reports.iter().map(run_summary).collect::<Result<Vec<_>, _>>()?;
            json!({"skill": skill.to_string(), "version": version, "runs": runs}).into()
        }
        VersionOutcome::EvalReport(report) => serde_json::to_value(&*report).map_err(|_| internal_error())?.into(),
    })
}

/// `202` with the eval run's id and where to poll it.
pub(super) fn queued_answer(skill: &SkillPath, version: u32, run_id: &str) -> Answer {
    let poll = format!("/skills/{skill}/versions/{version}/evals/{run_id}");
    Answer {
        status: 202,
        body: Payload::Json(json!({"run_id": run_id, "status": "running", "poll": poll})),
        headers: vec![("location", poll)],
    }
}

/// An eval run as a version's list shows it: the report without its cases, which only the run's
/// own route carries.
pub(super) fn run_summary(report: &EvalReport) -> Result<Value, ApiError> {
    let mut shown = serde_json::to_value(report).map_err(|_| internal_error())?;
    if let Some(fields) = shown.as_object_mut() {
        fields.remove("cases");
    }
    Ok(shown)
}

/// A version as every answer shows it: the record's facts, and whether it is the default now.
pub(super) fn summary(record: &VersionRecord, is_default: bool) -> Value {
    json!({
        "skill": record.skill.to_string(),
        "version": record.version,
        "sha256": record.sha256,
        "size": record.size,
        "files": record.files.len(),
        "uploaded_by": record.uploaded_by,
        "uploaded_at": rfc3339(record.uploaded_at),
        "default": is_default,
        "warnings": record.warnings,
        "needs": record.needs,
        "optional_needs": record.optional_needs,
    })
}

/// Unix seconds as an RFC 3339 UTC time; `null` for a time that cannot be one.
fn rfc3339(seconds: i64) -> Value {
    time::OffsetDateTime::from_unix_timestamp(seconds)
        .ok()
        .and_then(|at| at.format(&Rfc3339).ok())
        .map_or(Value::Null, Value::String)
}

/// `400 invalid_skill`, with every problem found beside the error, each naming its file.
pub(super) fn invalid_answer(problems: &[Problem]) -> Answer {
    let mut message = "the upload is not a valid skill".to_owned();
    if let Some(first) = problems.first() {
        message = format!("{message}: {first}");
    }
    if problems.len() > 1 {
        message = format!("{message} (and {} more problems; see `problems`)", problems.len() - 1);
    }
    let error = ApiError::new(400, "invalid_skill", message);
    let mut body = error.body();
    body["problems"] = json!(problems);
    Answer { status: 400, body: Payload::Json(body), headers: Vec::new() }
}

/// A version's file: its bytes (UTF-8 text said to be so), a link to a large one, or a 413.
fn file_answer(path: &str, file: VersionFileBody) -> Result<Answer, ApiError> {
    let private = [("x-content-type-options", "nosniff".to_owned()), ("cache-control", "private, no-store".to_owned())];
    Ok(match file {
        VersionFileBody::Bytes(bytes) => {
            let text = !bytes.contains(&0) && std::str::from_utf8(&bytes).is_ok();
            let kind = if text { "text/plain; charset=utf-8" } else { "application/octet-stream" };
            let mut headers = vec![("content-type", kind.to_owned())];
            headers.extend(private);
            Answer { status: 200, body: Payload::Bytes(bytes), headers }
        }
        VersionFileBody::Link { url, size } => {
            let body = json!({"url": url, "expires_in": agent_core::turn::DOWNLOAD_LINK_LIFETIME.as_secs(), "size": size, "path": path});
            let mut headers = vec![("location", url)];
            headers.extend(private);
            Answer { status: 303, body: Payload::Json(body), headers }
        }
        VersionFileBody::TooLarge { size } => {
            return Err(too_large(&format!("the file ({size} bytes; this storage makes no download links)")))
        }
    })
}

/// `413`: what is asked is over what one answer carries.
fn too_large(what: &str) -> ApiError {
    ApiError::new(
        413,
        "payload_too_large",
        format!("{what} is over the {} MiB an answer carries", INLINE_MAX_BYTES / (1024 * 1024)),
    )
}
