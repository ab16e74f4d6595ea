//! The routes of skills' versions as calls: the path's shape found first (a 404 or a 405 before
//! the caller is known), then the skill, the version, the query and the body validated. No I/O.

use agent_core::skills::bundle::is_sha256;
use agent_core::turn::evals::{Requirement, MAX_RUNS};
use agent_core::SkillPath;
use http::Method;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::MAX_STAGED_ZIP_BYTES;
use crate::api::ApiError;
use crate::routes::files::decode_path;
use crate::routes::message::Request;
use crate::routes::uploads::{direct_body, DIRECT_UPLOAD_MAX_BYTES};

/// The largest JSON body these routes take: a hash, a size and a flag.
const MAX_JSON_BODY_BYTES: usize = 4096;
/// Runs of each eval case when the request names none.
pub(super) const DEFAULT_EVAL_RUNS: u32 = 3;
/// The longest eval run id: the time and some randomness are far shorter.
const MAX_RUN_ID_CHARS: usize = 64;

/// A path under `/skills/` that is one of these routes: the raw segments of its skill and what is
/// asked of it. Nothing in it is validated yet but its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::routes) struct SkillRoute<'a> {
    pub(super) skill: &'a [&'a str],
    pub(super) action: Action<'a>,
}

/// What a route asks, with the raw segments it still needs (a version number, a file's path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action<'a> {
    /// `PUT {skill}/versions`: the body is the zip.
    Publish,
    /// `POST {skill}/versions`: publish a zip staged by a presigned upload.
    PublishStaged,
    /// `POST {skill}/versions/uploads`: a presigned link to stage a zip.
    Presign,
    /// `GET {skill}/versions`.
    List,
    /// `GET {skill}/versions/{n}`.
    Get(&'a str),
    /// `GET {skill}/versions/{n}/files/{path...}`.
    File(&'a str, &'a [&'a str]),
    /// `GET {skill}/versions/{n}/zip`.
    Zip(&'a str),
    /// `PUT {skill}/default`.
    SetDefault,
    /// `DELETE {skill}/versions/{n}`.
    DeleteVersion(&'a str),
    /// `DELETE {skill}`.
    DeleteSkill,
    /// `POST {skill}/versions/{n}/evals`: an eval run queued.
    RunEvals(&'a str),
    /// `GET {skill}/versions/{n}/evals`.
    ListEvals(&'a str),
    /// `GET {skill}/versions/{n}/evals/{run_id}`.
    GetEval(&'a str, &'a str),
}

impl<'a> SkillRoute<'a> {
    /// The route `rest` (the raw segments after `/skills/`, at least one) names for `method`. A
    /// skill path has one to four segments, so the route is read from the right: `rest` split into
    /// a skill shaped like a [`SkillPath`] and a route's own segments, the longest skill first, and
    /// only then the whole of `rest` as the skill (`DELETE /skills/{path}`). The first split that is
    /// a route decides: a route of other methods only is a 405. Anything else is a 404.
    pub(in crate::routes) fn resolve(method: &Method, rest: &'a [&'a str]) -> Result<Self, ApiError> {
        let shaped = (1..=rest.len().min(4))
            .rev()
            .map(|split| rest.split_at(split))
            .filter(|(skill, _)| shaped_like_skill(skill));
        // A route's own segments at the right end first; the whole path as the skill (its DELETE) last.
        let (trailing, whole): (Vec<_>, Vec<_>) = shaped.partition(|(_, tail)| !tail.is_empty());
        let found = trailing.into_iter().chain(whole).find_map(|(skill, tail)| Some((skill, matched(method, tail)?)));
        match found {
            Some((skill, Matched::Action(action))) => Ok(Self { skill, action }),
            Some((_, Matched::OtherMethod)) => {
                Err(ApiError::new(405, "method_not_allowed", format!("{method} is not allowed on this path")))
            }
            None => Err(ApiError::not_found("no such route")),
        }
    }
}

/// A route the segments after a skill end, for the request's method or for others only.
enum Matched<'a> {
    Action(Action<'a>),
    OtherMethod,
}

/// Whether `segments` have the shape of a skill path: `name`, `category/name`,
/// `plugin/skills/name` or `group/plugin/skills/name` (the names themselves are checked later).
fn shaped_like_skill(segments: &[&str]) -> bool {
    matches!(segments, [_] | [_, _] | [_, "skills", _] | [_, _, "skills", _])
}

/// The route the segments after a skill end, if any, for `method`.
fn matched<'a>(method: &Method, tail: &'a [&'a str]) -> Option<Matched<'a>> {
    let action = match tail {
        [] => (method == Method::DELETE).then_some(Action::DeleteSkill),
        ["default"] => (method == Method::PUT).then_some(Action::SetDefault),
        ["versions"] => match *method {
            Method::PUT => Some(Action::Publish),
            Method::POST => Some(Action::PublishStaged),
            Method::GET => Some(Action::List),
            _ => None,
        },
        ["versions", "uploads"] => (method == Method::POST).then_some(Action::Presign),
        ["versions", number] => match *method {
            Method::GET => Some(Action::Get(number)),
            Method::DELETE => Some(Action::DeleteVersion(number)),
            _ => None,
        },
        ["versions", number, "zip"] => (method == Method::GET).then_some(Action::Zip(number)),
        ["versions", number, "files", path @ ..] if !path.is_empty() => {
            (method == Method::GET).then_some(Action::File(number, path))
        }
        ["versions", number, "evals"] => match *method {
            Method::POST => Some(Action::RunEvals(number)),
            Method::GET => Some(Action::ListEvals(number)),
            _ => None,
        },
        ["versions", number, "evals", run_id] => (method == Method::GET).then_some(Action::GetEval(number, run_id)),
        _ => return None,
    };
    Some(action.map_or(Matched::OtherMethod, Matched::Action))
}

/// A call on one skill's versions, validated.
pub(in crate::routes) struct VersionCall {
    pub(super) skill: SkillPath,
    pub(super) action: VersionAction,
}

/// What is asked of the skill, its parts validated.
pub(super) enum VersionAction {
    Publish {
        zip: Vec<u8>,
        promote: Option<bool>,
    },
    PublishStaged {
        upload: String,
        promote: Option<bool>,
    },
    Presign {
        size: u64,
        sha256: String,
    },
    List,
    Get {
        version: u32,
    },
    File {
        version: u32,
        path: String,
    },
    Zip {
        version: u32,
    },
    /// `require`, when given, is what the version's newest completed eval run must meet first.
    SetDefault {
        version: u32,
        require: Option<Requirement>,
    },
    DeleteVersion {
        version: u32,
    },
    DeleteSkill,
    RunEvals {
        version: u32,
        runs: u32,
    },
    ListEvals {
        version: u32,
    },
    GetEval {
        version: u32,
        run_id: String,
    },
}

/// The body of `POST {skill}/versions`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StagedBody {
    upload: String,
    #[serde(default)]
    promote: Option<bool>,
}

/// The body of `POST {skill}/versions/uploads`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PresignBody {
    sha256: String,
    size: u64,
}

/// The body of `PUT {skill}/default`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DefaultBody {
    version: u32,
    #[serde(default)]
    require: Option<RequireBody>,
}

/// The rates a promote requires of the version's newest completed eval run.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequireBody {
    #[serde(default)]
    trigger_rate: Option<f64>,
    #[serde(default)]
    pass_rate: Option<f64>,
}

/// The body of `POST {skill}/versions/{n}/evals`, which may be empty.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EvalsBody {
    #[serde(default)]
    runs: Option<u32>,
}

impl VersionCall {
    /// The call `route` makes with the rest of `request` (its query and body).
    pub(in crate::routes) fn from_route(route: SkillRoute<'_>, request: &Request<'_>) -> Result<Self, ApiError> {
        let skill = skill_path(route.skill)?;
        let action = match route.action {
            Action::Publish => {
                let zip = direct_body(request.body, request.base64, zip_too_large)?;
                VersionAction::Publish { zip, promote: promote(request.query.first("promote"))? }
            }
            Action::PublishStaged => {
                let staged: StagedBody = json_body(request, "{\"upload\": sha256, \"promote\"?: bool}")?;
                VersionAction::PublishStaged { upload: sha256(&staged.upload, "upload")?, promote: staged.promote }
            }
            Action::Presign => {
                let asked: PresignBody = json_body(request, "{\"sha256\": hex, \"size\": bytes}")?;
                let sha256 = sha256(&asked.sha256, "sha256")?;
                if asked.size == 0 {
                    return Err(ApiError::bad_request("`size` must be at least 1 byte"));
                }
                if asked.size > MAX_STAGED_ZIP_BYTES {
                    return Err(ApiError::new(
                        413,
                        "payload_too_large",
                        format!("a skill's zip may have at most {} MiB", MAX_STAGED_ZIP_BYTES / (1024 * 1024)),
                    ));
                }
                VersionAction::Presign { size: asked.size, sha256 }
            }
            Action::List => VersionAction::List,
            Action::Get(number) => VersionAction::Get { version: version_number(number)? },
            Action::File(number, path) => {
                VersionAction::File { version: version_number(number)?, path: decode_path(path)? }
            }
            Action::Zip(number) => VersionAction::Zip { version: version_number(number)? },
            Action::SetDefault => {
                let shape = "{\"version\": number, \"require\"?: {\"trigger_rate\"?: rate, \"pass_rate\"?: rate}}";
                let asked: DefaultBody = json_body(request, shape)?;
                if asked.version == 0 {
                    return Err(ApiError::bad_request("`version` must be a version number, from 1"));
                }
                VersionAction::SetDefault {
                    version: asked.version,
                    require: asked.require.map(requirement).transpose()?,
                }
            }
            Action::DeleteVersion(number) => VersionAction::DeleteVersion { version: version_number(number)? },
            Action::DeleteSkill => VersionAction::DeleteSkill,
            Action::RunEvals(number) => {
                let version = version_number(number)?;
                // No body asks for the default number of runs.
                let asked = match request.body.map(str::trim) {
                    None | Some("") => EvalsBody { runs: None },
                    Some(_) => json_body(request, "{\"runs\"?: number}")?,
                };
                let runs = asked.runs.unwrap_or(DEFAULT_EVAL_RUNS);
                if !(1..=MAX_RUNS).contains(&runs) {
                    return Err(ApiError::bad_request(format!("`runs` must be from 1 to {MAX_RUNS}")));
                }
                VersionAction::RunEvals { version, runs }
            }
            Action::ListEvals(number) => VersionAction::ListEvals { version: version_number(number)? },
            Action::GetEval(number, run_id) => {
                VersionAction::GetEval { version: version_number(number)?, run_id: eval_run_id(run_id)? }
            }
        };
        Ok(Self { skill, action })
    }
}

/// The skill a route names, from its raw segments (a skill path's characters need no decoding).
pub(super) fn skill_path(segments: &[&str]) -> Result<SkillPath, ApiError> {
    SkillPath::parse(&segments.join("/")).map_err(|err| ApiError::bad_request(format!("the skill path: {err}")))
}

/// A version number from a path: a whole number from 1, in plain digits.
pub(super) fn version_number(text: &str) -> Result<u32, ApiError> {
    match text.parse::<u32>() {
        Ok(number) if number > 0 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(number),
        _ => Err(ApiError::bad_request("the version in the path must be a whole number from 1")),
    }
}

/// The rates a promote requires, each from 0 to 1, at least one of them.
fn requirement(asked: RequireBody) -> Result<Requirement, ApiError> {
    let requirement = Requirement { trigger_rate: asked.trigger_rate, pass_rate: asked.pass_rate };
    if requirement.is_empty() {
        return Err(ApiError::bad_request("`require` names `trigger_rate`, `pass_rate` or both"));
    }
    let in_range = |rate: Option<f64>| rate.is_none_or(|rate| (0.0..=1.0).contains(&rate));
    if !in_range(requirement.trigger_rate) || !in_range(requirement.pass_rate) {
        return Err(ApiError::bad_request("a required rate is from 0 to 1 (0.8 for 80%)"));
    }
    Ok(requirement)
}

/// An eval run's id as a path names it: letters, digits and `-`, else no run of the caller's (a
/// 404, as a turn id that cannot be one is).
pub(super) fn eval_run_id(text: &str) -> Result<String, ApiError> {
    let valid = !text.is_empty()
        && text.len() <= MAX_RUN_ID_CHARS
        && text.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-');
    match valid {
        true => Ok(text.to_owned()),
        false => Err(ApiError::not_found(format!("no eval run `{text}`"))),
    }
}

/// `?promote=true|false`, or `None` when absent (the first version becomes the default by itself).
pub(super) fn promote(value: Option<&str>) -> Result<Option<bool>, ApiError> {
    match value {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(_) => Err(ApiError::bad_request("`promote` must be `true` or `false`")),
    }
}

/// A SHA-256 as a client may write it (hex digits in either case), as stored: lowercase.
fn sha256(text: &str, field: &str) -> Result<String, ApiError> {
    let lower = text.to_ascii_lowercase();
    if is_sha256(&lower) {
        Ok(lower)
    } else {
        Err(ApiError::bad_request(format!("`{field}` must be the 64 hex digits of the zip's SHA-256")))
    }
}

/// The request's small JSON body, bounded, decoded from base64 when the integration encoded it.
fn json_body<T: DeserializeOwned>(request: &Request<'_>, shape: &str) -> Result<T, ApiError> {
    let raw = request.body.unwrap_or("");
    if raw.len() > 2 * MAX_JSON_BODY_BYTES {
        return Err(ApiError::bad_request(format!("the body is too large for {shape}")));
    }
    let bytes = crate::api::body_bytes(raw, request.base64)?;
    serde_json::from_slice(&bytes).map_err(|err| ApiError::bad_request(format!("send {shape}: {err}")))
}

/// A zip too large to send in the request: it goes through a presigned upload.
fn zip_too_large() -> ApiError {
    ApiError::new(
        413,
        "payload_too_large",
        format!(
            "a zip sent in the request carries at most {} MiB: for a larger one ask for a link with \
             POST /skills/{{path}}/versions/uploads, PUT the zip there, then POST /skills/{{path}}/versions",
            DIRECT_UPLOAD_MAX_BYTES / (1024 * 1024)
        ),
    )
}
