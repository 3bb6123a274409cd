//! The integration tests of the `cairn` binary and the server: one binary, a module per area. Every test runs the
//! real binary on loopback over a real SQLite file (see `harness`).

#![allow(dead_code)] // Each module uses a different part of the harness.

mod bedrock;
mod browser;
mod cli;
mod config;
mod crash;
mod dashboard;
mod harness;
mod http;
mod multinode;
mod queues;
mod schedule;
mod stats;
mod work;
mod workflow;
