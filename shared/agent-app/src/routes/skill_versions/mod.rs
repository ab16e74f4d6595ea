//! Publishing skills through the API: a skill's numbered versions uploaded as a zip (in the
//! request, or staged by a presigned upload), listed, read, downloaded, made the default (a
//! promote or a rollback) and deleted, over agent-core's `skills::versions`.
//!
//! A version's evals are run in the background: queued on the turn queue, their reports read
//! back, and a promote may require the newest run's rates.
//!
//! A step per file: `parse` finds the route from the path's right end and validates its parts
//! (no I/O), `perform` makes the call against the object store (`evals`: the eval calls, with the
//! turn queue), `answer` shapes what it got back; `outcome` holds what they pass between them.

mod answer;
mod evals;
mod outcome;
mod parse;
mod perform;
#[cfg(test)]
mod tests;

pub(super) use answer::versions_answer;
pub(super) use outcome::{Context, VersionOutcome};
pub(super) use parse::{SkillRoute, VersionCall};
pub(super) use perform::perform;

/// The largest zip a presigned upload may stage: the inflated files are bounded apart
/// ([`agent_core::skills::versions::MAX_SKILL_BYTES`]).
pub const MAX_STAGED_ZIP_BYTES: u64 = 50 * 1024 * 1024;
