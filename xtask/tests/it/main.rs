//! xtask's integration tests, one binary (`cargo test -p xtask --test it`) so that the dependencies
//! are linked once: the compiled xtask binary run as a user runs it, for `--help` and for
//! `skills validate|sync|eval`.

mod help;
mod skills_agents;
mod skills_eval;
mod skills_sync;
mod skills_validate;
mod support;
