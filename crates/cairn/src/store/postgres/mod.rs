//! The PostgreSQL backend (see `docs/design/postgres.md`): connecting, the schema and the migrations that bring a
//! database to it, the reader pool, read-only SQL, and the listener that hears the other nodes. The engine's
//! statements carry their PostgreSQL text beside SQLite's (`store/db.rs`, `Sql`).

pub(crate) mod connect;
pub(crate) mod listener;
pub(crate) mod migrations;
pub(crate) mod readers;
pub(crate) mod sql;
