//! Integration tests of the server crate, the server started in process on loopback: the Bedrock text protocol
//! over real TCP, on a real SQLite file and on a PostgreSQL database (the module is built twice, as `sqlite` and
//! `postgres`; the second runs on the private cluster `scripts/test` starts); the HTTP API (`http`, built twice
//! the same way, as `http::sqlite` and `http::postgres`: its calls, errors and OpenAPI document through the Rust
//! client and raw requests); and the listeners' guards (`guards`: timeouts and the connection budget), on SQLite
//! only, since they do not depend on the database. What needs the `cairn` binary (`cairn serve`'s flags, signals
//! and restarts) is tested in the CLI crate.

// Building the module once per backend is the point.
#![allow(clippy::duplicate_mod)]

mod guards;
mod tls;
mod tls_client;

#[path = "../../../cairn/tests/it/certs.rs"]
mod certs;

#[path = "../../../cairn/tests/it/poll.rs"]
mod poll;

#[path = "bedrock/mod.rs"]
mod sqlite;

#[path = "bedrock/mod.rs"]
mod postgres;

/// The HTTP API, built once per backend too (the path attributes are relative to `http/`).
mod http {
    #[path = "mod.rs"]
    mod sqlite;

    #[path = "mod.rs"]
    mod postgres;
}
