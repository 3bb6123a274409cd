//! The PostgreSQL backend (see `docs/design/postgres.md`): connecting, the schema and the migrations that bring a
//! database to it, the translation of the engine's SQL to PostgreSQL's dialect, the reader pool, and the listener
//! that hears the other nodes.

pub(crate) mod connect;
pub(crate) mod dialect;
pub(crate) mod listener;
pub(crate) mod migrations;
pub(crate) mod readers;
pub(crate) mod sql;
