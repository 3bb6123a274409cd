//! The JSON bodies of Cairn's HTTP API (`/v1/…`), shared by the server and the client so the two cannot drift.
//!
//! Conventions: times are RFC 3339 strings in UTC; durations are whole milliseconds in fields ending in `_ms`;
//! lease tokens are strings (they are 64-bit, more than a JavaScript number holds exactly); unknown fields are
//! refused, so a misspelt option is an error rather than silently ignored. Conversions to and from the engine's
//! types live here too; validation does not: the engine checks every field and names it in its errors.
//!
//! One module per resource, each body beside its conversions; every public item is re-exported here, so users write
//! `cairn_api::PushRequest`. A request declared as a [`Route`] (its path, body and answer, in its resource's module)
//! is mounted by the server and called by the client through one generic path each, so `cairn::Jobs` runs
//! embedded or remote alike. The `openapi` feature derives the OpenAPI schemas the server documents its API with.

#![warn(missing_docs)]

mod access;
mod activity;
mod batches;
mod config;
mod empty;
mod errors;
mod fan_out;
mod fuzz;
mod health;
mod job_reads;
mod jobs;
mod leases;
mod millis;
mod push;
mod query;
mod queues;
mod recurring;
mod route;
#[cfg(feature = "openapi")]
pub mod rules;
mod signals;
mod sql;
mod stats;
mod steps;
mod workers;

pub use access::{ADMIN, Access, ENQUEUE, Named, PUBLIC, READ, READ_ONE, Reach, Role, WORK};
pub use activity::*;
pub use batches::*;
pub use config::*;
pub use empty::*;
pub use errors::*;
pub use fan_out::*;
pub use health::*;
pub use job_reads::*;
pub use jobs::*;
pub use leases::*;
pub use push::*;
pub use query::{id_param, query_string};
pub use queues::*;
pub use recurring::*;
pub use route::*;
pub use signals::*;
pub use sql::*;
pub use stats::*;
pub use steps::*;
pub use workers::*;

/// The `api_bodies` fuzz target's harness (`fuzz/`, `docs/fuzzing.md`); not part of the API.
#[doc(hidden)]
pub mod __fuzz {
    pub use crate::fuzz::bodies;
}
