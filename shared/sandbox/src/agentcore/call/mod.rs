//! One call's exchange with the runner (`runner.py`), without I/O: what is written into the
//! interpreter session (`prepare`: the files under a stage folder, `call.json` and the runner
//! itself) and what the runner's report means (`report`: the output and how the command ended;
//! `plan`: what changed under the workspace and which files to read back).

mod plan;
mod prepare;
mod report;
#[cfg(test)]
mod tests;

pub(crate) use plan::{batches, sha256, Plan, Wanted};
pub(crate) use prepare::{Call, Upload, TREE_NAME};
pub(crate) use report::{Report, MAX_REPORT_BYTES};
