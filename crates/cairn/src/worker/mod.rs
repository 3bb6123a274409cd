//! The worker API: register async handlers by job name, and a [`Worker`] takes matching jobs and runs them with
//! weighted concurrency, automatic heartbeats, and the handler's outcome mapped to finish, retry or fail.
//!
//! Built only on the [`Backend`] calls, which the embedded [`Queue`](crate::Queue) and the HTTP client both
//! provide, so a worker behaves exactly like any other client and moves to a server unchanged: `backend` is that
//! trait, `builder` holds the settings, `handler` what a handler is to it, `report` what it did, `context` what a handler sees of its job, `job_error` how a handler says it
//! failed, `run_loop` the taking, running and shutting down, `completer` the finishing of jobs together, and
//! `patient` the recording of outcomes through a short outage.

pub(crate) mod backend;
mod builder;
mod completer;
mod context;
mod handler;
mod job_error;
#[cfg(feature = "opentelemetry")]
mod otel;
mod patient;
mod report;
mod run_loop;

pub use backend::{Backend, BoxFuture};
pub use builder::{Worker, WorkerBuilder};
pub use context::{JobContext, OpenStep};
pub use handler::HandlerResult;
pub use job_error::JobError;
pub use report::WorkerReport;
