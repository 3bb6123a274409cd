//! Integration tests through the public API, one module per area. One binary, so it links once.
//!
//! The engine's behaviour is tested on both backends: the modules of `engine.rs` are built twice, as `sqlite` and
//! as `postgres`, and their `super::harness::TestQueue` opens a queue on that backend. The other modules test one
//! backend's own parts.

// Building the engine's modules once per backend is the point.
#![allow(clippy::duplicate_mod)]

mod harness;

#[path = "engine.rs"]
mod sqlite;

#[path = "engine.rs"]
mod postgres;

mod certs;
mod crash;
mod due_times;
mod network;
mod poll;
mod postgres_backend;
mod postgres_tls;
mod proxy;
mod repeat_syntax;
mod sql_enqueue;
mod storage;
mod structure;
mod workflow_kill;
