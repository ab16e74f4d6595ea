//! The permissions and wiring `template.yaml` gives the functions, rendered for given parameters the way
//! CloudFormation resolves them (`render`): the model's grants (`model`), the skills index and the
//! bundle maker (`skills_index`), the alarms and the dashboard (`alarms`), and what each function is
//! given (`functions`: the sessions index, the cursor and bundle keys, the approval policy).

mod alarms;
mod functions;
mod model;
mod render;
mod skills_index;

pub(crate) use render::{iam_matches, resources, scalar, Rendered};
