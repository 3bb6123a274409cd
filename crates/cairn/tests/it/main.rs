//! Integration tests through the public API, one module per area. One binary, so it links once.

mod harness;

mod claim;
mod config;
mod crash;
mod enqueue;
mod leases;
mod lifecycle;
mod postgres_backend;
mod queue_control;
mod recurring;
mod repeat_syntax;
mod sql;
mod state_machine;
mod stats;
mod storage;
mod worker;
mod workflow;
