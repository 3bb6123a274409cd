//! The worker API: register async handlers by job name, and a [`Worker`] takes matching jobs and runs them with
//! weighted concurrency, automatic heartbeats, and the handler's outcome mapped to finish, retry or fail.
//!
//! Built only on the [`Backend`] calls, which the embedded [`Queue`](crate::Queue) and the HTTP client both
//! provide, so a worker behaves exactly like any other client and moves to a server unchanged: `backend` is that
//! trait, `builder` holds the settings, `context` what a handler sees of its job, `job_error` how a handler says it
//! failed, `run_loop` the taking, running and shutting down, `completer` the finishing of jobs together, and
//! `patient` the recording of outcomes through a short outage.

mod backend;
mod builder;
mod completer;
mod context;
mod job_error;
#[cfg(feature = "opentelemetry")]
mod otel;
mod patient;
mod run_loop;

pub use backend::{Backend, BoxFuture};
pub use builder::{Worker, WorkerBuilder, WorkerReport};
pub use context::JobContext;
pub use job_error::JobError;

/// What a handler returns: `Ok(())` finishes the job; an error retries or fails it (see [`JobError`]).
pub type HandlerResult = Result<(), JobError>;
