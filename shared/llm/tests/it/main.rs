//! The llm crate's tests, in one binary: each provider against the workspace's scripted model server
//! (`local_stack::model_server`) on 127.0.0.1, buffered and streamed, images and PDFs, and replay and recording.

mod bedrock;
mod cache;
mod files;
mod fixtures;
mod providers;
mod streaming;
