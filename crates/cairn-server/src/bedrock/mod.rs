//! The Bedrock::Jobs text protocol (issue 5), so that clients written for Bedrock work against Cairn unchanged.
//!
//! Built so far: `frame` (reading requests and writing responses, reference §1.2–1.3), `escape` (the backslash
//! escaping of header values), `connection` (the listener: pipelining, `Connection: close`, limits, slow and
//! vanishing clients, shutdown) and `commands` (CreateJob(s) with `unique`, GetJob(s) with real blocking behind
//! `Connection: wait`, QueryJob, UpdateJob, FinishJob, RetryJob, FailJob, DeleteJob, CancelJob, RequeueJobs).
//! `cairn serve --bedrock ADDR` serves it; `docs/bedrock.md` documents it. Not yet: parent and child jobs,
//! `retryAfter`, `mockRequest`, `unique` in CreateJobs; each answers a `501` that says so.

pub mod commands;
pub mod connection;
pub mod escape;
pub mod frame;
mod fuzz;

/// The `bedrock_frames` fuzz target's harness (`fuzz/`, `docs/fuzzing.md`); not part of the API.
#[doc(hidden)]
pub mod __fuzz {
    pub use super::fuzz::frames;
}

pub use commands::BedrockCommands;
pub use connection::{BedrockConfig, serve};
