//! The PostgreSQL backend, being built (see `docs/design/postgres.md`): so far its schema, the migrations that
//! bring a database to it, and the translation of the engine's SQL to PostgreSQL's dialect.

pub(crate) mod dialect;
pub(crate) mod migrations;
