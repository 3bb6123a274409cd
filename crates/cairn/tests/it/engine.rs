//! The engine's tests that hold on every backend. `main.rs` builds this module twice, as `sqlite` and as
//! `postgres`; `harness::TestQueue` opens a queue on the backend its module path names.

pub mod harness {
    pub use crate::harness::*;
    pub type TestQueue = crate::harness::TestQueueOn<{ is_postgres_module(module_path!()) }>;
}

mod batches;
mod bulk;
mod claim;
mod concurrency_keys;
mod config;
mod enqueue;
mod events;
mod fan_out;
mod leases;
mod lifecycle;
mod queue_control;
mod recurring;
mod signals;
mod sql;
mod state_machine;
mod stats;
mod steps;
mod trace;
mod wait;
mod worker;
mod workflow;
