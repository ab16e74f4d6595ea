//! agent-core's integration tests, one binary (`cargo test -p agent-core --test it`) so that the
//! dependencies are linked once: whole turns, memories, usage and the catalog index over the embedded
//! store, and the file tools' parity with deepagents.

mod catalog_agents;
mod catalog_index;
mod deepagents_parity;
mod memories;
mod prompt_cache;
mod shown_files;
mod skill_evals;
mod skill_versions;
mod turns;
mod usage;
