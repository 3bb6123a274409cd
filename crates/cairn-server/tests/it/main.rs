//! Integration tests of the server crate: the Bedrock text protocol over real TCP on loopback, on a real SQLite
//! file and on a PostgreSQL database (the module is built twice, as `sqlite` and `postgres`; the second runs on
//! the private cluster `scripts/test` starts); and the listeners' guards (`guards`: timeouts and the connection
//! budget), on SQLite only, since they do not depend on the database.

// Building the module once per backend is the point.
#![allow(clippy::duplicate_mod)]

mod guards;

#[path = "../../../cairn/tests/it/poll.rs"]
mod poll;

#[path = "bedrock/mod.rs"]
mod sqlite;

#[path = "bedrock/mod.rs"]
mod postgres;
