//! The server's tests that hold on every backend. `main.rs` builds this module twice, as `sqlite` and as
//! `postgres`; `harness::TestServer` starts `cairn serve` on the backend its module path names.

pub mod harness {
    pub use crate::harness::*;
    pub type TestServer = crate::harness::TestServerOn<{ is_postgres_module(module_path!()) }>;
}

mod bedrock;
mod cli;
mod config;
mod http;
mod queues;
mod stats;
mod work;
mod workflow;
