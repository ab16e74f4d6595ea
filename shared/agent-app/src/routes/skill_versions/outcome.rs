//! What a call on a skill's versions is made with and comes back with: the context, the outcome
//! `answer` shapes, and the status a versions error maps to. `perform` and `evals` make calls,
//! `answer` reads what they got: all three use this file, which uses none of them.

use agent_core::skills::versions::{DefaultVersion, Problem, Published, VersionError, VersionRecord};
use agent_core::store::{ObjectStore, StoreError};
use agent_core::turn::evals::EvalReport;
use agent_core::turn::PresignedUpload;
use agent_core::SkillPath;

use crate::api::ApiError;
use crate::queue::TurnQueue;

/// What the calls are made with.
pub(in crate::routes) struct Context<'a> {
    pub(in crate::routes) objects: &'a dyn ObjectStore,
    /// Where eval runs are sent; without one they are refused.
    pub(in crate::routes) queue: Option<&'a dyn TurnQueue>,
    /// The listing budget turns use: the catalog index is rewritten with it when a default changes.
    pub(in crate::routes) listing_budget: usize,
    /// The model eval runs are made with, as their reports name it.
    pub(in crate::routes) model_id: &'a str,
}

/// What a call on a skill's versions got back.
pub(in crate::routes) enum VersionOutcome {
    Published(Published),
    Presigned(Option<PresignedUpload>),
    Listed {
        skill: SkillPath,
        default: Option<u32>,
        records: Vec<VersionRecord>,
    },
    Version {
        record: VersionRecord,
        is_default: bool,
        skill_md: String,
    },
    File {
        path: String,
        file: VersionFileBody,
    },
    /// `zip` is `None` for a version too large to zip in an answer.
    Zip {
        skill: SkillPath,
        version: u32,
        zip: Option<Vec<u8>>,
    },
    DefaultSet {
        skill: SkillPath,
        chosen: DefaultVersion,
        previous: Option<u32>,
    },
    Deleted,
    /// The upload is not a valid skill: each problem names its file.
    Invalid(Vec<Problem>),
    EvalsQueued {
        skill: SkillPath,
        version: u32,
        run_id: String,
    },
    EvalsListed {
        skill: SkillPath,
        version: u32,
        reports: Vec<EvalReport>,
    },
    /// Boxed: a whole run is larger than any other outcome.
    EvalReport(Box<EvalReport>),
}

/// A version's file as it is answered.
pub(in crate::routes) enum VersionFileBody {
    Bytes(Vec<u8>),
    /// Too large for an answer: a presigned link to it.
    Link {
        url: String,
        size: u64,
    },
    /// Too large for an answer, and the store makes no links.
    TooLarge {
        size: u64,
    },
}

/// The status and client-safe message of a versions error; a skill that is not valid is answered
/// with its problems by `answer::invalid_answer` instead.
pub(in crate::routes) fn version_error(err: VersionError) -> ApiError {
    match err {
        VersionError::Invalid(problems) => ApiError::new(
            400,
            "invalid_skill",
            format!("the upload is not a valid skill ({} problems)", problems.len()),
        ),
        VersionError::NotFound(message) => ApiError::not_found(message),
        VersionError::Conflict(message) => ApiError::new(409, "conflict", message),
        VersionError::Full(message) => ApiError::new(409, "limit_reached", message),
        VersionError::Storage(StoreError::Conflict) => ApiError::new(
            409,
            "conflict",
            "other changes to this skill's versions kept coming first; send the request again",
        ),
        VersionError::Storage(StoreError::Corrupt(detail)) => {
            tracing::error!(error = %detail, "stored skill versions could not be read");
            ApiError::new(500, "internal_error", "the stored versions of this skill could not be read")
        }
        VersionError::Storage(StoreError::Backend(detail)) => {
            tracing::error!(error = %detail, "storage failed");
            ApiError::new(503, "storage_unavailable", "storage is unavailable; try again")
        }
    }
}
