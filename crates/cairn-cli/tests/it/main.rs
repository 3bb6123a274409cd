//! The integration tests of the `cairn` binary: one binary, a module per area. Every test runs the real binary on
//! loopback over a real database (see `harness`). The HTTP API itself (its calls, errors and OpenAPI document) is
//! tested next to the server, in process, in `crates/cairn-server/tests/it/http/`; `http` here keeps what needs
//! the `cairn serve` process (its flags, SIGTERM and restart, its two ports under one budget).
//!
//! The modules of `server_suite.rs` are built twice, as `sqlite` and as `postgres`, so that the server's behaviour
//! is tested on both backends (PostgreSQL: a database of its own per test on the cluster `scripts/test` starts).
//! The others test one thing: `crash` (SIGKILL on a SQLite file), `multinode` (several servers on one PostgreSQL
//! database), `dashboard` (the page, in a real browser), `schedule` (no server).

#![allow(dead_code)]
// Each module uses a different part of the harness.
// Building the server's modules once per backend is the point.
#![allow(clippy::duplicate_mod)]

mod browser;
mod crash;
mod dashboard;
mod database_faults;
mod failover;
mod full_disk;
mod harness;
mod load;
mod multinode;
mod schedule;
mod tls;
mod tokens;

#[path = "../../../cairn/tests/it/certs.rs"]
mod certs;

#[path = "../../../cairn-server/tests/it/tls_client.rs"]
mod tls_client;

#[path = "server_suite.rs"]
mod sqlite;

#[path = "server_suite.rs"]
mod postgres;
